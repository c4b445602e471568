//! Writing a finished index: merging each key class's runs into posting
//! lists and directories, checksumming the sections as they go out, and the
//! durable write of the file (see [`crate::format`] for the layout).

use super::*;

/// CRC-32C of each chunk of each section, gathered as the sections go to
/// the file (in file order, which is not their number order).
pub(super) struct Summer {
    /// Per section number, its chunk sums.
    pub(super) sums: [Vec<u32>; format::N_DATA_SECTIONS],
    /// The section being written, its bytes so far and the open chunk's CRC.
    pub(super) cur: usize,
    pub(super) done: u64,
    pub(super) crc: u32,
}

impl Summer {
    pub(super) fn new() -> Summer {
        Summer { sums: Default::default(), cur: 0, done: 0, crc: 0 }
    }
    pub(super) fn start(&mut self, section: usize) {
        (self.cur, self.done, self.crc) = (section, 0, 0);
    }
    pub(super) fn feed(&mut self, mut b: &[u8]) {
        let chunk = u64::from(format::CHUNK_LEN);
        while !b.is_empty() {
            let room = (chunk - self.done % chunk) as usize;
            let n = room.min(b.len());
            self.crc = crc32c::crc32c_append(self.crc, &b[..n]);
            self.done += n as u64;
            b = &b[n..];
            if self.done.is_multiple_of(chunk) {
                self.sums[self.cur].push(self.crc);
                self.crc = 0;
            }
        }
    }
    pub(super) fn end(&mut self) {
        if !self.done.is_multiple_of(u64::from(format::CHUNK_LEN)) {
            self.sums[self.cur].push(self.crc);
        }
        self.done = 0;
    }
}

impl Builder {
    /// Writes the index to `path` (through `path.part`, fsynced, renamed).
    pub fn finish(mut self, path: &Path) -> Result<IndexSummary, IndexError> {
        self.write(path)
    }

    /// [`Builder::finish`] of the index `rel` beneath `dir` (a store): the
    /// temporary file is created, and renamed, through the directory's
    /// descriptor, never through a symlink at any component.
    pub fn finish_in(mut self, dir: &wv_sys::fs::Dir, rel: &str) -> Result<IndexSummary, IndexError> {
        self.write_in(dir, rel)
    }

    /// [`Builder::finish`] without giving up the builder: call
    /// [`Builder::reset`] before adding the next file's records.
    ///
    /// The posting lists go to the file as they are merged (through a
    /// buffer of about 1 MiB); only each class's directory is held whole.
    /// The file is created 0640 whatever the umask, never through a
    /// symlink; its checksums are computed here, as its bytes go out.
    pub fn write(&mut self, path: &Path) -> Result<IndexSummary, IndexError> {
        if self.capture_id.is_none() {
            // The capture beside the index (the recorder's index thread
            // runs once the file is closed and renamed).
            if let Some(cap) = wv_store::layout::capture_of_index(path) {
                self.capture_id = crate::ident::open_capture(cap, true).and_then(|f| CaptureId::of(&f)).ok();
            }
        }
        self.write_with(path, |w| wv_sys::fs::replace_durable(path, w))
    }

    /// [`Builder::write`] of the index `rel` beneath `dir` (see [`Builder::finish_in`]).
    pub fn write_in(&mut self, dir: &wv_sys::fs::Dir, rel: &str) -> Result<IndexSummary, IndexError> {
        if self.capture_id.is_none() {
            if let Some(cap) = rel.strip_suffix(wv_store::layout::INDEX) {
                self.capture_id = crate::ident::open_capture_in(dir, cap).and_then(|f| CaptureId::of(&f)).ok();
            }
        }
        self.write_with(&dir.display(rel), |w| dir.replace(rel, w))
    }

    fn write_with(
        &mut self,
        path: &Path,
        replace: impl FnOnce(&mut dyn FnMut(&mut std::fs::File) -> Result<u64, WriteError>) -> Result<u64, WriteError>,
    ) -> Result<IndexSummary, IndexError> {
        let io = |e| IndexError::Io { path: path.to_path_buf(), source: e };
        let mut body = |f: &mut std::fs::File| {
            f.write_all(&[0; HEAD_LEN]).map_err(io)?;
            let mut written = HEAD_LEN as u64;
            let head = self.encode_into(&mut |bytes| {
                written += bytes.len() as u64;
                f.write_all(bytes).map_err(io)
            })?;
            std::os::unix::fs::FileExt::write_all_at(&*f, &head, 0).map_err(io)?;
            Ok::<_, WriteError>(written)
        };
        let len = replace(&mut body).map_err(|e| match e {
            WriteError::Index(e) => e,
            WriteError::Io(e) => io(e),
        })?;
        let (first_ns, last_ns) = self.time_range();
        Ok(IndexSummary {
            linktype: self.linktype,
            packets: self.packets,
            first_ns,
            last_ns,
            blocks: self.blocks.len() as u32,
            index_bytes: len,
            keys_complete: self.keys_complete,
        })
    }

    fn time_range(&self) -> (u64, u64) {
        let first = self.blocks.iter().map(|b| b.min_ts).min().unwrap_or(0);
        let last = self.blocks.iter().map(|b| b.max_ts).max().unwrap_or(0);
        (first, last)
    }

    /// Lays out the whole index file in memory.
    pub fn encode(&mut self) -> Result<Vec<u8>, IndexError> {
        let mut file = vec![0u8; HEAD_LEN];
        let head = self.encode_into(&mut |bytes| {
            file.extend_from_slice(bytes);
            Ok(())
        })?;
        file[..head.len()].copy_from_slice(&head);
        Ok(file)
    }

    /// Hands the sections to `sink` in file order, right after the header
    /// and section table, and returns those (which name each section's
    /// place). File order: the block table, then per key class its posting
    /// lists and then its directory (the directory's end offsets are only
    /// known once the lists are out; readers go by the table).
    fn encode_into(
        &mut self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), IndexError>,
    ) -> Result<[u8; HEAD_LEN], IndexError> {
        let summer = RefCell::new(Summer::new());
        let sink = &mut |b: &[u8]| {
            summer.borrow_mut().feed(b);
            sink(b)
        };
        let mut table = [(0u64, 0u64); format::N_SECTIONS];
        let mut at = HEAD_LEN as u64;
        let (mut dir, mut out) = (std::mem::take(&mut self.dir), std::mem::take(&mut self.out));
        // Block table.
        out.clear();
        let (mut prev_off, mut prev_ts) = (0u64, 0u64);
        for b in &self.blocks {
            put_varint(&mut out, b.offset.wrapping_sub(prev_off));
            put_varint(&mut out, zigzag(b.min_ts.wrapping_sub(prev_ts) as i64));
            put_varint(&mut out, b.max_ts - b.min_ts);
            prev_off = b.offset;
            prev_ts = b.min_ts;
        }
        summer.borrow_mut().start(format::section::BLOCKS);
        sink(&out)?;
        summer.borrow_mut().end();
        table[format::section::BLOCKS] = (at, out.len() as u64);
        at += out.len() as u64;
        // The last runs are encoded here, on the finishing thread.
        self.ipv4.finish();
        self.ports.finish();
        if self.ipv4.lost || self.ports.lost {
            // Some pairs are missing: queries must not trust the posting lists.
            self.keys_complete = false;
        }
        self.ipv6.sort_unstable();
        for (class, pairs) in [
            (KeyClass::Ipv4, Pairs::Runs(&self.ipv4.runs)),
            (KeyClass::Ipv6, Pairs::Wide(&self.ipv6)),
            (KeyClass::Port, Pairs::Runs(&self.ports.runs)),
            (KeyClass::Proto, Pairs::Dense(&self.protos)),
            (KeyClass::Vlan, Pairs::Dense(&self.vlans)),
        ] {
            dir.clear();
            out.clear();
            summer.borrow_mut().start(class.dir_section() + 1);
            let post_len = encode_class(class, pairs, &mut dir, &mut out, sink)?;
            summer.borrow_mut().end();
            table[class.dir_section() + 1] = (at, post_len);
            at += post_len;
            summer.borrow_mut().start(class.dir_section());
            sink(&dir)?;
            summer.borrow_mut().end();
            table[class.dir_section()] = (at, dir.len() as u64);
            at += dir.len() as u64;
        }
        // The chunk sums, in section number order, as the last section.
        out.clear();
        for sums in &summer.borrow().sums {
            sums.iter().for_each(|c| out.extend_from_slice(&c.to_le_bytes()));
        }
        sink(&out)?;
        let sums_crc = crc32c::crc32c(&out);
        table[format::section::SUMS] = (at, out.len() as u64);
        (self.dir, self.out) = (dir, out);
        let (first_ns, last_ns) = self.time_range();
        let mut flags = if self.keys_complete { format::FLAG_KEYS_COMPLETE } else { 0 };
        if self.capture_id.is_some() {
            flags |= format::FLAG_CAPTURE_ID;
        }
        if self.late_structure {
            flags |= format::FLAG_LATE_STRUCTURE;
        }
        let id = self.capture_id.unwrap_or(CaptureId { bytes: 0, mtime_ns: 0, fingerprint: 0 });
        let head = format::Head {
            version: format::VERSION,
            flags,
            linktype: self.linktype,
            block_packets: (self.block_mask + 1) as u32,
            packets: self.packets,
            first_ns,
            last_ns,
            n_blocks: self.blocks.len() as u32,
            n_sections: format::N_SECTIONS as u32,
            capture_bytes: id.bytes,
            capture_mtime: id.mtime_ns,
            capture_sum: id.fingerprint,
            chunk_len: format::CHUNK_LEN,
            sums_crc,
            head_crc: 0,
            sections: table,
        }
        .seal();
        Ok(head)
    }
}

/// What can go wrong inside [`wv_sys::fs::replace_durable`] while an index
/// is written: the index's own error, or the helper's I/O.
pub(super) enum WriteError {
    Index(IndexError),
    Io(std::io::Error),
}

impl From<IndexError> for WriteError {
    fn from(e: IndexError) -> Self {
        WriteError::Index(e)
    }
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// One key class's (key, block) pairs, sorted, possibly with repeats; or
/// its posting lists built directly, indexed by key.
pub(super) enum Pairs<'a> {
    /// Encoded runs of `key << 32 | block` pairs, in block order.
    Runs(&'a [Vec<u8>]),
    Wide(&'a [(u128, u32)]),
    Dense(&'a [Posting]),
}

/// Lays out one key class into its two sections: the directory (each key,
/// then the end offset of its posting list) into `dir`, and the posting
/// lists (block + 1, delta + varint) through `post` to `sink`, about 1 MiB
/// at a time. Returns the length of the posting lists.
pub(super) fn encode_class(
    class: KeyClass,
    pairs: Pairs,
    dir: &mut Vec<u8>,
    post: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), IndexError>,
) -> Result<u64, IndexError> {
    let mut enc = ClassEncoder { class, dir, post, sink, sent: 0, key: 0, last: 0 };
    match pairs {
        Pairs::Runs(runs) => {
            // Merge the runs by key; runs of the same key come in run
            // (block) order, and a block split between two runs is kept once.
            let mut cursors: Vec<RunCursor> = runs.iter().map(|r| RunCursor::new(r)).collect();
            let mut heap = BinaryHeap::with_capacity(cursors.len());
            for (i, c) in cursors.iter_mut().enumerate() {
                if let Some((key, block)) = c.next_key() {
                    heap.push(Reverse((key, i, block)));
                }
            }
            while let Some(Reverse((key, i, block))) = heap.pop() {
                enc.push(u128::from(key), block as u32)?;
                let c = &mut cursors[i];
                let (diffs, sum) = c.differences();
                enc.post.extend_from_slice(diffs);
                enc.last += sum as u32;
                if let Some((key, block)) = c.next_key() {
                    heap.push(Reverse((key, i, block)));
                }
            }
        }
        Pairs::Wide(v) => v.iter().try_for_each(|&(k, b)| enc.push(k, b))?,
        Pairs::Dense(v) => {
            for (k, p) in v.iter().enumerate().filter(|(_, p)| p.last != 0) {
                enc.post.extend_from_slice(&p.bytes);
                enc.end_key(k as u128)?;
            }
        }
    }
    if enc.last != 0 {
        enc.end_key(enc.key)?;
    }
    let len = enc.sent + enc.post.len() as u64;
    (enc.sink)(enc.post)?;
    Ok(len)
}

/// Posting bytes held before they go to the sink (small in tests, so they
/// pass through the chunked path).
pub(super) const POST_CHUNK: usize = if cfg!(test) { 64 } else { 1 << 20 };

pub(super) struct ClassEncoder<'a> {
    pub(super) class: KeyClass,
    pub(super) dir: &'a mut Vec<u8>,
    pub(super) post: &'a mut Vec<u8>,
    pub(super) sink: &'a mut dyn FnMut(&[u8]) -> Result<(), IndexError>,
    /// Posting bytes already handed to the sink.
    pub(super) sent: u64,
    /// The key being written and its last block + 1 (0: no key yet).
    pub(super) key: u128,
    pub(super) last: u32,
}

impl ClassEncoder<'_> {
    #[inline]
    pub(super) fn push(&mut self, key: u128, block: u32) -> Result<(), IndexError> {
        if self.last != 0 && key != self.key {
            self.end_key(self.key)?;
            self.last = 0;
        }
        self.key = key;
        let b1 = block + 1;
        if b1 != self.last {
            put_varint(self.post, u64::from(b1 - self.last));
            self.last = b1;
        }
        Ok(())
    }

    /// Closes `key`'s posting list: its directory entry. Hands the posting
    /// bytes on once they pass [`POST_CHUNK`].
    pub(super) fn end_key(&mut self, key: u128) -> Result<(), IndexError> {
        let end = u32::try_from(self.sent + self.post.len() as u64).map_err(|_| IndexError::TooLarge)?;
        self.class.emit_entry(key, end, self.dir);
        if self.post.len() >= POST_CHUNK {
            (self.sink)(self.post)?;
            self.sent += self.post.len() as u64;
            self.post.clear();
        }
        Ok(())
    }
}
