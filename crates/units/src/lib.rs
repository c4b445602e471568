//! The quantities options take, one grammar and one formatter each:
//! durations, sizes, rates, counts, CPU lists and shares of a volume.
//!
//! Every option of every subcommand (and the HTTP API's `step`, the
//! synthetic spec, `--from '10m ago'`) parses through these, so a form is
//! accepted or refused the same way wherever it is given, with the same
//! sentence. A crate of its own, without dependencies, so that a library
//! that only needs a duration (`wv-serve`, `wv-tune`) does not depend on
//! the capture backends for it.
#![deny(unsafe_code)]

mod count;
mod cpus;
mod duration;
mod given;
mod rate;
mod size;

pub use count::{count_error, parse_count, parse_packet_rate, parse_percent, COUNT_FORMS};
pub use cpus::{format_cpu_list, parse_cpu_list, MAX_CPUS};
pub use duration::{duration_error, parse_duration, DurationError, DURATION_FORMS, MAX_DURATION_NS};
pub use given::{given_duration, given_size, Given, MAX_SIZE};
pub use rate::{format_bit_rate, parse_bit_rate, parse_rate, rate_error, Rate, RateError, BYTE_RATE_FORMS, RATE_FORMS};
pub use size::{format_bytes, parse_size, size_error, SIZE_FORMS};
