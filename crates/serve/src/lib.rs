//! The HTTP service of a store: a versioned JSON API (`/api/v1/`), packet
//! export as nanosecond pcap streamed from the query layer, Prometheus
//! metrics (`/metrics`) and a web console whose assets are built into the
//! binary. It runs inside `wirevault record --listen` (and then sees the
//! live counters the recorder publishes on a [`LiveCounters`]) or on its
//! own over a store at rest (`wirevault serve`).
//!
//! * [`config`]: what the server is told (listen address, TLS, tokens,
//!   limits), checked before anything listens.
//! * [`auth`]: bearer tokens (reloadable) and the identity of a request.
//! * [`host`]: the `Host` check that keeps DNS rebinding out of a server
//!   without tokens.
//! * [`tls`]: the rustls server configuration (client certificates, CRLs).
//! * `api`: the routes; `export`: queries on their own lowered-priority
//!   threads, streamed; `metrics`: the exposition; `console`: the assets;
//!   `store_view`: the catalog, re-read only when it changed; [`status`]:
//!   the typed `/api/v1/status` answer.
//! * `conn`: one connection, watched for a client that takes no data
//!   (`--send-timeout`); `answer`: each request logged and counted once,
//!   when its answer ends, under how it ended.
//!
//! Packets are read through `wv_query` and the store's catalog only, so a
//! fix there serves the CLI and the API alike; an API query returns the
//! bytes `wirevault query` writes for the same arguments.
#![deny(unsafe_code)]

mod answer;
mod api;
pub mod auth;
pub mod config;
mod conn;
mod console;
mod export;
pub mod fleet;
mod histogram;
pub mod host;
mod metrics;
mod packets;
mod server;
pub mod status;
mod store_view;
pub mod tls;

pub use config::{Config, ConfigError, TlsFiles};
pub use fleet::{Fleet, FleetStatus};
pub use host::AllowedHost;
pub use server::{ServeError, Server};
pub use status::Status;

use std::sync::{Arc, Mutex};

/// The counters of the recording in this process, published by the
/// recorder once a second (the same snapshot it writes to `stats.json`,
/// so the three views agree).
#[derive(Default)]
pub struct LiveCounters {
    latest: Mutex<Option<Arc<Recording>>>,
    /// Reads the fullest arena's fill (0..=1) now: queries wait while capture is behind.
    pressure: Mutex<Option<PressureFn>>,
}

/// The fill of the fullest arena, read at the moment of the call.
pub type PressureFn = Arc<dyn Fn() -> f64 + Send + Sync>;

impl LiveCounters {
    pub fn new() -> Arc<LiveCounters> {
        Arc::new(LiveCounters::default())
    }

    /// Replaces the published counters.
    pub fn publish(&self, r: Recording) {
        *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(r));
    }

    /// The last published counters (None before the first).
    pub fn latest(&self) -> Option<Arc<Recording>> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Gives the server a live reading of the arenas' fill (once capture runs).
    pub fn set_pressure(&self, f: PressureFn) {
        *self.pressure.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// The fullest arena's fill now (0 before capture runs).
    pub fn pressure(&self) -> f64 {
        let f = self.pressure.lock().unwrap_or_else(|e| e.into_inner()).clone();
        f.map_or(0.0, |f| f())
    }
}

/// A snapshot of the recording in this process: the recorder's one report (the same
/// `STORE/stats.json` holds, so the three views agree).
pub use wv_record::{RecordingStats as Recording, State as RecordingState, StreamStats as Counters};

/// Writes one log line of a level (the binary's logger: standard error,
/// journald). The text is the server's sentence, `api: ...`, without the
/// program's name or a word for its level: the logger adds what its format
/// wants.
pub type LogFn = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

/// How much a log line matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// The request log, and what the server does (listening, refusing a
    /// client over its connection limit).
    Info,
    /// Something does not work as configured, and the server goes on: a
    /// query thread keeps its priority, accepting failed.
    Warning,
    /// The server cannot go on: it stopped listening.
    Error,
}
