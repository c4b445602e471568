//! Runs of (key, block) pairs: filled by the per-packet add, sorted and
//! encoded on the stream's sort thread (or where they are dropped), read
//! back key by key when the index is written.

use super::*;

/// One key class's (key << 32 | block) pairs: the run being filled, and
/// the file's earlier runs, sorted and encoded.
///
/// An encoded run is the varint of its first pair's block (the smallest:
/// pairs come in block order), then per key in increasing order: the
/// varint key difference to the previous key, the key's first block minus
/// the run's first, the differences to its next blocks, and a 0 byte (no
/// difference is 0: repeats are dropped). Merging runs then copies the
/// difference bytes and only recomputes each run's first difference.
pub(super) struct Runs {
    pub(super) run_pairs: usize,
    /// The run being filled: allocated at its first pair, with `run_pairs` room.
    pub(super) run: Vec<u64>,
    /// Empty run buffers, and how many runs are out being sorted.
    pub(super) free: Vec<Vec<u64>>,
    pub(super) out: usize,
    /// This file's encoded runs, by sequence number (empty until back).
    pub(super) runs: Vec<Vec<u8>>,
    /// Runs handed out or encoded for this file.
    pub(super) sent: usize,
    /// Empty buffers for encoded runs, kept from earlier files.
    pub(super) spare: Vec<Vec<u8>>,
    /// A run of this file was lost (its sort panicked).
    pub(super) lost: bool,
    pub(super) tx: Sender<Done>,
    pub(super) rx: Receiver<Done>,
}

/// A run back from sorting; `lost` when sorting it failed (a panic): the
/// file's posting lists then miss its pairs.
pub(super) struct Done {
    pub(super) seq: usize,
    pub(super) pairs: Vec<u64>,
    pub(super) encoded: Vec<u8>,
    pub(super) lost: bool,
}

/// One full run to sort and encode. It does its work when run, or when
/// dropped unrun (a sort thread that went away). If the work panics, or the
/// job is dropped by a thread that is unwinding, it reports back as lost:
/// nobody waits for it, and nothing is lost silently.
pub(super) struct RunJob {
    pub(super) seq: usize,
    pub(super) pairs: Option<Vec<u64>>,
    pub(super) encoded: Vec<u8>,
    pub(super) tx: Sender<Done>,
}

impl RunJob {
    pub(super) fn work(&mut self) {
        let Some(mut pairs) = self.pairs.take() else { return };
        let mut encoded = std::mem::take(&mut self.encoded);
        encode_run(&mut pairs, &mut encoded);
        pairs.clear();
        // The builder holds the receiver unless it was dropped: then nobody wants the run.
        let _ = self.tx.send(Done { seq: self.seq, pairs, encoded, lost: false });
        self.seq = usize::MAX;
    }
}

impl Drop for RunJob {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if self.seq != usize::MAX {
                let _ = self.tx.send(Done { seq: self.seq, pairs: Vec::new(), encoded: Vec::new(), lost: true });
            }
        } else {
            self.work();
        }
    }
}

impl Runs {
    pub(super) fn new(run_pairs: usize) -> Runs {
        let (tx, rx) = channel();
        Runs {
            run_pairs: run_pairs.max(1),
            run: Vec::new(),
            free: Vec::new(),
            out: 0,
            runs: Vec::new(),
            sent: 0,
            spare: Vec::new(),
            lost: false,
            tx,
            rx,
        }
    }

    /// Appends a pair; a full run goes to `offload` (or is encoded here).
    #[inline]
    pub(super) fn push(&mut self, pair: u64, offload: &mut Option<Offload>) {
        if self.run.len() == self.run.capacity() {
            self.make_room(offload);
        }
        self.run.push(pair);
    }

    /// Allocates the run being filled (as `make_room` does at the first pair) and writes one
    /// word per 4 KiB page of it, so that its pages are faulted in now ([`Builder::warm`]).
    pub(super) fn warm(&mut self) {
        if self.run.capacity() < self.run_pairs {
            reserve_huge(&mut self.run, self.run_pairs);
        }
        let room = self.run.spare_capacity_mut();
        for w in room.iter_mut().step_by(4096 / std::mem::size_of::<u64>()) {
            w.write(0);
        }
        // The words are never read: this keeps the writes (and so the page faults) from being
        // optimised away.
        std::hint::black_box(room);
    }

    #[cold]
    #[inline(never)]
    pub(super) fn make_room(&mut self, offload: &mut Option<Offload>) {
        if self.run.len() < self.run_pairs {
            reserve_huge(&mut self.run, self.run_pairs);
        } else {
            self.spill(offload);
        }
    }

    /// Hands the run being filled to `offload` (or encodes it here) and
    /// starts the next in an empty buffer.
    pub(super) fn spill(&mut self, offload: &mut Option<Offload>) {
        self.collect(false);
        while self.free.is_empty() && self.out >= MAX_OUT {
            self.receive_one();
        }
        let next = self.free.pop().unwrap_or_else(|| {
            let mut v = Vec::new();
            reserve_huge(&mut v, self.run_pairs);
            v
        });
        let pairs = std::mem::replace(&mut self.run, next);
        let encoded = self.spare.pop().unwrap_or_default();
        let mut job = RunJob { seq: self.sent, pairs: Some(pairs), encoded, tx: self.tx.clone() };
        self.sent += 1;
        self.out += 1;
        match offload {
            Some(offload) => offload(Box::new(move || job.work())),
            None => job.work(),
        }
        self.collect(false);
    }

    /// Takes in the runs that are back; with `all`, waits for every one.
    pub(super) fn collect(&mut self, all: bool) {
        while let Ok(d) = self.rx.try_recv() {
            self.take(d);
        }
        while all && self.out > 0 {
            self.receive_one();
        }
    }

    pub(super) fn receive_one(&mut self) {
        // Cannot fail: `self.tx` keeps the channel open, and every job sends
        // once, whether it ran, was dropped or panicked.
        if let Ok(d) = self.rx.recv() {
            self.take(d);
        }
    }

    pub(super) fn take(&mut self, d: Done) {
        self.out -= 1;
        self.lost |= d.lost;
        self.place(d.seq, d.encoded);
        if d.pairs.capacity() > 0 {
            self.free.push(d.pairs);
        }
    }

    /// Stores encoded run number `seq` (runs may come back in any order).
    pub(super) fn place(&mut self, seq: usize, encoded: Vec<u8>) {
        if self.runs.len() <= seq {
            self.runs.resize_with(seq + 1, Vec::new);
        }
        self.runs[seq] = encoded;
    }

    /// Waits for the runs out, then encodes the last one here, in its own
    /// buffer: `runs` is then complete.
    pub(super) fn finish(&mut self) {
        self.collect(true);
        if !self.run.is_empty() {
            let mut encoded = self.spare.pop().unwrap_or_default();
            encode_run(&mut self.run, &mut encoded);
            self.run.clear();
            self.place(self.sent, encoded);
            self.sent += 1;
        }
    }

    /// Empties the runs for the next file, keeping the buffers (encoded
    /// ones up to twice as many as this file used).
    pub(super) fn reset(&mut self) {
        self.collect(true);
        self.run.clear();
        let used = self.runs.len();
        self.spare.extend(self.runs.drain(..).map(|mut v| {
            v.clear();
            v
        }));
        self.spare.truncate(2 * used.max(1));
        self.sent = 0;
        self.lost = false;
    }
}

/// Sorts a run and encodes it into `out` (see [`Runs`]).
pub(super) fn encode_run(pairs: &mut Vec<u64>, out: &mut Vec<u8>) {
    out.clear();
    let Some(&first) = pairs.first() else { return };
    let base = first as u32;
    SCRATCH.with(|s| sort_pairs(pairs, &mut s.borrow_mut()));
    put_varint(out, u64::from(base));
    let (mut key, mut last) = (None, 0u32);
    for &p in pairs.iter() {
        let (k, b) = (p >> 32, p as u32);
        match key {
            Some(prev) if prev == k => {
                if b != last {
                    put_varint(out, u64::from(b - last));
                    last = b;
                }
            }
            _ => {
                if let Some(prev) = key {
                    out.push(0);
                    put_varint(out, k - prev);
                } else {
                    put_varint(out, k);
                }
                put_varint(out, u64::from(b - base));
                key = Some(k);
                last = b;
            }
        }
    }
    out.push(0);
}

/// Reads encoded runs key by key.
pub(super) struct RunCursor<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    pub(super) base: u64,
    pub(super) key: u64,
}

impl<'a> RunCursor<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> RunCursor<'a> {
        let mut pos = 0;
        let base = get_varint(bytes, &mut pos).unwrap_or(0);
        RunCursor { bytes, pos, base, key: 0 }
    }

    /// The next key and its first block; the cursor is then at its differences.
    pub(super) fn next_key(&mut self) -> Option<(u64, u64)> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let dk = get_varint(self.bytes, &mut self.pos)?;
        self.key += dk; // the first key of a run is its difference to 0
        let b = get_varint(self.bytes, &mut self.pos)?;
        Some((self.key, self.base + b))
    }

    /// The current key's block differences (encoded) and their sum; the
    /// cursor is then past the key's 0 byte.
    pub(super) fn differences(&mut self) -> (&'a [u8], u64) {
        let start = self.pos;
        let mut sum = 0;
        loop {
            match get_varint(self.bytes, &mut self.pos) {
                Some(0) | None => break,
                Some(d) => sum += d,
            }
        }
        let end = self.pos.saturating_sub(1).max(start);
        (&self.bytes[start..end], sum)
    }
}

/// Empties `v`; shrinks it to twice the elements it held when it holds more
/// than four times that and more than 1 MiB.
pub(super) fn trim<T>(v: &mut Vec<T>) {
    let used = v.len();
    v.clear();
    let size = std::mem::size_of::<T>().max(1);
    if v.capacity() * size > 1 << 20 && v.capacity() > 4 * used {
        v.shrink_to(2 * used);
    }
}
