//! `--count` without `--limit` over several files: no output order to keep,
//! so the files are counted on several threads at once (each file by one
//! thread, its own filters), and their reports are merged in file order, so
//! warnings read as they do from one pass. A scan-bound count (an expression
//! the index cannot narrow) is then limited by the cores, not by one.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// At most this many counting threads (a count must not take every core of
/// a recorder's machine).
const MAX_THREADS: usize = 4;

/// The threads a count over `files` files uses: 1 means count in line.
pub(super) fn threads_for(files: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(MAX_THREADS).min(files)
}

/// Counts the packets of `files` in `[from, to)` that pass the expression,
/// on `threads` threads, adding each file's report to `report` in file order.
pub(super) fn count_files(
    p: &Prepared,
    files: &[(usize, &Entry)],
    (from, to): (u64, u64),
    threads: usize,
    report: &mut Report,
) -> Result<(), QueryError> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    // How far a cancelled count got, over all threads.
    let (opened, read) = (AtomicUsize::new(0), AtomicU64::new(0));
    let done: Mutex<Vec<Option<Result<Report, QueryError>>>> = Mutex::new((0..files.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                // Compiled on first use, per link type (as `scan` does for a
                // link type the catalog did not name); those `prepare`
                // could not compile for (and said so) match nothing.
                let mut filters: HashMap<u32, ExactFilter> = p
                    .filters
                    .iter()
                    .filter(|(_, f)| f.matches_nothing())
                    .map(|(lt, _)| (*lt, ExactFilter::nothing()))
                    .collect();
                let mut stop = Stop::new(p.cancel_flag(), files.len());
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((_, e)) = files.get(i) else { break };
                    let r = if stop.cancelled() {
                        Err(stop.error())
                    } else {
                        opened.fetch_add(1, Ordering::Relaxed);
                        let before = stop.read();
                        let r = count_one(p, e, (from, to), &mut filters, &mut stop);
                        read.fetch_add(stop.read() - before, Ordering::Relaxed);
                        r
                    };
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if let Ok(mut d) = done.lock() {
                        d[i] = Some(r);
                    }
                }
            });
        }
    });
    let done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    let cancelled = QueryError::Cancelled { opened: opened.into_inner(), files: files.len(), read: read.into_inner() };
    for r in merged(done, cancelled)? {
        report.absorb(r);
    }
    Ok(())
}

/// The files' reports in file order, or what stopped the count: the first
/// error in file order other than a cancel (an error is more important than
/// a cancel, which would hide it: another thread's cancel can come first),
/// else `cancelled` if any thread was cancelled (each thread knows only its
/// own progress: `cancelled` says the whole count's).
fn merged(done: Vec<Option<Result<Report, QueryError>>>, cancelled: QueryError) -> Result<Vec<Report>, QueryError> {
    let mut reports = Vec::with_capacity(done.len());
    let mut was_cancelled = false;
    for r in done.into_iter().flatten() {
        match r {
            Ok(r) => reports.push(r),
            Err(QueryError::Cancelled { .. }) => was_cancelled = true,
            Err(e) => return Err(e),
        }
    }
    if was_cancelled {
        return Err(cancelled);
    }
    Ok(reports)
}

/// One file's count and report.
fn count_one(
    p: &Prepared,
    e: &Entry,
    (from, to): (u64, u64),
    filters: &mut HashMap<u32, ExactFilter>,
    stop: &mut Stop<'_>,
) -> Result<Report, QueryError> {
    let mut r = Report::default();
    let opened = open_cursor(&p.root, p.store_dir.as_ref(), e, p.plan.as_ref(), (from, to), p.locked, &mut r)?;
    if let Some(Cursor { mut reader, path, .. }) = opened {
        scan(&mut reader, &path, from, to, &p.query.expr, filters, &mut r, stop, |_, r| {
            r.matched += 1;
            Ok(true)
        })?;
    }
    Ok(r)
}

impl Report {
    /// Adds what one file's reading found (its count, how it was read, its
    /// damage and warnings) to this report.
    fn absorb(&mut self, r: Report) {
        // Every field named: a new one must be decided on here.
        let Report {
            matched,
            files: _,
            files_skipped_by_time: _,
            files_indexed,
            files_scanned,
            blocks_read,
            blocks_total,
            part_files: _,
            recording: _,
            damaged: _,
            damaged_files,
            deleted_while_recording,
            on_unusable_volume,
            warnings,
        } = r;
        self.matched += matched;
        self.files_indexed += files_indexed;
        self.files_scanned += files_scanned;
        self.blocks_read += blocks_read;
        self.blocks_total += blocks_total;
        self.deleted_while_recording += deleted_while_recording;
        self.on_unusable_volume += on_unusable_volume;
        for path in &damaged_files {
            self.note_damaged(path);
        }
        self.warnings.extend(warnings);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read error of file `name`.
    fn io_error(name: &str) -> QueryError {
        QueryError::Io { path: name.into(), source: io::Error::from_raw_os_error(libc::EIO) }
    }

    /// A cancel after `read` packets.
    fn cancel(read: u64) -> QueryError {
        QueryError::Cancelled { opened: 1, files: 4, read }
    }

    /// One thread cancelled while another hit an I/O error: the error is
    /// the count's, whichever file came first (until 2026-11-27 the cancel
    /// was, and the error was lost).
    #[test]
    fn an_io_error_wins_over_a_cancel() {
        let done = vec![Some(Err(cancel(10))), Some(Ok(Report::default())), Some(Err(io_error("b.pcap"))), None];
        let e = merged(done, cancel(99)).unwrap_err();
        assert!(matches!(&e, QueryError::Io { path, .. } if path == Path::new("b.pcap")), "{e}");
        // The first error in file order, whatever the cancels.
        let done = vec![Some(Err(io_error("a.pcap"))), Some(Err(cancel(10))), Some(Err(io_error("c.pcap")))];
        let e = merged(done, cancel(99)).unwrap_err();
        assert!(matches!(&e, QueryError::Io { path, .. } if path == Path::new("a.pcap")), "{e}");
    }

    /// A cancel alone says how far the whole count got; without either,
    /// the reports come back in file order.
    #[test]
    fn a_cancel_alone_says_the_whole_counts_progress() {
        let done = vec![Some(Ok(Report::default())), Some(Err(cancel(10))), None];
        assert!(matches!(merged(done, cancel(99)), Err(QueryError::Cancelled { read: 99, .. })));
        let one = |n| Some(Ok(Report { matched: n, ..Report::default() }));
        let r = merged(vec![one(1), None, one(2)], cancel(99)).unwrap();
        assert_eq!(r.iter().map(|r| r.matched).collect::<Vec<_>>(), [1, 2]);
    }
}
