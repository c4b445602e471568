//! AF_PACKET transmit: a packet socket bound to one interface that sends whole link-layer frames
//! in batches with one `sendmmsg(2)` per batch, bypassing the qdisc (`PACKET_QDISC_BYPASS`), and
//! the monotonic clock a sender paces itself by.
//!
//! # Why sendmmsg and not PACKET_TX_RING
//!
//! Both were considered for `wirevault replay`; the ring was not built, so this choice rests on
//! the reasons below, not on a measurement of the ring. A TX ring saves the copy of each frame into an
//! skb only with `PACKET_QDISC_BYPASS` *and* a driver that sends from the ring's pages; the
//! kernel still builds one skb per frame and veth (the test and bench link) copies nothing
//! either way. The ring also hides which frame failed and why (`TP_STATUS_WRONG_FORMAT` says
//! only "something was wrong", and a frame the driver refuses stops the whole flush), and every
//! slot must be as large as the largest frame (a 9000-byte MTU makes a 16 KiB slot per 60-byte
//! frame). `sendmmsg` gives one system call per batch (64 frames), an exact error per frame, and
//! no slot size; the qdisc is bypassed the same way (`packet_direct_xmit`). The bench
//! (`bench/replay.sh`) compares it with tcpreplay on the same veth.
//!
//! # The socket
//!
//! Bound with protocol 0, the socket receives nothing (no receive hook is registered), so the
//! frames it sends are not copied back to it. The kernel takes the frame's protocol from its
//! Ethernet header (`packet_parse_headers`).

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};

use super::{packet_socket, setsockopt, Error};
use crate::netif;

/// The most frames one [`TxSocket::send`] call hands to the kernel (`UIO_MAXIOV` is 1024).
pub const MAX_BATCH: usize = 256;

/// Send buffer asked for: room for a batch of jumbo frames in flight (the kernel caps it at
/// `wmem_max` without CAP_NET_ADMIN; `SO_SNDBUFFORCE` is tried first).
const SNDBUF: libc::c_int = 4 << 20;

/// A packet socket that sends frames out of one interface. See the module documentation.
#[derive(Debug)]
pub struct TxSocket {
    fd: OwnedFd,
    ifname: String,
    /// Reused for every batch: no allocation per call.
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

// SAFETY: the raw pointers in `msgs`/`iovs` are only filled and used inside one `send` call (they
// point into the caller's buffer for its duration); between calls they are stale and never read.
unsafe impl Send for TxSocket {}

impl TxSocket {
    /// Opens a socket that sends on `ifname`. Fails with `NoSuchInterface`, `InterfaceDown`,
    /// `PermissionDenied` (no CAP_NET_RAW) or `Os`.
    pub fn open(ifname: &str) -> Result<TxSocket, Error> {
        let ifindex = netif::ifindex(ifname)?;
        if !netif::is_up(ifname)? {
            return Err(Error::InterfaceDown(ifname.to_owned()));
        }
        let fd = packet_socket()?;
        let raw = fd.as_raw_fd();
        setsockopt(raw, libc::SOL_PACKET, PACKET_QDISC_BYPASS, &(1 as libc::c_int), "bypassing the qdisc")?;
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &SNDBUF, "sizing the send buffer").is_err() {
            setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &SNDBUF, "sizing the send buffer")?;
        }
        // SAFETY: `sockaddr_ll` is a plain C struct; all-zero bytes are a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = 0; // receive nothing
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: a valid sockaddr_ll and its exact size.
        let rc = unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(Error::os("binding the sending socket to the interface"));
        }
        Ok(TxSocket {
            fd,
            ifname: ifname.to_owned(),
            msgs: Vec::with_capacity(MAX_BATCH),
            iovs: Vec::with_capacity(MAX_BATCH),
        })
    }

    /// The interface this socket sends on.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Sends the frames `buf[start..end]` for each span, in order, with one `sendmmsg` (at most
    /// [`MAX_BATCH`] spans are taken). `Ok(n)`: the first `n` frames went to the driver (n ≥ 1,
    /// or 0 for no spans); `Err(e)`: the first frame was refused with `e` and nothing was sent.
    /// The caller retries the rest (a refusal after the first frame ends the batch early
    /// without its error; sending from that frame again reports it).
    pub fn send(&mut self, buf: &[u8], spans: &[(usize, usize)]) -> io::Result<usize> {
        let spans = &spans[..spans.len().min(MAX_BATCH)];
        if spans.is_empty() {
            return Ok(0);
        }
        self.iovs.clear();
        for &(s, e) in spans {
            let frame = &buf[s..e];
            self.iovs.push(libc::iovec { iov_base: frame.as_ptr().cast_mut().cast(), iov_len: frame.len() });
        }
        self.msgs.clear();
        for iov in self.iovs.iter_mut() {
            // SAFETY: `msghdr` is a plain C struct; all-zero bytes are a valid value (no address,
            // no control data).
            let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
            hdr.msg_iov = iov;
            hdr.msg_iovlen = 1;
            self.msgs.push(libc::mmsghdr { msg_hdr: hdr, msg_len: 0 });
        }
        loop {
            // SAFETY: `msgs` holds `len` valid headers, each pointing at one iovec of `iovs` that
            // points into `buf`, all alive and unchanged for the call; the kernel only reads the
            // frames and writes `msg_len`.
            let rc = unsafe {
                libc::sendmmsg(self.fd.as_raw_fd(), self.msgs.as_mut_ptr(), self.msgs.len() as libc::c_uint, 0)
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// `PACKET_QDISC_BYPASS` (linux/if_packet.h): hand frames straight to the driver.
const PACKET_QDISC_BYPASS: libc::c_int = 20;

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock `std::time::Instant` uses; never steps).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid, exclusively borrowed timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `CLOCK_MONOTONIC` reads `t_ns` (an absolute deadline: `clock_nanosleep` with
/// `TIMER_ABSTIME`, so the time spent before the call does not add to the wait). Returns early
/// on a signal.
pub fn sleep_until_ns(t_ns: u64) {
    let ts = libc::timespec { tv_sec: (t_ns / 1_000_000_000) as libc::time_t, tv_nsec: (t_ns % 1_000_000_000) as _ };
    // SAFETY: a valid timespec; the remainder pointer may be null with TIMER_ABSTIME.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_moves_and_sleep_reaches_its_deadline() {
        let t0 = monotonic_ns();
        sleep_until_ns(t0 + 2_000_000);
        let t1 = monotonic_ns();
        assert!(t1 >= t0 + 2_000_000, "woke at +{} ns", t1 - t0);
        // A deadline in the past returns at once.
        sleep_until_ns(t0);
    }

    #[test]
    fn missing_interface_is_named() {
        match TxSocket::open("wv-no-such-if0") {
            Err(Error::NoSuchInterface(n)) => assert_eq!(n, "wv-no-such-if0"),
            other => panic!("{other:?}"),
        }
    }
}
