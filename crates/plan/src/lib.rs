//! Capacity planning for a recorder (`wirevault plan`): what a saturated
//! Ethernet link carries and what storing it costs.
//!
//! * [`ethernet`]: exact framing on the wire (preamble and start delimiter,
//!   inter-frame gap, FCS, minimum frame) and link rates (`10gbps`, `10Gb/s`).
//! * [`formats`]: bytes per stored packet of each capture format (pcap,
//!   pcapng with its padding, HPCAP's RAW) and of wirevault's index.
//! * [`mix`]: what a link carries: one size, a weighted mix (IMIX), or the
//!   size distribution of a capture file or store (read through `wv_query`).
//! * [`capacity`]: the rates of one mix on a saturated link.
//! * [`bench`](mod@bench): a `disk-bench` result (its JSON), the volumes needed and the
//!   buffer that absorbs its dips.
//! * [`report`]: a plan's rows as `plan --json` writes them, one versioned
//!   struct each.
//!
//! Everything here is arithmetic on explicit inputs except
//! [`mix::Distribution::read`], which reads packets through the query layer.
#![deny(unsafe_code)]

pub mod bench;
pub mod capacity;
pub mod ethernet;
pub mod formats;
pub mod mix;
pub mod report;

pub use capacity::{Rates, Storage};
pub use ethernet::SizeConvention;
pub use formats::StoreFormat;
pub use mix::{Class, Distribution, Mix};
