//! `wirevault record --read`: ingest of existing capture files, checked
//! against libpcap (`tcpdump -r FILE -w OUT` is the expected result) and
//! against Wireshark's readers (capinfos, tshark, editcap), on generated
//! files and on the 830 files of tcpdump's own test suite. Also the errors
//! a user can cause: bad filter, unreadable input, unwritable store, every
//! input checked before the store is created; and times past 2106, refused
//! in pcap and kept in pcapng.
//!
//! Needs tcpdump and Wireshark's command-line tools; skips without them
//! (fails in CI). No root needed.

use crate::util::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const N: u32 = 2000;
const START_NS: u64 = 1_650_000_000_123_456_000;

/// Records `--read FILES` into `store` with a small arena, options `opts`
/// and filter expression `filter`.
fn record_read(store: &Path, files: &[PathBuf], opts: &[&str], filter: &[&str]) -> Outcome {
    let out = wirevault()
        .args(["record", "-q", "--buffer", "8M", "--block-size", "64K", "-o"])
        .arg(store)
        .args(opts)
        .arg("--read")
        .args(files)
        .arg("--")
        .args(filter)
        .output()
        .expect("run wirevault");
    Outcome::from_output(out)
}

fn recs_as_frames(recs: &[Rec]) -> Vec<Frame> {
    recs.iter().map(Rec::frame).collect()
}

fn paths(files: &[StoredFile]) -> Vec<PathBuf> {
    files.iter().map(|f| f.path.clone()).collect()
}

/// One input file per timestamp precision and container; each comes back
/// with identical frames, timestamps, lengths and snaplen.
wvtest!(read_round_trip_keeps_frames_timestamps_and_snaplen, needs = ["tcpdump", "capinfos", "editcap"], |t| {
    let tmp = TempDir::new("read-round-trip");
    let mut sent = test_frames(N, START_NS);
    let us = tmp.join("us.pcap");
    write_pcap(&us, 1, 65535, false, &sent);
    // Nanosecond input keeps its nanoseconds.
    for (i, f) in sent.iter_mut().enumerate() {
        f.ts_ns += (i as u64 * 7919) % 1000;
    }
    let ns = tmp.join("ns.pcap");
    write_pcap(&ns, 1, 65535, true, &sent);
    let ng = tmp.join("ns.pcapng");
    run_ok(Command::new("editcap").args(["-F", "pcapng"]).arg(&ns).arg(&ng));

    for input in [&us, &ns, &ng] {
        let what = input.file_name().unwrap().to_string_lossy().into_owned();
        let store = tmp.join(format!("store-{what}"));
        record_read(&store, std::slice::from_ref(input), &[], &[]).expect(0, &what);
        let c = final_counters(&store);
        assert_eq!((c.received, c.written, c.filtered, c.drops()), (N as u64, N as u64, 0, 0), "{what}");
        let files = check_store(&store);
        let got = stream_records(&files, 0);
        let (_, want) = tcpdump_frames(input, &[], tmp.path());
        assert_same_frames(&recs_as_frames(&want), &got, true, &what);
        for f in &files {
            assert_eq!(f.entry["snaplen"], 65535, "{what}: snaplen of the input is kept");
        }
        assert_peers_read(&paths(&files), usize::MAX);
    }
});

wvtest!(read_rotation_by_size_loses_and_duplicates_nothing, needs = ["tcpdump", "capinfos"], |t| {
    let tmp = TempDir::new("read-rotation");
    let sent = test_frames(N, START_NS);
    let input = tmp.join("sent.pcap");
    write_pcap(&input, 1, 65535, false, &sent);
    let store = tmp.join("store");
    record_read(&store, &[input], &["--file-size", "64K"], &[]).expect(0, "rotation");
    let c = final_counters(&store);
    assert_eq!((c.written, c.drops()), (N as u64, 0));
    let files = check_store(&store);
    let total: u64 = files.iter().map(|f| f.entry["bytes"].as_u64().unwrap()).sum();
    assert!(files.len() as u64 >= total / (64 << 10), "{} files for {total} bytes", files.len());
    for f in &files {
        let b = f.entry["bytes"].as_u64().unwrap();
        assert!(b <= 64 << 10, "{}: {b} bytes, over --file-size 64K", f.path.display());
    }
    assert_same_frames(&sent, &stream_records(&files, 0), true, "frames across rotation");
    assert_peers_read(&paths(&files), 20);
});

wvtest!(read_filter_stores_what_tcpdump_selects_and_counts_the_rest, needs = ["tcpdump", "capinfos"], |t| {
    let tmp = TempDir::new("read-filter");
    let sent = test_frames(N, START_NS);
    let input = tmp.join("sent.pcap");
    write_pcap(&input, 1, 65535, false, &sent);
    let (_, want) = tcpdump_frames(&input, &["udp port 53"], tmp.path());
    assert!(want.len() > 100 && want.len() < N as usize / 2, "{} frames match", want.len());

    let store = tmp.join("store");
    record_read(&store, &[input], &[], &["udp", "port", "53"]).expect(0, "filter");
    let c = final_counters(&store);
    assert_eq!(
        (c.received, c.written, c.filtered, c.drops()),
        (N as u64, want.len() as u64, N as u64 - want.len() as u64, 0),
        "received, written, filtered, dropped"
    );
    let files = check_store(&store);
    assert_same_frames(&recs_as_frames(&want), &stream_records(&files, 0), true, "udp port 53");
    assert_peers_read(&paths(&files), usize::MAX);
});

/// `--format pcapng` files open in tshark and capinfos, and Wireshark's
/// reader (editcap to nanosecond pcap) finds the same frames and timestamps.
wvtest!(pcapng_output_holds_the_same_frames, needs = ["tshark", "capinfos", "editcap", "tcpdump"], |t| {
    let tmp = TempDir::new("read-pcapng");
    let mut sent = test_frames(N, START_NS);
    for (i, f) in sent.iter_mut().enumerate() {
        f.ts_ns += (i as u64 * 7919) % 1000;
    }
    let input = tmp.join("sent.pcap");
    write_pcap(&input, 1, 65535, true, &sent);
    let store = tmp.join("store");
    record_read(&store, &[input], &["--format", "pcapng", "--file-size", "2M"], &[]).expect(0, "pcapng");
    let c = final_counters(&store);
    assert_eq!((c.written, c.drops()), (N as u64, 0));
    let files = check_store(&store);
    assert!(files.len() >= 3, "{} files", files.len());
    for f in &files {
        assert_eq!(f.format, wv_wire::reader::Format::Pcapng);
        assert_eq!(f.entry["format"], "pcapng");
    }
    assert_same_frames(&sent, &stream_records(&files, 0), true, "pcapng (our reader)");
    assert_peers_read(&paths(&files), usize::MAX);

    let mut by_wireshark = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let out =
            run_ok(Command::new("tshark").args(["-n", "-r"]).arg(&f.path).args(["-T", "fields", "-e", "frame.number"]));
        let n = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
        assert_eq!(n, f.entry["packets"].as_u64().unwrap(), "tshark's packet count of {}", f.path.display());
        let err = String::from_utf8_lossy(&out.stderr);
        let complaints: Vec<&str> = err.lines().filter(|l| !l.contains("could be dangerous")).collect();
        assert!(complaints.is_empty(), "tshark on {}: {err}", f.path.display());
        let conv = tmp.join(format!("conv-{i}.pcap"));
        run_ok(Command::new("editcap").args(["-F", "nsecpcap"]).arg(&f.path).arg(&conv));
        by_wireshark.extend(read_capture(&conv).1);
    }
    assert_same_frames(&sent, &by_wireshark, true, "pcapng (Wireshark's reader)");
});

// ---------------------------------------------------------------------------
// tcpdump's test corpus

/// The link type of a capture's first packet, per our reader.
fn first_linktype(p: &Path) -> Option<u32> {
    let f = fs::File::open(p).ok()?;
    let mut r = wv_wire::reader::Reader::new(f).ok()?;
    r.next_packet().ok().flatten().map(|p| p.linktype)
}

/// Every Ethernet file of the corpus, ingested in one `--read` run, comes
/// back with exactly the frames libpcap reads from it: same bytes, caplen,
/// origlen, timestamp (µs sources at µs precision, ns sources at ns) and
/// snaplen. The store keeps input order, so frames map back to their file.
wvtest!(corpus_ethernet_files_round_trip_like_tcpdump, needs = ["tcpdump", "capinfos", corpus], |t| {
    let all = t.corpus_files();
    let tmp = TempDir::new("corpus-eth");
    // Files without packets (or that our reader rejects) go to tcpdump too,
    // which decides by the header's link type.
    // time_2106_overflow.pcapng's and time_2107.pcapng's packets are past
    // what a pcap record holds: `record` counts them as `timestamp_range`
    // drops (tested in hostile_store2).
    let candidates: Vec<PathBuf> = all
        .into_iter()
        .filter(|p| !p.ends_with("time_2106_overflow.pcapng") && !p.ends_with("time_2107.pcapng"))
        .filter(|p| matches!(first_linktype(p), Some(1) | None))
        .collect();
    // libpcap's reading of each, two tcpdumps at a time.
    let mut expected: Vec<(PathBuf, Vec<Rec>)> = Vec::new();
    std::thread::scope(|s| {
        let halves = candidates.chunks(candidates.len().div_ceil(2).max(1));
        let handles: Vec<_> = halves
            .map(|chunk| {
                let dir = tmp.path();
                s.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|p| {
                            let (lt, recs) = tcpdump_frames(p, &[], dir);
                            (lt == 1).then(|| (p.clone(), recs))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            expected.extend(h.join().unwrap());
        }
    });
    assert!(expected.len() >= 477, "only {} Ethernet files in the corpus", expected.len());
    eprintln!("{} Ethernet files of the corpus", expected.len());

    let store = tmp.join("store");
    let inputs: Vec<PathBuf> = expected.iter().map(|(p, _)| p.clone()).collect();
    let o = record_read(&store, &inputs, &[], &[]);
    o.expect(0, "corpus --read");
    let total: usize = expected.iter().map(|(_, r)| r.len()).sum();
    let c = final_counters(&store);
    assert_eq!((c.received, c.written, c.drops()), (total as u64, total as u64, 0));
    let files = check_store(&store);
    let got = stream_records(&files, 0);

    let mut at = 0;
    let mut bad = Vec::new();
    for (p, want) in &expected {
        let name = p.file_name().unwrap().to_string_lossy();
        for (k, w) in want.iter().enumerate() {
            let Some(g) = got.get(at + k) else {
                bad.push(format!("{name}: frame {k} missing"));
                break;
            };
            let same = g.data == w.data && g.caplen == w.caplen && g.origlen == w.origlen && g.ts_ns == w.ts_ns;
            if !same {
                bad.push(format!(
                    "{name}: frame {k}: tcpdump ts {} caplen {} origlen {}, stored ts {} caplen {} origlen {}{}",
                    w.ts_ns,
                    w.caplen,
                    w.origlen,
                    g.ts_ns,
                    g.caplen,
                    g.origlen,
                    if g.data == w.data { "" } else { ", bytes differ" }
                ));
                break;
            }
            if g.snaplen != w.snaplen {
                bad.push(format!("{name}: snaplen {} stored as {}", w.snaplen, g.snaplen));
                break;
            }
        }
        at += want.len();
    }
    assert!(bad.is_empty(), "{} files differ from tcpdump:\n{}", bad.len(), bad.join("\n"));
    assert_eq!(got.len(), total);
    assert_peers_read(&paths(&files), 0);
});

/// All 830 files of the corpus (every link type, crash reproducers among
/// them) go through `--read` without a panic; whatever is reported names
/// its file; whatever is stored is valid.
wvtest!(corpus_every_file_reads_without_panic, needs = ["capinfos", corpus], |t| {
    let all = t.corpus_files();
    let tmp = TempDir::new("corpus-all");
    let store = tmp.join("store");
    let o = record_read(&store, &all, &[], &[]);
    assert_no_panic(&o.stderr, "corpus --read");
    assert!(matches!(o.code, Some(0) | Some(1)), "exit code {:?}: {}", o.code, o.stderr);
    for line in o.stderr.lines() {
        let l = line.trim_start_matches("wirevault: ");
        let known = l.starts_with("note:")
            || l.starts_with("tune:")
            || l.contains("packets received in")
            || l.contains("input problem(s)")
            || l.contains("record with --format pcapng");
        assert!(
            known || all.iter().any(|p| line.contains(&*p.file_name().unwrap().to_string_lossy())),
            "message does not name its file: {line}"
        );
    }
    let c = final_counters(&store);
    // Only packets past what a pcap record holds (time_2106_overflow, time_2107) are dropped.
    assert_eq!(c.drops(), c.timestamp_range);
    let files = check_store(&store);
    let stored: usize = files.iter().map(|f| f.records.len()).sum();
    assert_eq!(stored as u64, c.written);
    // Same count as our reader finds file by file.
    let by_reader: usize = all
        .iter()
        .map(|p| {
            let Ok(f) = fs::File::open(p) else { return 0 };
            let Ok(mut r) = wv_wire::reader::Reader::new(f) else { return 0 };
            let mut n = 0;
            while let Ok(Some(p)) = r.next_packet() {
                n += usize::from(p.ts_ns < (u32::MAX as u64 + 1) * 1_000_000_000);
            }
            n
        })
        .sum();
    assert_eq!(stored, by_reader, "packets stored vs packets in the corpus");
    let linktypes: BTreeMap<u64, usize> = files.iter().fold(BTreeMap::new(), |mut m, f| {
        *m.entry(f.entry["linktype"].as_u64().unwrap()).or_default() += 1;
        m
    });
    assert!(linktypes.len() > 10, "link types stored: {linktypes:?}");
    assert_peers_read(&paths(&files), 0);
});

// ---------------------------------------------------------------------------
// Errors a user can cause

wvtest!(bad_filter_exits_2_with_libpcaps_message, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("bad-filter");
    let input = tmp.join("in.pcap");
    write_pcap(&input, 1, 65535, false, &test_frames(10, START_NS));
    for expr in ["udp port nonsense", "udp and", "tcp[tcpflags] & bogus != 0"] {
        let store = tmp.join("store");
        let args: Vec<&str> = expr.split(' ').collect();
        let o = record_read(&store, std::slice::from_ref(&input), &[], &args);
        o.expect(2, expr);
        let msg = libpcap_filter_error(expr);
        assert!(o.stderr.contains(&msg), "{expr}: stderr lacks libpcap's \"{msg}\": {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{expr}: one line expected: {}", o.stderr);
        assert!(!store.exists(), "{expr}: store created for a bad filter");
    }
});

#[test]
fn store_under_a_regular_file_is_a_clear_error() {
    let tmp = TempDir::new("bad-store");
    let input = tmp.join("in.pcap");
    write_pcap(&input, 1, 65535, false, &test_frames(10, START_NS));
    let file = tmp.join("regular");
    fs::write(&file, b"x").unwrap();
    let store = file.join("store");
    let o = record_read(&store, &[input], &[], &[]);
    o.expect(1, "store under a file");
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one sentence expected: {}", o.stderr);
    assert!(lines[0].contains(&*store.to_string_lossy()), "message does not name the store: {}", o.stderr);
}

#[test]
fn missing_input_file_exits_1_naming_it() {
    let tmp = TempDir::new("missing-input");
    let gone = tmp.join("no-such.pcap");
    let store = tmp.join("store");
    let o = record_read(&store, std::slice::from_ref(&gone), &[], &[]);
    o.expect(1, "missing input"); // what the command names, the host lacks (issue 44)
    assert!(o.stderr.contains(&*gone.to_string_lossy()), "{}", o.stderr);
    assert!(!store.exists(), "store created for a missing input");
}

/// A truncated file and a file that is no capture at all, between two good
/// ones: exit 1, one message per bad file naming it, everything readable stored.
#[test]
fn broken_inputs_are_reported_and_the_rest_is_stored() {
    let tmp = TempDir::new("broken-input");
    let frames = test_frames(100, START_NS);
    let good1 = tmp.join("good1.pcap");
    write_pcap(&good1, 1, 65535, false, &frames[..40]);
    let cut = tmp.join("cut.pcap");
    write_pcap(&cut, 1, 65535, false, &frames[40..70]);
    let len = fs::metadata(&cut).unwrap().len();
    // Cut in the middle of the last record's data.
    let cut_len = len - (frames[69].data.len() as u64) / 2;
    fs::OpenOptions::new().write(true).open(&cut).unwrap().set_len(cut_len).unwrap();
    // A non-capture file is refused before anything is created (see
    // hostile_retrial::record_read_checks_every_input_before_creating_the_store).
    let good2 = tmp.join("good2.pcap");
    write_pcap(&good2, 1, 65535, false, &frames[70..]);

    let store = tmp.join("store");
    let o = record_read(&store, &[good1, cut.clone(), good2], &[], &[]);
    o.expect(1, "broken inputs");
    assert!(
        o.stderr.lines().any(|l| l.contains(&*cut.to_string_lossy())),
        "no message names {}: {}",
        cut.display(),
        o.stderr
    );
    let c = final_counters(&store);
    assert_eq!((c.written, c.drops()), (99, 0));
    let files = check_store(&store);
    let want: Vec<Frame> = frames[..69].iter().chain(&frames[70..]).cloned().collect();
    assert_same_frames(&want, &stream_records(&files, 0), true, "readable frames of broken inputs");
}

/// `--read FIFO`: Ctrl-C stops the recording at once (as it stops
/// `tcpdump -r FIFO`) while no writer has come, and while a writer holds
/// the FIFO open without sending; what was read is kept, and a stop is no
/// damaged input.
#[test]
fn a_waiting_fifo_stops_on_sigint() {
    let tmp = TempDir::new("fifo-stop");
    let fifo = tmp.join("in.fifo");
    mkfifo(&fifo);
    let fifo_arg = fifo.to_str().unwrap();
    let interrupt = |r: Recorder, what: &str| {
        // SAFETY: the recorder is our child, not yet reaped.
        unsafe { libc::kill(r.pid() as libc::pid_t, libc::SIGINT) };
        let o = r.wait(std::time::Duration::from_secs(10));
        o.expect(0, what);
        assert!(!o.stderr.contains("truncated") && !o.stderr.contains("problem"), "{what}: {}", o.stderr);
    };

    // No writer ever comes.
    let store = tmp.join("alone");
    let mut r =
        Recorder::start(None, &store, tmp.path(), &["-q", "--buffer", "8M", "--block-size", "64K", "--read", fifo_arg]);
    r.wait_ready();
    interrupt(r, "a FIFO without a writer");

    // A writer sends 50 frames and keeps the FIFO open.
    let frames = test_frames(50, START_NS);
    let src = tmp.join("src.pcap");
    write_pcap(&src, 1, 65535, false, &frames);
    let store = tmp.join("held");
    let mut r =
        Recorder::start(None, &store, tmp.path(), &["-q", "--buffer", "8M", "--block-size", "64K", "--read", fifo_arg]);
    r.wait_ready();
    let mut w = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    std::io::Write::write_all(&mut w, &fs::read(&src).unwrap()).unwrap();
    r.wait_received(50);
    interrupt(r, "a FIFO held open");
    drop(w);
    let files = check_store(&store);
    assert_same_frames(&frames, &stream_records(&files, 0), true, "frames read before the stop");
}

/// `-c N` on files reads no packet past the Nth stored (as `tcpdump -r -c`):
/// the packets read ahead were counted as received and dropped at shutdown
/// (1 of 512 written, 511 "dropped"), and with a filter as filtered.
#[test]
fn count_limit_on_files_reads_no_further() {
    let tmp = TempDir::new("count-files");
    let frames = test_frames(2000, START_NS);
    let f = tmp.join("in.pcap");
    write_pcap(&f, 1, 65535, false, &frames);
    let store = tmp.join("one");
    let o = record_read(&store, std::slice::from_ref(&f), &["-c", "1"], &[]);
    o.expect(0, "-c 1");
    // What was left unread is said (a prefix is not the whole input).
    assert!(o.stderr.contains("stopped before the end of the input: "), "{}", o.stderr);
    let c = final_counters(&store);
    assert_eq!((c.received, c.written, c.drops()), (1, 1, 0));
    let store = tmp.join("udp");
    record_read(&store, &[f], &["-c", "10"], &["udp"]).expect(0, "-c 10 udp");
    let c = final_counters(&store);
    // Received: the frames up to the tenth UDP one (IPv4 or IPv6), filtered or not.
    let udp = |d: &[u8]| d[12..14] == [8, 0] && d[23] == 17 || d[12..14] == [0x86, 0xdd] && d[20] == 17;
    let tenth = frames.iter().enumerate().filter(|(_, f)| udp(&f.data)).nth(9);
    let upto = tenth.map(|(i, _)| i as u64 + 1);
    assert_eq!((c.written, c.drops(), Some(c.received), c.filtered + 10), (10, 0, upto, c.received));
}

/// A pcapng input whose interfaces have different link types, packets
/// alternating: the store keeps one file per link type (not one per
/// packet: each change of link type used to close the file), every file
/// is one that tcpdump reads (libpcap refuses a pcapng file whose
/// interfaces differ in link type, so the files are not merged into one),
/// and `query` returns every packet, per link type as tshark selects it
/// from the input.
wvtest!(interleaved_link_types_make_one_file_each_and_lose_nothing, needs = ["tshark", "tcpdump"], |t| {
    let tmp = TempDir::new("read-linktypes");
    let input = tmp.join("two.pcapng");
    let n = 300;
    let (eth, raw) = write_two_link_types(&input, n, START_NS);
    let store = tmp.join("store");
    record_read(&store, std::slice::from_ref(&input), &[], &[]).expect(0, "record two link types");
    let mut files = check_store(&store);
    files.sort_by_key(|f| f.entry["linktype"].as_u64());
    let linktypes: Vec<u64> = files.iter().map(|f| f.entry["linktype"].as_u64().unwrap()).collect();
    assert_eq!(linktypes.len(), 2, "one file per link type, not {} files", linktypes.len());
    for (f, (lt, want)) in files.iter().zip([(1, &eth), (101, &raw)]) {
        assert_eq!(f.entry["linktype"], lt);
        assert_same_frames(want, &f.records, true, &format!("file of link type {lt}"));
        let (by_tcpdump_lt, by_tcpdump) = tcpdump_frames(&f.path, &[], tmp.path());
        assert_eq!((by_tcpdump_lt, by_tcpdump.len()), (lt, n as usize), "tcpdump -r {}", f.path.display());
    }
    let count = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    count.expect(0, "query --count");
    assert_eq!(count.stdout.trim(), (2 * n).to_string());
    for (port, iface, want) in [(1000, 0, &eth), (2000, 1, &raw)] {
        let got = query_frames(&store, &tmp.join(format!("q{port}.pcap")), &["udp", "port", &port.to_string()]);
        assert_same_frames(want, &got, true, &format!("query udp port {port}"));
        let o = run_ok(
            Command::new("tshark")
                .arg("-r")
                .arg(&input)
                .args(["-Y", &format!("frame.interface_id == {iface} && udp.port == {port}")]),
        );
        let by_tshark = String::from_utf8_lossy(&o.stdout).lines().count();
        assert_eq!(got.len(), by_tshark, "query udp port {port} against tshark on interface {iface}");
    }
});

/// The test sequence's own frames are what they claim: tshark, checking every IPv4 and UDP
/// checksum (IPv6's mandatory one included), finds none bad and no malformed IPv6 frame (the
/// DNS payloads are noise on purpose), and every IPv6 frame (jumbo ones among them) carries a
/// good UDP checksum.
wvtest!(test_frames_are_valid_as_tshark_checks_them, needs = ["tshark"], |t| {
    let tmp = TempDir::new("test-frames-valid");
    let file = tmp.join("frames.pcap");
    write_pcap(&file, 1, 65535, true, &test_frames(N, START_NS));
    let o = run_ok(Command::new("tshark").arg("-r").arg(&file).args([
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-Y",
        "ip.checksum.status == \"Bad\" || udp.checksum.status == \"Bad\" || ipv6 && _ws.malformed",
    ]));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "", "frames tshark finds bad");
    let want = (0..N).filter(|&i| kind_of(i) == Kind::Ipv6Udp).count();
    let count = |filter: &str| {
        let o =
            run_ok(Command::new("tshark").arg("-r").arg(&file).args(["-o", "udp.check_checksum:TRUE", "-Y", filter]));
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    assert_eq!(count("ipv6 && udp.checksum.status == \"Good\""), want, "IPv6 frames with a good UDP checksum");
    assert!(count("ipv6 && frame.len >= 9000") > 0, "no jumbo IPv6 frame in the sequence");
    assert!(count("vlan && ipv6 && frame.len >= 9000") > 0, "no tagged jumbo IPv6 frame in the sequence");
});

#[test]
fn record_read_checks_every_input_before_creating_the_store() {
    let tmp = TempDir::new("hr-read-check");
    let good = tmp.join("good.pcap");
    write_pcap(&good, 1, 65535, false, &test_frames(10, 1_700_000_000_000_000_000));
    for inputs in [vec!["/etc/passwd"], vec![good.to_str().unwrap(), "/etc/passwd"]] {
        let s = tmp.join("new");
        let mut args = vec!["record", "-r"];
        args.extend(inputs.iter());
        args.extend(["-o", s.to_str().unwrap(), "-q"]);
        let o = run_wirevault(&args);
        o.expect(1, "record -r /etc/passwd"); // not a capture file: exit 1 (issue 44)
        assert!(o.stderr.contains("/etc/passwd"), "{}", o.stderr);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
        assert!(!s.exists(), "a store was created for a non-capture input");
    }
    // Standard input still works.
    let s = tmp.join("stdin");
    let o = Outcome::from_output(
        wirevault()
            .args(["record", "-r", "-", "-o", s.to_str().unwrap(), "-q", "--buffer", "64M"])
            .stdin(fs::File::open(&good).unwrap())
            .output()
            .unwrap(),
    );
    o.expect(0, "record -r - < good.pcap");
    assert_eq!(final_counters(&s).written, 10);
}

wvtest!(times_past_2106_are_refused_in_pcap_and_kept_in_pcapng, needs = ["tcpdump", corpus], |t| {
    let input = t.corpus_file("time_2106_overflow.pcapng");
    let tmp = TempDir::new("hs2-2106");
    let count = |store: &Path, range: &[&str]| -> u64 {
        let mut a = vec!["query", s(store), "--count"];
        a.extend_from_slice(range);
        let o = run_wirevault(&a);
        o.expect(0, &format!("query {range:?}"));
        o.stdout.trim().parse().unwrap()
    };
    let stored = |store: &Path| -> u64 {
        fs::read_dir(store.join("stream-000"))
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| !p.to_string_lossy().ends_with(".idx"))
                    .map(|p| tcpdump_count(&p, ""))
                    .sum()
            })
            .unwrap_or(0)
    };
    let limit = (u32::MAX as u64 + 1) * 1_000_000_000;
    for format in ["pcap", "pcapng"] {
        let store = tmp.join(format);
        let o = run_wirevault(&["record", "-r", s(&input), "-o", s(&store), "-q", "--format", format]);
        o.expect(0, &format!("record --format {format}"));
        // The catalog holds the times the stored records hold.
        for e in catalog(&store) {
            let (_, recs) = read_capture(&store.join(e["file"].as_str().unwrap()));
            for r in recs {
                let (lo, hi) = (e["first_ns"].as_u64().unwrap(), e["last_ns"].as_u64().unwrap());
                assert!(
                    lo <= r.ts_ns && r.ts_ns <= hi,
                    "{format}: a stored time {} outside the catalog's {e}",
                    r.ts_ns
                );
            }
        }
        let c = final_counters(&store);
        let in_file = tcpdump_count(&input, "");
        assert_eq!(c.received, in_file);
        let on_disk = stored(&store);
        assert_eq!(c.written, on_disk, "{format}: written vs stored");
        assert_eq!(count(&store, &[]), on_disk, "{format}");
        assert_eq!(count(&store, &["--from", "0", "--to", "100"]), 0, "{format}: a wrapped time");
        let late = count(&store, &["--from", "2106-02-07T06:28:16Z"]);
        if format == "pcap" {
            assert_eq!(c.timestamp_range, in_file, "{format}: the packet past 2106 is counted as a drop");
            assert!(o.stderr.contains("--format pcapng"), "{}", o.stderr);
            assert_eq!(late, 0);
        } else {
            assert_eq!(c.timestamp_range, 0);
            assert_eq!(late, on_disk, "pcapng keeps the time");
        }
        // The catalog holds what the files hold.
        for e in catalog(&store) {
            assert!(e["first_ns"].as_u64().unwrap() >= limit, "{format}: {e}");
        }
    }
});
