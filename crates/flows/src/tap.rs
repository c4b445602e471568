//! The recorder's flow records: a [`FlowTable`] per stream, fed by the writer thread
//! ([`wv_store::StreamTap`]), whose ended records go to the flow file of the pcap file that
//! was open when they ended. Those files are encoded and written on a thread of their own
//! (`wv-flows-N`), never on the writer's.
//!
//! A closed file's records are sent when the next file opens, not when it closes: the records
//! of the flows still open when the recording stops belong in the last file's flow file, and
//! only the next open (or the stop) tells that a file was not the last.

use crate::parquet;
use crate::record::FlowRecord;
use crate::table::{Ended, FlowConfig, FlowTable};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use wv_store::catalog::Catalog;
use wv_store::writer::WriterShared;

/// Where records go as they end, besides the flow files (an IPFIX exporter): `offer` must
/// not wait (it runs on the writer thread); false: the record was dropped.
pub trait FlowSink: Send + Sync {
    fn offer(&self, r: FlowRecord) -> bool;
}

/// What every stream's tap shares.
#[derive(Clone)]
pub struct TapConfig {
    pub table: FlowConfig,
    /// The store: the flow files go beneath it (`flows/`).
    pub store: PathBuf,
    /// The recorder's node name, in every record.
    pub node: String,
    /// `--flows-to ipfix=...`: each record also goes to these as it ends.
    pub sinks: Vec<Arc<dyn FlowSink>>,
}

impl std::fmt::Debug for TapConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapConfig").field("store", &self.store).field("sinks", &self.sinks.len()).finish()
    }
}

/// The node name records carry by default: the host name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "localhost".into(), |h| h.trim().to_string())
}

/// The maker of each stream's tap, for `WriterConfig::tap`.
pub fn maker(cfg: TapConfig) -> wv_store::TapMaker {
    Arc::new(move |stream, shared, catalog| {
        Box::new(FlowTap::new(&cfg, stream, shared, Some(catalog))) as Box<dyn wv_store::StreamTap>
    })
}

/// One flow file to write.
struct Job {
    /// The pcap file (catalog path).
    file: String,
    ended: Vec<Ended>,
    /// The names of the files the records' packets are in, by number.
    names: Vec<(u64, String)>,
}

/// A stream's flow table and the thread that writes its flow files.
pub struct FlowTap {
    table: FlowTable,
    linktype: u32,
    /// Number of the open file (rising from 1), and the names of the files still referenced.
    file_no: u64,
    names: VecDeque<(u64, String)>,
    open: Option<String>,
    /// The file closed last, catalogued, whose records are not sent yet.
    closed: Option<String>,
    tx: Option<SyncSender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
    shared: Arc<WriterShared>,
    sinks: Vec<Arc<dyn FlowSink>>,
    /// Of the table's ended records, those already offered to the sinks.
    offered: usize,
    stream: u32,
    /// Frames prepared (their entries prefetched) and not yet applied, oldest first.
    ahead: std::collections::VecDeque<crate::table::Prepared>,
}

/// Frames a tap prepares ahead of applying them, and of them how many it prefetches the
/// entries of: enough for each cache miss to complete behind the work on the frames before it.
const AHEAD: usize = 16;
const PREFETCH_AT: usize = 8;

impl FlowTap {
    /// `catalog`: the recording's, which counts each flow file against the budget (`None`
    /// outside a recording: the store's next opening counts them).
    pub fn new(cfg: &TapConfig, stream: usize, shared: Arc<WriterShared>, catalog: Option<Arc<Catalog>>) -> FlowTap {
        // Two files' records may wait: the thread encodes one while the next closes.
        let (tx, rx) = sync_channel::<Job>(2);
        let (store, node, s2) = (cfg.store.clone(), cfg.node.clone(), shared.clone());
        let thread = std::thread::Builder::new()
            .name(format!("wv-flows-{stream}"))
            .spawn(move || writer(rx, store, catalog, node, stream as u32, s2))
            .map_err(|e| shared.warn(format!("no flow records: cannot start their thread: {e}")))
            .ok();
        FlowTap {
            table: FlowTable::new(cfg.table),
            linktype: 0,
            file_no: 0,
            names: VecDeque::new(),
            open: None,
            closed: None,
            tx: thread.is_some().then_some(tx),
            thread,
            shared,
            sinks: cfg.sinks.clone(),
            offered: 0,
            stream: stream as u32,
            ahead: std::collections::VecDeque::with_capacity(AHEAD + 1),
        }
    }

    /// Applies every frame prepared ahead (before the file changes, and at the end).
    fn catch_up(&mut self) {
        while let Some(p) = self.ahead.pop_front() {
            self.table.apply(p);
        }
        self.offer_ended();
    }

    /// Offers the records ended since the last call to the sinks (without node and files:
    /// the exporters send neither, and so nothing is allocated for them here).
    fn offer_ended(&mut self) {
        let ended = self.table.ended();
        if self.sinks.is_empty() || ended.len() == self.offered {
            return;
        }
        let mut dropped = 0;
        for e in &ended[self.offered..] {
            for s in &self.sinks {
                dropped += u64::from(!s.offer(e.record("", self.stream, Vec::new())));
            }
        }
        self.offered = ended.len();
        if dropped > 0 {
            self.shared.ipfix_records_dropped.fetch_add(dropped, Ordering::Relaxed);
        }
    }

    /// Sends the records ended so far to the flow file of `file`.
    fn send(&mut self, file: String) {
        self.offer_ended();
        self.offered = 0;
        let ended = self.table.take_ended();
        self.shared.flow_records_evicted.store(self.table.evicted, Ordering::Relaxed);
        let oldest = ended.iter().map(|e| e.files().0).min().unwrap_or(self.file_no);
        let names = self.names.iter().filter(|(n, _)| *n >= oldest).cloned().collect();
        if let Some(tx) = &self.tx {
            // Blocks only when two files' records are still being written.
            let _ = tx.send(Job { file, ended, names });
        }
    }

    /// Forgets the names no open flow needs (rarely: a scan of the table).
    fn prune_names(&mut self) {
        if self.names.len() < 64 {
            return;
        }
        let keep = self.table.oldest_file().unwrap_or(self.file_no).min(self.file_no);
        while self.names.front().is_some_and(|(n, _)| *n < keep) {
            self.names.pop_front();
        }
    }
}

impl wv_store::StreamTap for FlowTap {
    fn open(&mut self, file: &str, linktype: u32) {
        self.catch_up();
        if let Some(prev) = self.closed.take() {
            self.send(prev);
        }
        self.file_no += 1;
        self.table.set_file(self.file_no);
        self.names.push_back((self.file_no, file.to_string()));
        self.open = Some(file.to_string());
        self.linktype = linktype;
    }

    #[inline]
    fn add(&mut self, ts_ns: u64, frame: &[u8], origlen: u32) {
        self.ahead.push_back(self.table.prepare(self.linktype, ts_ns, frame, origlen));
        if let Some(p) = self.ahead.len().checked_sub(PREFETCH_AT + 1).and_then(|i| self.ahead.get(i)) {
            self.table.prefetch(p);
        }
        if self.ahead.len() > AHEAD {
            let p = self.ahead.pop_front().expect("more than AHEAD");
            self.table.apply(p);
        }
        if self.table.ended().len() != self.offered {
            self.offer_ended();
        }
    }

    fn close(&mut self, catalogued: bool) {
        self.catch_up();
        let file = self.open.take();
        // A file not catalogued has no flow file: its records go with the next one's.
        if catalogued {
            if let Some(prev) = self.closed.take() {
                self.send(prev);
            }
            self.closed = file;
        }
        self.prune_names();
    }

    fn stop(&mut self) {
        self.catch_up();
        self.table.stop();
        self.offer_ended();
        match self.closed.take() {
            Some(last) => self.send(last),
            None => {
                let n = self.table.take_ended().len();
                if n > 0 {
                    self.shared.warn(format!("{n} flow records lost: the stream's last file was not catalogued"));
                }
            }
        }
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FlowTap {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread that writes a stream's flow files.
fn writer(
    rx: Receiver<Job>,
    store: PathBuf,
    catalog: Option<Arc<Catalog>>,
    node: String,
    stream: u32,
    shared: Arc<WriterShared>,
) {
    let mut said = false;
    let dir = match wv_sys::fs::Dir::open(&store) {
        Ok(d) => d,
        Err(e) => {
            shared.warn(format!("no flow records: cannot open {}: {e}", store.display()));
            return;
        }
    };
    for job in rx {
        let records: Vec<_> = job
            .ended
            .iter()
            .map(|e| {
                let (first, last) = e.files();
                let files =
                    job.names.iter().filter(|(n, _)| (first..=last).contains(n)).map(|(_, s)| s.clone()).collect();
                e.record(&node, stream, files)
            })
            .collect();
        match parquet::write_in(&dir, &job.file, &records) {
            Ok(rel) => {
                shared.flows_written.fetch_add(records.len() as u64, Ordering::Relaxed);
                // Retention may delete a file before its records are written (a fast --read):
                // records of packets no longer stored go with them.
                if catalog.as_ref().is_some_and(|c| !c.beside(&job.file, dir.lstat(&rel).map_or(0, |s| s.len))) {
                    let _ = dir.unlink(&rel);
                }
            }
            Err(e) if !said => {
                said = true;
                shared.warn(format!("flow records of {} not written: {e}", job.file));
            }
            Err(_) => {}
        }
    }
}
