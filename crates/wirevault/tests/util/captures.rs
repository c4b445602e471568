//! Reading captures back, with the project's reader and with the peers'
//! (capinfos, tcpdump), and comparing them with what was sent.

use super::{run_ok, unique, Frame};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One record as read back from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub ts_ns: u64,
    pub caplen: u32,
    pub origlen: u32,
    pub linktype: u32,
    pub snaplen: u32,
    pub data: Vec<u8>,
}

impl Rec {
    /// The record as a frame to expect or write again (time, original length, bytes).
    pub fn frame(&self) -> Frame {
        Frame { ts_ns: self.ts_ns, origlen: self.origlen, data: self.data.clone() }
    }
}

/// Every record of a capture file, read with the project's reader; panics
/// (naming the file) if the file is not entirely valid.
pub fn read_capture(path: &Path) -> (wv_wire::reader::Format, Vec<Rec>) {
    let f = fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut r =
        wv_wire::reader::Reader::new(f).unwrap_or_else(|e| panic!("{} is not a valid capture: {e}", path.display()));
    let mut v = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => v.push(Rec {
                ts_ns: p.ts_ns,
                caplen: p.caplen,
                origlen: p.origlen,
                linktype: p.linktype,
                snaplen: p.snaplen,
                data: p.data.to_vec(),
            }),
            Ok(None) => break,
            Err(e) => panic!("{} after {} records: {e}", path.display(), v.len()),
        }
    }
    (r.format(), v)
}

/// Asserts that `got` holds exactly `want`, in order: same bytes, captured
/// and original lengths, and (if `check_ts`) timestamps. The message names
/// the first difference.
pub fn assert_same_frames(want: &[Frame], got: &[Rec], check_ts: bool, what: &str) {
    let n = want.len().min(got.len());
    for i in 0..n {
        let (w, g) = (&want[i], &got[i]);
        if g.data != w.data || g.origlen != w.origlen || g.caplen as usize != w.data.len() {
            let diff = w.data.iter().zip(&g.data).position(|(a, b)| a != b);
            panic!(
                "{what}: frame {i} differs: sent {} bytes (orig {}), stored {} bytes (orig {}); \
                 first differing byte {diff:?}\n sent:   {}\n stored: {}",
                w.data.len(),
                w.origlen,
                g.data.len(),
                g.origlen,
                hex(&w.data[..w.data.len().min(48)]),
                hex(&g.data[..g.data.len().min(48)])
            );
        }
        if check_ts {
            assert_eq!(g.ts_ns, w.ts_ns, "{what}: timestamp of frame {i}");
        }
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} frames expected, {} stored (the first {n} are identical)",
        want.len(),
        got.len()
    );
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Has the peers open each file: `capinfos` (Wireshark's reader; all files
/// in one run) must report no error or warning, and `tcpdump -r` (libpcap)
/// must read each of the first `tcpdump_max` files to the end without a message.
pub fn assert_peers_read(paths: &[PathBuf], tcpdump_max: usize) {
    if paths.is_empty() {
        return;
    }
    for chunk in paths.chunks(200) {
        let out = Command::new("capinfos")
            .args(["-c", "-M"])
            .args(chunk)
            .stdin(Stdio::null())
            .output()
            .expect("run capinfos");
        let err = String::from_utf8_lossy(&out.stderr);
        // Link types Wireshark has no dissector table for are not a file
        // problem: capinfos names them and exits 2.
        let mut unsupported = false;
        let problems: Vec<&str> = err
            .lines()
            .filter(|l| {
                let lt = l.contains("record data that capinfos doesn't support")
                    || (l.starts_with("(pcap: network type") && l.ends_with("unknown or unsupported)"));
                unsupported |= lt;
                !lt && !l.trim().is_empty()
            })
            .collect();
        assert!(
            (out.status.success() || unsupported) && problems.is_empty(),
            "capinfos does not accept the stored files ({}): {err}",
            out.status
        );
    }
    for p in paths.iter().take(tcpdump_max) {
        let out = Command::new("tcpdump")
            .args(["-n", "-q", "-r"])
            .arg(p)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("run tcpdump");
        let err = String::from_utf8_lossy(&out.stderr);
        let extra: Vec<&str> = err.lines().filter(|l| !l.starts_with("reading from file")).collect();
        assert!(out.status.success() && extra.is_empty(), "tcpdump -r {} failed ({}): {err}", p.display(), out.status);
    }
}

/// Frames of `file` as libpcap delivers them: `tcpdump -r FILE -w OUT` read
/// back, with the link type of OUT. Microsecond pcap files are read at
/// microsecond precision (libpcap's nanosecond scaling of a µs field wraps at
/// 2^32 for out-of-range values), everything else at nanosecond precision.
pub fn tcpdump_frames(file: &Path, filter: &[&str], tmp: &Path) -> (u32, Vec<Rec>) {
    let out = tmp.join(format!("tcpdump-{}.pcap", unique()));
    let head = fs::read(file).map(|b| b[..b.len().min(4)].to_vec()).unwrap_or_default();
    let micro = head == [0xd4, 0xc3, 0xb2, 0xa1] || head == [0xa1, 0xb2, 0xc3, 0xd4];
    let precision = if micro { "micro" } else { "nano" };
    run_ok(
        Command::new("tcpdump")
            .arg(format!("--time-stamp-precision={precision}"))
            .arg("-r")
            .arg(file)
            .arg("-w")
            .arg(&out)
            .args(filter),
    );
    let header = fs::read(&out).expect("read tcpdump output");
    let linktype = u32::from_le_bytes(header[20..24].try_into().unwrap()) & 0x03ff_ffff;
    let (_, recs) = read_capture(&out);
    let _ = fs::remove_file(&out);
    (linktype, recs)
}

/// How many packets of `file` match `filter` (`""`: all) as libpcap reads
/// them: the count `tcpdump -r FILE --count FILTER` prints. A file damaged
/// part way is counted up to the damage, as libpcap reads it (tcpdump's exit
/// status is not checked: its count is the oracle); no count is a panic.
pub fn tcpdump_count(file: &Path, filter: &str) -> u64 {
    let mut cmd = Command::new("tcpdump");
    cmd.arg("-r").arg(file).arg("--count");
    if !filter.is_empty() {
        cmd.arg(filter);
    }
    let o = cmd.stdin(Stdio::null()).output().expect("run tcpdump");
    let t = String::from_utf8_lossy(&o.stdout);
    t.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("tcpdump --count: {t}"))
}

/// libpcap's own complaint about a filter expression: what `tcpdump -d`
/// prints after "tcpdump: ".
pub fn libpcap_filter_error(expr: &str) -> String {
    let out = Command::new("tcpdump")
        .args(["-y", "EN10MB", "-d", expr])
        .stdin(Stdio::null())
        .output()
        .expect("run tcpdump -d");
    assert!(!out.status.success(), "tcpdump accepts filter {expr:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .rev()
        .find_map(|l| l.strip_prefix("tcpdump: "))
        .unwrap_or_else(|| panic!("tcpdump -d said: {err}"))
        .trim()
        .to_string()
}
