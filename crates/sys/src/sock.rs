//! What the kernel knows of a TCP connection that std does not say: how
//! much of what was written to it the peer has not acknowledged yet. The
//! HTTP server tells a client that reads slowly (its TCP acknowledges
//! bytes, a window at a time) from one that stopped (nothing moves) by it;
//! the socket's writability alone does not, since the kernel wakes a writer
//! only once a third of its send buffer is free, which at 2 KB/s is minutes.

use std::io;
use std::os::fd::RawFd;

/// Bytes written to the TCP socket `fd` that its peer has not acknowledged
/// (sent or not): `SIOCOUTQ`, `snd_nxt`'s distance from `snd_una` plus the
/// unsent queue. A descriptor that is not a TCP socket is an error (EBADF,
/// ENOTTY, EINVAL), never undefined behaviour.
pub fn unacknowledged(fd: RawFd) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int through the pointer, which
    // points at `n`, alive and writable for the call; any descriptor number
    // is acceptable to the kernel (a wrong one fails with an errno).
    if unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(n).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn counts_what_the_peer_has_not_acknowledged() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        assert_eq!(super::unacknowledged(a.as_raw_fd()).unwrap(), 0);
        a.write_all(&[7; 1000]).unwrap();
        let mut got = [0u8; 1000];
        b.read_exact(&mut got).unwrap();
        // The data arrived: the ACK follows at once on loopback.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while super::unacknowledged(a.as_raw_fd()).unwrap() != 0 {
            assert!(std::time::Instant::now() < deadline, "never acknowledged");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // A peer that stops reading: what its window does not take waits
        // in the send queue, and leaves it as the peer reads.
        a.set_nonblocking(true).unwrap();
        let mut written = 0u64;
        loop {
            match a.write(&[1; 65536]) {
                Ok(n) => written += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let stuck = super::unacknowledged(a.as_raw_fd()).unwrap();
        assert!(stuck > 0 && stuck <= written, "{stuck} of {written}");
        let mut sink = vec![0u8; 1 << 20];
        let mut read = 0u64;
        while read < written {
            read += b.read(&mut sink).unwrap() as u64;
        }
        while super::unacknowledged(a.as_raw_fd()).unwrap() != 0 {
            assert!(std::time::Instant::now() < deadline, "never acknowledged");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(super::unacknowledged(-1).is_err());
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(super::unacknowledged(f.as_raw_fd()).is_err());
    }
}
