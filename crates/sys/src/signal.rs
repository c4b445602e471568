//! Holding signals back while a program sets itself up.
//!
//! A signal whose handler is not installed yet takes its default action:
//! for SIGINT or SIGTERM that ends the process at once. A command that stops
//! cleanly on those signals installs its handlers only after parsing its
//! arguments, so a signal sent in between would kill it. [`Held::block`]
//! blocks them on the calling thread from the first line of `main`: a
//! signal sent meanwhile stays pending, and is delivered when the hold ends,
//! to the handler installed by then or, if none was, to the default action.

use std::io;
use std::marker::PhantomData;

/// Signals blocked on the thread that created it; dropping it restores that
/// thread's previous mask (pending signals are then delivered). The mask
/// belongs to a thread, so a `Held` cannot leave it (it is not `Send`).
pub struct Held {
    previous: libc::sigset_t,
    _thread: PhantomData<*const ()>,
}

impl Held {
    /// Blocks `signals` on the calling thread. Threads it starts while the
    /// hold lasts inherit the blocked mask; a process-directed signal then
    /// waits for a thread that does not block it.
    pub fn block(signals: &[libc::c_int]) -> io::Result<Held> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it below.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t owned by this frame.
        unsafe { libc::sigemptyset(&mut set) };
        for &s in signals {
            // SAFETY: as above; an invalid signal number returns -1.
            if unsafe { libc::sigaddset(&mut set, s) } != 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{s} is not a signal number")));
            }
        }
        // SAFETY: both pointers are valid sigset_t; this changes only the
        // calling thread's mask.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut previous) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(Held { previous, _thread: PhantomData })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: `previous` is the mask pthread_sigmask returned on this
        // same thread (Held is not Send).
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `signal` is pending on the calling thread or its process.
    fn pending(signal: libc::c_int) -> bool {
        // SAFETY: plain data, initialised by sigpending.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid sigset_t pointer.
        if unsafe { libc::sigpending(&mut set) } != 0 {
            return false;
        }
        // SAFETY: a valid, initialised sigset_t.
        unsafe { libc::sigismember(&set, signal) == 1 }
    }

    #[test]
    fn a_held_signal_waits_and_the_mask_comes_back() {
        // Thread-directed, on a thread of its own: nothing else in the test
        // binary sees SIGUSR2.
        std::thread::spawn(|| {
            let held = Held::block(&[libc::SIGUSR2]).unwrap();
            // SAFETY: sends SIGUSR2 to this thread only, which blocks it.
            unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR2) };
            assert!(pending(libc::SIGUSR2), "a blocked signal stays pending");
            // Ignoring a pending signal discards it, so that ending the hold
            // does not end the test binary.
            // SAFETY: sets SIGUSR2's disposition to SIG_IGN; nothing else uses it.
            unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
            assert!(!pending(libc::SIGUSR2));
            drop(held);
            // SAFETY: reads only the calling thread's mask.
            let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: a null new set only queries the mask.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now) };
            // SAFETY: a valid, initialised sigset_t.
            assert_eq!(unsafe { libc::sigismember(&now, libc::SIGUSR2) }, 0, "the hold ended");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_bad_signal_number_is_refused() {
        assert!(Held::block(&[10_000]).is_err());
    }
}
