//! The part of the arenas faulted in after capture has started.
//!
//! An arena's first [`Tuning::arena_first`](super::plan::Tuning) bytes are
//! faulted in before capture starts, the rest by one thread of its own, at
//! the lowest priority (`SCHED_IDLE`), 64 MiB at a time, in the order the
//! capture threads will reach them. A large arena then costs seconds of CPU
//! after start-up, on a core nobody else wants, instead of delaying the
//! start; a burst that overtakes the thread in its first lap faults its
//! pages itself (correct, slower). Once an arena is whole its writer
//! registers it with io_uring (`WriterConfig::arena_faulted`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use wv_sys::mem::Unfaulted;

/// How far the thread has come (read by `stats.json`).
#[derive(Default)]
pub struct Progress {
    /// Bytes it faulted in.
    pub bytes: AtomicU64,
    /// Its CPU time (ns).
    pub cpu_ns: AtomicU64,
    /// Why it stopped early (the kernel refused: a memory limit).
    error: std::sync::Mutex<Option<String>>,
    stop: AtomicBool,
}

/// The thread, and what it reports.
pub struct Prefault {
    pub progress: Arc<Progress>,
    thread: Option<JoinHandle<()>>,
}

/// Bytes faulted in per step (between looks at the stop flag).
const STEP: usize = 64 << 20;

impl Prefault {
    /// Starts the thread over `rests` (each with the flag its writer waits for); none: nothing
    /// to do, `done` already.
    pub fn start(rests: Vec<(Unfaulted, Arc<AtomicBool>)>) -> Prefault {
        let progress = Arc::new(Progress::default());
        if rests.is_empty() {
            return Prefault { progress, thread: None };
        }
        let p = progress.clone();
        let thread = std::thread::Builder::new()
            .name("wv-prefault".into())
            .spawn(move || {
                wv_sys::cpu::idle_priority_current_thread();
                let cpu0 = wv_sys::cpu::thread_cpu_ns();
                'all: for (mut rest, whole) in rests {
                    loop {
                        if p.stop.load(Ordering::Relaxed) {
                            break 'all;
                        }
                        match rest.step(STEP) {
                            Ok(0) => break,
                            Ok(n) => {
                                p.bytes.fetch_add(n as u64, Ordering::Relaxed);
                                p.cpu_ns.store(wv_sys::cpu::thread_cpu_ns() - cpu0, Ordering::Relaxed);
                            }
                            Err(e) => {
                                *p.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                                    "the rest of the arena could not be faulted in ahead of capture ({e}); capture faults its pages itself, slower; lower --buffer"
                                ));
                                break 'all;
                            }
                        }
                    }
                    whole.store(true, Ordering::Release);
                }
                p.cpu_ns.store(wv_sys::cpu::thread_cpu_ns() - cpu0, Ordering::Relaxed);
            });
        match thread {
            Ok(t) => Prefault { progress, thread: Some(t) },
            // No thread: the pages fault in as capture reaches them.
            Err(_) => Prefault { progress, thread: None },
        }
    }

    /// Stops the thread (within one step), waits for it, and says why it gave up early if it did.
    pub fn stop(mut self) -> Option<String> {
        self.progress.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.progress.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}
