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

/// Moves `len` bytes of `from` at offset `off` into the pipe `to` with
/// splice(2), without copying them through user space; loops on short
/// splices. Returns the bytes moved: fewer than `len` only when `from` ends
/// first. On an error (EINVAL, ENOSYS: this pair cannot be spliced) the
/// bytes already moved are in `moved`, for the caller to send the rest.
pub fn splice_file(from: &std::fs::File, off: u64, len: u64, to: &impl AsRawFd, moved: &mut u64) -> io::Result<()> {
    *moved = 0;
    while *moved < len {
        let mut o = (off + *moved) as libc::loff_t;
        let want = (len - *moved).min(1 << 30) as usize;
        // SAFETY: both fds are open for the call (borrowed); `o` is a live
        // loff_t the kernel reads and updates; no other memory is touched.
        let r = unsafe {
            libc::splice(from.as_raw_fd(), &mut o, to.as_raw_fd(), std::ptr::null_mut(), want, libc::SPLICE_F_MOVE)
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            break;
        }
        *moved += r as u64;
    }
    Ok(())
}

/// Opens `path` for reading without waiting for a writer when it is a FIFO:
/// open(2) of a FIFO waits until one comes, and no signal ends that wait
/// (the handlers restart it), so Ctrl-C could not stop a recording that
/// waits for its input. The file is switched back to blocking reads; a
/// caller that must stay stoppable waits with [`readable`] before it reads
/// (a FIFO that no writer has opened yet reads as ended).
pub fn open_read_now(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    crate::fs::clear_nonblock(f.as_raw_fd())?;
    Ok(f)
}

/// Waits at most `timeout` for `fd` to have something to read: data, or an
/// end (its writers gone, an error). False when the time ran out or a
/// signal came first.
pub fn readable(fd: &impl AsRawFd, timeout: std::time::Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one live pollfd, its count 1.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(r > 0)
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

    #[test]
    fn splices_a_file_range_into_a_pipe() {
        use std::io::{Read, Write};
        let dir = std::env::temp_dir().join(format!("wv-splice-{}", std::process::id()));
        let mut f = std::fs::File::create(&dir).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        f.write_all(&data).unwrap();
        let f = std::fs::File::open(&dir).unwrap();
        let mut fds = [0; 2];
        // SAFETY: pipe writes two fds into the array we own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both fds are ours, open, and closed only by these Files.
        let (mut r, w) = unsafe {
            use std::os::fd::FromRawFd;
            (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1]))
        };
        let t = std::thread::spawn(move || {
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            got
        });
        let mut moved = 0;
        splice_file(&f, 10, 250_000, &w, &mut moved).unwrap();
        assert_eq!(moved, 250_000);
        drop(w);
        assert_eq!(t.join().unwrap(), &data[10..250_010]);
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn a_fifo_opens_at_once_and_waits_for_its_writer_in_readable() {
        use std::io::{Read, Write};
        use std::time::Duration;
        let dir = std::env::temp_dir().join(format!("wv-pipe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mut r = open_read_now(&path).unwrap();
        // No writer yet: nothing to read, and the wait ends by its timeout.
        assert!(!readable(&r, Duration::from_millis(50)).unwrap());
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        w.write_all(b"abc").unwrap();
        assert!(readable(&r, Duration::from_secs(5)).unwrap());
        let mut buf = [0u8; 8];
        assert_eq!(r.read(&mut buf).unwrap(), 3, "reads block again, and return the data");
        drop(w);
        assert!(readable(&r, Duration::from_secs(5)).unwrap(), "the writer gone reads as the end");
        assert_eq!(r.read(&mut buf).unwrap(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
