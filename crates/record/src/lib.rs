//! The recording lifecycle as a library: [`Recorder::prepare`] checks a [`RecorderConfig`]
//! against the host and readies the store, [`Prepared::start`] goes live, and the
//! [`Recording`] it returns runs until stopped: [`Recording::tick`] (every ~100 ms) hands
//! over to the full rings and writes `stats.json` ([`Recording::watch`] turns it until the
//! writers are done, reporting to a [`Watch`]), [`Recording::snapshot`] gives the
//! counters ([`RecordingStats`]), [`Recording::stop`] (or the end of the source) joins the
//! threads and gives the [`Summary`].
//!
//! Mechanism only, as ripgrep's `grep-searcher` under its `core`: every default, flag, message
//! prefix and exit code is the binary's (`wirevault record`); what this crate has to say
//! comes back as [`Note`]s and errors of a [`Problem`] kind.
//!
//! Threads per stream: a capture thread (`wv-capture-N`), a writer (`wv-writer-N`), the
//! writer's sort and index threads; one prefault thread for the arenas; one that makes a live
//! interface's full rings at start-up (DESIGN.md, "Threads", "Start-up").

pub mod checks;
pub mod config;
pub mod defaults;
pub mod host;
mod prefault;
mod recording;
mod sources;
mod start;
pub mod stats;
mod store;

pub use config::{min_budget, Layout, RecorderConfig, Reductions, Source, Stamping, Tuning};
pub use recording::{Prepared, Recorder, Recording, Summary, Watch};
pub use stats::{Causes, DropCause, RecordingStats, Stamped, State, StreamStats, Timestamps};

/// How serious a [`Note`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something is wrong (not a failure of the recording: that is an [`Error`]).
    Error,
    /// Something may be lost or wrong (a volume taken out, a buffer refused).
    Warning,
    /// Worth knowing (a fallback taken, a choice explained).
    Note,
    /// What happened (a repair, a reload).
    Info,
}

/// One thing the recorder has to say, in one sentence without any prefix: the binary words
/// the level (`wirevault: warning: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub level: Level,
    pub text: String,
}

impl Note {
    pub fn error(text: impl Into<String>) -> Note {
        Note { level: Level::Error, text: text.into() }
    }

    pub fn warning(text: impl Into<String>) -> Note {
        Note { level: Level::Warning, text: text.into() }
    }

    /// A note: worth knowing (`wirevault: note: ...`).
    pub fn aside(text: impl Into<String>) -> Note {
        Note { level: Level::Note, text: text.into() }
    }

    pub fn info(text: impl Into<String>) -> Note {
        Note { level: Level::Info, text: text.into() }
    }
}

/// What kind of failure an [`Error`] is, for the binary's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// The configuration cannot be recorded as given: what the command line asked for must
    /// change (exit 2).
    Config,
    /// The host, the store or the source is not as the configuration says, or capture, I/O or
    /// the kernel failed (exit 1).
    Failed,
    /// The store's disk is full, or `--on-full stop` reached the budget (exit 3).
    DiskFull,
}

/// A recording that could not start, or that stopped on an error: one sentence, and its kind.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub problem: Problem,
    pub message: String,
}

impl Error {
    pub(crate) fn config(message: impl Into<String>) -> Error {
        Error { problem: Problem::Config, message: message.into() }
    }

    pub(crate) fn failed(message: impl Into<String>) -> Error {
        Error { problem: Problem::Failed, message: message.into() }
    }

    pub(crate) fn disk_full(message: impl Into<String>) -> Error {
        Error { problem: Problem::DiskFull, message: message.into() }
    }

    /// A failure already said (a [`Note`] before it): only the exit code is left.
    pub(crate) fn silent() -> Error {
        Error { problem: Problem::Failed, message: String::new() }
    }

    /// Whether there is anything left to say (`Error::silent`'s is said already).
    pub fn is_said(&self) -> bool {
        self.message.is_empty()
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
