//! `GET /api/v1/status` as one typed answer: the recording's counters (the
//! recorder's own [`Recording`] report, as `stats.json` holds them), the
//! store's size and volumes, retention, the horizon it holds and the
//! server's limits.

use crate::Recording;
use serde::{Deserialize, Serialize};

/// The status answer. Its `version` is wirevault's (the console shows it):
/// one wirevault answers one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub uptime_s: f64,
    pub store: String,
    /// The recording in this process (`None` in `wirevault serve`).
    pub recording: Option<LiveRecording>,
    /// The counters the last recording left in `stats.json` (`wirevault serve` only).
    pub last_recording: Option<Recording>,
    pub disk: Disk,
    pub retention: Retention,
    pub horizon: Horizon,
    pub limits: Limits,
}

/// The recording in this process: starting (before its first second), or its counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LiveRecording {
    Counters(Box<Recording>),
    Starting { state: Starting },
}

/// The one state of a recording that has no counters yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Starting {
    Starting,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disk {
    pub store_bytes: u64,
    pub files: usize,
    pub packets: u64,
    /// Over every file system the store writes to (see `volumes`).
    pub volume_free_bytes: Option<u64>,
    pub volume_size_bytes: Option<u64>,
    pub volumes: Vec<Volume>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    pub path: String,
    pub free_bytes: Option<u64>,
    pub size_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retention {
    /// `--max-size`, and `delete` or `stop`.
    pub budget_bytes: Option<u64>,
    pub on_full: Option<String>,
    pub files_deleted: u64,
    pub bytes_deleted: u64,
}

/// The time the store holds, and how long it holds at the write rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Horizon {
    pub oldest_ns: Option<u64>,
    pub oldest: Option<String>,
    pub newest_ns: Option<u64>,
    pub newest: Option<String>,
    pub span_s: Option<f64>,
    pub write_rate_bytes_s: Option<f64>,
    /// `current`, `average of the stored files` or `none`.
    pub rate_from: String,
    pub capacity_bytes: Option<u64>,
    /// How many hours of traffic the store holds at that rate, and
    /// (without a budget that deletes) in how many it is full.
    pub holds_hours: Option<f64>,
    pub full_in_hours: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub max_queries: usize,
    pub max_bytes: u64,
    pub queries_running: usize,
}
