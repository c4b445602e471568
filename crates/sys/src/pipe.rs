//! Pipes: a query writing pcap into `| tcpdump -r -` or `| cat` moves
//! gigabytes through a pipe whose default capacity (64 KiB) makes writer and
//! reader wake each other 16 times per MiB. A larger pipe halves the time.

use std::io;
use std::os::fd::AsRawFd;

/// Largest pipe size an unprivileged process may set (`/proc/sys/fs/pipe-max-size`).
pub fn max_size() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/fs/pipe-max-size").ok()?.trim().parse().ok()
}

/// Grows the pipe `fd` to at most `want` bytes (and at most the system's
/// `pipe-max-size`); returns its capacity afterwards. A refusal (EPERM when
/// the user's pipe buffers are at their limit) leaves the pipe as it was.
pub fn grow(fd: &impl AsRawFd, want: usize) -> io::Result<usize> {
    let size = want.min(max_size().unwrap_or(1 << 20)).min(i32::MAX as usize) as libc::c_int;
    // SAFETY: F_SETPIPE_SZ/F_GETPIPE_SZ take an int argument and touch no memory of ours.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, size) };
    if r >= 0 {
        return Ok(r as usize);
    }
    // SAFETY: as above.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_a_pipe_up_to_the_system_limit() {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two fds into the array we own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both fds are ours, open, and closed only by these Files.
        let (r, w) = unsafe {
            use std::os::fd::FromRawFd;
            (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1]))
        };
        let max = max_size().unwrap();
        let got = grow(&w, 1 << 20).unwrap();
        assert_eq!(got, (1 << 20).min(max).max(65536));
        drop(r);
    }
}
