//! One query over many stores: local store paths and recorders' URLs
//! (`wirevault serve`, `record --listen`), merged by timestamp into one
//! answer equal to what one recorder would have stored had it seen the
//! whole link, and never silently partial.
//!
//! * [`config`]: the fleet file (TOML) and the nodes it lists.
//! * [`http`]: a small blocking HTTP/1.1 client (plain on loopback, rustls
//!   elsewhere) whose socket timeouts are the node timeouts.
//! * [`merge`](mod@merge): one reader thread per node behind a bounded channel, and the
//!   k-way merge (ties by node, then by each node's own order).
//! * [`out`]: the merged stream as nanosecond pcap or as pcapng with one
//!   interface per node.
#![deny(unsafe_code)]

pub mod config;
pub mod http;
pub mod merge;
pub mod node;
pub mod out;

pub use config::{ConfigError, Credentials, FleetFile, Node, Overrides, Source, Timeouts};
pub use merge::{count, each, merge, Counted, Head, Lost, MergeError, MergedPacket, Outcome, Output, Selection};
pub use node::{get_json, query_params};
pub use out::{write, write_watched, write_where, Format};
