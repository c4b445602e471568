//! The arenas' memory faulted in ahead of need.
//!
//! An arena's blocks are taken lowest first (`wv_sys::byte_ring`), so a disk that keeps up
//! reuses its first few blocks and the rest is never touched. Only its first
//! [`Tuning::arena_first`](crate::Tuning) bytes are faulted in before capture starts;
//! one thread of its own, at background priority (`SCHED_BATCH`, nice 19), keeps every arena
//! faulted in ahead of its high-water mark (the blocks ever taken) by as much again, and at
//! least [`AHEAD_MIN`] blocks: the memory is paid for as the backlog grows, twice as far as
//! it has reached. A backlog that gains on the thread raises it to normal priority until it
//! is ahead again; one that outruns it faults its pages itself (correct, slower). A large
//! default arena then costs nothing on a disk that keeps up.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wv_sys::byte_ring::Gauge;
use wv_sys::mem::Unfaulted;

/// How far the thread has come (read by `stats.json`).
#[derive(Default)]
pub struct Progress {
    /// Bytes it faulted in.
    pub bytes: AtomicU64,
    /// Its CPU time (ns).
    pub cpu_ns: AtomicU64,
    /// Why it stopped early (the kernel refused: a memory limit), until said.
    error: Mutex<Option<String>>,
    stop: AtomicBool,
    /// The arenas it keeps ahead of need: what is left of each, and its use.
    arenas: Mutex<Vec<(Option<Unfaulted>, Gauge)>>,
}

impl Progress {
    /// The arenas' high-water marks, summed: bytes of them ever written.
    pub fn used(&self) -> u64 {
        self.arenas.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(_, g)| g.high_water()).sum()
    }

    /// Why the thread gave up, once (the status loop says it as soon as it happens).
    pub fn take_error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The thread, and what it reports.
pub struct Prefault {
    pub progress: Arc<Progress>,
    thread: Option<JoinHandle<()>>,
}

/// Bytes faulted in per step: between looks at the stop flag, and the longest the memory
/// map's lock is held at a time.
const STEP: usize = 8 << 20;
/// Blocks kept faulted in beyond the high-water mark, at least.
const AHEAD_MIN: u64 = 4;
/// How often the thread looks at the high-water marks: 50 wake-ups a second (each a few
/// microseconds), while a disk that falls behind by 1 GB/s fills 20 MB meanwhile.
const LOOK: Duration = Duration::from_millis(20);

/// How far an arena whose blocks of `block` bytes were used up to `high` is kept faulted in.
fn target(high: u64, block: u64, cap: u64) -> u64 {
    (high + high.max(AHEAD_MIN * block)).min(cap)
}

impl Prefault {
    /// Starts the thread (it faults nothing until arenas are [`Prefault::add`]ed).
    pub fn start() -> Prefault {
        let progress = Arc::new(Progress::default());
        let p = progress.clone();
        let thread = std::thread::Builder::new().name("wv-prefault".into()).spawn(move || {
            let mut background = wv_sys::cpu::background_priority_current_thread();
            let cpu0 = wv_sys::cpu::thread_cpu_ns();
            while !p.stop.load(Ordering::Relaxed) {
                // Behind (see `is_behind`), it faults at normal priority: the pages must come
                // in either way, and capture would otherwise fault them itself. Back at
                // background priority once it is ahead again.
                let behind = p.is_behind();
                if behind == background {
                    background = if behind {
                        !wv_sys::cpu::normal_priority_current_thread()
                    } else {
                        wv_sys::cpu::background_priority_current_thread()
                    };
                }
                if let Err(e) = p.keep_ahead() {
                    *p.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                        "the arena could not be faulted in beyond {} MiB ({e}): the memory it needs may not be there, and capture may be killed for it once it gets there; record with a smaller --buffer",
                        p.bytes.load(Ordering::Relaxed) >> 20
                    ));
                    break;
                }
                p.cpu_ns.store(wv_sys::cpu::thread_cpu_ns() - cpu0, Ordering::Relaxed);
                std::thread::sleep(LOOK);
            }
            p.cpu_ns.store(wv_sys::cpu::thread_cpu_ns() - cpu0, Ordering::Relaxed);
        });
        // Without the thread, the pages fault in as capture reaches them.
        Prefault { progress, thread: thread.ok() }
    }

    /// Keeps `rest` (an arena's part not faulted in yet) ahead of the arena's use.
    pub fn add(&self, rest: Option<Unfaulted>, gauge: Gauge) {
        // `None`: faulted in whole (reserved hugepages), only its use is reported.
        self.progress.arenas.lock().unwrap_or_else(|e| e.into_inner()).push((rest, gauge));
    }

    /// Stops the thread (it looks at the flag between steps) and says why it gave up early if
    /// it did and that was not said yet. It is waited for up to a second: the recording's end
    /// must not wait for it (the thread holds the mappings it works on, and ends with the
    /// process).
    pub fn stop(mut self) -> Option<String> {
        self.progress.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + Duration::from_secs(1);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        self.progress.take_error()
    }
}

impl Progress {
    /// True when some arena's faulted part reaches less than half its high-water mark beyond
    /// it (the thread keeps it a whole one ahead): the backlog grows faster than the thread.
    fn is_behind(&self) -> bool {
        let arenas = self.arenas.lock().unwrap_or_else(|e| e.into_inner());
        arenas.iter().any(|(rest, gauge)| {
            rest.as_ref().is_some_and(|r| {
                let (high, faulted) = (gauge.high_water() as usize, r.faulted());
                r.left() > 0 && high > 0 && faulted.saturating_sub(high) < high / 2
            })
        })
    }

    /// One look: every arena faulted in up to its [`target`], 8 MiB at a time.
    fn keep_ahead(&self) -> std::io::Result<()> {
        let mut arenas = self.arenas.lock().unwrap_or_else(|e| e.into_inner());
        for (rest, gauge) in arenas.iter_mut() {
            let high = gauge.high_water();
            let Some(rest) = rest else { continue };
            let want = target(high, gauge.block_size(), gauge.capacity()) as usize;
            while rest.left() > 0 && rest.faulted() < want {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let n = rest.step(STEP.min(want - rest.faulted()))?;
                self.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

impl Drop for Prefault {
    /// A recording that ends early (an error after the thread started) stops it too.
    fn drop(&mut self) {
        self.progress.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_kept_ahead_of_the_backlog_by_as_much_again() {
        let (b, cap) = (4u64 << 20, 4u64 << 30);
        // A disk that keeps up: a block or two used, four more faulted in.
        assert_eq!(target(b, b, cap), 5 * b);
        assert_eq!(target(2 * b, b, cap), 6 * b);
        // A backlog: twice as far as it reached, never past the arena.
        assert_eq!(target(100 * b, b, cap), 200 * b);
        assert_eq!(target(cap - b, b, cap), cap);
    }
}
