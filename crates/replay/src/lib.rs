//! Replay: send packets out of an interface at their recorded timing, a
//! multiple of it, a fixed packet or bit rate, or as fast as possible.
//!
//! * [`pacing`] turns each packet's timestamp (or its place in the sequence
//!   and its length) into a target time on the monotonic clock (a rate
//!   such as `5gbps` is parsed by `wv_units`, as every option's rate).
//! * [`send`] is the loop: it waits for each target (sleep with an absolute
//!   deadline, then spin for the last microseconds), batches the packets
//!   that are due together into one `sendmmsg`, and counts.
//! * [`stats`] holds the counters (sent, failed by cause, late) and the
//!   lateness histogram (p50, p99, max) without allocating per packet.
//! * [`route`] finds the interfaces that carry a default route, which
//!   the binary refuses to send on without `--force`.
//!
//! The packets come from the caller (the binary reads them through
//! `wv_query` with its `Sink::Packets`); this crate holds no policy about
//! where they come from.
#![deny(unsafe_code)]

pub mod pacing;
pub mod route;
pub mod send;
pub mod stats;

pub use pacing::{Pacing, Schedule};
pub use send::{frame_limit, Config, ReplayError, Replayer, Transmit};
pub use stats::{Cause, Lateness, Stats, Summary};
