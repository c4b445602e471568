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
