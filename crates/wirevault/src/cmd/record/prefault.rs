//! The part of the arenas faulted in after capture has started.
//!
//! An arena's first [`Tuning::arena_first`](super::plan::Tuning) bytes are
//! faulted in before capture starts, the rest by one thread of its own at
//! background priority (`SCHED_BATCH`, nice 19), 8 MiB at a time, each
//! arena in the order its capture thread will reach it and the arenas in
//! turn. A large arena then costs seconds of CPU after start-up, on a core
//! nobody else needs much, instead of delaying the start; a burst that
//! overtakes the thread in its first lap faults its pages itself (correct,
//! slower). Once an arena is whole its writer registers it with io_uring
//! (`WriterConfig::arena_faulted`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
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
}

impl Progress {
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

impl Prefault {
    /// Starts the thread over `rests` (each with the flag its writer waits for); with none,
    /// there is no thread.
    pub fn start(rests: Vec<(Unfaulted, Arc<AtomicBool>)>) -> Prefault {
        let progress = Arc::new(Progress::default());
        if rests.is_empty() {
            return Prefault { progress, thread: None };
        }
        let p = progress.clone();
        let thread = std::thread::Builder::new().name("wv-prefault".into()).spawn(move || {
            wv_sys::cpu::background_priority_current_thread();
            let cpu0 = wv_sys::cpu::thread_cpu_ns();
            let mut rests: Vec<_> = rests.into_iter().map(Some).collect();
            // One step of each arena in turn, until all are whole.
            'all: while rests.iter().any(Option::is_some) {
                for slot in rests.iter_mut() {
                    let Some((rest, whole)) = slot.as_mut() else { continue };
                    if p.stop.load(Ordering::Relaxed) {
                        break 'all;
                    }
                    match rest.step(STEP) {
                        Ok(0) => {
                            whole.store(true, Ordering::Release);
                            *slot = None;
                        }
                        Ok(n) => {
                            p.bytes.fetch_add(n as u64, Ordering::Relaxed);
                            p.cpu_ns.store(wv_sys::cpu::thread_cpu_ns() - cpu0, Ordering::Relaxed);
                        }
                        Err(e) => {
                            *p.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                                "the arena could not be faulted in beyond {} MiB ({e}): the memory it needs may not be there, and capture may be killed for it once it gets there; record with a smaller --buffer",
                                p.bytes.load(Ordering::Relaxed) >> 20
                            ));
                            break 'all;
                        }
                    }
                }
            }
            p.cpu_ns.store(wv_sys::cpu::thread_cpu_ns() - cpu0, Ordering::Relaxed);
        });
        match thread {
            Ok(t) => Prefault { progress, thread: Some(t) },
            // No thread: the pages fault in as capture reaches them.
            Err(_) => Prefault { progress, thread: None },
        }
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

impl Drop for Prefault {
    /// A recording that ends early (an error after the thread started) stops it too.
    fn drop(&mut self) {
        self.progress.stop.store(true, Ordering::Relaxed);
    }
}
