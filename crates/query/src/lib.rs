//! Queries over a store: a time range and a tcpdump filter expression in,
//! the matching packets as nanosecond pcap out, equal to what
//! `tcpdump -r FILE EXPRESSION` selects from the same files.
//!
//! * [`expr`] finds the part of an expression an index can use ([`expr::Plan`]).
//! * [`filter`] runs the libpcap-compiled expression on each candidate.
//! * [`exec`] chooses files by time, reads candidate blocks, merges by timestamp.
//! * [`time`] parses the times users give.
//! * [`stamps`]: timestamp statistics per stream (resolution, steps back, shared stamps, gaps).
#![deny(unsafe_code)]

pub mod exec;
pub mod expr;
pub mod filter;
pub mod stamps;
pub mod time;

pub use exec::{
    check_output, check_outside, outside, prepare, run, visit, ChunkFn, PacketFn, PacketRef, Prepared, Query,
    QueryError, Report, Sink, VisitFile,
};
pub use time::{parse_time, TimeError};
