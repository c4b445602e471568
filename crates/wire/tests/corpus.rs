//! Reads every capture of tcpdump's own test corpus (830 files, many of them
//! deliberately malformed) and checks the reader against tcpdump itself.
//!
//! Oracle: `tcpdump --time-stamp-precision=nano -r FILE -w OUT` writes exactly
//! the packets libpcap delivered (after its truncations, before its first
//! error) into a plain nanosecond pcap; we read OUT with our reader and
//! compare packet by packet (timestamp, caplen, origlen, bytes) with what we
//! read from FILE directly.

use std::fs::File;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;

use wv_wire::reader::{Format, ReadError, Reader};

/// Files where we knowingly differ from libpcap 1.10, and why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

#[derive(Debug, PartialEq, Eq)]
struct Rec {
    ts_ns: u64,
    caplen: u32,
    origlen: u32,
    data: Vec<u8>,
}

/// All packets up to the first error, and that error.
fn read_all(path: &Path) -> (Vec<Rec>, Option<ReadError>) {
    let mut out = Vec::new();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => panic!("cannot open {}: {e}", path.display()),
    };
    let mut r = match Reader::new(file) {
        Ok(r) => r,
        Err(e) => return (out, Some(e)),
    };
    loop {
        match r.next_packet() {
            Ok(Some(p)) => {
                assert_eq!(p.caplen as usize, p.data.len());
                assert!(p.caplen <= p.snaplen, "caplen above snaplen");
                out.push(Rec { ts_ns: p.ts_ns, caplen: p.caplen, origlen: p.origlen, data: p.data.to_vec() })
            }
            Ok(None) => return (out, None),
            Err(e) => {
                assert!(e.offset().is_some(), "error without offset: {e}");
                return (out, Some(e));
            }
        }
    }
}

/// A pcap record header stores 32-bit seconds: compare in that space.
fn as_pcap_ts(ts_ns: u64) -> (u32, u64) {
    ((ts_ns / 1_000_000_000) as u32, ts_ns % 1_000_000_000)
}

enum Outcome {
    /// Read without error; tcpdump agrees (or is not there).
    Clean {
        agrees: Option<bool>,
    },
    /// Stopped at an error; tcpdump agrees on the packets before it.
    Error {
        agrees: Option<bool>,
    },
    Panicked,
}

struct FileResult {
    name: String,
    outcome: Outcome,
    note: String,
}

/// The packets tcpdump read from `path`, and the error it reported (any
/// stderr line besides its "reading from file" banner).
fn tcpdump_oracle(path: &Path, out: &Path) -> Result<(Vec<Rec>, Option<String>), String> {
    let _ = std::fs::remove_file(out);
    // Ask for the file's own precision: at nanosecond precision, libpcap
    // scales a µs field by 1000 and `-w` stores the result in 32 bits, which
    // wraps for the out-of-range µs values some fuzzed files carry.
    let mut magic = [0u8; 4];
    let micro = std::fs::read(path)
        .map(|b| {
            magic.copy_from_slice(b.get(..4).unwrap_or(&[0; 4]));
            magic == [0xd4, 0xc3, 0xb2, 0xa1] || magic == [0xa1, 0xb2, 0xc3, 0xd4]
        })
        .unwrap_or(false);
    let precision = if micro { "micro" } else { "nano" };
    let res = Command::new("tcpdump")
        .arg(format!("--time-stamp-precision={precision}"))
        .arg("-r")
        .arg(path)
        .arg("-w")
        .arg(out)
        .output()
        .map_err(|e| format!("cannot run tcpdump: {e}"))?;
    let stderr = String::from_utf8_lossy(&res.stderr);
    let error: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("reading from file")).collect();
    let error = (!error.is_empty()).then(|| error.join(" / "));
    if !out.exists() {
        // tcpdump could not open the file at all: it saw no packets.
        return Ok((Vec::new(), error));
    }
    let (recs, err) = read_all(out);
    if let Some(e) = err {
        return Err(format!("cannot read tcpdump's output ({e}); tcpdump said: {stderr}"));
    }
    Ok((recs, error))
}

fn check_file(path: &Path, oracle_out: Option<&Path>) -> FileResult {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let read = panic::catch_unwind(AssertUnwindSafe(|| read_all(path)));
    let Ok((ours, err)) = read else {
        return FileResult { name, outcome: Outcome::Panicked, note: String::new() };
    };
    let mut note = match &err {
        Some(e) => format!("after {} packets: {e}", ours.len()),
        None => format!("{} packets", ours.len()),
    };
    let agrees = oracle_out.map(|out| match tcpdump_oracle(path, out) {
        Err(e) => {
            note.push_str(&format!("; oracle failed: {e}"));
            false
        }
        Ok((theirs, their_err)) => {
            if their_err.is_some() != err.is_some() {
                note.push_str(&format!(
                    "; ERROR STATUS differs: tcpdump says {}",
                    their_err.as_deref().unwrap_or("nothing")
                ));
                return false;
            }
            if theirs.len() != ours.len() {
                note.push_str(&format!("; COUNT differs: ours {} tcpdump {}", ours.len(), theirs.len()));
                return false;
            }
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                let what = if as_pcap_ts(a.ts_ns) != as_pcap_ts(b.ts_ns) {
                    Some(format!("ts {} vs {}", a.ts_ns, b.ts_ns))
                } else if a.caplen != b.caplen || a.origlen != b.origlen {
                    Some(format!("lengths {}/{} vs {}/{}", a.caplen, a.origlen, b.caplen, b.origlen))
                } else if a.data != b.data {
                    Some("data bytes".to_string())
                } else {
                    None
                };
                if let Some(w) = what {
                    note.push_str(&format!("; packet {i} differs: {w}"));
                    return false;
                }
            }
            true
        }
    });
    let outcome = if err.is_some() { Outcome::Error { agrees } } else { Outcome::Clean { agrees } };
    FileResult { name, outcome, note }
}

/// Cheap deterministic pseudo-random numbers (splitmix64), so that a
/// failing mutant can be reproduced by name.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Malformed variants of a valid capture, aimed at the structure libpcap
/// checks: a cut at an arbitrary byte, and bad length fields in a record
/// header or block (found through the offsets our reader reports).
fn mutants(name: &str, bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let seed = name.bytes().fold(0u64, |h, b| mix(h ^ u64::from(b)));
    let mut out = Vec::new();
    if bytes.len() > 1 {
        let cut = (mix(seed) % bytes.len() as u64) as usize;
        out.push((format!("{name}#cut{cut}"), bytes[..cut].to_vec()));
    }
    let Ok(mut r) = Reader::new(bytes) else {
        return out;
    };
    let pcapng = r.format() == Format::Pcapng;
    let mut offsets = Vec::new();
    while let Ok(Some(p)) = r.next_packet() {
        offsets.push((p.offset, p.caplen, p.snaplen));
    }
    if offsets.is_empty() {
        return out;
    }
    // Byte order of the (first section of the) file.
    let big = if pcapng {
        bytes.get(8..12) == Some(&[0x1a, 0x2b, 0x3c, 0x4d][..])
    } else {
        bytes.get(..4) == Some(&[0xa1, 0xb2, 0xc3, 0xd4][..]) || bytes.get(..4) == Some(&[0xa1, 0xb2, 0x3c, 0x4d][..])
    };
    for m in 0..2u64 {
        let h = mix(seed ^ (m + 1));
        let (off, caplen, snaplen) = offsets[(h % offsets.len() as u64) as usize];
        let off = off as usize;
        let choices = [
            caplen.wrapping_add(1),
            caplen.wrapping_add(4),
            snaplen.wrapping_add(1),
            262_145,
            0x00ff_fffc,
            0xffff_fff0,
            0,
            caplen / 2,
        ];
        let value = choices[(mix(h) % choices.len() as u64) as usize];
        // pcap: caplen of the record; pcapng: the block's total length or
        // (for an EPB) its caplen.
        let at = match (pcapng, mix(h) >> 60 & 1) {
            (false, _) => off + 8,
            (true, 0) => off + 4,
            (true, _) => off + 20,
        };
        let mut b = bytes.to_vec();
        let v = if big { value.to_be_bytes() } else { value.to_le_bytes() };
        if let Some(dst) = b.get_mut(at..at + 4) {
            dst.copy_from_slice(&v);
            out.push((format!("{name}#set{at}={value}"), b));
        }
    }
    out
}

/// Runs `check_file` over `jobs` on all cores; a job with bytes is a mutant
/// written to a scratch file first.
fn run(jobs: Vec<(String, PathBuf, Option<Vec<u8>>)>, tcpdump: bool, tmp: &Path) -> Vec<FileResult> {
    let hook = panic::take_hook();
    // Silence the default hook: a panic is reported as a result.
    panic::set_hook(Box::new(|_| {}));
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get().min(16));
    let mut results: Vec<FileResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let jobs = &jobs;
                s.spawn(move || {
                    let out = tmp.join(format!("out-{t}.pcap"));
                    let scratch = tmp.join(format!("in-{t}.pcap"));
                    let mut res = Vec::new();
                    for (name, path, bytes) in jobs.iter().skip(t).step_by(threads) {
                        let path = match bytes {
                            Some(b) => {
                                std::fs::write(&scratch, b).unwrap();
                                scratch.as_path()
                            }
                            None => path.as_path(),
                        };
                        let mut r = check_file(path, tcpdump.then_some(out.as_path()));
                        r.name = name.clone();
                        res.push(r);
                    }
                    res
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    panic::set_hook(hook);
    results.sort_by(|a, b| a.name.cmp(&b.name));
    results
}

/// Prints the tally and fails on panics and unexplained disagreements.
fn report(label: &str, results: &[FileResult]) {
    let (mut clean, mut errors, mut agree, mut panicked) = (0, 0, 0, Vec::new());
    let mut unexpected = Vec::new();
    for r in results {
        let agrees = match r.outcome {
            Outcome::Clean { agrees } => {
                clean += 1;
                agrees
            }
            Outcome::Error { agrees } => {
                errors += 1;
                agrees
            }
            Outcome::Panicked => {
                panicked.push(r.name.clone());
                continue;
            }
        };
        let base = r.name.split('#').next().unwrap_or("");
        match agrees {
            Some(true) => agree += 1,
            Some(false) => match KNOWN_DIFFERENCES.iter().find(|(n, _)| *n == base) {
                Some((_, why)) => println!("known difference {}: {} ({why})", r.name, r.note),
                None => {
                    println!("DISAGREES {}: {}", r.name, r.note);
                    unexpected.push(r.name.clone());
                }
            },
            None => {}
        }
        if std::env::var_os("WV_CORPUS_VERBOSE").is_some() {
            println!("{}: {}", r.name, r.note);
        }
    }
    println!(
        "{label}: {} files, {clean} read fully, {errors} stopped at an error, {} panicked; \
         {agree} agree with tcpdump",
        results.len(),
        panicked.len()
    );
    assert!(panicked.is_empty(), "reader panicked on {panicked:?}");
    assert!(unexpected.is_empty(), "{} files disagree with tcpdump: {unexpected:?}", unexpected.len());
}

fn have_tcpdump() -> bool {
    let ok = Command::new("tcpdump").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !ok {
        println!("tcpdump not found: reading without comparing");
    }
    ok
}

#[test]
fn tcpdump_corpus() {
    let Some(files) = wv_testkit::corpus_files("tcpdump_corpus") else { return };
    let tmp = wv_testkit::TempDir::new("wire-corpus");
    let jobs = files.into_iter().map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p, None)).collect();
    let results = run(jobs, have_tcpdump(), tmp.path());
    report("corpus", &results);
}

/// The corpus holds no file tcpdump fails to read, so the error paths are
/// exercised on mutants: libpcap must stop (or truncate) where we do.
#[test]
fn tcpdump_corpus_mutated() {
    let Some(files) = wv_testkit::corpus_files("tcpdump_corpus_mutated") else { return };
    let tmp = wv_testkit::TempDir::new("wire-mutated");
    let mut jobs = Vec::new();
    for p in files {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&p).unwrap();
        for (n, b) in mutants(&name, &bytes) {
            jobs.push((n, p.clone(), Some(b)));
        }
    }
    let results = run(jobs, have_tcpdump(), tmp.path());
    report("mutants", &results);
}
