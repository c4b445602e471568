//! The writer's two helper threads per stream: the index thread, which
//! writes a closed file's index and appends its catalog line, and the sort
//! thread, which runs the indexers' background work in order.

use super::*;

/// A closed file whose index is still to be written, then cataloged.
pub(super) struct Finish<I> {
    /// `None`: the file is only cataloged (not indexed, or cut by an error).
    pub(super) indexer: Option<I>,
    /// The index file, relative to `dir`.
    pub(super) index_rel: String,
    pub(super) entry: Entry,
    /// The volume the file is on.
    pub(super) dir: Arc<wv_sys::fs::Dir>,
    /// A file that spilled into the page cache: still to be made durable
    /// (fsync, then renamed from `.part`) before its index and catalog line.
    pub(super) persist: Option<Persist>,
    /// The file counted against the budget until the job is done.
    pub(super) budget: Option<crate::catalog::Uncataloged>,
    /// The stream's live file, which names the file until the job is done.
    pub(super) live: Option<Arc<crate::live::LiveFiles>>,
}

impl<I> Finish<I> {
    /// The file is catalogued, or will not be (its line or rename failed):
    /// out of the live file (only now: see `crate::live`).
    pub(super) fn out_of_live(&mut self) {
        if let Some(l) = self.live.take() {
            l.remove(&self.entry.file);
        }
    }
}

/// A closed file's fsync and rename, left to the index thread.
pub(super) struct Persist {
    /// Shared with writes that have completed (the zero-copy path's).
    pub(super) file: Arc<File>,
    pub(super) part_rel: String,
    pub(super) final_rel: String,
    /// Its packets (already counted as written).
    pub(super) packets: u64,
}

/// Writes indexes and appends catalog lines for closed files, off the writer
/// thread: merging and writing a big file's index takes long enough to stall
/// the writes otherwise. The channel holds one job, so at most two closed
/// files per stream wait for their index (each counted against the budget
/// until its catalog line is written: [`Finish::budget`]).
/// Each finished indexer goes back to the writer through `recycle`.
pub(super) fn finisher<I: FileIndexer>(
    rx: std::sync::mpsc::Receiver<Finish<I>>,
    recycle: std::sync::mpsc::SyncSender<I>,
    catalog: Arc<Catalog>,
    shared: Arc<WriterShared>,
) {
    for mut job in rx {
        if !persist(&mut job, &shared) {
            job.out_of_live();
            continue;
        }
        match job.indexer.as_mut().map(|ix| ix.finish(&job.dir, &job.index_rel)) {
            Some(Ok(())) => job.entry.index = Some(layout::index_rel(&job.entry.file)),
            Some(Err(e)) => {
                shared.warn(format!("index {} not written: {e}", job.dir.display(&job.index_rel).display()))
            }
            None => {}
        }
        if let Err(e) = catalog.append(&job.entry) {
            catalog_failed(&catalog, &job.entry, &e, &shared);
        }
        job.out_of_live();
        // Never full: at most three builders exist per stream.
        if let Some(ix) = job.indexer {
            let _ = recycle.try_send(ix);
        }
    }
}

/// A closed file's catalog line could not be written (`e`): the store's
/// own file system failed or filled. The file is whole on its volume, but
/// nothing reads it until `repair` catalogues it, so the stream stops (as
/// on a failed disk) instead of writing on, on other volumes, files no query
/// sees while the counters call them written.
pub(super) fn catalog_failed(
    catalog: &Catalog,
    entry: &crate::catalog::Entry,
    e: &std::io::Error,
    shared: &WriterShared,
) {
    shared.fail(
        format!(
            "cannot write the catalog {} ({e}): recording stops; {} and the files closed after it are whole on their volumes: `wirevault repair` catalogues them once the store's file system is writable again",
            catalog.path().display(),
            entry.file
        ),
        e.raw_os_error() == Some(libc::ENOSPC),
    );
}

/// Makes a spilled file durable (fsync, rename from `.part`) if the job
/// carries one; false when that failed: the file stays `.part` for
/// `wirevault repair`, its packets move from written to write errors, and
/// it gets no catalog line.
pub(super) fn persist<I>(job: &mut Finish<I>, shared: &WriterShared) -> bool {
    let Some(p) = job.persist.take() else { return true };
    let Err(e) = job.dir.persist(&p.file, &p.part_rel, &p.final_rel) else { return true };
    shared.written_packets.fetch_sub(p.packets, Ordering::Relaxed);
    shared.dropped_write_error.fetch_add(p.packets, Ordering::Relaxed);
    shared.warn(format!(
        "cannot close {}: {e}; it stays as {} for `wirevault repair`",
        job.dir.display(&p.final_rel).display(),
        p.part_rel
    ));
    false
}

/// Runs the work indexers hand over while their files fill (sorting runs of
/// keys), in order, on its own thread: it never waits for a file's index to
/// be written, so an indexer waiting for its work back waits for other work
/// only. A work that panics is reported (its indexer marks the file's index
/// incomplete) and the thread goes on with the next. Ends when every sender
/// is gone (the writer's and the indexers').
pub(super) fn sorter(rx: std::sync::mpsc::Receiver<crate::IndexWork>, shared: Arc<WriterShared>) {
    for work in rx {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_err() {
            shared.warn("sorting a run of index keys failed; that file's index will not narrow queries".into());
        }
    }
}

/// A writer's index and sort threads, started, with the ends of their queues the writer keeps.
pub(super) struct Helpers<I> {
    pub(super) finish_tx: std::sync::mpsc::SyncSender<Finish<I>>,
    /// Indexers the index thread is done with, to reuse.
    pub(super) recycled: std::sync::mpsc::Receiver<I>,
    pub(super) work_tx: std::sync::mpsc::Sender<crate::IndexWork>,
    pub(super) index: std::thread::JoinHandle<()>,
    pub(super) sort: std::thread::JoinHandle<()>,
}

/// Starts the index and sort threads of stream `cfg.stream`.
pub(super) fn start_helpers<I: FileIndexer>(
    cfg: &WriterConfig,
    catalog: &Arc<Catalog>,
    shared: &Arc<WriterShared>,
) -> io::Result<Helpers<I>> {
    let (finish_tx, rx) = std::sync::mpsc::sync_channel(1);
    // Room for every builder there can be (the writer's, the queued one and
    // the one being encoded), so none is dropped and re-faulted later.
    let (recycle_tx, recycled) = std::sync::mpsc::sync_channel::<I>(3);
    // Unbounded: each indexer has at most a few works out at once.
    let (work_tx, work_rx) = std::sync::mpsc::channel();
    if cfg.index {
        // The first file's indexer, made and warmed now: faulting in its two key runs (4 MiB
        // each, up to ~8 ms each at this VM's ~2 s per GB of fresh memory) was 7.6% of the
        // writer's samples in a 2-million-packet live run, all of it during the first packets
        // (bench/RESULTS.md). The writer resets it for the first file's link type.
        let mut ix = super::new_indexer::<I>(&recycled, &work_tx, wv_wire::linktype::ETHERNET);
        ix.warm();
        let _ = recycle_tx.try_send(ix);
    }
    let (c2, s2) = (catalog.clone(), shared.clone());
    let index = std::thread::Builder::new()
        .name(format!("wv-index-{}", cfg.stream))
        .spawn(move || finisher(rx, recycle_tx, c2, s2))?;
    let s3 = shared.clone();
    let sort =
        std::thread::Builder::new().name(format!("wv-sort-{}", cfg.stream)).spawn(move || sorter(work_rx, s3))?;
    Ok(Helpers { finish_tx, recycled, work_tx, index, sort })
}

/// Waits for the index and sort threads once the writer and its queue ends are gone.
pub(super) fn join_helpers(index: std::thread::JoinHandle<()>, sort: std::thread::JoinHandle<()>) -> io::Result<()> {
    index.join().map_err(|_| io::Error::other("the index thread panicked"))?;
    // Every indexer is gone with the writer and the finisher, and with them
    // the last senders of the sort queue.
    sort.join().map_err(|_| io::Error::other("the sort thread panicked"))
}
