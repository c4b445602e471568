//! AF_PACKET capture: a TPACKET_V3 memory-mapped receive ring per capture worker, fanout groups
//! to spread an interface over several rings, and an exact counter of filter-rejected packets.
//!
//! # The ring
//!
//! A TPACKET_V3 ring is `block_count` blocks of `block_size` bytes shared with the kernel. The
//! kernel fills one block at a time with packets (each a `tpacket3_hdr` followed by the frame) and
//! hands it to user space by setting the block's status word to `TP_STATUS_USER`, either when the
//! block is full or when `retire_tov_ms` passed since it was opened. User space reads the block
//! and hands it back by writing `TP_STATUS_KERNEL`. Blocks are handed over strictly in ring order,
//! so user space only ever has to look at one block: the next one.
//!
//! The status word is the only synchronisation: the kernel writes the packets, issues a write
//! barrier (`smp_wmb`) and then stores `TP_STATUS_USER`; we load the status with `Acquire`, so the
//! packets are visible once we see it. When we are done we store `TP_STATUS_KERNEL` with
//! `Release`, so our reads of the block happen before the kernel may overwrite it.
//!
//! # Set-up order
//!
//! A packet socket created with protocol 0 receives nothing until it is bound with a protocol, so
//! everything that shapes what arrives (version, ring, filter) is configured first and `bind`
//! comes last. Joining a fanout group needs a bound socket, so a socket that joins one is bound
//! with a drop-all filter and gets its real filter only once it is in the group: otherwise, for a
//! moment, it would receive *every* packet alongside the group and store some packets twice.
//!
//! # Loopback
//!
//! On a loopback device the kernel shows a packet socket every packet twice: once leaving
//! (`PACKET_OUTGOING`) and once arriving. libpcap drops the outgoing copy, so `tcpdump -i lo`
//! shows each packet once. The ring does the same in the kernel with `PACKET_IGNORE_OUTGOING`
//! (`PACKET_FANOUT_FLAG_IGNORE_OUTGOING` for a fanout group), and so does [`FilteredCounter`].

use std::io;
use std::marker::PhantomData;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::bpf;
pub use crate::error::Error;

mod block;
mod held;
/// Sending frames (`wirevault replay`): sendmmsg batches with qdisc bypass, the monotonic clock.
pub mod tx;
use crate::netif;
pub use block::{Block, Frames, Rewritten, ZcRecord};
pub use held::{BlockId, BlockWriter, Next, WriteDone};

/// How a fanout group spreads packets over its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanoutMode {
    /// By flow hash (`PACKET_FANOUT_HASH`): both directions of a connection go to the same ring.
    ///
    /// `PACKET_FANOUT_FLAG_DEFRAG` is deliberately *not* set: with it the kernel reassembles IPv4
    /// fragments before the fanout and the ring receives the reassembled datagram instead of the
    /// fragments that were on the wire (and nothing at all for an incomplete set), which a
    /// lossless recorder must not do. Without it, all fragments of a datagram still hash alike
    /// (addresses and protocol only), though possibly to a different ring than the flow's
    /// unfragmented packets.
    Hash,
    /// By the CPU that received the packet (`PACKET_FANOUT_CPU`); pairs with RSS and IRQ affinity.
    Cpu,
    /// Round robin (`PACKET_FANOUT_LB`); splits flows.
    Lb,
}

/// Membership of a fanout group. All rings of one group must use the same interface, mode and
/// `group_id`; ids are per network namespace, so two recorders must not share one by accident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fanout {
    /// Group id (`PACKET_FANOUT` low 16 bits).
    pub group_id: u16,
    /// How packets are spread.
    pub mode: FanoutMode,
}

/// Shape and behaviour of one ring.
#[derive(Debug, Clone)]
pub struct RingConfig {
    /// Bytes per block; a multiple of the page size. 4 MiB is a good default.
    pub block_size: usize,
    /// Number of blocks; the ring is `block_size * block_count` bytes of locked memory.
    pub block_count: usize,
    /// Milliseconds after which the kernel hands over a block that is not full (0 lets the kernel
    /// derive it from the link speed). Bounds the latency of a quiet link and of the shutdown drain.
    pub retire_tov_ms: u32,
    /// Put the interface into promiscuous mode while the ring is open.
    pub promisc: bool,
    /// Join this fanout group.
    pub fanout: Option<Fanout>,
    /// Kernel capture filter (cBPF, e.g. from `pcap_compile`); `None` captures everything.
    /// A `ret #k` value limits the bytes stored per packet (the snap length).
    pub filter: Option<Vec<libc::sock_filter>>,
}

/// When a drain after [`Ring::stop_intake`] has seen every block: two waits found none, and no
/// block came for twice the retire timeout since the stop and since the last block taken. The
/// kernel hands over the last partly filled block within one timeout of the stop; twice that
/// leaves room for a late timer. A count of empty waits alone ends too early where a wait is
/// shorter than the timeout: the zero-copy path waits 1-40 ms at a time while writes are in
/// flight (with 10 ms waits and the 40 ms timer it once ended before the last block came), and
/// a signal cuts a `poll` short. The copy and zero-copy paths both drain by it.
#[derive(Debug, Default)]
pub struct Drain {
    /// When the intake stopped, or the last block after it came; None before the stop.
    quiet_since: Option<std::time::Instant>,
    empty_waits: u32,
}

impl Drain {
    /// The intake stopped ([`Ring::stop_intake`]).
    pub fn stopped(&mut self) {
        self.quiet_since = Some(std::time::Instant::now());
    }

    /// True once [`Drain::stopped`] was called.
    pub fn is_stopped(&self) -> bool {
        self.quiet_since.is_some()
    }

    /// A block was taken.
    pub fn block(&mut self) {
        if self.is_stopped() {
            self.quiet_since = Some(std::time::Instant::now());
        }
    }

    /// A wait for a block ended without one.
    pub fn empty_wait(&mut self) {
        if self.is_stopped() {
            self.empty_waits += 1;
        }
    }

    /// True when no block of `ring` is left to come.
    pub fn done(&self, ring: &Ring) -> bool {
        self.done_after(ring.drain_quiet())
    }

    fn done_after(&self, quiet: std::time::Duration) -> bool {
        self.empty_waits >= 2 && self.quiet_since.is_some_and(|t| t.elapsed() >= quiet)
    }
}

/// Kernel counters of a ring since the previous [`Ring::take_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets the filter accepted, including the dropped ones.
    pub packets: u64,
    /// Packets accepted but dropped because no block was free (user space too slow).
    pub drops: u64,
    /// How often the ring froze (all blocks owned by user space).
    pub freeze_q_cnt: u64,
}

/// An 802.1Q/802.1ad tag the kernel removed from the frame (hardware VLAN offload, also done in
/// software on receive): put it back after the MAC addresses to store the frame as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vlan {
    /// Tag protocol identifier: 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub tpid: u16,
    /// Tag control information: priority (3 bits), DEI (1), VLAN id (12).
    pub tci: u16,
}

/// One captured packet, borrowed from a [`Block`].
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Receive time, nanoseconds since the Unix epoch: the kernel's software stamp, or the
    /// NIC's raw hardware stamp when [`Ring::request_hw_timestamps`] asked for it and the
    /// packet has one (`hw_stamp`).
    pub ts_ns: u64,
    /// `ts_ns` is the NIC's raw hardware stamp (`TP_STATUS_TS_RAW_HARDWARE`); otherwise it is
    /// the kernel's software stamp (`TP_STATUS_TS_SOFTWARE`, or taken when the frame was
    /// copied into the ring).
    pub hw_stamp: bool,
    /// Length of the packet on the wire (without a removed VLAN tag).
    pub wire_len: u32,
    /// The captured bytes from the link-layer header on (`tp_snaplen` bytes at `tp_mac`); shorter
    /// than `wire_len` when the filter's snap length cut it.
    pub data: &'a [u8],
    /// The VLAN tag the kernel stripped from `data`, if any.
    pub vlan: Option<Vlan>,
}

// Kernel layout constants, checked against `libc`'s definitions by the layout tests.
const BLOCK_STATUS: usize = offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize = offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST_PKT: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
const BLOCK_SEQ_NUM: usize = offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, seq_num);
const BLOCK_HDR_LEN: usize = size_of::<libc::tpacket_block_desc>();
const PKT_HDR_LEN: usize = size_of::<libc::tpacket3_hdr>();

/// Bytes reserved before each frame by [`Ring::open_zero_copy`].
const ZERO_COPY_RESERVE: u32 = 2;

/// `tp_frame_size` of the request: meaningless for V3 but checked by the kernel (it must be
/// TPACKET_ALIGNMENT-aligned, hold a header, and divide the block size).
const FRAME_SIZE: usize = 2048;

/// A TPACKET_V3 receive ring on one interface. See the module documentation.
pub struct Ring {
    // Field order is drop order: unmap before closing the socket.
    map: Mapping,
    fd: OwnedFd,
    block_size: usize,
    block_count: usize,
    retire_tov_ms: u32,
    /// Index of the block user space reads next.
    next: usize,
    ifname: String,
}

// SAFETY: `Ring` exclusively owns its socket and mapping; nothing in it is tied to the thread
// that created it, so it may move to a capture worker thread. It is not `Sync`: `next_block`
// needs `&mut`, and other threads use a `Control`.
unsafe impl Send for Ring {}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("ifname", &self.ifname)
            .field("fd", &self.fd.as_raw_fd())
            .field("block_size", &self.block_size)
            .field("block_count", &self.block_count)
            .field("next", &self.next)
            .finish()
    }
}

impl Ring {
    /// Opens a ring on `ifname`. Fails with `NoSuchInterface`, `InterfaceDown` (not `IFF_UP`),
    /// `PermissionDenied`, `InvalidConfig` or `Os`.
    pub fn open(ifname: &str, cfg: &RingConfig) -> Result<Ring, Error> {
        Ring::open_reserved(ifname, cfg, 0)
    }

    /// Opens a ring whose blocks can be rewritten in place into pcapng ([`Block::rewrite_pcapng`]):
    /// the same as [`Ring::open`], with 2 bytes reserved before each frame (`PACKET_RESERVE`), so
    /// that an Ethernet frame starts 4-byte aligned (the kernel puts it at 82 bytes after its
    /// header, 84 with the reserve) and an Enhanced Packet Block header fits right before it.
    pub fn open_zero_copy(ifname: &str, cfg: &RingConfig) -> Result<Ring, Error> {
        Ring::open_reserved(ifname, cfg, ZERO_COPY_RESERVE)
    }

    fn open_reserved(ifname: &str, cfg: &RingConfig, reserve: u32) -> Result<Ring, Error> {
        let map_len = validate(cfg)?;
        let ifindex = netif::ifindex(ifname)?;
        if !netif::is_up(ifname)? {
            return Err(Error::InterfaceDown(ifname.to_owned()));
        }
        let loopback = netif::arphrd(ifname)? == libc::ARPHRD_LOOPBACK;

        let fd = packet_socket()?;
        let raw = fd.as_raw_fd();
        setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
            "selecting TPACKET_V3",
        )?;
        if loopback && cfg.fanout.is_none() {
            setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                &(1 as libc::c_int),
                "ignoring outgoing loopback packets",
            )?;
        }
        if cfg.fanout.is_some() {
            attach_filter(raw, &bpf::drop_all())?;
        } else if let Some(f) = &cfg.filter {
            attach_filter(raw, f)?;
        }

        if reserve > 0 {
            setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_RESERVE,
                &reserve,
                "reserving room before each frame (PACKET_RESERVE)",
            )?;
        }
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size as u32,
            tp_block_nr: cfg.block_count as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: (cfg.block_size / FRAME_SIZE * cfg.block_count) as u32,
            tp_retire_blk_tov: cfg.retire_tov_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req, "creating the capture ring (PACKET_RX_RING)")
            .map_err(|e| match e {
                Error::Os { source, .. } if source.raw_os_error() == Some(libc::ENOMEM) => Error::InvalidConfig(
                    format!("the kernel could not allocate {} blocks of {} bytes", cfg.block_count, cfg.block_size),
                ),
                e => e,
            })?;
        let map = Mapping::new(raw, map_len)?;

        bind(raw, ifindex)?;
        if let Some(fanout) = cfg.fanout {
            let mut flags = 0;
            if loopback {
                flags |= libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
            }
            let mode = match fanout.mode {
                FanoutMode::Hash => libc::PACKET_FANOUT_HASH,
                FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
                FanoutMode::Lb => libc::PACKET_FANOUT_LB,
            };
            let arg = u32::from(fanout.group_id) | ((mode | flags) << 16);
            setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                &arg,
                "joining the fanout group (another program may use the same group id)",
            )?;
            match &cfg.filter {
                Some(f) => attach_filter(raw, f)?,
                None => detach_filter(raw)?,
            }
        }
        if cfg.promisc {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as libc::c_int,
                mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq, "enabling promiscuous mode")?;
        }
        Ok(Ring {
            map,
            fd,
            block_size: cfg.block_size,
            block_count: cfg.block_count,
            retire_tov_ms: cfg.retire_tov_ms,
            next: 0,
            ifname: ifname.to_owned(),
        })
    }

    /// Waits (`poll(2)`, at most `timeout_ms`; -1 = forever, 0 = don't wait) for the next block
    /// the kernel handed to user space. `Ok(None)` on timeout or signal. Dropping the returned
    /// [`Block`] hands it back to the kernel; do that promptly, the kernel drops packets when it
    /// has no free block.
    ///
    /// `Err(InterfaceDown)` is reported once when the interface goes down or is deleted; the ring
    /// stays usable and captures again if the interface comes back up.
    pub fn next_block(&mut self, timeout_ms: i32) -> Result<Option<Block<'_>>, Error> {
        let Some((idx, status)) = self.next_ready(timeout_ms)? else { return Ok(None) };
        // SAFETY: `idx < block_count`, so the offset stays inside the mapping.
        let ptr = unsafe { self.map.ptr.add(idx * self.block_size) };
        Ok(Some(Block { ptr, len: self.block_size, status, release: true, _ring: PhantomData }))
    }

    /// Waits (at most `timeout_ms`) until the next block in ring order is user space's, then
    /// moves past it and returns its index and status word.
    ///
    /// `poll(2)` says the socket is readable while user space holds the block before the
    /// kernel's current one (`packet_poll`), so it does not wait while blocks are held: a
    /// [`BlockWriter`] holding blocks waits for its writes instead ([`Ring::ready_now`]).
    fn next_ready(&mut self, timeout_ms: i32) -> Result<Option<(usize, u32)>, Error> {
        if let Some(r) = self.ready_now() {
            return Ok(Some(r));
        }
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN | libc::POLLERR, revents: 0 };
        // SAFETY: one valid, exclusively borrowed pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(None);
            }
            return Err(Error::Os { what: "waiting for packets (poll)", source: e });
        }
        match self.ready_now() {
            Some(r) => Ok(Some(r)),
            None => {
                if pfd.revents & libc::POLLERR != 0 {
                    self.take_socket_error()?;
                }
                Ok(None)
            }
        }
    }

    /// The next block in ring order if the kernel handed it to user space (moving past it).
    fn ready_now(&mut self) -> Option<(usize, u32)> {
        let status = self.status(self.next).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let idx = self.next;
        self.next = (idx + 1) % self.block_count;
        Some((idx, status))
    }

    /// Asks the kernel to put the NIC's raw hardware receive stamp into each frame header
    /// (`PACKET_TIMESTAMP` with `SOF_TIMESTAMPING_RAW_HARDWARE`) where the packet has one;
    /// packets without one keep the software stamp. The NIC stamps only once
    /// [`crate::tsinfo::enable_hw_rx`] turned its receive stamping on.
    pub fn request_hw_timestamps(&self) -> Result<(), Error> {
        setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_TIMESTAMP,
            &(libc::SOF_TIMESTAMPING_RAW_HARDWARE as libc::c_int),
            "asking for hardware timestamps on the capture ring (PACKET_TIMESTAMP)",
        )
    }

    /// Kernel counters since the previous call (reading resets them).
    pub fn take_stats(&self) -> Result<Stats, Error> {
        take_stats(self.fd.as_raw_fd())
    }

    /// Stops new packets entering the ring (attaches a drop-all filter) for a clean shutdown:
    /// afterwards, read with [`Ring::next_block`] until it returns `None` after waiting at least
    /// `retire_tov_ms` (the kernel hands over the last partly filled block when its timer fires;
    /// it never hands over an empty one).
    pub fn stop_intake(&self) -> Result<(), Error> {
        attach_filter(self.fd.as_raw_fd(), &bpf::drop_all())
    }

    /// A handle for another thread to read the counters and stop the intake while a worker owns
    /// the ring (a duplicate of the socket descriptor).
    pub fn control(&self) -> Result<Control, Error> {
        Ok(Control {
            fd: self.fd.try_clone().map_err(|source| Error::Os { what: "duplicating the capture socket", source })?,
        })
    }

    /// How long a drain must have seen no block ([`Drain`]): twice the retire timeout, or 1 s
    /// when the kernel derives the timeout from the link speed (`retire_tov_ms` 0: 8 ms when
    /// the speed is unknown, seconds on slow links).
    fn drain_quiet(&self) -> std::time::Duration {
        let ms = if self.retire_tov_ms == 0 { 1000 } else { 2 * u64::from(self.retire_tov_ms) };
        std::time::Duration::from_millis(ms)
    }

    /// The interface this ring captures on.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The status word of block `idx`, shared with the kernel.
    fn status(&self, idx: usize) -> &AtomicU32 {
        debug_assert!(idx < self.block_count);
        // SAFETY: `idx < block_count`, so the word lies inside the mapping, which lives as long
        // as `&self`; it is 4-byte aligned (blocks are page aligned, the offset is 8). The kernel
        // accesses it concurrently, which is why it is only ever read and written atomically.
        unsafe { AtomicU32::from_ptr(self.map.ptr.as_ptr().add(idx * self.block_size + BLOCK_STATUS).cast::<u32>()) }
    }

    fn take_socket_error(&self) -> Result<(), Error> {
        let mut err: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: valid out-pointers of the sizes given.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(Error::os("reading the capture socket error"));
        }
        match err {
            0 => Ok(()),
            libc::ENETDOWN | libc::ENODEV | libc::ENXIO => Err(Error::InterfaceDown(self.ifname.clone())),
            e => Err(Error::Os { what: "capture socket error", source: io::Error::from_raw_os_error(e) }),
        }
    }
}

/// A second handle on a ring's socket, for the thread that does not own the [`Ring`].
#[derive(Debug)]
pub struct Control {
    fd: OwnedFd,
}

impl Control {
    /// Same as [`Ring::take_stats`].
    pub fn take_stats(&self) -> Result<Stats, Error> {
        take_stats(self.fd.as_raw_fd())
    }

    /// Same as [`Ring::stop_intake`].
    pub fn stop_intake(&self) -> Result<(), Error> {
        attach_filter(self.fd.as_raw_fd(), &bpf::drop_all())
    }
}

/// Exact count of the packets the capture filter rejected on an interface.
///
/// A plain AF_PACKET socket (no ring, not in the fanout group) bound to the interface with the
/// *inverted* capture filter (`bpf::invert`) and the smallest receive buffer. It is never read.
/// The kernel counts a packet that passes the filter exactly once: `tp_packets` when it is queued,
/// `tp_drops` when the (full) buffer has no room, and `PACKET_STATISTICS` reports
/// `tp_packets + tp_drops` for a non-ring socket (af_packet.c, `packet_getsockopt`). Counting
/// happens on arrival, so draining the queue would change nothing but cost system calls; the
/// queued packets pin only the minimum receive buffer (about 4.6 KB; the filter keeps 1 byte).
///
/// Open it *before* the rings and read it after they are stopped, so that it covers at least the
/// capture's lifetime. Note that it also counts packets that arrive before the rings are bound
/// and after they stop; `stop_intake` on it freezes the count.
#[derive(Debug)]
pub struct FilteredCounter {
    fd: OwnedFd,
}

impl FilteredCounter {
    /// Opens the counter on `ifname` with `inverted_filter` (from [`bpf::invert`]).
    pub fn open(ifname: &str, inverted_filter: &[libc::sock_filter]) -> Result<Self, Error> {
        let ifindex = netif::ifindex(ifname)?;
        if !netif::is_up(ifname)? {
            return Err(Error::InterfaceDown(ifname.to_owned()));
        }
        let loopback = netif::arphrd(ifname)? == libc::ARPHRD_LOOPBACK;
        let fd = packet_socket()?;
        let raw = fd.as_raw_fd();
        if loopback {
            setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                &(1 as libc::c_int),
                "ignoring outgoing loopback packets",
            )?;
        }
        attach_filter(raw, inverted_filter)?;
        // 0 is raised to the kernel minimum (SOCK_MIN_RCVBUF).
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &(0 as libc::c_int), "shrinking the counter socket buffer")?;
        bind(raw, ifindex)?;
        Ok(FilteredCounter { fd })
    }

    /// Packets the capture filter rejected since the previous call (reading resets the count).
    pub fn take_count(&self) -> Result<u64, Error> {
        let mut st = libc::tpacket_stats { tp_packets: 0, tp_drops: 0 };
        getsockopt(self.fd.as_raw_fd(), libc::PACKET_STATISTICS, &mut st, "reading the filtered-packet counter")?;
        // tp_packets already includes tp_drops (see the type documentation).
        Ok(u64::from(st.tp_packets))
    }

    /// Stops counting (attaches a drop-all filter); the count so far stays readable.
    pub fn stop_intake(&self) -> Result<(), Error> {
        attach_filter(self.fd.as_raw_fd(), &bpf::drop_all())
    }
}

/// Keeps the kernel stamping every packet once as it arrives (`skb->tstamp`, the stamp a ring
/// gives each frame) while the returned socket lives: an AF_INET datagram socket that asks for
/// receive stamps (`SO_TIMESTAMPNS`) turns on the kernel's stamping for all packets
/// (`net_enable_timestamp`). Without it, each ring stamps a packet when it receives it, and
/// two rings on one interface give the same packet two times a few hundred nanoseconds apart;
/// `record`'s start-up hands over from one ring to another by the packets' times
/// (`wv_capture::handover`), which must agree.
pub fn receive_stamps() -> Result<OwnedFd, Error> {
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::os("creating the socket that turns on receive stamps"));
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    setsockopt(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPNS,
        &(1 as libc::c_int),
        "turning on receive stamps",
    )?;
    Ok(fd)
}

/// Checks `cfg` and returns the mapping length.
fn validate(cfg: &RingConfig) -> Result<usize, Error> {
    // SAFETY: plain libc call.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let bad = |m: String| Err(Error::InvalidConfig(m));
    if cfg.block_size == 0 || !cfg.block_size.is_multiple_of(page) || !cfg.block_size.is_multiple_of(FRAME_SIZE) {
        return bad(format!("block size {} is not a positive multiple of the page size ({page})", cfg.block_size));
    }
    if cfg.block_size > u32::MAX as usize / 2 {
        return bad(format!("block size {} is too large", cfg.block_size));
    }
    if cfg.block_count == 0 {
        return bad("the ring needs at least one block".to_owned());
    }
    let frames = (cfg.block_size / FRAME_SIZE).checked_mul(cfg.block_count);
    match (cfg.block_size.checked_mul(cfg.block_count), frames) {
        (Some(len), Some(f)) if f <= u32::MAX as usize && len < isize::MAX as usize => Ok(len),
        _ => bad(format!("{} blocks of {} bytes is too large", cfg.block_count, cfg.block_size)),
    }
}

/// `socket(AF_PACKET, SOCK_RAW, 0)`: protocol 0 receives nothing until `bind`.
fn packet_socket() -> Result<OwnedFd, Error> {
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::PermissionDenied,
            _ => Error::Os { what: "creating an AF_PACKET socket", source: e },
        });
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: RawFd, ifindex: u32) -> Result<(), Error> {
    // SAFETY: `sockaddr_ll` is a plain C struct; all-zero bytes are a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: a valid sockaddr_ll and its exact size.
    let rc = unsafe {
        libc::bind(fd, (&sll as *const libc::sockaddr_ll).cast(), size_of::<libc::sockaddr_ll>() as libc::socklen_t)
    };
    if rc < 0 {
        return Err(Error::os("binding the capture socket to the interface"));
    }
    Ok(())
}

fn attach_filter(fd: RawFd, prog: &[libc::sock_filter]) -> Result<(), Error> {
    let len =
        u16::try_from(prog.len()).ok().filter(|&n| n > 0 && usize::from(n) <= bpf::MAX_INSNS).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "a capture filter has 1 to {} instructions, not {}",
                bpf::MAX_INSNS,
                prog.len()
            ))
        })?;
    let fprog = libc::sock_fprog {
        len,
        // The kernel only reads the program (it copies it in setsockopt).
        filter: prog.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog, "attaching the capture filter")
}

fn detach_filter(fd: RawFd) -> Result<(), Error> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, &(0 as libc::c_int), "detaching the set-up filter")
}

fn take_stats(fd: RawFd) -> Result<Stats, Error> {
    let mut st = libc::tpacket_stats_v3 { tp_packets: 0, tp_drops: 0, tp_freeze_q_cnt: 0 };
    getsockopt(fd, libc::PACKET_STATISTICS, &mut st, "reading ring counters")?;
    Ok(Stats {
        packets: u64::from(st.tp_packets),
        drops: u64::from(st.tp_drops),
        freeze_q_cnt: u64::from(st.tp_freeze_q_cnt),
    })
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T, what: &'static str) -> Result<(), Error> {
    // SAFETY: `val` is a valid `T` for the duration of the call and `size_of::<T>()` is its
    // size; each caller passes the type the option expects.
    let rc = unsafe { libc::setsockopt(fd, level, name, (val as *const T).cast(), size_of::<T>() as libc::socklen_t) };
    if rc < 0 {
        return Err(Error::os(what));
    }
    Ok(())
}

fn getsockopt<T>(fd: RawFd, name: libc::c_int, out: &mut T, what: &'static str) -> Result<(), Error> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is valid for writes of `size_of::<T>()` bytes, the length we pass; the
    // kernel writes at most that many. Callers pass plain integer structs (any bytes valid).
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_PACKET, name, (out as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(Error::os(what));
    }
    Ok(())
}

/// The ring mapping; unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// Maps the RX ring of packet socket `fd`, locked in memory when the limits allow.
    fn new(fd: RawFd, len: usize) -> Result<Mapping, Error> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let map = |flags| {
            // SAFETY: a fresh shared mapping of the socket's ring at an address of the kernel's
            // choosing; it aliases no Rust object.
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) }
        };
        let mut p = map(libc::MAP_SHARED | libc::MAP_LOCKED);
        if p == libc::MAP_FAILED {
            // MAP_LOCKED fails (EAGAIN) beyond RLIMIT_MEMLOCK without CAP_IPC_LOCK. The ring's
            // pages are kernel memory that is never swapped anyway; locking only pre-faults.
            p = map(libc::MAP_SHARED);
        }
        if p == libc::MAP_FAILED {
            return Err(Error::os("mapping the capture ring"));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::Os {
            what: "mapping the capture ring",
            source: io::Error::other("mmap returned NULL"),
        })?;
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping created in `new`, and no borrow of it
        // outlives the `Ring` that owns this `Mapping`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel values from `linux/if_packet.h` on x86_64 (checked with a C program against the
    /// Debian 12 headers): libc's definitions must match them.
    #[test]
    fn layout_matches_kernel() {
        use libc::*;
        assert_eq!(size_of::<tpacket_req3>(), 28);
        assert_eq!(offset_of!(tpacket_req3, tp_block_size), 0);
        assert_eq!(offset_of!(tpacket_req3, tp_block_nr), 4);
        assert_eq!(offset_of!(tpacket_req3, tp_frame_size), 8);
        assert_eq!(offset_of!(tpacket_req3, tp_frame_nr), 12);
        assert_eq!(offset_of!(tpacket_req3, tp_retire_blk_tov), 16);
        assert_eq!(offset_of!(tpacket_req3, tp_sizeof_priv), 20);
        assert_eq!(offset_of!(tpacket_req3, tp_feature_req_word), 24);

        assert_eq!(size_of::<tpacket_block_desc>(), 48);
        assert_eq!(offset_of!(tpacket_block_desc, version), 0);
        assert_eq!(offset_of!(tpacket_block_desc, offset_to_priv), 4);
        assert_eq!(offset_of!(tpacket_block_desc, hdr), 8);

        assert_eq!(size_of::<tpacket_hdr_v1>(), 40);
        assert_eq!(std::mem::align_of::<tpacket_hdr_v1>(), 8);
        assert_eq!(offset_of!(tpacket_hdr_v1, block_status), 0);
        assert_eq!(offset_of!(tpacket_hdr_v1, num_pkts), 4);
        assert_eq!(offset_of!(tpacket_hdr_v1, offset_to_first_pkt), 8);
        assert_eq!(offset_of!(tpacket_hdr_v1, blk_len), 12);
        assert_eq!(offset_of!(tpacket_hdr_v1, seq_num), 16);
        assert_eq!(offset_of!(tpacket_hdr_v1, ts_first_pkt), 24);
        assert_eq!(offset_of!(tpacket_hdr_v1, ts_last_pkt), 32);

        assert_eq!(size_of::<tpacket3_hdr>(), 48);
        assert_eq!(offset_of!(tpacket3_hdr, tp_next_offset), 0);
        assert_eq!(offset_of!(tpacket3_hdr, tp_sec), 4);
        assert_eq!(offset_of!(tpacket3_hdr, tp_nsec), 8);
        assert_eq!(offset_of!(tpacket3_hdr, tp_snaplen), 12);
        assert_eq!(offset_of!(tpacket3_hdr, tp_len), 16);
        assert_eq!(offset_of!(tpacket3_hdr, tp_status), 20);
        assert_eq!(offset_of!(tpacket3_hdr, tp_mac), 24);
        assert_eq!(offset_of!(tpacket3_hdr, tp_net), 26);
        assert_eq!(offset_of!(tpacket3_hdr, hv1), 28);
        assert_eq!(offset_of!(tpacket3_hdr, tp_padding), 40);

        assert_eq!(size_of::<tpacket_hdr_variant1>(), 12);
        assert_eq!(offset_of!(tpacket_hdr_variant1, tp_rxhash), 0);
        assert_eq!(offset_of!(tpacket_hdr_variant1, tp_vlan_tci), 4);
        assert_eq!(offset_of!(tpacket_hdr_variant1, tp_vlan_tpid), 8);
        assert_eq!(offset_of!(tpacket_hdr_variant1, tp_padding), 10);

        assert_eq!(size_of::<tpacket_stats_v3>(), 12);
        assert_eq!(offset_of!(tpacket_stats_v3, tp_packets), 0);
        assert_eq!(offset_of!(tpacket_stats_v3, tp_drops), 4);
        assert_eq!(offset_of!(tpacket_stats_v3, tp_freeze_q_cnt), 8);
        assert_eq!(size_of::<tpacket_stats>(), 8);

        assert_eq!(size_of::<packet_mreq>(), 16);
        assert_eq!(offset_of!(packet_mreq, mr_type), 4);

        assert_eq!(BLOCK_STATUS, 8);
        assert_eq!(BLOCK_NUM_PKTS, 12);
        assert_eq!(BLOCK_FIRST_PKT, 16);
        assert_eq!(BLOCK_SEQ_NUM, 24);
    }

    fn cfg() -> RingConfig {
        RingConfig {
            block_size: 1 << 22,
            block_count: 4,
            retire_tov_ms: 10,
            promisc: false,
            fanout: None,
            filter: None,
        }
    }

    #[test]
    fn config_validation() {
        assert_eq!(validate(&cfg()).unwrap(), 16 << 20);
        for (bs, bc) in [(0, 4), (1000, 4), (4096 + 2048, 4), (1 << 22, 0)] {
            let c = RingConfig { block_size: bs, block_count: bc, ..cfg() };
            assert!(matches!(validate(&c), Err(Error::InvalidConfig(_))), "{bs} {bc}");
        }
    }

    /// A hand-made block: the walk must stop at offsets that leave the block.
    #[test]
    fn frame_walk_is_bounded() {
        let mut b = vec![0u8; 4096];
        let put = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        put(&mut b, BLOCK_NUM_PKTS, 3);
        put(&mut b, BLOCK_FIRST_PKT, 48);
        // packet 1 at 48: mac at +68, 10 bytes, next at +96
        put(&mut b, 48, 96);
        put(&mut b, 48 + 4, 1);
        put(&mut b, 48 + 8, 5);
        put(&mut b, 48 + 12, 10);
        put(&mut b, 48 + 16, 60);
        b[48 + 24..48 + 26].copy_from_slice(&68u16.to_ne_bytes());
        // packet 2 at 144: claims 10000 bytes of data -> ends the walk
        put(&mut b, 144 + 12, 10_000);
        b[144 + 24..144 + 26].copy_from_slice(&68u16.to_ne_bytes());
        let frames = Frames { block: &b, off: 48, left: 3 };
        let v: Vec<_> = frames.collect();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].ts_ns, 1_000_000_005);
        assert_eq!((v[0].wire_len, v[0].data.len(), v[0].vlan, v[0].hw_stamp), (60, 10, None, false));
        // tp_status says which stamp the kernel put.
        put(&mut b, 48 + 20, libc::TP_STATUS_TS_RAW_HARDWARE | libc::TP_STATUS_USER);
        assert!(Frames { block: &b, off: 48, left: 3 }.next().unwrap().hw_stamp);
        put(&mut b, 48 + 20, libc::TP_STATUS_TS_SOFTWARE);
        assert!(!Frames { block: &b, off: 48, left: 3 }.next().unwrap().hw_stamp);

        // next offset pointing past the end
        put(&mut b, 48, 5000);
        assert_eq!(Frames { block: &b, off: 48, left: 3 }.count(), 1);
        // first offset inside the block header or past the end
        assert_eq!(Frames { block: &b, off: 8, left: 3 }.count(), 0);
        assert_eq!(Frames { block: &b, off: 4090, left: 3 }.count(), 0);
        // next offset 0 before the last packet
        put(&mut b, 48, 0);
        assert_eq!(Frames { block: &b, off: 48, left: 3 }.count(), 1);
    }

    /// A drain ends only after the stop, two empty waits and the quiet time ([`Drain`]).
    #[test]
    fn a_drain_needs_the_stop_two_empty_waits_and_the_quiet_time() {
        use std::time::Duration;
        let long = Duration::from_secs(3600);
        let mut d = Drain::default();
        for _ in 0..3 {
            d.empty_wait();
            d.block();
        }
        assert!(!d.is_stopped() && !d.done_after(Duration::ZERO), "empty waits before the stop do not count");
        d.stopped();
        d.empty_wait();
        assert!(!d.done_after(Duration::ZERO), "one empty wait");
        d.empty_wait();
        assert!(d.done_after(Duration::ZERO));
        assert!(!d.done_after(long), "two empty waits, but not quiet long enough");
        // A block after the stop starts the quiet time again.
        let before = d.quiet_since;
        std::thread::sleep(Duration::from_millis(2));
        d.block();
        assert!(d.quiet_since > before);
    }

    /// A hand-made block laid out as the kernel lays one out for a ring opened with
    /// `open_zero_copy` (frames 16-aligned, data at +84), rewritten into pcapng: every block
    /// that results has matching length fields, the EPBs hold the frames (a stripped VLAN tag
    /// put back, the snap length applied), and small gaps become EPB options.
    #[test]
    fn rewrite_pcapng_in_place() {
        use wv_wire::pcapng::{BT_EPB, BT_LOCAL_SKIP};
        // Many frames of many lengths.
        let many: Vec<(usize, u32, Option<u16>)> = (0..300usize)
            .map(|i| {
                let n = 14 + (i * 37) % 300;
                (n, n as u32 + (i % 3) as u32, (i % 7 == 0).then_some(i as u16))
            })
            .collect();
        // (data length, wire length, VLAN tci), snap length, options of the last EPB, block size
        for (frames, snaplen, last_gap, size) in [
            (vec![(60usize, 60u32, None), (100, 100, Some(0x0123u16)), (1514, 1514, None)], 1000, None, 8192),
            (vec![(3952, 3952, None)], 65535, Some(8), 8192),
            (vec![(3956, 3956, None)], 65535, Some(4), 8192),
            (many.clone(), 200, None, 1 << 17),
            // Cut to a length that is no multiple of 4: the cut records have padding.
            (many.clone(), 201, None, 1 << 17),
            (many, 65535, None, 1 << 17),
            // Every trailer in the next frame's header (data + 84 a multiple of 16).
            ((0..200).map(|i| (28 + 16 * (i % 20), 2000, None)).collect(), 65535, None, 1 << 17),
        ] {
            // Not zeros: the padding the rewrite must zero, and the gaps it must cover, start
            // as other bytes (the block descriptor and each frame's kernel header are zeroed
            // below before their fields are set).
            let mut mem = vec![0xa5a5_a5a5_a5a5_a5a5u64; size / 8];
            let ptr = NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
            // SAFETY: test memory, `size` bytes, exclusively ours for the test.
            let b = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size) };
            b[..48].fill(0);
            let put = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
            put(b, BLOCK_NUM_PKTS, frames.len() as u32);
            put(b, BLOCK_FIRST_PKT, 48);
            let mut off = 48;
            let mut want = Vec::new();
            for (i, &(n, wire, vlan)) in frames.iter().enumerate() {
                let next = (84 + n).next_multiple_of(16);
                b[off..off + 84].fill(0);
                put(b, off, if i + 1 < frames.len() { next as u32 } else { 0 });
                put(b, off + 4, 7);
                put(b, off + 8, i as u32);
                put(b, off + 12, n as u32);
                put(b, off + 16, wire);
                let mut status = libc::TP_STATUS_USER;
                if let Some(tci) = vlan {
                    status |= libc::TP_STATUS_VLAN_VALID;
                    put(b, off + 28 + 4, u32::from(tci));
                }
                put(b, off + 20, status);
                b[off + 24..off + 26].copy_from_slice(&84u16.to_ne_bytes());
                let data: Vec<u8> = (0..n).map(|k| (k * 7 + i) as u8).collect();
                b[off + 84..off + 84 + n].copy_from_slice(&data);
                let mut stored = data.clone();
                if let Some(tci) = vlan {
                    let tag = [0x81, 0x00, (tci >> 8) as u8, tci as u8];
                    stored.splice(12..12, tag);
                }
                stored.truncate(snaplen);
                want.push((7_000_000_000 + i as u64, stored, wire + if vlan.is_some() { 4 } else { 0 }));
                off += next;
            }
            let mut block = Block { ptr, len: size, status: libc::TP_STATUS_USER, release: true, _ring: PhantomData };
            let mut recs = Vec::new();
            let rw = block.rewrite_pcapng(snaplen as u32, true, &mut recs);
            assert_eq!(rw.misplaced, 0);
            assert_eq!(recs.len(), frames.len());
            assert_eq!(rw.len % 4096, 0);
            let out = block.bytes()[..rw.len].to_vec();
            drop(block);
            let get = |o: usize| u32::from_le_bytes(out[o..o + 4].try_into().unwrap());
            let (mut got, mut last_len) = (Vec::new(), 0);
            for (at, t, len) in pcapng_blocks(&out) {
                match t {
                    BT_EPB => {
                        let ts = u64::from(get(at + 12)) << 32 | u64::from(get(at + 16));
                        let cap = get(at + 20) as usize;
                        got.push((ts, out[at + 28..at + 28 + cap].to_vec(), get(at + 24)));
                        let pad = &out[at + 28 + cap..at + 28 + cap.next_multiple_of(4)];
                        assert!(pad.iter().all(|&x| x == 0), "padding of the EPB at {at}: {pad:?}");
                        last_len = len - (28 + cap.next_multiple_of(4) + 4);
                    }
                    BT_LOCAL_SKIP => last_len = 0,
                    other => panic!("block type {other:#x} at {at}"),
                }
            }
            assert_eq!(got, want);
            assert_eq!(Some(last_len).filter(|&l| l > 0), last_gap, "options of the last EPB");
            assert_eq!(
                recs.iter().map(|r| r.caplen as usize).collect::<Vec<_>>(),
                want.iter().map(|w| w.1.len()).collect::<Vec<_>>()
            );
        }
    }

    /// The (offset, type, length) of each pcapng block of a rewritten block's bytes, checking
    /// that every length is a multiple of 4, inside the bytes and repeated in the trailer.
    fn pcapng_blocks(out: &[u8]) -> Vec<(usize, u32, usize)> {
        let get = |o: usize| u32::from_le_bytes(out[o..o + 4].try_into().unwrap());
        let (mut at, mut blocks) = (0, Vec::new());
        while at < out.len() {
            let (t, len) = (get(at), get(at + 4) as usize);
            assert!(len >= 12 && len % 4 == 0 && at + len <= out.len(), "block at {at}: length {len}");
            assert_eq!(get(at + len - 4) as usize, len, "trailer of the block at {at}");
            blocks.push((at, t, len));
            at += len;
        }
        blocks
    }

    /// A frame that cannot become a record where it lies (its data not 4-byte aligned: a ring
    /// opened without the reserve) is counted as misplaced and covered by the skip block
    /// before the next record; the records around it are written as usual.
    #[test]
    fn rewrite_pcapng_covers_a_misplaced_frame() {
        use wv_wire::pcapng::{BT_EPB, BT_LOCAL_SKIP};
        let size = 8192;
        let mut mem = vec![0xa5a5_a5a5_a5a5_a5a5u64; size / 8];
        let ptr = NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: test memory, `size` bytes, exclusively ours for the test.
        let b = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size) };
        b[..48].fill(0);
        let put = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        // (data offset in the frame, length): the second frame's data is 2 bytes off.
        let frames = [(84u16, 60usize), (82, 70), (84, 100), (84, 61)];
        put(b, BLOCK_NUM_PKTS, frames.len() as u32);
        put(b, BLOCK_FIRST_PKT, 48);
        let mut off = 48;
        for (i, &(mac, n)) in frames.iter().enumerate() {
            let next = (usize::from(mac) + n).next_multiple_of(16);
            b[off..off + 84].fill(0);
            put(b, off, if i + 1 < frames.len() { next as u32 } else { 0 });
            put(b, off + 4, 9);
            put(b, off + 8, i as u32);
            put(b, off + 12, n as u32);
            put(b, off + 16, n as u32);
            put(b, off + 20, libc::TP_STATUS_USER);
            b[off + 24..off + 26].copy_from_slice(&mac.to_ne_bytes());
            let d = off + usize::from(mac);
            b[d..d + n].iter_mut().enumerate().for_each(|(k, x)| *x = (k + i) as u8);
            off += next;
        }
        let mut block = Block { ptr, len: size, status: libc::TP_STATUS_USER, release: true, _ring: PhantomData };
        let mut recs = Vec::new();
        let rw = block.rewrite_pcapng(65535, true, &mut recs);
        assert_eq!((rw.misplaced, recs.len(), rw.stored_bytes), (1, 3, 60 + 100 + 61));
        let out = block.bytes()[..rw.len].to_vec();
        drop(block);
        let get = |o: usize| u32::from_le_bytes(out[o..o + 4].try_into().unwrap());
        let mut got = Vec::new();
        for (at, t, _) in pcapng_blocks(&out) {
            match t {
                BT_EPB => {
                    let cap = get(at + 20) as usize;
                    got.push((get(at + 16), out[at + 28..at + 28 + cap].to_vec()));
                }
                BT_LOCAL_SKIP => {}
                other => panic!("block type {other:#x} at {at}"),
            }
        }
        let want: Vec<(u32, Vec<u8>)> = [(0usize, 60usize), (2, 100), (3, 61)]
            .iter()
            .map(|&(i, n)| (9_000_000_000u64 as u32 + i as u32, (0..n).map(|k| (k + i) as u8).collect()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn error_messages() {
        assert_eq!(Error::PermissionDenied.to_string(), "capturing needs root or CAP_NET_RAW");
        assert_eq!(
            Error::InterfaceDown("eth1".into()).to_string(),
            "network interface eth1 is down; bring it up with `ip link set eth1 up`"
        );
    }
}

/// The zero-copy rewrite's cost, for callgrind or perf (not a check: ignored by default). A
/// 4 MiB block of 29,126 60-byte frames laid out as the kernel lays them out (data at 84 bytes,
/// 144 bytes apart), rewritten `ITERS` times (default 1) from a copy of the kernel's layout:
/// `valgrind --tool=callgrind --toggle-collect='wv_sys::afpacket::block::Block::rewrite_pcapng'
/// TEST_BINARY --ignored rewrite_cost` counts the rewrite alone; over the frame count, its
/// instructions per frame (bench/RESULTS.md).
#[cfg(test)]
mod cost {
    use super::*;

    #[test]
    #[ignore]
    fn rewrite_cost() {
        let (size, n) = (4 << 20, 60usize);
        let mut kernel = vec![0u8; size];
        let put = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        let stride = (84 + n).next_multiple_of(16);
        let frames = (size - 48) / stride;
        put(&mut kernel, BLOCK_NUM_PKTS, frames as u32);
        put(&mut kernel, BLOCK_FIRST_PKT, 48);
        for i in 0..frames {
            let off = 48 + i * stride;
            put(&mut kernel, off, if i + 1 < frames { stride as u32 } else { 0 });
            put(&mut kernel, off + 4, 7);
            put(&mut kernel, off + 8, i as u32);
            put(&mut kernel, off + 12, n as u32);
            put(&mut kernel, off + 16, n as u32);
            put(&mut kernel, off + 20, libc::TP_STATUS_USER);
            kernel[off + 24..off + 26].copy_from_slice(&84u16.to_ne_bytes());
        }
        let iters: usize = std::env::var("ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
        let mut mem = vec![0u64; size / 8];
        let mut recs = Vec::with_capacity(1 << 16);
        for _ in 0..iters {
            let ptr = NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
            // SAFETY: test memory, `size` bytes, exclusively ours for the test.
            let b = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), size) };
            b.copy_from_slice(&kernel);
            let mut block = Block { ptr, len: size, status: libc::TP_STATUS_USER, release: false, _ring: PhantomData };
            let rw = std::hint::black_box(block.rewrite_pcapng(65535, true, &mut recs));
            assert_eq!((recs.len(), rw.misplaced), (frames, 0));
        }
    }
}
