//! `wirevault record`: capture packets into a store.
//!
//! In three stages, as ripgrep's binary: [`args`] holds the flags as clap
//! parses them; [`plan`] checks every flag and turns them into a validated
//! [`plan::Plan`] (closed choices as enums, sizes as numbers, the defaults
//! and fixed tunings in [`plan::defaults`]) before anything is created;
//! [`run`](mod@run) builds the real objects from the plan: sources, the store
//! ([`store`]), one capture worker and one writer per stream, and reports
//! through [`status`] (status line, `stats.json`, summary). The writer is
//! generic over its indexer: `run` starts it with `wv_index::Builder`.

mod args;
mod plan;
mod prefault;
mod reload;
mod run;
mod start;
mod status;
mod store;

pub use args::Args;
pub use plan::defaults::buffer as default_buffer;
/// The recorder's defaults and writer tunings, which `disk-bench` measures with.
pub use plan::{buffer_fits, cpus_available, defaults, min_budget, volumes_size, Tuning};
pub use run::run;
