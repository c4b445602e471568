//! The glue between the store's writer and the index builder: the one place
//! the binary names both (the writer takes a factory of per-file indexers).

use std::path::Path;
use std::sync::Arc;

/// The index builder as the writer's per-file indexer.
struct Indexer(wv_index::Builder);

impl wv_store::FileIndexer for Indexer {
    fn add(&mut self, ts_ns: u64, offset: u64, frame: &[u8], origlen: u32) {
        self.0.add(ts_ns, offset, frame, origlen);
    }

    fn finish(&mut self, path: &Path) -> std::io::Result<()> {
        self.0.write(path).map(drop).map_err(std::io::Error::other)
    }

    fn reset(&mut self, linktype: u32) {
        self.0.reset(linktype);
    }
}

/// Index builders that hand their full runs of keys to the stream's sort
/// thread (see wv_index's builder): the writer thread only appends.
pub fn indexer_factory() -> wv_store::IndexerFactory {
    Arc::new(|linktype, offload| {
        let mut b = wv_index::Builder::new(linktype);
        b.set_offload(offload);
        Box::new(Indexer(b)) as Box<dyn wv_store::FileIndexer>
    })
}
