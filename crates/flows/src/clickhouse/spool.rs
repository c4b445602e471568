//! The inserter: sends a store's flow files (`STORE/flows/**.parquet`, each closed and whole)
//! to ClickHouse, one INSERT per file, on a thread of its own. The flow files are the spool:
//! they are on the store's disk already, retention bounds them with their packets, and
//! nothing waits in memory. `STORE/flows/clickhouse.cursor` names the files ClickHouse
//! acknowledged; a file not in it is asked for (`batch_rows`) before it is sent again when an
//! earlier try may have reached the table (a restart, a kill -9, an answer that never came).
//! docs/clickhouse.md gives the argument that each record arrives once.

use super::{batch_date, Error, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The cursor's name beneath `STORE/flows/`.
pub const CURSOR: &str = "clickhouse.cursor";

/// What the inserter did (stats.json and /metrics).
#[derive(Debug, Default)]
pub struct Counters {
    /// Batches (flow files) and records ClickHouse has, sent by this recording or found
    /// there already.
    pub batches_sent: AtomicU64,
    pub records_sent: AtomicU64,
    /// Flow files waiting to be sent, and their records.
    pub batches_pending: AtomicU64,
    pub records_pending: AtomicU64,
    /// Flow files (and their records) retention deleted before they were sent.
    pub batches_lost: AtomicU64,
    pub records_lost: AtomicU64,
    /// Tries that failed (down, refused, no answer).
    pub failures: AtomicU64,
}

/// Says one sentence in the recorder's log.
pub type Log = Arc<dyn Fn(String) + Send + Sync>;

/// The running inserter.
pub struct Inserter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub counters: Arc<Counters>,
}

impl Inserter {
    /// Starts the thread sending the flow files of `store` to `target`.
    pub fn start(target: Target, store: PathBuf, log: Log) -> std::io::Result<Inserter> {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let (s2, c2) = (stop.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("wv-clickhouse".into())
            .spawn(move || Spool::new(target, store, c2, log).run(&s2))?;
        Ok(Inserter { stop, thread: Some(thread), counters })
    }

    /// Stops it after a last pass over the flow files (the recording's last ones are written
    /// by now), given at most `grace` to send them; what is left is sent by the next recording.
    pub fn stop(mut self, grace: Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + grace;
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            // Past the grace, the thread is left to end with the process: its request has
            // timeouts, and a batch cut off is asked for next time.
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Inserter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A pending flow file.
struct Pending {
    /// Its records, from its footer (what is lost if retention deletes it first).
    rows: u64,
    /// An earlier try may have put it in the table: ask before sending.
    unsure: bool,
}

struct Spool {
    target: Target,
    store: PathBuf,
    counters: Arc<Counters>,
    log: Log,
    /// The store's spool id (the cursor's first line): batch ids are `ID/FILE`.
    id: String,
    done: BTreeSet<String>,
    pending: BTreeMap<String, Pending>,
    cursor: Option<std::fs::File>,
    table_ok: bool,
    /// A first scan was made (files found then may be in the table already).
    started: bool,
    /// Flow files that cannot be read: said once, left where they are, not sent.
    bad: BTreeSet<String>,
    /// The problem said last (said again only when it changes).
    said: Option<String>,
}

impl Spool {
    fn new(target: Target, store: PathBuf, counters: Arc<Counters>, log: Log) -> Spool {
        Spool {
            target,
            store,
            counters,
            log,
            id: String::new(),
            done: BTreeSet::new(),
            pending: BTreeMap::new(),
            cursor: None,
            table_ok: false,
            started: false,
            bad: BTreeSet::new(),
            said: None,
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        if let Err(e) = self.open_cursor() {
            (self.log)(format!(
                "flow records are not sent to ClickHouse: cannot keep {}/flows/{CURSOR}: {e}",
                self.store.display()
            ));
            return;
        }
        let mut wait = Duration::from_millis(200);
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            let ok = self.pass(stop);
            if stopping {
                return;
            }
            // Backs off to 10 s while ClickHouse fails; a second between passes otherwise.
            wait = if ok {
                Duration::from_secs(1)
            } else {
                (wait * 2).clamp(Duration::from_secs(1), Duration::from_secs(10))
            };
            let until = Instant::now() + wait;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Reads (or makes) the cursor, keeping only the names of files still there, and
    /// rewrites it whole.
    fn open_cursor(&mut self) -> std::io::Result<()> {
        let dir = self.store.join(wv_store::layout::FLOWS);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(CURSOR);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let mut lines = text.split_inclusive('\n');
        self.id = lines
            .next()
            .and_then(|l| l.strip_prefix("spool "))
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(new_id);
        // A last line without its newline was cut by a crash: not acknowledged.
        self.done =
            lines.filter_map(|l| l.strip_suffix('\n')).filter(|f| dir.join(f).is_file()).map(str::to_string).collect();
        let tmp = dir.join(format!("{CURSOR}.part"));
        {
            let mut f = std::fs::File::create(&tmp)?;
            let mut s = format!("spool {}\n", self.id);
            for d in &self.done {
                s.push_str(d);
                s.push('\n');
            }
            f.write_all(s.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(&dir)?.sync_all()?;
        self.cursor = Some(std::fs::OpenOptions::new().append(true).open(&path)?);
        Ok(())
    }

    /// Notes `file` acknowledged, durably (one line, synced).
    fn commit(&mut self, file: &str) -> std::io::Result<()> {
        let c = self.cursor.as_mut().ok_or_else(|| std::io::Error::other("no cursor"))?;
        c.write_all(format!("{file}\n").as_bytes())?;
        c.sync_data()?;
        self.done.insert(file.to_string());
        self.pending.remove(file);
        self.count_pending();
        Ok(())
    }

    /// Finds the flow files not sent; counts those gone before they were.
    fn scan(&mut self, first: bool) {
        let dir = self.store.join(wv_store::layout::FLOWS);
        let now: BTreeSet<String> = crate::find::flow_files(&dir)
            .iter()
            .filter_map(|p| p.strip_prefix(&dir).ok().and_then(|r| r.to_str()).map(str::to_string))
            .collect();
        let gone: Vec<String> = self.pending.keys().filter(|k| !now.contains(*k)).cloned().collect();
        for g in gone {
            let p = self.pending.remove(&g).expect("listed");
            self.counters.batches_lost.fetch_add(1, Ordering::Relaxed);
            self.counters.records_lost.fetch_add(p.rows, Ordering::Relaxed);
        }
        for f in now {
            if !self.done.contains(&f) && !self.pending.contains_key(&f) {
                let rows = std::fs::File::open(dir.join(&f)).ok().and_then(footer_rows).unwrap_or(0);
                // At the start, any file not in the cursor may be in the table (sent, then a
                // crash before its line was written).
                self.pending.insert(f, Pending { rows, unsure: first });
            }
        }
        self.count_pending();
    }

    fn count_pending(&self) {
        self.counters.batches_pending.store(self.pending.len() as u64, Ordering::Relaxed);
        self.counters.records_pending.store(self.pending.values().map(|p| p.rows).sum(), Ordering::Relaxed);
    }

    /// One pass: every pending file sent, oldest first, until one fails. Returns whether
    /// nothing failed.
    fn pass(&mut self, stop: &AtomicBool) -> bool {
        self.scan(!self.started);
        self.started = true;
        if self.pending.is_empty() {
            return true;
        }
        if !self.table_ok {
            match self.target.ensure_table() {
                Ok(()) => self.table_ok = true,
                Err(e) => return self.failed(&e, "cannot make or check its table"),
            }
        }
        let names: Vec<String> = self.pending.keys().filter(|k| !self.bad.contains(*k)).cloned().collect();
        let grace = Instant::now() + Duration::from_secs(10);
        for f in names {
            if stop.load(Ordering::Relaxed) && Instant::now() > grace {
                return true;
            }
            if let Err(e) = self.send(&f) {
                let unsure = e.unsure();
                if let Some(p) = self.pending.get_mut(&f) {
                    p.unsure |= unsure;
                }
                // A refusal may be the table changed under us: checked again next time.
                self.table_ok = !matches!(e, Error::Http(super::http::Failure::Refused(..)));
                return self.failed(&e, &format!("did not take the flow records of {f}"));
            }
        }
        if self.said.take().is_some() {
            (self.log)(format!(
                "ClickHouse at {} takes flow records again; every waiting flow file is sent",
                self.target.url()
            ));
        }
        self.count_pending();
        true
    }

    /// Sends one flow file (or finds it in the table) and commits it.
    fn send(&mut self, f: &str) -> Result<(), Error> {
        let path = self.store.join(wv_store::layout::FLOWS).join(f);
        let records =
            match std::fs::File::open(&path).map_err(crate::parquet::Error::from).and_then(crate::parquet::read) {
                Ok(r) => r,
                // Gone since the scan: counted lost by the next one.
                Err(_) if !path.exists() => return Ok(()),
                Err(e) => {
                    (self.log)(format!("flow file {f} cannot be read ({e}), so it is not sent to ClickHouse"));
                    self.bad.insert(f.to_string());
                    return Ok(());
                }
            };
        let batch = format!("{}/{f}", self.id);
        let unsure = self.pending.get(f).is_some_and(|p| p.unsure);
        let date = batch_date(&records);
        // Rows already there are a whole earlier insert, or (a body cut off at a row's end by
        // a kill) its first rows: only the rest is sent.
        let there = if unsure && !records.is_empty() { self.target.batch_rows(&batch, date)? } else { 0 };
        if there > records.len() as u64 {
            (self.log)(format!(
                "ClickHouse at {} has {there} rows of batch {batch}, more than the {} of {f}: was the flow file made again? It is not sent again",
                self.target.url(),
                records.len()
            ));
        } else if there < records.len() as u64 {
            self.target.insert(&batch, date, &records[there as usize..])?;
        }
        self.commit(f).map_err(|e| Error::Answer(format!("the flow records of {f} are in ClickHouse, but {}/flows/{CURSOR} cannot note it ({e}); they are asked for before being sent again", self.store.display())))?;
        self.counters.batches_sent.fetch_add(1, Ordering::Relaxed);
        self.counters.records_sent.fetch_add(records.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Says a failure once (until it changes) and counts it; returns false.
    fn failed(&mut self, e: &Error, what: &str) -> bool {
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
        let kind = match e {
            Error::Http(super::http::Failure::Down(_)) => "down".to_string(),
            Error::Http(super::http::Failure::Unsure(_)) => "unsure".to_string(),
            other => other.to_string(),
        };
        if self.said.as_deref() != Some(kind.as_str()) {
            let n = self.pending.len();
            (self.log)(match e {
                Error::Table(t) => format!("ClickHouse at {}: {t}; recording goes on and {n} flow file(s) wait in the store to be sent", self.target.url()),
                _ => format!(
                    "ClickHouse at {} {what}: it {e}; recording goes on and {n} flow file(s) wait in the store to be sent when it takes them",
                    self.target.url()
                ),
            });
            self.said = Some(kind);
        }
        false
    }
}

/// The number of rows a Parquet file's footer gives.
fn footer_rows(f: std::fs::File) -> Option<u64> {
    use parquet::file::reader::FileReader;
    let r = parquet::file::serialized_reader::SerializedFileReader::new(f).ok()?;
    u64::try_from(r.metadata().file_metadata().num_rows()).ok()
}

/// A new spool id: 16 random bytes in hex.
fn new_id() -> String {
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b)).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        b[..16].copy_from_slice(&(t.as_nanos() ^ u128::from(std::process::id())).to_le_bytes());
    }
    super::hex(&b)
}

/// `STORE/flows/clickhouse.cursor`'s path.
pub fn cursor_path(store: &Path) -> PathBuf {
    store.join(wv_store::layout::FLOWS).join(CURSOR)
}
