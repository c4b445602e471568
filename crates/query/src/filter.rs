//! The exact filter: the expression compiled by libpcap (as `tcpdump -r`
//! compiles it for the file's link type), run on each candidate packet with
//! its real captured and original lengths by the project's cBPF interpreter
//! (`wv_wire::bpf`, libpcap's semantics), so `len`, `less` and `greater` see
//! the original length, as they do in tcpdump.

use wv_filter::{self as filter, Filter};

/// An expression compiled for one link type.
pub struct ExactFilter {
    program: Option<Filter>,
    /// Matches nothing: libpcap could not compile the expression for this
    /// link type (see [`ExactFilter::nothing`]).
    nothing: bool,
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
        Self::compile_file(expr, linktype, false)
    }

    /// As [`ExactFilter::compile`], for a file written in the other byte
    /// order than this machine's when `swapped` (as `tcpdump -r` compiles it).
    pub fn compile_file(expr: &str, linktype: u32, swapped: bool) -> Result<ExactFilter, CompileError> {
        if expr.trim().is_empty() {
            return Ok(ExactFilter { program: None, nothing: false });
        }
        let program = filter::compile_file(expr, linktype, wv_wire::MAX_SNAPLEN, swapped)
            .map_err(|e| CompileError { message: e.message })?;
        Ok(ExactFilter { program: Some(program), nothing: false })
    }

    /// A filter that matches no packet: for a link type libpcap cannot
    /// apply the expression to (`ether host` on raw IP, any filter on
    /// PKTAP), while the store's other link types are filtered.
    pub fn nothing() -> ExactFilter {
        ExactFilter { program: None, nothing: true }
    }

    /// True for [`ExactFilter::nothing`].
    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether the packet `data` (captured bytes) of original length
    /// `origlen` passes the filter.
    #[inline]
    pub fn matches(&self, data: &[u8], origlen: u32) -> bool {
        !self.nothing && self.program.as_ref().is_none_or(|p| p.matches(data, origlen))
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
