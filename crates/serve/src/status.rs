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

#[cfg(test)]
mod tests {
    use super::*;

    fn status(recording: Option<LiveRecording>) -> Status {
        Status {
            version: "0.1.0".into(),
            uptime_s: 1.5,
            store: "/s".into(),
            recording,
            last_recording: None,
            disk: Disk {
                store_bytes: 10,
                files: 1,
                packets: 2,
                volume_free_bytes: None,
                volume_size_bytes: None,
                volumes: vec![Volume { path: "/s".into(), free_bytes: Some(5), size_bytes: None }],
            },
            retention: Retention {
                budget_bytes: Some(100),
                on_full: Some("delete".into()),
                files_deleted: 0,
                bytes_deleted: 0,
            },
            horizon: Horizon {
                oldest_ns: None,
                oldest: None,
                newest_ns: None,
                newest: None,
                span_s: None,
                write_rate_bytes_s: None,
                rate_from: "none".into(),
                capacity_bytes: None,
                holds_hours: None,
                full_in_hours: None,
            },
            limits: Limits { max_queries: 4, max_bytes: 1 << 30, queries_running: 0 },
        }
    }

    #[test]
    fn a_recording_that_is_starting_is_said_as_its_state_alone() {
        let s = status(Some(LiveRecording::Starting { state: Starting::Starting }));
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["recording"], serde_json::json!({ "state": "starting" }));
        assert_eq!(serde_json::from_value::<Status>(v).unwrap(), s);
    }

    #[test]
    fn the_answer_reads_back_as_written() {
        let rec = crate::Recording { state: crate::RecordingState::Capturing, workers: 2, ..Default::default() };
        let s = status(Some(LiveRecording::Counters(Box::new(rec))));
        let text = serde_json::to_string(&s).unwrap();
        let back: Status = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (v["recording"]["state"].as_str(), v["recording"]["workers"].as_u64()),
            (Some("capturing"), Some(2))
        );
        assert_eq!(
            (v["retention"]["on_full"].as_str(), v["limits"]["max_queries"].as_u64()),
            (Some("delete"), Some(4))
        );
        assert_eq!(v["last_recording"], serde_json::Value::Null);
    }
}
