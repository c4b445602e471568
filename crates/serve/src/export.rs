//! Queries of the API, each on a thread of its own at lowered CPU and I/O
//! priority (capture comes first), holding one of `--max-queries` permits.
//!
//! A pcap export streams: the query hands its 1 MiB output buffers over
//! whole (`wv_query::Sink::Chunks`), and they go to the HTTP body through
//! a channel of 4 without a copy; a client that goes away closes the
//! channel, and the next chunk (or the next file: the cancel flag) stops
//! the query. The answer
//! is the bytes `wirevault query` writes for the same selection. What the
//! headers promise is settled before the first byte: when a `limit` or the
//! byte cap may cut the answer, a first pass over the selection (without
//! writing) finds whether it does and how many packets fit, and the export
//! then takes exactly those.

use crate::api::ApiError;
use crate::server::State;
use crate::store_view::StoreView;
use bytes::Bytes;
use std::io;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// A time range, filter and limit, checked.
#[derive(Clone)]
pub(crate) struct Selection {
    pub from: Option<u64>,
    pub to: Option<u64>,
    pub expr: String,
    pub limit: Option<u64>,
    /// Set when the client went away: the query stops before its next file
    /// or within a few thousand records of the one it reads.
    pub cancel: Arc<std::sync::atomic::AtomicBool>,
}

/// As the log shows it: `from=... to=... filter="..." limit=N`, the given parts only.
impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(t) = self.from {
            parts.push(format!("from={}", crate::store_view::time(t)));
        }
        if let Some(t) = self.to {
            parts.push(format!("to={}", crate::store_view::time(t)));
        }
        if !self.expr.is_empty() {
            parts.push(format!("filter={:?}", self.expr));
        }
        if let Some(l) = self.limit {
            parts.push(format!("limit={l}"));
        }
        if parts.is_empty() {
            parts.push("everything".into());
        }
        f.write_str(&parts.join(" "))
    }
}

impl Selection {
    fn query(&self, store: &std::path::Path, limit: Option<u64>) -> wv_query::Query {
        wv_query::Query {
            store: store.to_path_buf(),
            from_ns: self.from,
            to_ns: self.to,
            expr: self.expr.clone(),
            limit,
        }
    }

    /// Prepares the query; a bad expression is the CLI's sentence, as a 400,
    /// and a store that cannot be read a 503 (see [`query_failed`]).
    pub fn prepare(&self, view: &StoreView, limit: Option<u64>) -> Result<wv_query::Prepared, ApiError> {
        let mut p = wv_query::prepare(self.query(view.path(), limit)).map_err(|e| query_failed(view, e))?;
        p.cancel_when(self.cancel.clone());
        Ok(p)
    }
}

/// A query that failed: when the store itself cannot be read (deleted,
/// moved away, unreadable), that is what the client is told, as a 503 with
/// the sentence `status` gives, on every endpoint; else the query's error.
pub(crate) fn query_failed(view: &StoreView, e: wv_query::QueryError) -> ApiError {
    match (&e, view.catalog()) {
        (wv_query::QueryError::BadExpression { .. } | wv_query::QueryError::Cancelled { .. }, _) | (_, Ok(_)) => {
            ApiError::from_query(e)
        }
        (_, Err(why)) => ApiError::Unavailable(why),
    }
}

/// What a pcap answer's headers say, known before its first byte.
pub(crate) struct Head {
    pub headers: Vec<(&'static str, String)>,
}

/// The counts of a `count` answer.
#[derive(serde::Serialize)]
pub(crate) struct Counted {
    pub matched: u64,
    pub limit: Option<u64>,
    /// The limit cut the count: more packets match.
    pub truncated: bool,
    /// Why the range selects nothing the store holds, if so.
    pub outside: Option<String>,
    pub store_oldest: Option<String>,
    pub store_newest: Option<String>,
    /// Capture files still being written, not counted (as the CLI).
    pub open_files_excluded: usize,
    pub warnings: Vec<String>,
}

/// Sets a cancel flag when dropped: held by a handler whose future hyper
/// drops when the client goes away.
pub(crate) struct CancelOnDrop(pub Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Above this fill of the fullest arena, queries pause between chunks.
const PAUSE_ABOVE: f64 = 0.10;
/// The longest one pause lasts (a disk too slow for the traffic even
/// without queries would otherwise hold every query forever).
const PAUSE_AT_MOST: std::time::Duration = std::time::Duration::from_secs(30);

/// Capture first: while the recorder in this process is behind (an arena
/// more than a tenth full: the disk is not keeping up), a query waits
/// before reading on, at most 30 s at a time, so that its reads do not take
/// the disk from the writers. I/O priority alone does not do it: the
/// multi-queue schedulers most disks use ignore it.
pub(crate) fn yield_to_capture(state: &State) {
    let Some(live) = &state.live else { return };
    let deadline = std::time::Instant::now() + PAUSE_AT_MOST;
    while live.pressure() > PAUSE_ABOVE && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Waits for a query permit (fair: first come, first served) at most the
/// configured time.
pub(crate) async fn permit(state: &Arc<State>) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    let wait = state.cfg.queue_wait;
    match tokio::time::timeout(wait, state.queries.clone().acquire_owned()).await {
        Ok(Ok(p)) => Ok(p),
        _ => Err(ApiError::Busy(format!(
            "{} queries are running and none finished within {} s; retry later",
            state.cfg.max_queries,
            wait.as_secs()
        ))),
    }
}

/// Runs `work` on a query thread holding `permit`; its result comes back
/// through the returned receiver.
pub(crate) fn spawn<T: Send + 'static>(
    state: &Arc<State>,
    permit: tokio::sync::OwnedSemaphorePermit,
    work: impl FnOnce(&Arc<State>) -> T + Send + 'static,
) -> Result<oneshot::Receiver<T>, ApiError> {
    let (tx, rx) = oneshot::channel();
    let st = state.clone();
    std::thread::Builder::new()
        .name("wv-api-query".into())
        .spawn(move || {
            let _permit = permit;
            if let Err(e) = wv_sys::cpu::lower_current_thread(st.cfg.query_nice, 7) {
                (st.cfg.log)(crate::LogLevel::Warning, &format!("api: cannot lower a query thread's priority: {e}"));
            }
            let _ = tx.send(work(&st));
        })
        .map_err(|e| ApiError::Internal(format!("cannot start a query thread: {e}")))?;
    Ok(rx)
}

/// `count`: the matching packets, the limit's cut, and why an empty
/// answer is empty.
pub(crate) fn count(state: &State, sel: &Selection) -> Result<Counted, ApiError> {
    let p = sel.prepare(&state.view, sel.limit.map(|l| l.saturating_add(1)))?;
    let span = p.span();
    let (open, recording) = p.open_files();
    let report = wv_query::run(p, wv_query::Sink::Count).map_err(|e| query_failed(&state.view, e))?;
    let truncated = sel.limit.is_some_and(|l| report.matched > l);
    let warnings = warnings(report.warnings, open, recording);
    Ok(Counted {
        matched: sel.limit.map_or(report.matched, |l| report.matched.min(l)),
        limit: sel.limit,
        truncated,
        outside: crate::store_view::outside(span, sel.from, sel.to),
        store_oldest: span.map(|s| crate::store_view::time(s.0)),
        store_newest: span.map(|s| crate::store_view::time(s.1)),
        open_files_excluded: if recording { open } else { 0 },
        warnings,
    })
}

/// The warnings of a query's answer (`count`, `packets`): the query's own
/// (files missing, unreadable, damaged) and the partial files a crash left.
pub(crate) fn warnings(mut of_query: Vec<String>, open: usize, recording: bool) -> Vec<String> {
    if open > 0 && !recording {
        of_query.push(format!(
            "{open} partial file(s) left by a crash are not included; run `wirevault repair` on the store"
        ));
    }
    of_query
}

/// How many packets an export may carry: all (`None`) or the first N,
/// and what cut them; with the prepared query when no first pass was
/// needed (it is the export's).
struct Fit {
    packets: Option<u64>,
    cut_by: Option<String>,
    prepared: Option<wv_query::Prepared>,
}

/// The first pass of an export that a limit or the byte cap may cut.
fn fit(state: &State, sel: &Selection, body: &mpsc::Sender<io::Result<Bytes>>) -> Result<Fit, ApiError> {
    let max = state.cfg.max_bytes;
    let p = sel.prepare(&state.view, None)?;
    let may_exceed = p.bytes_upper_bound().is_none_or(|b| b.saturating_add(24) > max);
    if sel.limit.is_none() && !may_exceed {
        return Ok(Fit { packets: None, cut_by: None, prepared: Some(p) });
    }
    let limit = sel.limit.unwrap_or(u64::MAX);
    let (mut n, mut bytes, mut cut_by, mut linktype) = (0u64, 24u64, None, None);
    let mut mixed = None;
    let mut seen = 0u32;
    let mut each = |pk: wv_query::PacketRef<'_>| -> io::Result<()> {
        // (The query layer looks at the cancel flag itself too: before each
        // file and every few thousand records, matching or not.)
        if body.is_closed() || sel.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        seen = seen.wrapping_add(1);
        if seen.is_multiple_of(1024) {
            yield_to_capture(state);
        }
        if *linktype.get_or_insert(pk.linktype) != pk.linktype {
            mixed = Some((linktype.unwrap_or(0), pk.linktype));
            return Err(io::Error::other("mixed"));
        }
        if n == limit {
            cut_by = Some(format!("limit={limit}"));
            return Err(io::Error::other("full"));
        }
        let rec = 16 + pk.data.len() as u64;
        if bytes + rec > max {
            cut_by = Some(format!("max-bytes={max}"));
            return Err(io::Error::other("full"));
        }
        n += 1;
        bytes += rec;
        Ok(())
    };
    match wv_query::run(p, wv_query::Sink::Packets(&mut each)) {
        Ok(_) => {}
        Err(e) if e.is_broken_pipe() || matches!(e, wv_query::QueryError::Cancelled { .. }) => {
            return Err(ApiError::gone(&e));
        }
        Err(wv_query::QueryError::Output(_)) if mixed.is_some() => {
            let (first, other) = mixed.unwrap_or_default();
            return Err(ApiError::from_query(wv_query::QueryError::MixedLinktypes { first, other }));
        }
        Err(wv_query::QueryError::Output(_)) => {}
        Err(e) => return Err(query_failed(&state.view, e)),
    }
    Ok(Fit { packets: if cut_by.is_some() { Some(n) } else { sel.limit }, cut_by, prepared: None })
}

/// The outcome of an export, for the log.
pub(crate) struct Exported {
    pub bytes: u64,
    /// Packets sent, when known (an export cut short does not count them).
    pub packets: Option<u64>,
    pub outcome: String,
}

/// A pcap export: settles the headers (sent through `ready`), then
/// streams the packets into `body`.
pub(crate) fn export(
    state: &State,
    sel: &Selection,
    ready: oneshot::Sender<Result<Head, ApiError>>,
    body: mpsc::Sender<io::Result<Bytes>>,
    link: Option<&crate::conn::Link>,
) -> Exported {
    let failed = |ready: oneshot::Sender<Result<Head, ApiError>>, e: ApiError| {
        let outcome = match e {
            ApiError::Gone(_) => e.to_string(),
            _ => format!("refused: {e}"),
        };
        let _ = ready.send(Err(e));
        Exported { bytes: 0, packets: None, outcome }
    };
    let mut fit = match fit(state, sel, &body) {
        Ok(f) => f,
        Err(e) => return failed(ready, e),
    };
    let p = match fit.prepared.take().map_or_else(|| sel.prepare(&state.view, fit.packets), Ok) {
        Ok(p) => p,
        Err(e) => return failed(ready, e),
    };
    let span = p.span();
    let (open, recording) = p.open_files();
    let mut headers = vec![
        ("content-type", "application/vnd.tcpdump.pcap".to_string()),
        ("content-disposition", format!("attachment; filename=\"{}\"", file_name(sel))),
        ("x-wirevault-max-bytes", state.cfg.max_bytes.to_string()),
    ];
    if let Some((a, b)) = span {
        headers.push(("x-wirevault-store-oldest", crate::store_view::time(a)));
        headers.push(("x-wirevault-store-newest", crate::store_view::time(b)));
    }
    if let Some(why) = crate::store_view::outside(span, sel.from, sel.to) {
        headers.push(("x-wirevault-empty", why));
    }
    if let Some(cut) = &fit.cut_by {
        headers.push(("x-wirevault-truncated", cut.clone()));
        headers.push(("x-wirevault-packets", fit.packets.unwrap_or(0).to_string()));
    }
    if open > 0 {
        let what = if recording { "still being written" } else { "left by a crash (run `wirevault repair`)" };
        headers.push(("x-wirevault-warning", format!("{open} file(s) {what} are not included")));
    }
    // What is known to be missing before the first byte is said in the
    // headers; a file that goes missing or shrinks after it aborts the body.
    let known = state.damaged.still_damaged();
    let warned = p.warnings().to_vec();
    let announced = warned.iter().cloned().chain(known.iter().map(Known::warning));
    headers.extend(announced.take(MAX_WARNING_HEADERS).map(|w| ("x-wirevault-warning", w)));
    if ready.send(Ok(Head { headers })).is_err() {
        return Exported { bytes: 0, packets: None, outcome: "client went away".into() };
    }
    // The query's own 1 MiB buffers go to the body as they are (no copy),
    // and come back to it once sent (no allocation, no page faults).
    let (mut sent, cap) = (0u64, state.cfg.max_bytes);
    let pool = Pool::default();
    let mut give = |chunk: Vec<u8>| -> io::Result<Vec<u8>> {
        if sent + chunk.len() as u64 > cap {
            return Err(io::Error::other(format!("the answer would exceed --max-bytes ({cap} bytes)")));
        }
        sent += chunk.len() as u64;
        yield_to_capture(state);
        let bytes = Bytes::from_owner(Pooled { buf: chunk, pool: pool.clone() });
        // Waits for room as long as the connection lives: a client that
        // takes nothing is given up by the connection's watchdog, which
        // drops the body and so ends this wait.
        match body.blocking_send(Ok(bytes)) {
            Ok(()) => Ok(pool.take()),
            Err(_) => Err(io::ErrorKind::BrokenPipe.into()),
        }
    };
    let result = wv_query::run(p, wv_query::Sink::Chunks(&mut give));
    match result {
        Ok(r) => match changed_meanwhile(&r, &warned, &known) {
            None => {
                // A file announced damaged that read whole this time (repaired
                // in place, or outside this selection) is not announced again.
                state.damaged.forget_all_but(&r.damaged_files);
                let outcome = fit.cut_by.map_or("complete".into(), |c| format!("truncated ({c})"));
                Exported { bytes: sent, packets: Some(r.matched), outcome }
            }
            Some(msg) => {
                // The headers promised the selection; a body without some of
                // its packets must not end as a whole one. A file that stays
                // as it is now is damaged for good: the next export says so
                // in its headers and runs to its end.
                state.damaged.remember(&r.damaged_files);
                let _ = body.blocking_send(Err(io::Error::other(msg.clone())));
                Exported { bytes: sent, packets: Some(r.matched), outcome: format!("failed: {msg}") }
            }
        },
        Err(e) if e.is_broken_pipe() && link.is_some_and(|l| l.gave_up()) => {
            let secs = state.cfg.send_timeout.as_secs();
            let outcome = format!("given up: the client took no data for {secs} s (--send-timeout)");
            Exported { bytes: sent, packets: None, outcome }
        }
        Err(e) if e.is_broken_pipe() || matches!(e, wv_query::QueryError::Cancelled { .. }) => {
            Exported { bytes: sent, packets: None, outcome: ApiError::gone(&e).to_string() }
        }
        Err(e) => {
            // Headers are out: the stream is cut without its last chunk,
            // so the client sees an incomplete transfer, not a short pcap.
            let msg = e.to_string();
            let _ = body.blocking_send(Err(io::Error::other(msg.clone())));
            Exported { bytes: sent, packets: None, outcome: format!("failed: {msg}") }
        }
    }
}

/// The output buffers of one export that hyper has sent and dropped, for
/// the query to fill again: a fresh 1 MiB buffer per chunk costs page
/// faults (and zeroing) in the query thread and an munmap in the server's.
#[derive(Clone, Default)]
struct Pool(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

/// Buffers a pool keeps (the body channel's 4 and hyper's queue).
const POOL_MAX: usize = 8;

impl Pool {
    /// A buffer back from the client's side, or a new empty one.
    fn take(&self) -> Vec<u8> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default()
    }
}

/// A chunk on its way to the client; its buffer returns to the pool when
/// hyper drops it.
struct Pooled {
    buf: Vec<u8>,
    pool: Pool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let mut p = self.pool.0.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() < POOL_MAX {
            p.push(std::mem::take(&mut self.buf));
        }
    }
}

/// Warnings of the catalog given as headers at most.
const MAX_WARNING_HEADERS: usize = 8;

/// Stored files that an export found damaged (unreadable past some record,
/// shorter than their entry), each with its length and modification time
/// then. While a file keeps both, it is damaged for good, not changing:
/// later exports announce it in their headers (where the CLI prints a
/// warning) and run to their end instead of being cut again and again. A
/// file that changes (repaired, replaced, deleted) is forgotten.
#[derive(Default)]
pub(crate) struct Damaged(std::sync::Mutex<Vec<Known>>);

/// A file found damaged: its length and modification time then.
#[derive(Clone, PartialEq)]
struct Known {
    path: std::path::PathBuf,
    len: u64,
    modified: std::time::SystemTime,
}

impl Known {
    fn of(path: &std::path::Path) -> Option<Known> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Known { path: path.to_path_buf(), len: m.len(), modified: m.modified().ok()? })
    }

    fn unchanged(&self) -> bool {
        Known::of(&self.path).as_ref() == Some(self)
    }

    fn warning(&self) -> String {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("{name} is damaged: its packets past the damage are not included (`wirevault repair` names it)")
    }
}

/// Files [`Damaged`] remembers at most (the oldest are forgotten first).
const MAX_DAMAGED: usize = 64;

impl Damaged {
    fn remember(&self, files: &[std::path::PathBuf]) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for k in files.iter().filter_map(|f| Known::of(f)) {
            v.retain(|o| o.path != k.path);
            v.push(k);
        }
        let over = v.len().saturating_sub(MAX_DAMAGED);
        v.drain(..over);
    }

    /// Forgets the remembered files not among `files`.
    fn forget_all_but(&self, files: &[std::path::PathBuf]) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).retain(|k| files.contains(&k.path));
    }

    /// The remembered files still as they were found (the others are forgotten).
    fn still_damaged(&self) -> Vec<Known> {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.retain(Known::unchanged);
        v.clone()
    }
}

/// Why an export that ran to its end still lacks packets it promised: a
/// catalogued file deleted (retention, by the recorder) or found missing,
/// short or unreadable while the export ran, and neither among the warnings
/// of the query its headers gave nor a file known damaged that is still as
/// it was found.
fn changed_meanwhile(r: &wv_query::Report, warned: &[String], known: &[Known]) -> Option<String> {
    let name = |p: &std::path::PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let excused = |p: &std::path::PathBuf| {
        let n = name(p);
        warned.iter().any(|w| w.contains(n.as_str())) || known.iter().any(|k| &k.path == p && k.unchanged())
    };
    let damaged: Vec<String> = r.damaged_files.iter().filter(|p| !excused(p)).map(name).collect();
    if damaged.is_empty() && r.deleted_while_recording == 0 {
        return None;
    }
    let mut why = Vec::new();
    if r.deleted_while_recording > 0 {
        why.push(format!("{} file(s) deleted by the recorder's retention", r.deleted_while_recording));
    }
    if !damaged.is_empty() {
        why.push(format!("{} missing, shortened or unreadable ({})", damaged.len(), damaged.join(", ")));
    }
    Some(format!(
        "the answer is incomplete: stored files changed while it was read: {}; ask again (with a later `from` if retention deletes the oldest files)",
        why.join("; ")
    ))
}

/// `wirevault-FROM-TO.pcap` (compact UTC times; `start`/`end` when open).
fn file_name(sel: &Selection) -> String {
    let t = |v: Option<u64>, open: &str| v.map_or(open.to_string(), wv_store::layout::utc_compact);
    format!("wirevault-{}-{}.pcap", t(sel.from, "start"), t(sel.to, "end"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_chunk_comes_back_to_the_pool_with_its_buffer() {
        let pool = Pool::default();
        let mut buf = Vec::with_capacity(1 << 20);
        buf.extend_from_slice(b"pcap bytes");
        let ptr = buf.as_ptr();
        let bytes = Bytes::from_owner(Pooled { buf, pool: pool.clone() });
        let part = bytes.slice(5..);
        drop(bytes);
        // Still held by a slice: not back yet.
        assert!(pool.take().capacity() == 0);
        assert_eq!(&part[..], b"bytes");
        drop(part);
        let again = pool.take();
        assert_eq!((again.as_ptr(), again.capacity()), (ptr, 1 << 20));
        // At most POOL_MAX are kept.
        for _ in 0..POOL_MAX + 3 {
            drop(Bytes::from_owner(Pooled { buf: vec![0; 8], pool: pool.clone() }));
        }
        assert_eq!(pool.0.lock().unwrap().len(), POOL_MAX);
    }

    fn sel(from: Option<u64>, to: Option<u64>, expr: &str, limit: Option<u64>) -> Selection {
        Selection { from, to, expr: expr.into(), limit, cancel: Arc::default() }
    }

    #[test]
    fn a_selection_is_logged_by_its_given_parts() {
        assert_eq!(sel(None, None, "", None).to_string(), "everything");
        assert_eq!(
            sel(Some(1_500_000_000), None, "tcp port 80", Some(5)).to_string(),
            "from=1970-01-01T00:00:01.500000000Z filter=\"tcp port 80\" limit=5"
        );
        assert_eq!(sel(None, Some(0), "", None).to_string(), "to=1970-01-01T00:00:00.000000000Z");
    }

    #[test]
    fn an_export_is_named_by_its_range() {
        assert_eq!(file_name(&sel(None, None, "", None)), "wirevault-start-end.pcap");
        assert_eq!(
            file_name(&sel(Some(1_000_000_000), None, "", None)),
            "wirevault-19700101T000001.000000000Z-end.pcap"
        );
    }

    #[test]
    fn partial_files_are_a_warning_only_when_nothing_records() {
        let q = vec!["f is short".to_string()];
        assert_eq!(warnings(q.clone(), 0, false), q);
        assert_eq!(warnings(q.clone(), 2, true), q);
        let w = warnings(q, 2, false);
        assert_eq!(w.len(), 2);
        assert!(w[1].starts_with("2 partial file(s) left by a crash are not included"), "{w:?}");
    }

    #[test]
    fn files_changed_meanwhile_are_named_unless_already_warned_of() {
        let mut r = wv_query::Report::default();
        assert_eq!(changed_meanwhile(&r, &[], &[]), None);
        r.damaged_files = vec!["/s/a.pcap".into(), "/s/b.pcap".into()];
        let warned = vec!["a.pcap is short".to_string()];
        let why = changed_meanwhile(&r, &warned, &[]).unwrap();
        assert!(why.contains(": 1 missing, shortened or unreadable (b.pcap);"), "{why}");
        r.damaged_files.truncate(1);
        assert_eq!(changed_meanwhile(&r, &warned, &[]), None);
        r.deleted_while_recording = 3;
        let why = changed_meanwhile(&r, &warned, &[]).unwrap();
        assert!(why.contains(": 3 file(s) deleted by the recorder's retention;"), "{why}");
    }

    #[test]
    fn a_count_on_an_empty_store_says_why_it_is_empty() {
        let store = crate::server::TestStore::new("count-empty");
        let c = count(&store.state(), &sel(None, None, "udp", Some(5))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.matched, c.limit, c.truncated, c.open_files_excluded), (0, Some(5), false, 0));
        assert_eq!((c.store_oldest, c.store_newest), (None, None));
        assert!(c.outside.as_deref().is_some_and(|o| o.contains("no packets")), "{:?}", c.outside);
        // A bad filter is the CLI's sentence, as a 400.
        let e = count(&store.state(), &sel(None, None, "udp and and", None)).err();
        assert!(matches!(e, Some(ApiError::BadRequest(_))), "{:?}", e.map(|e| e.to_string()));
    }
}
