//! The exact filter: the expression compiled by libpcap, run on each
//! candidate packet with its real captured and original lengths, exactly as
//! `tcpdump -r` runs it.
//!
//! The `pcap` crate's `BpfProgram::filter` passes the buffer length as the
//! packet's original length, which would make `len`, `less` and `greater`
//! wrong for truncated packets; so this module calls libpcap's
//! `pcap_offline_filter` itself, in one fenced `unsafe` block.

use pcap::{BpfProgram, Capture, Linktype, Precision};

/// An expression compiled for one link type.
pub struct ExactFilter {
    program: Option<BpfProgram>,
}

/// libpcap refused the expression.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("{message}")]
pub struct CompileError {
    pub message: String,
}

impl ExactFilter {
    /// Compiles `expr` (optimised, as tcpdump does) for `linktype`. An
    /// empty expression accepts every packet.
    pub fn compile(expr: &str, linktype: u32) -> Result<ExactFilter, CompileError> {
        if expr.trim().is_empty() {
            return Ok(ExactFilter { program: None });
        }
        let cap = Capture::dead_with_precision(Linktype(linktype as i32), Precision::Nano)
            .map_err(|e| CompileError { message: e.to_string() })?;
        let program = cap.compile(expr, true).map_err(|e| CompileError {
            message: match e {
                pcap::Error::PcapError(m) => m,
                other => other.to_string(),
            },
        })?;
        Ok(ExactFilter { program: Some(program) })
    }

    /// Whether the packet `data` (captured bytes) of original length
    /// `origlen` passes the filter.
    #[inline]
    pub fn matches(&self, data: &[u8], origlen: u32) -> bool {
        match &self.program {
            None => true,
            Some(p) => ffi::offline_filter(p, data, origlen),
        }
    }
}

#[allow(unsafe_code)]
mod ffi {
    use pcap::BpfProgram;
    use std::os::raw::{c_int, c_uint};

    /// `struct bpf_program` of <pcap/bpf.h>.
    #[repr(C)]
    struct RawProgram {
        bf_len: c_uint,
        bf_insns: *const u8,
    }

    /// `struct pcap_pkthdr` of <pcap/pcap.h>.
    #[repr(C)]
    struct RawPkthdr {
        ts: libc::timeval,
        caplen: u32,
        len: u32,
    }

    extern "C" {
        fn pcap_offline_filter(fp: *const RawProgram, h: *const RawPkthdr, pkt: *const u8) -> c_int;
    }

    pub(super) fn offline_filter(p: &BpfProgram, data: &[u8], origlen: u32) -> bool {
        let insns = p.get_instructions();
        let prog = RawProgram { bf_len: insns.len() as c_uint, bf_insns: insns.as_ptr().cast() };
        let hdr = RawPkthdr {
            ts: libc::timeval { tv_sec: 0, tv_usec: 0 },
            caplen: data.len() as u32,
            // As the file says, even when smaller than caplen: tcpdump does the same.
            len: origlen,
        };
        // SAFETY: `prog` points at the instructions owned by `p`, which
        // outlives this call (`get_instructions` returns the compiled
        // program's `bpf_insn` array: `BpfInstruction` is
        // `repr(transparent)` over `bpf_insn`). `hdr.caplen` is exactly the
        // length of `data`, and libpcap's interpreter bounds every load by
        // caplen, so it reads only inside `data`. The call keeps no pointer.
        unsafe { pcap_offline_filter(&prog, &hdr, data.as_ptr()) != 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn len_uses_origlen() {
        let f = ExactFilter::compile("greater 1000", 1).unwrap();
        let frame = [0u8; 64];
        assert!(f.matches(&frame, 1514));
        assert!(!f.matches(&frame, 64));
    }

    #[test]
    fn bad_expression() {
        let e = ExactFilter::compile("host and", 1).err().unwrap();
        assert!(e.message.contains("syntax error"), "{}", e.message);
        assert!(ExactFilter::compile("", 1).unwrap().matches(&[], 0));
    }
}
