//! `wirevault disk-bench`'s mechanisms: gauge a volume with the recorder's
//! own write path ([`runner`]), summarise the result as the paper does
//! ([`stats`]: mean, 99% confidence interval, 5th/95th percentiles, worst
//! windows), size the buffer that absorbs the measured dips at a rate
//! ([`buffer`]), draw the per-second series ([`plot`]) and write it all
//! as one versioned [`report::Report`].
//!
//! Policy (defaults, the free-space limit, units on the command line, the
//! report) lives in the binary (`crates/wirevault/src/cmd/disk_bench.rs`).

#![deny(unsafe_code)]

pub mod buffer;
pub mod plot;
pub mod report;
pub mod runner;
pub mod stats;

use std::io;
use std::path::Path;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    /// A write (or its fsync) failed; `full` when the volume ran out of space.
    #[error("writing {path} failed: {source}")]
    Write { path: String, full: bool, source: io::Error },
    /// The stop flag was set.
    #[error("interrupted")]
    Interrupted,
    #[error("{0}")]
    Plot(String),
}

impl BenchError {
    fn io(what: impl Into<String>, source: io::Error) -> BenchError {
        BenchError::Io { what: what.into(), source }
    }

    fn write(path: &Path, source: io::Error) -> BenchError {
        let full = matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT));
        BenchError::Write { path: path.display().to_string(), full, source }
    }
}
