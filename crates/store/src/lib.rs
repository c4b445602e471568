//! The store: how captured packets become files on disk.
//!
//! * [`stream::StreamProducer`] runs on the capture worker: it lays each
//!   record into the arena (a byte ring) exactly as it will be on disk and
//!   decides where files begin and end.
//! * [`writer::run`] runs on the writer thread: it hands arena memory to the
//!   kernel with io_uring + O_DIRECT, closes files (trim, fsync, rename), feeds
//!   the index builder and appends to the [`catalog`]; until a file is
//!   catalogued, its valid prefix is published for readers ([`live`]).
//!
//! The two talk through a bounded lock-free queue of [`stream::Msg`]; see
//! DESIGN.md, "Record data path".
#![deny(unsafe_code)]

pub mod catalog;
pub mod layout;
pub mod live;
pub mod lock;
pub mod recover;
pub mod retention;
pub mod stream;
pub mod volume;
pub mod writer;

/// File format of the store's files (the one `Format`, from wv-wire).
pub use wv_wire::Format;

/// What the writer does with each record of a file besides writing it:
/// the index builder. The writer is generic over it (`writer::run::<I>`),
/// so the per-record [`FileIndexer::add`] is a direct call the compiler can
/// inline into the writer's walk; the store still does not depend on the
/// index crate, which implements this trait for its builder.
pub trait FileIndexer: Send + Sized + 'static {
    /// A new indexer for a file of `linktype`, handing its background work
    /// (sorting full runs of keys) to `offload`.
    fn new(linktype: u32, offload: IndexOffload) -> Self;
    /// One record, in file order: its timestamp, byte offset in the file,
    /// captured bytes and original length.
    fn add(&mut self, ts_ns: u64, offset: u64, frame: &[u8], origlen: u32);
    /// Writes the index of the closed file as `rel` beneath the store `dir`
    /// (no symlink followed on the way, as every path of a store).
    fn finish(&mut self, dir: &wv_sys::fs::Dir, rel: &str) -> std::io::Result<()>;
    /// Empties the indexer for a new file of `linktype`, keeping its
    /// allocations: the writer reuses finished indexers, so their memory is
    /// not returned to the kernel and faulted in again (zeroed) for every file.
    fn reset(&mut self, linktype: u32);
    /// Faults in the memory a file's first packets would write, so that a new
    /// stream pays for it at start-up rather than on its first packets (the
    /// writer warms one indexer when it starts). Nothing by default.
    fn warm(&mut self) {}
}

/// Per-stream state that spans files, which the writer thread feeds beside each file's
/// [`FileIndexer`]: the flow table (`wv_flows::tap`). Called in stream order; what it writes
/// it writes off the writer thread. Not fed on the zero-copy path, whose capture thread walks
/// the records.
pub trait StreamTap: Send {
    /// The stream's next file opened, to be catalogued as `file`, of `linktype`.
    fn open(&mut self, file: &str, linktype: u32);
    /// One record of the open file, in stream order (as [`FileIndexer::add`]).
    fn add(&mut self, ts_ns: u64, frame: &[u8], origlen: u32);
    /// The open file closed: catalogued (`true`), or lost to a write error (`false`).
    fn close(&mut self, catalogued: bool);
    /// The stream ends: after the last file's [`StreamTap::close`]. Returns once what it
    /// made is written.
    fn stop(&mut self);
}

/// Makes a stream's [`StreamTap`] (given its number, counters and the store's catalog, which
/// counts what the tap writes beside each file against the budget) when its writer starts.
pub type TapMaker = std::sync::Arc<
    dyn Fn(usize, std::sync::Arc<writer::WriterShared>, std::sync::Arc<catalog::Catalog>) -> Box<dyn StreamTap>
        + Send
        + Sync,
>;

/// Work an indexer hands to the stream's sort thread (sorting a full run of
/// keys) instead of doing it on the writer thread. The one hand-off type:
/// the index builder takes these too.
pub type IndexWork = Box<dyn FnOnce() + Send>;

/// Queues [`IndexWork`] on the stream's sort thread, which runs works in
/// order and waits for nothing else. [`FileIndexer::finish`] runs on
/// another thread (the index thread) and may wait for the works of its
/// file. A work that cannot be queued any more (the thread has stopped) is
/// dropped.
pub type IndexOffload = Box<dyn FnMut(IndexWork) + Send>;
