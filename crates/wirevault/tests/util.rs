//! Fixtures shared by the `record_*` integration tests: the real binary, temp
//! directories, a pair of network namespaces joined by a veth pair, a pcap
//! writer for test frames, a recorder process handle, and the checks every
//! store must pass (catalog against files, peers' readers, exact counters).
//!
//! The tests compare what wirevault stored with what was sent by reading the
//! stored files with the project's own reader (`wv_wire::reader`) *and* by
//! having tcpdump/capinfos open them: a file that our reader accepts but
//! Wireshark's or libpcap's rejects is a bug too.
//!
//! Tests that need root or outside tools skip with a printed `SKIP` line when
//! those are missing, except under CI (`CI=true`), where `scripts/install-deps.sh`
//! has installed every tool and a missing one is a failure.
#![allow(dead_code)]

use serde_json::Value;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wv_wire::views::ones_sum;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_wirevault")
}

/// `wirevault` as a command, with arguments to add.
pub fn wirevault() -> Command {
    Command::new(bin())
}

/// Makes a FIFO (mode 0600) at `path`.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// True when running under CI, where skipping for a missing tool is a failure.
pub fn in_ci() -> bool {
    wv_testkit::in_ci()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True if the test may go on; prints why not otherwise.
pub fn need_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    eprintln!("SKIP {test}: needs root (network namespaces, AF_PACKET sockets)");
    false
}

/// True if every tool is installed. A missing tool skips the test with a
/// message, or fails it under CI.
pub fn need_tools(test: &str, tools: &[&str]) -> bool {
    wv_testkit::need_tools(test, tools)
}

/// The tcpdump test captures (`../shared/corpus/tcpdump-tests` beside the
/// repository), or `None` with a printed `SKIP` line. Under CI a missing
/// corpus is a failure: CI clones the repository beside `shared/`.
pub fn corpus_dir(test: &str) -> Option<PathBuf> {
    wv_testkit::corpus_dir(test)
}

/// One file of the corpus (see [`corpus_dir`]).
pub fn corpus_file(test: &str, name: &str) -> Option<PathBuf> {
    wv_testkit::corpus_file(test, name)
}

/// True if `tool` is installed (on PATH or in an sbin directory).
pub fn have(tool: &str) -> bool {
    wv_testkit::have(tool)
}

/// Wall clock in nanoseconds since the epoch.
/// A time in ns as `--from`/`--to` take it: epoch seconds with nine decimals.
pub fn time_arg(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

static UNIQUE: AtomicU32 = AtomicU32::new(0);

/// A per-process unique number for names of temp dirs and namespaces.
fn unique() -> u32 {
    UNIQUE.fetch_add(1, Ordering::Relaxed)
}

/// Serialises tests that put load on the machine (live capture, traffic at
/// top speed), so that parallel tests do not make each other drop packets.
pub fn heavy_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A temporary directory, removed on drop unless the test failed (then its
/// path is printed so the store can be inspected) or `WV_KEEP_TEMP` is set.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("wirevault-test-{}-{}-{name}", std::process::id(), unique()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("WV_KEEP_TEMP").is_some() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs a command to completion; panics with its output if it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Asserts that stderr shows no panic and no backtrace.
pub fn assert_no_panic(stderr: &str, what: &str) {
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE") && !stderr.contains("stack backtrace"),
        "{what}: wirevault panicked:\n{stderr}"
    );
}

// ---------------------------------------------------------------------------
// Network namespaces

/// Two fresh network namespaces joined by a veth pair (`veth-a` in `ns_a`,
/// `veth-b` in `ns_b`), MTU 9000, with IPv6 and ARP off and no addresses so
/// that the kernel sends nothing on its own: every frame on the link is one
/// the test sent. Dropping it deletes both namespaces (and with them the
/// veth pair).
pub struct VethPair {
    pub ns_a: String,
    pub ns_b: String,
    pub if_a: &'static str,
    pub if_b: &'static str,
}

/// `ip ARGS...`, which must succeed.
pub fn ip(args: &[&str]) {
    run_ok(Command::new("ip").args(args));
}

/// Makes `dev` in namespace `ns` a host: its MAC `mac`, address `addr`/24, its one peer
/// `peer` known at `peer_mac` (no ARP on the wire), and loopback up.
pub fn host(ns: &str, dev: &str, (addr, mac): (&str, &str), (peer, peer_mac): (&str, &str)) {
    ip(&["-n", ns, "link", "set", "dev", dev, "address", mac]);
    ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
    ip(&["-n", ns, "neigh", "replace", peer, "lladdr", peer_mac, "dev", dev]);
    ip(&["-n", ns, "link", "set", "lo", "up"]);
}

impl VethPair {
    pub fn new() -> VethPair {
        VethPair::with_queues(1)
    }

    /// A pair whose ends have `queues` receive and transmit queues each.
    pub fn with_queues(queues: u32) -> VethPair {
        remove_stale_namespaces();
        let base = format!("wvt-{}-{}", std::process::id(), unique());
        let pair = VethPair { ns_a: format!("{base}-a"), ns_b: format!("{base}-b"), if_a: "veth-a", if_b: "veth-b" };
        for ns in [&pair.ns_a, &pair.ns_b] {
            ip(&["netns", "add", ns]);
            // Before the veth exists, so that it never gets an IPv6 address
            // (no ND, MLD or router solicitations on the link).
            run_ok(
                Command::new("ip")
                    .args(["netns", "exec", ns, "sysctl", "-qw"])
                    .args(["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]),
            );
        }
        let q = queues.to_string();
        let q: &[&str] = if queues > 1 { &["numtxqueues", &q, "numrxqueues", &q] } else { &[] };
        let (a, b) = (
            [&["link", "add", pair.if_a, "netns", &pair.ns_a], q].concat(),
            [&["name", pair.if_b, "netns", &pair.ns_b], q].concat(),
        );
        ip(&[&a[..], &["type", "veth", "peer"], &b[..]].concat());
        for (ns, dev) in [(&pair.ns_a, pair.if_a), (&pair.ns_b, pair.if_b)] {
            ip(&["-n", ns, "link", "set", "dev", dev, "mtu", "9000", "arp", "off", "multicast", "off", "up"]);
        }
        // veth reports carrier as soon as both ends are up; wait for it so
        // that tcpreplay never meets a link that is still down.
        for (ns, dev) in [(&pair.ns_a, pair.if_a), (&pair.ns_b, pair.if_b)] {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let out = run_ok(Command::new("ip").args(["-n", ns, "-o", "link", "show", "dev", dev]));
                if String::from_utf8_lossy(&out.stdout).contains("LOWER_UP") {
                    break;
                }
                assert!(Instant::now() < deadline, "{dev} in {ns} never came up");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        pair
    }

    /// `ip netns exec NS` followed by a program.
    pub fn exec(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }

    /// tcpdump on this pair's far end (`if_b` in `ns_b`), nanosecond stamps, writing `out`
    /// with a kernel buffer of `buffer_kib`; started 700 ms before it returns, so it sees
    /// what is sent next. Stop it with SIGINT (its stderr is piped for the summary).
    pub fn tcpdump_beside(&self, out: &Path, buffer_kib: u32) -> Child {
        let td = VethPair::exec(&self.ns_b, "tcpdump")
            .args(["-i", self.if_b, "-n", "-U", "-B", &buffer_kib.to_string(), "--time-stamp-precision=nano", "-w"])
            .arg(out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tcpdump");
        std::thread::sleep(std::time::Duration::from_millis(700));
        td
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
    }
}

/// Deletes namespaces left behind by test processes that no longer exist
/// (a test killed by a signal cannot run its Drop guard).
fn remove_stale_namespaces() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("wvt-") else {
            continue;
        };
        let pid: u32 = rest.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if pid != 0 && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

// ---------------------------------------------------------------------------
// Test frames and pcap files

/// One frame as sent or as expected on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub ts_ns: u64,
    pub origlen: u32,
    pub data: Vec<u8>,
}

/// What kind of frame [`test_frames`] made; the filter tests need to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// IPv4/UDP with port 53 as source or destination.
    Dns,
    /// IPv4/UDP on another port.
    Udp,
    /// IPv4/TCP to port 53 (must not match `udp port 53`).
    TcpDns,
    /// 802.1Q-tagged (some with priority 7, DEI, VID 0) non-IP frame.
    Vlan,
    /// 802.1ad + 802.1Q (QinQ) non-IP frame.
    QinQ,
    /// Untagged non-IP frame (local experimental EtherType 0x88b5).
    Raw,
    /// IPv6/UDP (checksummed) on a port that is not 53; up to jumbo sizes; every other one
    /// (`seq % 20 == 17`) 802.1Q-tagged.
    Ipv6Udp,
}

pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// The IPv6 addresses of [`Kind::Ipv6Udp`] frames: fd00::1 to fd00::2.
const V6_SRC: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn ipv4_header(total_len: usize, proto: u8, seq: u32) -> [u8; 20] {
    let mut h = [0u8; 20];
    let repr = wv_wire::views::ipv4::Repr {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        protocol: proto.into(),
        payload_len: (total_len - 20) as u16,
        ttl: 64,
        ident: seq as u16,
        dont_frag: true,
    };
    repr.emit(&mut h).expect("20 bytes");
    h
}

/// Builds frame number `seq` of kind `kind`, exactly `size` bytes long, its
/// payload the sequence number followed by a pattern that differs per frame.
pub fn make_frame(seq: u32, kind: Kind, size: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(size);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    match kind {
        Kind::Dns | Kind::Udp | Kind::TcpDns => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            let ip_len = size - 14;
            let proto = if kind == Kind::TcpDns { 6 } else { 17 };
            f.extend_from_slice(&ipv4_header(ip_len, proto, seq));
            let (sport, dport): (u16, u16) = match kind {
                Kind::Dns if seq.is_multiple_of(2) => (40000 + (seq % 1000) as u16, 53),
                Kind::Dns => (53, 40000 + (seq % 1000) as u16),
                Kind::Udp => (40000, 5353 + (seq % 3) as u16),
                _ => (40001, 53),
            };
            f.extend_from_slice(&sport.to_be_bytes());
            f.extend_from_slice(&dport.to_be_bytes());
            if kind == Kind::TcpDns {
                f.extend_from_slice(&seq.to_be_bytes()); // sequence number
                f.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
            } else {
                f.extend_from_slice(&((ip_len - 20) as u16).to_be_bytes());
                f.extend_from_slice(&[0, 0]); // no checksum (allowed in IPv4)
            }
        }
        Kind::Vlan => {
            // Priority 0..7, DEI on every 5th, VID 0 (priority tag) on every 11th.
            let vid = if seq.is_multiple_of(11) { 0 } else { 1 + seq % 4094 };
            let tci = ((seq % 8) << 13) | if seq.is_multiple_of(5) { 1 << 12 } else { 0 } | vid;
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&(tci as u16).to_be_bytes());
            f.extend_from_slice(&0x88b5u16.to_be_bytes());
        }
        Kind::QinQ => {
            f.extend_from_slice(&0x88a8u16.to_be_bytes());
            f.extend_from_slice(&(100 + (seq % 100) as u16).to_be_bytes());
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&(200 + (seq % 100) as u16).to_be_bytes());
            f.extend_from_slice(&0x88b5u16.to_be_bytes());
        }
        Kind::Raw => f.extend_from_slice(&0x88b5u16.to_be_bytes()),
        Kind::Ipv6Udp => {
            if seq % 20 == 17 {
                f.extend_from_slice(&0x8100u16.to_be_bytes());
                f.extend_from_slice(&((1 + seq % 4094) as u16).to_be_bytes());
            }
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            let payload = (size - f.len() - 40) as u16;
            f.extend_from_slice(&(0x6000_0000 | (seq & 0xf_ffff)).to_be_bytes()); // flow label
            f.extend_from_slice(&payload.to_be_bytes());
            f.extend_from_slice(&[17, 64]);
            f.extend_from_slice(&V6_SRC);
            f.extend_from_slice(&V6_DST);
            f.extend_from_slice(&40002u16.to_be_bytes());
            f.extend_from_slice(&(5360 + (seq % 3) as u16).to_be_bytes());
            f.extend_from_slice(&payload.to_be_bytes());
            f.extend_from_slice(&[0, 0]); // the checksum, once the payload is in
        }
    }
    assert!(f.len() + 4 <= size, "frame {seq} of {size} bytes too small for {kind:?}");
    f.extend_from_slice(&seq.to_be_bytes());
    let mut x = seq.wrapping_mul(2_654_435_761);
    while f.len() < size {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        f.push((x >> 24) as u8);
    }
    if kind == Kind::Ipv6Udp {
        // Pseudo-header (addresses, UDP length, next header) and the datagram.
        let ip = if f[12..14] == [0x81, 0] { 18 } else { 14 };
        let len = (f.len() - ip - 40) as u32;
        let pseudo = u32::from(ones_sum(0, &f[ip + 8..ip + 40])) + (len >> 16) + (len & 0xffff) + 17;
        let c = match !ones_sum(pseudo, &f[ip + 40..]) {
            0 => 0xffff,
            c => c,
        };
        f[ip + 46..ip + 48].copy_from_slice(&c.to_be_bytes());
    }
    f
}

/// The shortest frame of `kind` [`make_frame`] builds (60, or its headers and sequence number).
pub fn min_frame_len(kind: Kind) -> usize {
    match kind {
        Kind::Dns | Kind::Udp | Kind::TcpDns => 14 + 20 + 20 + 4,
        Kind::Ipv6Udp => 14 + 4 + 40 + 8 + 4,
        _ => 60,
    }
}

/// The kind of frame number `seq` in [`test_frames`].
pub fn kind_of(seq: u32) -> Kind {
    match seq % 10 {
        0 | 4 => Kind::Dns,
        1 | 8 => Kind::Udp,
        2 => Kind::TcpDns,
        3 | 9 => Kind::Vlan,
        6 => Kind::QinQ,
        7 => Kind::Ipv6Udp,
        _ => Kind::Raw,
    }
}

/// A known sequence of `n` frames with sizes from 60 to 9000 bytes (and the
/// largest an MTU of 9000 admits: 9014 untagged, 9018 with one VLAN tag),
/// of every [`Kind`], each carrying its sequence number, timestamps 1 ms
/// apart starting at `start_ns` (whole microseconds).
pub fn test_frames(n: u32, start_ns: u64) -> Vec<Frame> {
    (0..n)
        .map(|seq| {
            let kind = kind_of(seq);
            let size = match seq {
                1 => 9014,
                3 => 9018,
                _ if seq % 13 == 0 => 60,
                _ if seq % 17 == 0 => 9000,
                _ if seq % 4 == 0 => 60 + (seq as usize * 7) % 200,
                _ => 60 + (seq as usize * 4463) % (9000 - 60 + 1),
            };
            let data = make_frame(seq, kind, size.max(min_frame_len(kind)));
            Frame { ts_ns: start_ns + seq as u64 * 1_000_000, origlen: data.len() as u32, data }
        })
        .collect()
}

/// Writes a little-endian pcap file (µs or ns timestamps) of `frames`.
pub fn write_pcap(path: &Path, linktype: u32, snaplen: u32, nanos: bool, frames: &[Frame]) {
    let mut b = Vec::with_capacity(24 + frames.iter().map(|f| 16 + f.data.len()).sum::<usize>());
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    b.extend_from_slice(&magic.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&snaplen.to_le_bytes());
    b.extend_from_slice(&linktype.to_le_bytes());
    for f in frames {
        let (sec, frac) = if nanos {
            (f.ts_ns / 1_000_000_000, f.ts_ns % 1_000_000_000)
        } else {
            (f.ts_ns / 1_000_000_000, f.ts_ns % 1_000_000_000 / 1000)
        };
        b.extend_from_slice(&(sec as u32).to_le_bytes());
        b.extend_from_slice(&(frac as u32).to_le_bytes());
        b.extend_from_slice(&(f.data.len() as u32).to_le_bytes());
        b.extend_from_slice(&f.origlen.to_le_bytes());
        b.extend_from_slice(&f.data);
    }
    fs::File::create(path)
        .and_then(|mut w| w.write_all(&b))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// An IPv4/UDP packet from port `port` to itself, numbered `seq`.
pub fn udp_packet(port: u16, seq: u32) -> Vec<u8> {
    let mut udp = Vec::new();
    for v in [port, port, 8 + 24, 0] {
        udp.extend_from_slice(&v.to_be_bytes());
    }
    udp.extend_from_slice(&seq.to_be_bytes());
    udp.extend_from_slice(&[b'x'; 20]);
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    ip[2..4].copy_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip.extend(udp);
    ip
}

/// A pcapng file with two interfaces, Ethernet (0) and raw IP (1), whose
/// packets alternate: `n` each, Ethernet ones to UDP port 1000, raw ones
/// to 2000, 1 µs apart from `start_ns`. Returns the frames of each interface.
pub fn write_two_link_types(path: &Path, n: u32, start_ns: u64) -> (Vec<Frame>, Vec<Frame>) {
    let frames: Vec<(u32, Frame)> = (0..2 * n)
        .map(|i| {
            let ifc = i % 2;
            let mut data = udp_packet(1000 + 1000 * ifc as u16, i);
            if ifc == 0 {
                let mut e = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
                e.append(&mut data);
                data = e;
            }
            (ifc, Frame { ts_ns: start_ns + u64::from(i) * 1000, origlen: data.len() as u32, data })
        })
        .collect();
    let packets: Vec<(u32, u64, &[u8])> = frames.iter().map(|(ifc, f)| (*ifc, f.ts_ns, &f.data[..])).collect();
    wv_testkit::write_pcapng_two_interfaces(path, &packets);
    let (eth, raw): (Vec<_>, Vec<_>) = frames.into_iter().partition(|(ifc, _)| *ifc == 0);
    (eth.into_iter().map(|(_, f)| f).collect(), raw.into_iter().map(|(_, f)| f).collect())
}

// ---------------------------------------------------------------------------
// Reading captures

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

// ---------------------------------------------------------------------------
// Stores

/// One closed file of a store, as its catalog line describes it and as its
/// bytes read.
pub struct StoredFile {
    pub entry: Value,
    pub path: PathBuf,
    pub format: wv_wire::reader::Format,
    pub records: Vec<Rec>,
}

pub fn stats(store: &Path) -> Value {
    let p = store.join("stats.json");
    let s = fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{} is not JSON ({e}): {s}", p.display()))
}

pub fn catalog(store: &Path) -> Vec<Value> {
    let p = store.join("catalog.jsonl");
    let s = fs::read_to_string(&p).unwrap_or_default();
    s.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad catalog line ({e}): {l}"))).collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("catalog/stats field {k} missing or not a number in {v}"))
}

/// Checks a finished store and returns its files in catalog order:
/// no `.part` file is left; the catalog lists every capture file of every
/// stream and nothing else; each line agrees with its file (size, packets,
/// first/last timestamp, link type, snaplen, format) and names an index
/// that exists; files of one stream follow each other in sequence order.
pub fn check_store(store: &Path) -> Vec<StoredFile> {
    let mut on_disk = Vec::new();
    let mut parts = Vec::new();
    for d in fs::read_dir(store).expect("read store").flatten() {
        let dp = d.path();
        if d.file_name().to_string_lossy().ends_with(".part") {
            parts.push(dp.clone());
        }
        if !dp.is_dir() {
            continue;
        }
        for f in fs::read_dir(&dp).expect("read stream dir").flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".part") {
                parts.push(f.path());
            } else if name.ends_with(".pcap") || name.ends_with(".pcapng") {
                on_disk.push(f.path().strip_prefix(store).unwrap().to_path_buf());
            }
        }
    }
    assert!(parts.is_empty(), "left-over .part files in {}: {parts:?}", store.display());
    let cat = catalog(store);
    let mut listed: Vec<PathBuf> = cat.iter().map(|e| PathBuf::from(e["file"].as_str().expect("file"))).collect();
    let mut a = on_disk.clone();
    a.sort();
    listed.sort();
    assert_eq!(a, listed, "capture files on disk and catalog lines differ");

    let mut files = Vec::new();
    let mut last_seq: std::collections::HashMap<u64, (String, u64)> = Default::default();
    for e in cat {
        let rel = e["file"].as_str().unwrap().to_string();
        let path = store.join(&rel);
        let stream = u(&e, "stream");
        assert!(rel.starts_with(&format!("stream-{stream:03}/")), "catalog line of stream {stream} names {rel}");
        // NAME = <time>-<sequence>.<ext>: sequence numbers increase per stream.
        let stem = Path::new(&rel).file_stem().unwrap().to_string_lossy().into_owned();
        let seq: u64 = stem
            .rsplit('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("file name {rel} has no sequence number"));
        if let Some((prev, s)) = last_seq.get(&stream) {
            assert!(seq > *s, "catalog order: {rel} after {prev}");
        }
        last_seq.insert(stream, (rel.clone(), seq));

        let size = fs::metadata(&path).unwrap_or_else(|err| panic!("{rel}: {err}")).len();
        assert_eq!(u(&e, "bytes"), size, "{rel}: catalog bytes vs file size");
        let (format, records) = read_capture(&path);
        let fmt = e["format"].as_str().unwrap_or("");
        assert_eq!(fmt, format.to_string(), "{rel}: catalog format");
        assert!(rel.ends_with(&format!(".{fmt}")), "{rel}: extension vs format {fmt}");
        assert_eq!(u(&e, "packets"), records.len() as u64, "{rel}: catalog packets");
        assert!(!records.is_empty(), "{rel}: a closed file without packets");
        // The catalog holds the min and max time of the file (times may go back).
        let min = records.iter().map(|r| r.ts_ns).min().unwrap();
        let max = records.iter().map(|r| r.ts_ns).max().unwrap();
        assert_eq!(u(&e, "first_ns"), min, "{rel}: catalog first_ns");
        assert_eq!(u(&e, "last_ns"), max, "{rel}: catalog last_ns");
        for r in &records {
            assert_eq!(r.linktype as u64, u(&e, "linktype"), "{rel}: linktype");
            assert_eq!(r.snaplen as u64, u(&e, "snaplen"), "{rel}: snaplen");
        }
        match &e["index"] {
            Value::Null => {}
            Value::String(i) => assert!(store.join(i).is_file(), "{rel}: index {i} missing"),
            other => panic!("{rel}: index is {other}"),
        }
        files.push(StoredFile { entry: e, path, format, records });
    }
    files
}

/// The live entries of `store`'s stream 0 (its `live-000.json`: the files a
/// running recorder has stored and not catalogued yet); none without the file.
pub fn live_entries(store: &Path) -> Vec<Value> {
    let p = store.join("live-000.json");
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("{}: {e}", p.display()),
    };
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} ({e}): {text}", p.display()));
    doc["files"].as_array().unwrap_or_else(|| panic!("no files in {text}")).clone()
}

/// Copies the published prefix of each live entry's file (its first `bytes`
/// bytes, under its `.part` name or, renamed since, its final one) into `tmp`.
pub fn published_prefixes(store: &Path, tmp: &Path, tag: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, e) in live_entries(store).iter().enumerate() {
        let rel = e["file"].as_str().unwrap();
        let bytes = e["bytes"].as_u64().unwrap() as usize;
        if e["packets"] == 0 {
            continue;
        }
        let part = store.join(rel);
        let data = std::fs::read(&part)
            .or_else(|_| std::fs::read(store.join(rel.strip_suffix(".part").unwrap())))
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(data.len() >= bytes, "{rel}: {} bytes on disk, {bytes} published", data.len());
        let p = tmp.join(format!("prefix-{tag}-{i}.{}", e["format"].as_str().unwrap()));
        std::fs::write(&p, &data[..bytes]).unwrap();
        out.push(p);
    }
    out
}

/// All records of stream `stream`, concatenated in file order.
pub fn stream_records(files: &[StoredFile], stream: u64) -> Vec<Rec> {
    files
        .iter()
        .filter(|f| f.entry["stream"].as_u64() == Some(stream))
        .flat_map(|f| f.records.iter().cloned())
        .collect()
}

/// The final counters of a recording, checked for consistency:
/// state "done", balanced, and received = written + filtered +
/// deduplicated + cut + every drop.
pub struct Counters {
    pub received: u64,
    pub written: u64,
    pub filtered: u64,
    pub deduplicated: u64,
    pub cut: u64,
    pub kernel: u64,
    pub arena_full: u64,
    pub write_error: u64,
    pub shutdown: u64,
    pub timestamp_range: u64,
    /// `--source xdp`: the AF_XDP fill ring had no chunk (0 when the key is missing).
    pub fill_ring: u64,
    /// `--source xdp`: the socket dropped it for another reason (0 when the key is missing).
    pub xsk_other: u64,
}

impl Counters {
    pub fn drops(&self) -> u64 {
        self.kernel
            + self.arena_full
            + self.write_error
            + self.shutdown
            + self.timestamp_range
            + self.fill_ring
            + self.xsk_other
    }
}

pub fn final_counters(store: &Path) -> Counters {
    let s = stats(store);
    assert_eq!(s["state"], "done", "stats.json: {s}");
    let d = &s["dropped"];
    let c = Counters {
        received: u(&s, "received"),
        written: u(&s, "written"),
        filtered: u(&s, "filtered"),
        deduplicated: u(&s, "deduplicated"),
        cut: u(&s, "cut"),
        kernel: u(d, "kernel"),
        arena_full: u(d, "arena_full"),
        write_error: u(d, "write_error"),
        shutdown: u(d, "shutdown"),
        timestamp_range: u(d, "timestamp_range"),
        fill_ring: d["fill_ring"].as_u64().unwrap_or(0),
        xsk_other: d["xsk_other"].as_u64().unwrap_or(0),
    };
    assert_eq!(
        c.received,
        c.written + c.filtered + c.deduplicated + c.cut + c.drops(),
        "received != written + filtered + deduplicated + cut + drops: {s}"
    );
    assert_eq!(s["balanced"], true, "stats.json: {s}");
    c
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

// ---------------------------------------------------------------------------
// The recorder process

/// How a wirevault run ended.
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn from_output(o: Output) -> Outcome {
        Outcome {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts exit code `code` and no panic.
    pub fn expect(&self, code: i32, what: &str) -> &Self {
        assert_no_panic(&self.stderr, what);
        assert_eq!(self.code, Some(code), "{what}: exit code\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self
    }
}

/// Waits until `child` has taken charge of `sig`: blocked it (the first
/// thing wirevault's `main` does) or installed a handler for it. A signal
/// sent before that lands in the dynamic loader or the runtime's start-up,
/// where no program can catch it; a test of what a signal does to wirevault
/// measures its delays from here. Kills the child and panics after 10 s, or
/// if it ends first.
pub fn wait_until_signals_are_held(child: &mut Child, sig: libc::c_int) {
    let bit = 1u64 << (sig - 1);
    let mask = |status: &str, key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("wirevault ended ({st}) before it held signal {sig}");
        }
        let status = fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        if (mask(&status, "SigBlk:") | mask(&status, "SigCgt:")) & bit != 0 {
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wirevault never blocked or caught signal {sig} (10 s)");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs wirevault to completion with `args`.
pub fn run_wirevault(args: &[&str]) -> Outcome {
    Outcome::from_output(wirevault().args(args).stdin(Stdio::null()).output().expect("run wirevault"))
}

/// What `wirevault query SRC -w OUT ARGS...` selects (it must exit 0): the frames it wrote.
pub fn query_frames(src: &Path, out: &Path, args: &[&str]) -> Vec<Rec> {
    let mut a = vec!["query", src.to_str().expect("a UTF-8 path"), "-w", out.to_str().expect("a UTF-8 path")];
    a.extend_from_slice(args);
    run_wirevault(&a).expect(0, &format!("{a:?}"));
    read_capture(out).1
}

/// A `wirevault record` running in the background (optionally inside a
/// network namespace), with its output going to files. Dropping it kills
/// the process if it is still running.
pub struct Recorder {
    child: Option<Child>,
    pub store: PathBuf,
    out: PathBuf,
    err: PathBuf,
}

impl Recorder {
    /// Starts `wirevault record -o STORE ARGS...` (in `netns` if given).
    pub fn start(netns: Option<&str>, store: &Path, logs: &Path, args: &[&str]) -> Recorder {
        let n = unique();
        let out = logs.join(format!("recorder-{n}.out"));
        let err = logs.join(format!("recorder-{n}.err"));
        let mut cmd = match netns {
            Some(ns) => VethPair::exec(ns, bin()),
            None => wirevault(),
        };
        cmd.arg("record").arg("-o").arg(store).args(args);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).unwrap())
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Recorder { child: Some(child), store: store.to_path_buf(), out, err }
    }

    /// The recorder's process id (to send it signals).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn stderr_now(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits until the recorder has all its sources open: a live interface its full rings
    /// (stats.json `rings`; it captures on a small ring before them), anything else once
    /// stats.json says it captures.
    pub fn wait_ready(&mut self) {
        self.wait_for("stats.json to say the full rings capture", |s| {
            fs::read_to_string(s.join("stats.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["state"] != "starting" && v["rings"] != "small")
        });
    }

    /// Waits until stats.json says the recorder captures (on a live interface's small ring,
    /// before its full rings), as its "capturing on" line does.
    pub fn wait_capturing(&mut self) {
        self.wait_for("stats.json to say it captures", |s| {
            fs::read_to_string(s.join("stats.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["state"] == "capturing")
        });
    }

    /// Waits until stats.json counts at least `n` received packets.
    pub fn wait_received(&mut self, n: u64) {
        self.wait_counter("received", n);
    }

    /// Waits until the top-level counter `key` of stats.json reaches `n`.
    pub fn wait_counter(&mut self, key: &str, n: u64) {
        self.wait_for(&format!("stats.json {key} >= {n}"), |s| {
            fs::read_to_string(s.join("stats.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| v[key].as_u64())
                .is_some_and(|r| r >= n)
        });
    }

    fn wait_for(&mut self, what: &str, done: impl Fn(&Path) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if done(&self.store) {
                return;
            }
            if let Some(st) = self.exited() {
                panic!("wirevault exited ({st}) while the test waited for {what}:\n{}", self.stderr_now());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", self.stderr_now());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits (up to 60 s) for the process to end.
    pub fn terminate(self) -> Outcome {
        let pid = self.child.as_ref().unwrap().id() as libc::pid_t;
        // SAFETY: pid is our own child, not yet reaped, so it cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        self.wait(Duration::from_secs(60))
    }

    /// Waits up to `timeout` for the process to end on its own.
    pub fn wait(mut self, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = self.exited() {
                break st;
            }
            if Instant::now() >= deadline {
                let e = self.stderr_now();
                drop(self); // kills it
                panic!("wirevault did not exit within {timeout:?}:\n{e}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        self.child = None;
        Outcome {
            code: status.code(),
            stdout: fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: fs::read_to_string(&self.err).unwrap_or_default(),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A background process (traffic generator) killed and reaped on drop.
pub struct Background(pub Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------
// HTTP, through curl (a real client)

/// One HTTP answer: status, headers (lower-case names), body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A client of one server: its base URL, curl options (TLS files, tokens,
/// `--resolve`), and the network namespace it runs in (if any).
#[derive(Clone)]
pub struct Http {
    pub base: String,
    pub netns: Option<String>,
    pub opts: Vec<String>,
}

impl Http {
    pub fn new(base: &str) -> Http {
        Http { base: base.trim_end_matches('/').to_string(), netns: None, opts: vec![] }
    }

    pub fn with(&self, opts: &[&str]) -> Http {
        let mut h = self.clone();
        h.opts.extend(opts.iter().map(|s| s.to_string()));
        h
    }

    /// `curl -G` of `path` with `params` URL-encoded; `None` when curl
    /// itself fails (TLS refused, connection reset), with its message.
    pub fn try_get(&self, path: &str, params: &[(&str, &str)]) -> Result<Reply, String> {
        let n = unique();
        let dir = std::env::temp_dir();
        let (hfile, bfile) = (dir.join(format!("wv-http-{n}.h")), dir.join(format!("wv-http-{n}.b")));
        let mut cmd = match &self.netns {
            Some(ns) => VethPair::exec(ns, "curl"),
            None => Command::new("curl"),
        };
        cmd.args(["-sS", "-G", "--max-time", "120", "-D"]).arg(&hfile).arg("-o").arg(&bfile);
        cmd.args(&self.opts);
        for (k, v) in params {
            cmd.arg("--data-urlencode").arg(format!("{k}={v}"));
        }
        cmd.arg(format!("{}{path}", self.base));
        let out = cmd.stdin(Stdio::null()).output().expect("run curl");
        let head = fs::read_to_string(&hfile).unwrap_or_default();
        let body = fs::read(&bfile).unwrap_or_default();
        let _ = fs::remove_file(&hfile);
        let _ = fs::remove_file(&bfile);
        if !out.status.success() {
            return Err(format!("curl {path}: {} {}", out.status, String::from_utf8_lossy(&out.stderr)));
        }
        // The last response's head (after any 100-continue).
        let block = head.split("\r\n\r\n").filter(|b| b.starts_with("HTTP/")).last().unwrap_or("");
        let mut lines = block.lines();
        let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Ok(Reply { status, headers, body })
    }

    pub fn get(&self, path: &str, params: &[(&str, &str)]) -> Reply {
        self.try_get(path, params).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Records `record --synthetic SPEC` (quietly) into the store `store`.
pub fn record_synthetic(store: &Path, spec: &str) {
    run_wirevault(&["record", "--synthetic", spec, "-o", store.to_str().unwrap(), "-q", "--no-tune-warnings"])
        .expect(0, "record");
}

/// `promtool check metrics` on the exposition.
pub fn promtool_ok(body: &[u8], what: &str) {
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    c.stdin.take().unwrap().write_all(body).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{what}: promtool check metrics failed: {}{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(body)
    );
}

/// `wirevault serve` running in the background; its address is read from
/// its log line `api: serving STORE on SCHEME://ADDR/`.
pub struct Served {
    pub child: Child,
    pub addr: String,
    pub err: PathBuf,
}

impl Served {
    /// Starts `wirevault serve STORE --listen 127.0.0.1:0 ARGS...` and waits until it listens.
    pub fn start(store: &Path, logs: &Path, args: &[&str]) -> Served {
        let mut all = vec![store.to_str().expect("a UTF-8 path"), "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        Served::with_args(&all, logs)
    }

    /// Starts `wirevault serve ARGS...` (they must make it listen) and waits until it listens.
    pub fn with_args(args: &[&str], logs: &Path) -> Served {
        let err = logs.join(format!("serve-{}.err", unique()));
        let child = wirevault()
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .expect("start wirevault serve");
        let mut s = Served { child, addr: String::new(), err };
        s.addr = s.wait_log_addr();
        s
    }

    fn wait_log_addr(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = fs::read_to_string(&self.err).unwrap_or_default();
            if let Some(addr) = served_addr(&log) {
                return addr;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("wirevault serve exited ({st}):\n{log}");
            }
            assert!(Instant::now() < deadline, "wirevault serve did not start listening:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Sends a signal (SIGHUP reloads, SIGTERM stops).
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `host:port` of the log line `api: serving STORE on SCHEME://ADDR/`.
pub fn served_addr(log: &str) -> Option<String> {
    log.lines()
        .find(|l| l.contains("api: serving "))
        .and_then(|l| l.split("://").nth(1))
        .and_then(|rest| rest.split('/').next())
        .map(str::to_string)
}

// ---------------------------------------------------------------------------
// Loop-mounted file systems

/// An ext4 file system on a loop device with direct I/O to its backing file
/// (so O_DIRECT reaches the disk, not the page cache), mounted at `dir`;
/// unmounted, detached and removed on drop (also when the test fails).
pub struct LoopFs {
    pub dir: PathBuf,
    image: PathBuf,
    dev: String,
}

impl LoopFs {
    /// A new `mib` MiB file system (`None` if any step fails; needs root,
    /// losetup and mkfs.ext4).
    pub fn new(tag: &str, mib: u64) -> Option<LoopFs> {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let image = base.join(format!("wv-loop-{tag}-{}.img", std::process::id()));
        let dir = base.join(format!("wv-loop-{tag}-{}.mnt", std::process::id()));
        fs::create_dir_all(&dir).ok()?;
        // Allocated, not sparse, and initialised by mkfs, so that neither the
        // backing file's block allocation nor ext4's lazy inode-table
        // initialisation runs during a measurement.
        let q = |c: &mut Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
        if !q(Command::new("fallocate").args(["-l", &format!("{mib}M")]).arg(&image)) {
            return None;
        }
        let out = Command::new("losetup").args(["--find", "--show", "--direct-io=on"]).arg(&image).output().ok()?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let lfs = LoopFs { dir, image, dev };
        if !out.status.success() || lfs.dev.is_empty() {
            return None;
        }
        (q(Command::new("mkfs.ext4").args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", &lfs.dev]))
            && q(Command::new("mount").arg(&lfs.dev).arg(&lfs.dir)))
        .then_some(lfs)
    }
}

impl LoopFs {
    /// Makes ext4 act as on a metadata error (`trigger_fs_error`), remounted
    /// read-only first asked for with `errors=remount-ro`: the file system
    /// refuses every later write, as a failing disk's does. False if the
    /// kernel has no such knob.
    pub fn fail(&self) -> bool {
        let ok = Command::new("mount")
            .args(["-o", "remount,errors=remount-ro"])
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        let name = self.dev.trim_start_matches("/dev/");
        ok && fs::write(format!("/sys/fs/ext4/{name}/trigger_fs_error"), "wirevault test\n").is_ok()
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = fs::remove_dir(&self.dir);
        let _ = fs::remove_file(&self.image);
    }
}

/// SplitMix64: a fixed sequence of pseudo-random numbers for a seed, so that
/// a failing random test can be replayed from the seed it prints.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// In `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}
