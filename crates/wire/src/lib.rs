//! On-disk and on-wire formats as zero-copy views.
//!
//! Everything here is safe code that takes untrusted bytes: constructors
//! check lengths once (`new_checked`), after which accessors cannot fail.
//! The capture path uses the `emit_*` helpers to lay records straight into
//! arena memory; readers (`--read`, `index`, `query`) use the parsers.
#![deny(unsafe_code)]

pub mod bpf;
pub mod dissect;
pub mod format;
pub mod names;
pub mod octets;
pub mod packet;
pub mod pcap;
pub mod pcapng;
pub mod reader;
pub mod time;
pub mod tunnel;
pub mod views;

pub mod linktype;

pub use format::Format;

/// Largest snapshot length libpcap accepts for most link types
/// (`MAXIMUM_SNAPLEN` in libpcap's pcap-int.h).
pub const MAX_SNAPLEN: u32 = 262_144;

/// The classic simple IMIX (7:4:1 of IP packets of 40, 576 and 1500 bytes) as
/// Ethernet frames without FCS: what `record --synthetic size=imix` sends and
/// `plan --mix imix` plans for, one definition for both.
pub const IMIX: [u32; 12] = [60, 60, 60, 60, 60, 60, 60, 590, 590, 590, 590, 1514];
