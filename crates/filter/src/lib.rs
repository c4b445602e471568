//! tcpdump filter expressions: compiled by libpcap, run in the kernel
//! (live capture) or by [`wv_wire::bpf`] in user space (files, synthetic,
//! AF_XDP, and query's exact filter).
//!
//! Its own crate so that what only filters (`wv-query`) need not depend on
//! the capture backends (`wv-capture`) to reach libpcap's compiler.
#![deny(unsafe_code)]

use wv_wire::bpf::Insn;

/// A compiled filter.
#[derive(Debug, Clone)]
pub struct Filter {
    pub expression: String,
    pub program: Vec<Insn>,
}

/// Why an expression could not be compiled: libpcap's own message.
#[derive(Debug, thiserror::Error)]
#[error("invalid filter expression \"{}\": {message}", shown(expression))]
pub struct FilterError {
    pub expression: String,
    pub message: String,
}

/// Most words (blank-separated) an expression may have. libpcap's optimiser
/// takes time that grows about with the cube of the program's size (1,000
/// `or`ed hosts: over a minute, in tcpdump too); this bound keeps even the
/// unoptimised compile below that checks the size cheap.
pub const MAX_WORDS: usize = 1_200;
/// Most instructions the unoptimised program may have; about 3 s of the
/// optimiser at worst on this project's test machine (400 `or`ed hosts).
pub const MAX_UNOPTIMISED_INSNS: usize = 12_000;

/// An expression as messages quote it: a long one (a list of 1,000 hosts)
/// is cut after 80 characters, so the message stays one readable line.
pub fn shown(expression: &str) -> String {
    match expression.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &expression[..i]),
        None => expression.to_string(),
    }
}

/// Compiles `expression` for packets of `linktype` (a file's LINKTYPE_*
/// value) with snapshot length `snaplen`, as tcpdump would for a capture
/// file of that link type written in this machine's byte order (as every
/// stored file is). See [`compile_file`].
pub fn compile(expression: &str, linktype: u32, snaplen: u32) -> Result<Filter, FilterError> {
    compile_file(expression, linktype, snaplen, false)
}

/// Compiles `expression` exactly as `tcpdump -r` does for a capture file of
/// `linktype` whose headers are in the other byte order than this machine's
/// when `swapped`. libpcap's code generator takes its savefile branch only
/// for a handle opened on a savefile: DLT_NULL/DLT_LOOP then test BSD's
/// AF_INET6 values (24, 28, 30) and byte-swap the address family of a
/// swapped file, where a dead handle tests Linux's 10 only. So the filter
/// is compiled on a handle opened on a pipe holding just a pcap file header
/// of that link type and byte order (libpcap maps the LINKTYPE_* value to
/// its DLT_* itself, as for the real file). Should that fail, it falls back
/// to a dead handle of [`wv_wire::linktype::to_dlt`]. Primitives that need
/// live-capture metadata (`inbound`, `outbound`, `ifindex`) are refused
/// with libpcap's savefile message.
pub fn compile_file(expression: &str, linktype: u32, snaplen: u32, swapped: bool) -> Result<Filter, FilterError> {
    let err = |m: String| FilterError { expression: expression.to_string(), message: m };
    check_words(expression).map_err(err)?;
    let dlt = wv_wire::linktype::to_dlt(linktype);
    match savefile_handle(linktype, snaplen, swapped) {
        Some(cap) => compile_on(&cap, expression, Some(dlt)),
        None => {
            let cap = pcap::Capture::dead_with_precision(pcap::Linktype(dlt), pcap::Precision::Nano)
                .map_err(|e| err(e.to_string()))?;
            compile_on(&cap, expression, Some(dlt))
        }
    }
}

/// Whether a capture file whose first bytes are `head` (12 are enough) is
/// written in the other byte order than this machine's: what libpcap calls a
/// swapped savefile (pcap magic, or a pcapng section's byte-order magic).
pub fn swapped_header(head: &[u8]) -> bool {
    let word = |o: usize| head.get(o..o + 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()));
    match word(0) {
        Some(0xa1b2_c3d4 | 0xa1b2_3c4d) => false,
        Some(0xd4c3_b2a1 | 0x4d3c_b2a1) => true,
        Some(0x0a0d_0d0a) => word(8) == Some(0x4d3c_2b1a),
        _ => false,
    }
}

/// A libpcap savefile handle on a pipe that holds only a pcap file header
/// (nanosecond magic) for `linktype`, `snaplen` and the byte order asked for.
fn savefile_handle(linktype: u32, snaplen: u32, swapped: bool) -> Option<pcap::Capture<pcap::Offline>> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let words: [u32; 4] = [0, 0, snaplen.max(1), linktype];
    let mut header = Vec::with_capacity(24);
    let put32 = |h: &mut Vec<u8>, v: u32| h.extend_from_slice(&if swapped { v.swap_bytes() } else { v }.to_ne_bytes());
    let put16 = |h: &mut Vec<u8>, v: u16| h.extend_from_slice(&if swapped { v.swap_bytes() } else { v }.to_ne_bytes());
    put32(&mut header, 0xa1b2_3c4d);
    put16(&mut header, 2);
    put16(&mut header, 4);
    for w in words {
        put32(&mut header, w);
    }
    let (reader, mut writer) = std::io::pipe().ok()?;
    writer.write_all(&header).ok()?;
    drop(writer);
    // libpcap opens the path itself; the pipe's read end is reachable through /proc.
    let path = format!("/proc/self/fd/{}", reader.as_raw_fd());
    let cap = pcap::Capture::from_file_with_precision(&path, pcap::Precision::Nano).ok();
    drop(reader);
    cap
}

/// Compiles `expression` on a live handle of interface `ifname`, so that
/// libpcap emits Linux's special VLAN loads (the kernel strips VLAN tags
/// before the socket filter runs, exactly as for `tcpdump -i IF`).
pub fn compile_live(expression: &str, ifname: &str, snaplen: u32) -> Result<Filter, FilterError> {
    let err = |m: String| FilterError { expression: expression.to_string(), message: m };
    check_words(expression).map_err(err)?;
    let live = pcap::Capture::from_device(ifname)
        .and_then(|c| c.snaplen(snaplen as i32).promisc(false).immediate_mode(true).open());
    match live {
        Ok(cap) => compile_on(&cap, expression, None),
        // Without a live handle (no permission yet, odd interface) compile
        // as for an Ethernet file; the caller reports the interface error.
        Err(_) => compile(expression, wv_wire::linktype::ETHERNET, snaplen),
    }
}

fn check_words(expression: &str) -> Result<(), String> {
    let words = expression.split_whitespace().count();
    if words > MAX_WORDS {
        return Err(too_large(format!("{words} words, at most {MAX_WORDS}")));
    }
    Ok(())
}

fn too_large(what: String) -> String {
    format!(
        "the expression is too large ({what}): libpcap's optimiser would take minutes on it (tcpdump's too); \
         use ranges (net 10.0.0.0/22, portrange 1000-2000) or split it into several queries"
    )
}

/// Compiles on `cap`: first without the optimiser (time linear in the
/// expression) to bound the program's size and, for a file of `dlt`,
/// refuse live-only metadata (a savefile handle refuses it itself; a dead
/// one would emit Linux's ancillary loads); then optimised, as tcpdump does.
fn compile_on<T: pcap::Activated + ?Sized>(
    cap: &pcap::Capture<T>,
    expression: &str,
    savefile_dlt: Option<i32>,
) -> Result<Filter, FilterError> {
    let err = |m: String| FilterError { expression: expression.to_string(), message: m };
    let raw = cap.compile(expression, false).map_err(|e| err(libpcap_message(e)))?;
    let insns = raw.get_instructions();
    if insns.len() > MAX_UNOPTIMISED_INSNS {
        return Err(err(too_large(format!(
            "{} BPF instructions before optimisation, at most {MAX_UNOPTIMISED_INSNS}",
            insns.len()
        ))));
    }
    if let Some(dlt) = savefile_dlt {
        let raw = to_filter(expression, &raw).ok_or_else(|| err("libpcap produced an unreadable program".into()))?;
        if let Some(what) = live_only_metadata(&raw.program) {
            // libpcap's own words when it compiles for a savefile (tcpdump -r).
            return Err(err(format!(
                "{what} not supported on {} when reading savefiles",
                pcap::Linktype(dlt).get_description().unwrap_or_else(|_| format!("DLT {dlt}"))
            )));
        }
    }
    let prog = cap.compile(expression, true).map_err(|e| err(libpcap_message(e)))?;
    to_filter(expression, &prog).ok_or_else(|| err("libpcap produced an unreadable program".into()))
}

/// libpcap's own words, without the pcap crate's "libpcap error: " prefix.
fn libpcap_message(e: pcap::Error) -> String {
    match e {
        pcap::Error::PcapError(m) => m,
        other => other.to_string(),
    }
}

/// Linux's ancillary loads (`SKF_AD_OFF + n`): packet metadata a socket
/// filter sees but a stored packet does not have. libpcap emits them for a
/// handle without a savefile; `tcpdump -r` refuses the primitive instead.
fn live_only_metadata(program: &[Insn]) -> Option<&'static str> {
    const SKF_AD_OFF: u32 = 0xffff_f000; // -0x1000
    const SKF_AD_PKTTYPE: u32 = 4;
    const SKF_AD_IFINDEX: u32 = 8;
    const BPF_LD_ABS: u16 = 0x20; // BPF_LD | BPF_ABS, any size
    let all: Vec<u32> =
        program.iter().filter(|i| i.code & 0xe7 == BPF_LD_ABS && i.k >= SKF_AD_OFF).map(|i| i.k - SKF_AD_OFF).collect();
    if all.is_empty() {
        return None;
    }
    Some(if all.contains(&SKF_AD_PKTTYPE) {
        "inbound/outbound"
    } else if all.contains(&SKF_AD_IFINDEX) {
        "ifindex"
    } else {
        "live-capture metadata"
    })
}

fn to_filter(expression: &str, prog: &pcap::BpfProgram) -> Option<Filter> {
    let program = prog.get_instructions().iter().map(|i| Insn::parse(&i.to_string())).collect::<Option<Vec<_>>>()?;
    Some(Filter { expression: expression.to_string(), program })
}

impl Filter {
    /// True if the packet matches.
    #[inline]
    pub fn matches(&self, data: &[u8], wirelen: u32) -> bool {
        wv_wire::bpf::run(&self.program, data, wirelen) != 0
    }

    /// True when the program jumps back (libpcap's `protochain` loops over
    /// the IPv6 extension headers): the kernel refuses it as a socket
    /// filter; libpcap and [`wv_wire::bpf`] run it in user space.
    pub fn jumps_back(&self) -> bool {
        use wv_wire::bpf::code::{JA, JMP};
        self.program.iter().any(|i| i.code == JMP | JA && (i.k as i32) < 0)
    }

    /// The program as kernel socket filter instructions.
    pub fn sock_filter(&self) -> Vec<libc::sock_filter> {
        self.program.iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protochain_jumps_back() {
        assert!(compile("ip6 protochain 17", 1, 262_144).unwrap().jumps_back());
        assert!(!compile("udp port 53", 1, 262_144).unwrap().jumps_back());
    }

    #[test]
    fn compiles_and_reports_errors() {
        let f = compile("udp port 53", 1, 262_144).unwrap();
        assert!(f.program.len() > 5);
        let e = compile("udp prot 53", 1, 262_144).unwrap_err();
        assert!(e.to_string().contains("syntax error"), "{e}");
    }

    #[test]
    fn raw_ip_files_compile_as_dlt_raw() {
        // LINKTYPE_RAW (101) was handed to libpcap as a DLT: "unknown data link type 101".
        let f = compile("udp port 53", wv_wire::linktype::RAW, 262_144).unwrap();
        let mut pkt = [0u8; 28];
        pkt[0] = 0x45;
        pkt[9] = 17;
        pkt[22..24].copy_from_slice(&53u16.to_be_bytes());
        assert!(f.matches(&pkt, 28));
        pkt[9] = 6;
        assert!(!f.matches(&pkt, 28));
    }

    #[test]
    fn dlt_null_uses_the_savefile_branch() {
        // DLT_NULL, IPv6 with BSD's AF_INET6 30 (macOS), in this machine's byte order.
        let mut pkt = vec![0u8; 4 + 40 + 8];
        pkt[0..4].copy_from_slice(&30u32.to_ne_bytes());
        pkt[4] = 0x60;
        pkt[4 + 6] = 17;
        let n = pkt.len() as u32;
        assert!(compile("ip6", 0, 65535).unwrap().matches(&pkt, n));
        assert!(compile("udp", 0, 65535).unwrap().matches(&pkt, n));
        // The same packet from a machine of the other byte order.
        pkt[0..4].copy_from_slice(&30u32.swap_bytes().to_ne_bytes());
        assert!(!compile("ip6", 0, 65535).unwrap().matches(&pkt, n));
        assert!(compile_file("ip6", 0, 65535, true).unwrap().matches(&pkt, n));
    }

    #[test]
    fn live_only_primitives_are_refused_for_files() {
        for (e, what) in
            [("inbound", "inbound/outbound"), ("udp and outbound", "inbound/outbound"), ("ifindex 2", "ifindex")]
        {
            let m = compile(e, 1, 262_144).unwrap_err().message;
            assert_eq!(m, format!("{what} not supported on Ethernet when reading savefiles"));
        }
    }

    #[test]
    fn huge_expressions_are_refused_quickly() {
        let hosts: Vec<String> = (0..1000).map(|i| format!("host 10.0.{}.{}", i / 250, i % 250)).collect();
        let t = std::time::Instant::now();
        let e = compile(&hosts.join(" or "), 1, 262_144).unwrap_err();
        assert!(e.message.contains("too large"), "{}", e.message);
        let ports: Vec<String> = (0..500).map(|i| format!("port {}", i + 1)).collect();
        let e = compile(&ports.join(" or "), 1, 262_144).unwrap_err();
        assert!(e.message.contains("too large"), "{}", e.message);
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(compile(&hosts[..100].join(" or "), 1, 262_144).is_ok());
    }
}
