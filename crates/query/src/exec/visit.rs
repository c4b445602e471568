//! [`visit()`]: every selected packet of a store (or capture file) handed to a
//! caller one file at a time, per stream in recording order, without the
//! merge by time. For tools that need each stream's own order (timestamp
//! statistics: a stamp going backwards is only visible there) or only
//! per-packet numbers (size distributions), and nothing written.

use super::*;

/// One file of a [`visit()`]: its catalog entry's stream and path.
#[derive(Debug, Clone, Copy)]
pub struct VisitFile<'a> {
    /// The entry's stream (0 for a single capture file).
    pub stream: usize,
    /// The file as given or beneath the store (for messages).
    pub path: &'a Path,
}

/// Hands every packet of `p` in its time range that passes its filter to
/// `f`, file by file: streams in ascending order, each stream's files in
/// the order they were recorded (the sequence number in their names, else
/// the catalog's order), each file's packets in file order. `f` returns
/// whether to go on. The files are chosen, opened (beneath the store,
/// following no symlink), narrowed by their indexes and checked exactly as
/// by [`run`]; damage is reported in the [`Report`] the same way.
pub fn visit(mut p: Prepared, mut f: impl FnMut(VisitFile<'_>, &Packet<'_>) -> bool) -> Result<Report, QueryError> {
    let ((from, to, limit), mut report) = begin(&mut p);
    let mut files = in_range(&p.entries, (p.store_dir.as_ref(), &p.root), from, to, &mut report);
    // Recording order within a stream: the per-stream sequence number of
    // the name (times in names are first stamps, which may go backwards),
    // then the catalog's (append) order.
    let seq = |e: &Entry| {
        let name = e.file.rsplit('/').next().unwrap_or(&e.file);
        wv_store::layout::seq_of(name).unwrap_or(u64::MAX)
    };
    files.sort_by_key(|(i, e)| (e.stream, seq(e), *i));
    let expr = p.query.expr.clone();
    let cancel = p.cancel.clone();
    let mut stop = Stop::new(cancel.as_deref(), files.len());
    for (_, e) in files {
        if report.matched >= limit {
            break;
        }
        if stop.cancelled() {
            return Err(stop.error());
        }
        stop.opened += 1;
        let Some(mut c) =
            open_cursor(&p.root, p.store_dir.as_ref(), e, p.plan.as_ref(), (from, to), p.locked, &mut report)?
        else {
            continue;
        };
        let Cursor { reader, path, .. } = &mut c;
        let file = VisitFile { stream: e.stream, path };
        let stopped = scan(reader, path, from, to, &expr, &mut p.filters, &mut report, &mut stop, |pk, report| {
            report.matched += 1;
            Ok(f(file, pk) && report.matched < limit)
        })?;
        if stopped && report.matched < limit {
            break;
        }
    }
    Ok(report)
}
