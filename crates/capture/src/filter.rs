//! tcpdump filter expressions: compiled by libpcap, run in the kernel
//! (live capture) or by [`wv_wire::bpf`] in user space (files, synthetic).

use wv_wire::bpf::Insn;

/// A compiled filter.
#[derive(Debug, Clone)]
pub struct Filter {
    pub expression: String,
    pub program: Vec<Insn>,
}

/// Why an expression could not be compiled: libpcap's own message.
#[derive(Debug, thiserror::Error)]
#[error("invalid filter expression \"{expression}\": {message}")]
pub struct FilterError {
    pub expression: String,
    pub message: String,
}

/// Compiles `expression` for packets of `linktype` with snapshot length
/// `snaplen`, as tcpdump would for a capture file of that link type.
pub fn compile(expression: &str, linktype: u32, snaplen: u32) -> Result<Filter, FilterError> {
    let err = |m: String| FilterError { expression: expression.to_string(), message: m };
    let cap = pcap::Capture::dead_with_precision(pcap::Linktype(linktype as i32), pcap::Precision::Nano)
        .map_err(|e| err(e.to_string()))?;
    let _ = snaplen; // dead handles use MAXIMUM_SNAPLEN; the return value only caps caplen
    let prog = cap.compile(expression, true).map_err(|e| err(e.to_string()))?;
    to_filter(expression, &prog).ok_or_else(|| err("libpcap produced an unreadable program".into()))
}

/// Compiles `expression` on a live handle of interface `ifname`, so that
/// libpcap emits Linux's special VLAN loads (the kernel strips VLAN tags
/// before the socket filter runs, exactly as for `tcpdump -i IF`).
pub fn compile_live(expression: &str, ifname: &str, snaplen: u32) -> Result<Filter, FilterError> {
    let err = |m: String| FilterError { expression: expression.to_string(), message: m };
    let live = pcap::Capture::from_device(ifname)
        .and_then(|c| c.snaplen(snaplen as i32).promisc(false).immediate_mode(true).open());
    match live {
        Ok(cap) => {
            let prog = cap.compile(expression, true).map_err(|e| err(e.to_string()))?;
            to_filter(expression, &prog).ok_or_else(|| err("libpcap produced an unreadable program".into()))
        }
        // Without a live handle (no permission yet, odd interface) compile
        // as for an Ethernet file; the caller reports the interface error.
        Err(_) => compile(expression, wv_wire::linktype::ETHERNET, snaplen),
    }
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

    /// The program as kernel socket filter instructions.
    pub fn sock_filter(&self) -> Vec<libc::sock_filter> {
        self.program.iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_and_reports_errors() {
        let f = compile("udp port 53", 1, 262_144).unwrap();
        assert!(f.program.len() > 5);
        let e = compile("udp prot 53", 1, 262_144).unwrap_err();
        assert!(e.to_string().contains("syntax error"), "{e}");
    }
}
