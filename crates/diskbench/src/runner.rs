//! Writes N files of S bytes the way the recorder's writer does, and times them.
//!
//! **Direct** (the recorder's path): each file is created with O_DIRECT
//! (`wv_sys::fs::Dir::create_output`, buffered where the file system refuses
//! it, as the recorder does), preallocated whole before its first write
//! (`wv_sys::fs::Prealloc`: in `prealloc_step` steps where that is refused),
//! its arena registered with the ring (`uring::Writer::register_arena`), and written with `block_size` writes
//! from an aligned arena (`wv_sys::byte_ring` over `wv_sys::mem::AlignedBuf`)
//! through an io_uring (`wv_sys::uring::Writer`) with `depth` writes in
//! flight; when the last write completed the file is `fsync`ed. The arena is
//! filled with pseudo-random bytes once, before the clock starts; per block
//! the producer only advances its head, so what is timed is the writer and
//! the disk, not a memory copy.
//!
//! **Buffered** (as `dd conv=fsync`): plain `write(2)` of `block_size` through
//! the page cache, then `fsync`.
//!
//! A file's time runs from its creation to the end of its `fsync`. The
//! per-second series counts the bytes whose write completed in each second
//! since the first file was created (buffered: whose `write(2)` returned);
//! only whole seconds are in it. Files are deleted at the end (and on error
//! or when `stop` is set) unless `keep`.

use crate::BenchError;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use wv_sys::byte_ring::{byte_ring_blocks, Consumer, Producer};
use wv_sys::fs::Dir;
use wv_sys::mem::{AlignedBuf, HUGE_PAGE};
use wv_sys::uring::{self, Completion};

/// How the files are written (`"direct"`, `"buffered"` in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// O_DIRECT and io_uring: the recorder's writer.
    Direct,
    /// write(2) through the page cache and a final fsync per file (dd).
    Buffered,
}

/// What to run (validated by the caller).
#[derive(Debug, Clone)]
pub struct Config {
    pub dir: PathBuf,
    pub files: u32,
    /// Bytes per file, a multiple of 4 KiB.
    pub file_size: u64,
    pub mode: Mode,
    /// Bytes per write, a multiple of 4 KiB.
    pub block_size: u64,
    /// Writes in flight (direct mode).
    pub depth: u32,
    /// Preallocation step (direct mode; 0 = none).
    pub prealloc_step: u64,
    /// Leave the files in place.
    pub keep: bool,
}

/// One file's result.
#[derive(Debug, Clone)]
pub struct FileResult {
    pub bytes: u64,
    /// From creation to the end of its fsync.
    pub seconds: f64,
}

impl FileResult {
    pub fn bytes_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9)
    }
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub files: Vec<FileResult>,
    /// Bytes completed in each whole second since the start.
    pub per_second: Vec<u64>,
    pub total_bytes: u64,
    /// Seconds from the first file's creation to the last fsync's end.
    pub elapsed: f64,
    /// O_DIRECT was used (false in buffered mode or where it was refused).
    pub direct: bool,
    /// The files left behind (`keep`).
    pub kept: Vec<PathBuf>,
}

/// The name of the `i`-th file (unique per process, so two runs in one
/// directory never meet).
pub fn file_name(i: u32) -> String {
    format!("wv-disk-bench-{}-{i:04}.dat", std::process::id())
}

/// Runs the benchmark. `progress` is called with the bytes completed so far.
pub fn run(cfg: &Config, stop: &AtomicBool, progress: &mut dyn FnMut(u64)) -> Result<Outcome, BenchError> {
    let dir = Dir::open(&cfg.dir).map_err(|e| BenchError::io(format!("cannot open {}", cfg.dir.display()), e))?;
    let mut created: Vec<String> = Vec::new();
    let result = run_in(cfg, &dir, &mut created, stop, progress);
    if cfg.keep && result.is_ok() {
        return result.map(|mut o| {
            o.kept = created.iter().map(|n| dir.display(n)).collect();
            o
        });
    }
    let mut cleanup_err = None;
    for name in &created {
        if let Err(e) = dir.unlink(name) {
            cleanup_err.get_or_insert(BenchError::io(format!("cannot remove {}", dir.display(name).display()), e));
        }
    }
    match (result, cleanup_err) {
        (Ok(_), Some(e)) => Err(e),
        (r, _) => r,
    }
}

/// Bytes completed per whole second since `t0`.
struct Series {
    t0: Instant,
    seconds: Vec<u64>,
    total: u64,
}

impl Series {
    fn add(&mut self, bytes: u64) {
        let s = self.t0.elapsed().as_secs() as usize;
        if self.seconds.len() <= s {
            self.seconds.resize(s + 1, 0);
        }
        self.seconds[s] += bytes;
        self.total += bytes;
    }

    /// Drops the last, partial second.
    fn whole_seconds(mut self, elapsed: f64) -> Vec<u64> {
        self.seconds.resize(elapsed.floor() as usize, 0);
        self.seconds
    }
}

fn run_in(
    cfg: &Config,
    dir: &Dir,
    created: &mut Vec<String>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, BenchError> {
    let mut direct_writer = match cfg.mode {
        Mode::Direct => Some(DirectWriter::new(cfg)?),
        Mode::Buffered => None,
    };
    let pattern = match cfg.mode {
        Mode::Buffered => pattern((BUFFERED_BLOCKS * cfg.block_size) as usize),
        Mode::Direct => Vec::new(),
    };
    let t0 = Instant::now();
    let mut series = Series { t0, seconds: Vec::new(), total: 0 };
    let mut files = Vec::with_capacity(cfg.files as usize);
    let mut used_direct = cfg.mode == Mode::Direct;
    for i in 0..cfg.files {
        if stop.load(Ordering::Relaxed) {
            return Err(BenchError::Interrupted);
        }
        let name = file_name(i);
        let started = Instant::now();
        let want_direct = cfg.mode == Mode::Direct;
        let (file, direct) = dir
            .create_output(&name, want_direct)
            .map_err(|e| BenchError::io(format!("cannot create {}", dir.display(&name).display()), e))?;
        created.push(name.clone());
        used_direct &= direct;
        let shown = dir.display(&name);
        match direct_writer.as_mut() {
            Some(w) => w.write_file(&file, direct, &shown, cfg, &mut series, stop, progress)?,
            None => write_buffered(&file, &shown, cfg, &pattern, &mut series, stop, progress)?,
        }
        file.sync_all().map_err(|e| BenchError::write(&shown, e))?;
        drop(file);
        files.push(FileResult { bytes: cfg.file_size, seconds: started.elapsed().as_secs_f64() });
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let total_bytes = series.total;
    Ok(Outcome {
        files,
        per_second: series.whole_seconds(elapsed),
        total_bytes,
        elapsed,
        direct: used_direct,
        kept: Vec::new(),
    })
}

/// Blocks of distinct bytes the buffered writer cycles through.
const BUFFERED_BLOCKS: u64 = 16;

/// Pseudo-random bytes (xorshift64*), never repeating within `len`:
/// incompressible, so neither a compressing, deduplicating nor
/// zero-detecting device (a VM's host storage) flatters the result. (A
/// 1 MiB pattern repeated through each 4 MiB block made this VM's disk look
/// 1.5 times faster than fio's random buffers.)
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    v.truncate(len);
    v
}

fn write_buffered(
    file: &File,
    shown: &Path,
    cfg: &Config,
    pattern: &[u8],
    series: &mut Series,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<(), BenchError> {
    let mut f = file;
    let mut off = 0;
    let mut at = 0;
    while off < cfg.file_size {
        if stop.load(Ordering::Relaxed) {
            return Err(BenchError::Interrupted);
        }
        let len = (cfg.file_size - off).min(cfg.block_size) as usize;
        if at + len > pattern.len() {
            at = 0;
        }
        f.write_all(&pattern[at..at + len]).map_err(|e| BenchError::write(shown, e))?;
        at += len;
        off += len as u64;
        series.add(len as u64);
        progress(series.total);
    }
    Ok(())
}

/// The recorder's write path: an arena of `slots` blocks, an io_uring of
/// `depth`, writes released from the arena in stream order.
struct DirectWriter {
    producer: Producer,
    consumer: Consumer,
    io: uring::Writer,
    /// Stream position and length of each write in flight, oldest first,
    /// with whether it completed.
    pending: VecDeque<(u64, u64, bool)>,
    /// Sequence number of `pending[0]`.
    pending_base: u64,
    completions: Vec<Completion>,
}

impl DirectWriter {
    fn new(cfg: &Config) -> Result<DirectWriter, BenchError> {
        // Twice the writes in flight, in whole blocks, and a whole number of
        // 2 MiB pages (AlignedBuf's unit) so that no block wraps the ring.
        let unit = HUGE_PAGE as u64 / gcd(cfg.block_size, HUGE_PAGE as u64);
        let slots = (2 * u64::from(cfg.depth)).next_multiple_of(unit);
        let len = slots * cfg.block_size;
        let buf = AlignedBuf::new(len as usize, true).map_err(|e| BenchError::io("cannot allocate the arena", e))?;
        // One arena block per write.
        let (mut producer, mut consumer) = byte_ring_blocks(buf, cfg.block_size);
        // Distinct bytes in every block of the arena (see `pattern`).
        producer.write(&pattern(consumer.capacity() as usize));
        producer.publish();
        consumer.release(producer.head());
        let mut io = uring::Writer::new(cfg.depth.max(2)).map_err(|e| BenchError::io("cannot set up io_uring", e))?;
        // As the recorder's writer: the arena pinned once (plain writes where refused).
        let blocks = (consumer.capacity() / consumer.block_size()) as u32;
        let _ = io.register_arena(&consumer, blocks);
        Ok(DirectWriter { producer, consumer, io, pending: VecDeque::new(), pending_base: 0, completions: Vec::new() })
    }

    #[allow(clippy::too_many_arguments)]
    fn write_file(
        &mut self,
        file: &File,
        direct: bool,
        shown: &Path,
        cfg: &Config,
        series: &mut Series,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), BenchError> {
        let mut off = 0u64;
        let mut prealloc = wv_sys::fs::Prealloc::new(direct);
        while off < cfg.file_size {
            if stop.load(Ordering::Relaxed) {
                self.drain(shown, series)?;
                return Err(BenchError::Interrupted);
            }
            while self.io.in_flight() >= cfg.depth as usize || !self.producer.has_room(cfg.block_size) {
                self.reap(1, shown, series)?;
                progress(series.total);
            }
            let len = (cfg.file_size - off).min(cfg.block_size);
            // As the writer: the whole file at once, steps where that is refused.
            prealloc.ensure(file, off + len, cfg.file_size, cfg.prealloc_step);
            // The block's bytes are already in the arena: advance the head
            // over one block and publish it.
            let start = self.producer.head();
            self.producer.write(&[0xa5]);
            self.producer.pad_to(cfg.block_size);
            self.producer.publish();
            let id = self.pending_base + self.pending.len() as u64;
            self.io
                .write_ring(file, &self.consumer, start, len as u32, off, id << 32 | len)
                .map_err(|e| BenchError::write(shown, e))?;
            self.pending.push_back((start, len, false));
            off += len;
        }
        self.drain(shown, series)?;
        progress(series.total);
        Ok(())
    }

    fn drain(&mut self, shown: &Path, series: &mut Series) -> Result<(), BenchError> {
        while self.io.in_flight() > 0 {
            self.reap(self.io.in_flight(), shown, series)?;
        }
        Ok(())
    }

    /// Waits for at least `min` completions, counts them and releases the
    /// arena up to the oldest write still in flight.
    fn reap(&mut self, min: usize, shown: &Path, series: &mut Series) -> Result<(), BenchError> {
        self.completions.clear();
        self.io.wait(min, &mut self.completions).map_err(|e| BenchError::io("io_uring wait failed", e))?;
        let mut failed = None;
        for c in &self.completions {
            let (id, len) = (c.user_data >> 32, c.user_data & 0xffff_ffff);
            if let Some(p) = id.checked_sub(self.pending_base).and_then(|i| self.pending.get_mut(i as usize)) {
                p.2 = true;
            }
            if c.result < 0 {
                failed.get_or_insert(io::Error::from_raw_os_error(-c.result));
            } else if (c.result as u64) < len {
                failed.get_or_insert(io::Error::from_raw_os_error(libc::ENOSPC));
            } else {
                series.add(len);
            }
        }
        while self.pending.front().is_some_and(|p| p.2) {
            let (start, _, _) = self.pending.pop_front().unwrap_or_default();
            self.pending_base += 1;
            let next = self.pending.front().map_or(self.producer.head(), |p| p.0);
            self.consumer.release(next.max(start));
        }
        match failed {
            Some(e) => {
                // Nothing may be left in flight on a file that is about to be closed.
                while self.io.in_flight() > 0 {
                    self.completions.clear();
                    if self.io.wait(self.io.in_flight(), &mut self.completions).is_err() {
                        break;
                    }
                }
                Err(BenchError::write(shown, e))
            }
            None => Ok(()),
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path, mode: Mode) -> Config {
        Config {
            dir: dir.to_path_buf(),
            files: 3,
            file_size: (1 << 20) + 12 * 4096,
            mode,
            block_size: 256 << 10,
            depth: 4,
            prealloc_step: 512 << 10,
            keep: true,
        }
    }

    /// Every file holds exactly the bytes asked for, all of them the
    /// pattern's (no block of zeros or of an unpublished arena region), and
    /// the counts add up; without `keep` nothing is left.
    #[test]
    fn files_are_written_whole_and_removed() {
        for mode in [Mode::Direct, Mode::Buffered] {
            let dir = std::env::temp_dir().join(format!("wv-diskbench-{}-{mode:?}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let c = cfg(&dir, mode);
            let stop = AtomicBool::new(false);
            let mut last = 0;
            let out = run(&c, &stop, &mut |b| last = b).unwrap();
            assert_eq!(out.files.len(), 3);
            assert_eq!(out.total_bytes, 3 * c.file_size);
            assert_eq!(last, out.total_bytes);
            assert_eq!(out.kept.len(), 3);
            let bytes = pattern((BUFFERED_BLOCKS * c.block_size) as usize);
            for p in &out.kept {
                let data = std::fs::read(p).unwrap();
                assert_eq!(data.len() as u64, c.file_size, "{mode:?}");
                if mode == Mode::Buffered {
                    let period = bytes.len();
                    assert!(data.chunks(period).all(|ch| ch == &bytes[..ch.len()]));
                }
                // Incompressible: no 4 KiB page of the file is all zeros.
                assert!(data.chunks(4096).all(|pg| pg.iter().any(|&b| b != 0)), "{mode:?}: a zero page");
            }
            let mut c2 = c.clone();
            c2.keep = false;
            for p in &out.kept {
                std::fs::remove_file(p).unwrap();
            }
            let out2 = run(&c2, &stop, &mut |_| {}).unwrap();
            assert!(out2.kept.is_empty());
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files left behind");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_stop_removes_what_was_written() {
        let dir = std::env::temp_dir().join(format!("wv-diskbench-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = cfg(&dir, Mode::Direct);
        c.keep = true; // even with --keep, an interrupted run leaves nothing
        let stop = AtomicBool::new(false);
        let r = run(&c, &stop, &mut |b| {
            if b >= c.file_size {
                stop.store(true, Ordering::Relaxed)
            }
        });
        assert!(matches!(r, Err(BenchError::Interrupted)), "{r:?}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn series_keeps_whole_seconds_only() {
        let s = Series { t0: Instant::now(), seconds: vec![5, 6, 7], total: 18 };
        assert_eq!(s.whole_seconds(2.4), vec![5, 6]);
        let s = Series { t0: Instant::now(), seconds: vec![5], total: 5 };
        assert_eq!(s.whole_seconds(3.0), vec![5, 0, 0]);
    }
}
