//! AF_XDP capture: an XDP program that redirects every frame of an interface to one XSK socket
//! per receive queue, and the sockets (UMEM, fill ring, RX ring) that user space reads.
//!
//! # The program
//!
//! Nineteen eBPF instructions, written here by hand (no compiler, no libbpf):
//!
//! ```text
//! r6 = r1                       ; the context, kept across the calls
//! call bpf_ktime_get_ns         ; the frame's stamp (CLOCK_MONOTONIC), taken as the driver
//! r7 = r0                       ;   hands the frame over, not when user space reads it
//! r1 = r6
//! r2 = -8
//! call bpf_xdp_adjust_meta      ; 8 bytes of metadata in front of the frame
//! if r0 != 0 goto redirect      ; refused (no room, or the driver has none): no stamp
//! r2 = *(u32 *)(r6 + 8)         ; ctx->data_meta
//! r3 = *(u32 *)(r6 + 0)         ; ctx->data
//! r4 = r2
//! r4 += 8
//! if r4 > r3 goto redirect      ; the bounds check the verifier asks for
//! *(u64 *)(r2 + 0) = r7         ; the stamp, just before the frame's first byte
//! redirect:
//! r2 = *(u32 *)(r6 + 16)        ; ctx->rx_queue_index
//! r1 = map fd                   ; ld_imm64, BPF_PSEUDO_MAP_FD: the XSKMAP
//! r3 = XDP_PASS                 ; flags: the action when the queue has no socket
//! call bpf_redirect_map
//! exit
//! ```
//!
//! A frame on a queue with a socket in the map goes to that socket; any other frame goes on to
//! the host's stack (`XDP_PASS`, the low bits of `bpf_redirect_map`'s flags), never dropped by
//! the program. A frame redirected to a socket is *taken from the host*: AF_XDP is for a port
//! that only mirrors traffic (SPAN, TAP). The program is loaded with `BPF_F_XDP_HAS_FRAGS`
//! (frames larger than a page, jumbo frames on veth) and attached with a BPF link
//! (`BPF_LINK_CREATE`), so it goes away with the process, whatever way the process ends.
//!
//! The kernel copies the metadata into the UMEM in front of the frame (copy mode; the first
//! chunk of a frame of several) or leaves it there (zero-copy), so each frame has its own stamp
//! ([`XskSocket::take_stamp`]), however many frames one read takes. A frame that goes on to
//! the host (a queue without a socket, or after the socket left the map at shutdown) carries
//! the 8 bytes of metadata too; only another XDP or TC program on the interface could see them.
//!
//! # The sockets
//!
//! Each socket owns its UMEM: `frames` chunks of [`CHUNK`] bytes in one page-aligned buffer
//! ([`crate::mem::AlignedBuf`]), all of them handed to the kernel through the fill ring at the
//! start. The kernel writes a frame into a chunk and publishes a descriptor (address, length,
//! `XDP_PKT_CONTD` when the frame continues in the next descriptor) on the RX ring; user space
//! reads the descriptors, copies the frames out and gives the chunks back through the fill
//! ring. Both rings are single-producer single-consumer with `u32` indexes that wrap: the
//! producer index is loaded with `Acquire` (the descriptors and frame bytes are visible once we
//! see it), the consumer index stored with `Release` (our reads are done before the kernel may
//! reuse the slots).
//!
//! The socket binds without `XDP_COPY` or `XDP_ZEROCOPY`: the kernel takes zero-copy where the
//! driver offers it and copies otherwise; [`XskSocket::zerocopy`] says which it got.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::mem::AlignedBuf;
use crate::netif;

/// Size of one UMEM chunk: the smallest the kernel takes (XDP_UMEM_MIN_CHUNK_SIZE). Every frame
/// takes at least one chunk, so small chunks hold the most small frames per byte of UMEM; in
/// copy mode 1,792 bytes of it hold frame data (256 are the kernel's headroom), so a 1514-byte
/// frame fits one chunk and a larger one spans several (`XDP_USE_SG`).
pub const CHUNK: usize = 2048;

/// Why XDP capture could not start or read. Each message is one sentence a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Interface(#[from] crate::error::Error),
    /// `bpf(2)` or `socket(AF_XDP)` refused for lack of privilege.
    #[error("AF_XDP capture needs root (CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW)")]
    PermissionDenied,
    /// The XDP program could not be attached in native or generic mode.
    #[error("cannot attach an XDP program to {ifname} ({reason}); record without --source xdp (AF_PACKET)")]
    Attach { ifname: String, reason: String },
    /// Another AF_XDP socket reads the queue.
    #[error("receive queue {queue} of {ifname} is already read by another AF_XDP socket (another recorder?); stop it or record without --source xdp")]
    QueueBusy { ifname: String, queue: u32 },
    /// Any other system call failure.
    #[error("{what}: {source}")]
    Os { what: &'static str, source: io::Error },
}

fn os(what: &'static str) -> Error {
    let source = io::Error::last_os_error();
    if source.raw_os_error() == Some(libc::EPERM) {
        return Error::PermissionDenied;
    }
    Error::Os { what, source }
}

// ---- bpf(2) ----

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`'s `BPF_XDP`.
const BPF_XDP: u32 = 37;
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_FUNC_KTIME_GET_NS: i32 = 5;
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
/// Bytes of metadata the program puts in front of each frame: its stamp.
const STAMP_LEN: usize = 8;
const XDP_PASS: i32 = 2;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Offsets of `data`, `data_meta` and `rx_queue_index` in `struct xdp_md`.
const XDP_MD_DATA: i16 = 0;
const XDP_MD_DATA_META: i16 = 8;
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// `union bpf_attr`, as a zeroed block the commands' fields are written into (144 bytes on
/// 6.x; the kernel accepts any size whose tail beyond what it knows is zero).
#[repr(C, align(8))]
struct Attr([u8; 144]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 144])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// `bpf(cmd, attr)`: the result (an fd for the commands that create one), or -1 with errno.
fn bpf(cmd: libc::c_long, attr: &mut Attr) -> libc::c_long {
    // SAFETY: `attr` is a valid, writable bpf_attr of the size passed; the pointers written into
    // it by the callers point to live buffers that outlive the call.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), size_of::<Attr>() as libc::c_uint) }
}

fn fd_from(rc: libc::c_long, what: &'static str) -> Result<OwnedFd, Error> {
    if rc < 0 {
        return Err(os(what));
    }
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

/// One eBPF instruction, `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: dst | (src << 4), off, imm }
}

/// The program of the module documentation, for XSKMAP `map_fd`.
fn program(map_fd: RawFd) -> [Insn; 19] {
    [
        insn(0xbf, 6, 1, 0, 0),                        // BPF_ALU64 | BPF_MOV | BPF_X
        insn(0x85, 0, 0, 0, BPF_FUNC_KTIME_GET_NS),    // BPF_JMP | BPF_CALL
        insn(0xbf, 7, 0, 0, 0),                        // r7 = r0
        insn(0xbf, 1, 6, 0, 0),                        // r1 = r6
        insn(0xb7, 2, 0, 0, -(STAMP_LEN as i32)),      // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0x85, 0, 0, 0, BPF_FUNC_XDP_ADJUST_META), // BPF_JMP | BPF_CALL
        insn(0x55, 0, 0, 6, 0),                        // BPF_JMP | BPF_JNE | BPF_K: to 13
        insn(0x61, 2, 6, XDP_MD_DATA_META, 0),         // BPF_LDX | BPF_MEM | BPF_W
        insn(0x61, 3, 6, XDP_MD_DATA, 0),              // BPF_LDX | BPF_MEM | BPF_W
        insn(0xbf, 4, 2, 0, 0),                        // r4 = r2
        insn(0x07, 4, 0, 0, STAMP_LEN as i32),         // BPF_ALU64 | BPF_ADD | BPF_K
        insn(0x2d, 4, 3, 1, 0),                        // BPF_JMP | BPF_JGT | BPF_X: to 13
        insn(0x7b, 2, 7, 0, 0),                        // BPF_STX | BPF_MEM | BPF_DW
        insn(0x61, 2, 6, XDP_MD_RX_QUEUE_INDEX, 0),    // BPF_LDX | BPF_MEM | BPF_W
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),   // BPF_LD | BPF_DW | BPF_IMM, first half
        insn(0, 0, 0, 0, 0),                           // second half: the fd's upper 32 bits
        insn(0xb7, 3, 0, 0, XDP_PASS),                 // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),    // BPF_JMP | BPF_CALL
        insn(0x95, 0, 0, 0, 0),                        // BPF_JMP | BPF_EXIT
    ]
}

/// How the XDP program runs on the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`), before any socket buffer exists.
    Native,
    /// Generic XDP (`XDP_FLAGS_SKB_MODE`), after the kernel built a socket buffer: works on any
    /// interface, slower.
    Generic,
}

/// The XSKMAP and the program, attached to one interface while this value lives.
pub struct XdpProgram {
    // Field order is drop order: detach (close the link) before the program and the map go.
    link: Option<OwnedFd>,
    prog: OwnedFd,
    map: OwnedFd,
    queues: u32,
}

impl XdpProgram {
    /// Creates the XSKMAP (`queues` entries) and loads the program. Nothing is attached yet.
    pub fn load(queues: u32) -> Result<XdpProgram, Error> {
        let mut a = Attr::new();
        a.u32(0, BPF_MAP_TYPE_XSKMAP).u32(4, 4).u32(8, 4).u32(12, queues.max(1));
        a.0[24..31].copy_from_slice(b"wv_xsks");
        let map = fd_from(bpf(BPF_MAP_CREATE, &mut a), "creating the XSKMAP (bpf BPF_MAP_CREATE)")?;
        let insns = program(map.as_raw_fd());
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 64 * 1024];
        let load = |log_level: u32, log: &mut [u8]| {
            let mut a = Attr::new();
            a.u32(0, BPF_PROG_TYPE_XDP)
                .u32(4, insns.len() as u32)
                .u64(8, insns.as_ptr() as u64)
                .u64(16, license.as_ptr() as u64)
                .u32(24, log_level)
                .u32(28, if log_level > 0 { log.len() as u32 } else { 0 })
                .u64(32, if log_level > 0 { log.as_mut_ptr() as u64 } else { 0 })
                .u32(44, BPF_F_XDP_HAS_FRAGS)
                .u32(68, BPF_XDP);
            a.0[48..56].copy_from_slice(b"wv_xdp\0\0");
            bpf(BPF_PROG_LOAD, &mut a)
        };
        let rc = load(0, &mut log);
        let prog = if rc < 0 {
            let first = io::Error::last_os_error();
            if first.raw_os_error() == Some(libc::EPERM) {
                return Err(Error::PermissionDenied);
            }
            // Once more with the verifier's log, for the message.
            let rc = load(1, &mut log);
            if rc < 0 {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]).trim().replace('\n', "; ");
                return Err(Error::Os {
                    what: "loading the XDP program (bpf BPF_PROG_LOAD)",
                    source: io::Error::new(first.kind(), format!("{first}: {text}")),
                });
            }
            fd_from(rc, "loading the XDP program")?
        } else {
            fd_from(rc, "loading the XDP program")?
        };
        Ok(XdpProgram { link: None, prog, map, queues })
    }

    /// Puts `sock` into the map at `queue`: frames of that receive queue go to it from now on.
    pub fn insert(&self, queue: u32, sock: &XskSocket) -> Result<(), Error> {
        let (key, value) = (queue, sock.fd.as_raw_fd() as u32);
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64)
            .u64(24, 0);
        if bpf(BPF_MAP_UPDATE_ELEM, &mut a) < 0 {
            return Err(os("putting an XSK socket into the XSKMAP"));
        }
        Ok(())
    }

    /// Takes the socket of `queue` out of the map: that queue's frames go to the host again.
    pub fn remove(&self, queue: u32) -> Result<(), Error> {
        let key = queue;
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32).u64(8, &key as *const u32 as u64);
        if bpf(BPF_MAP_DELETE_ELEM, &mut a) < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT) {
            return Err(os("taking an XSK socket out of the XSKMAP"));
        }
        Ok(())
    }

    /// Number of map entries (receive queues) the program serves.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// Attaches the program to `ifname` with a BPF link: natively where the driver can, else
    /// generic XDP. Returns the mode, or `Attach` with both refusals.
    pub fn attach(&mut self, ifname: &str) -> Result<AttachMode, Error> {
        let ifindex = netif::ifindex(ifname)?;
        let mut why = Vec::new();
        for (flags, mode) in [(XDP_FLAGS_DRV_MODE, AttachMode::Native), (XDP_FLAGS_SKB_MODE, AttachMode::Generic)] {
            let mut a = Attr::new();
            a.u32(0, self.prog.as_raw_fd() as u32).u32(4, ifindex).u32(8, BPF_XDP).u32(12, flags);
            let rc = bpf(BPF_LINK_CREATE, &mut a);
            if rc >= 0 {
                self.link = Some(fd_from(rc, "attaching the XDP program")?);
                return Ok(mode);
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EPERM) {
                return Err(Error::PermissionDenied);
            }
            let name = if mode == AttachMode::Native { "native" } else { "generic" };
            let hint = match e.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::EEXIST) => " (another XDP program is attached)",
                Some(libc::ERANGE) => " (the MTU is too large for this driver's XDP)",
                _ => "",
            };
            why.push(format!("{name}: {e}{hint}"));
        }
        Err(Error::Attach { ifname: ifname.to_owned(), reason: why.join("; ") })
    }
}

impl std::fmt::Debug for XdpProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpProgram").field("queues", &self.queues).field("attached", &self.link.is_some()).finish()
    }
}

/// Number of receive queues of `ifname` (`/sys/class/net/IF/queues/rx-*`), 1 when unknown.
pub fn rx_queues(ifname: &str) -> u32 {
    let dir = format!("/sys/class/net/{ifname}/queues");
    let n = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count())
        .unwrap_or(0);
    (n as u32).max(1)
}

// ---- XSK sockets ----

/// Kernel counters of one XSK socket (`XDP_STATISTICS`), cumulative since it opened.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Frames dropped for another reason than a full RX ring (no free chunk in the fill ring,
    /// frame too large for the chunks): each such frame counts here once.
    pub rx_dropped: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel wanted a chunk and the fill ring had none (a frame in copy mode then
    /// also counts in `rx_dropped`).
    pub rx_fill_ring_empty: u64,
    /// Fill-ring entries the kernel refused (addresses outside the UMEM): a bug if not zero.
    pub rx_invalid_descs: u64,
}

/// One ring mapping (RX or fill) and its shared indexes.
struct XskRing {
    ptr: NonNull<u8>,
    len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    /// Entries - 1 (the size is a power of two).
    mask: u32,
}

impl XskRing {
    fn map(fd: RawFd, off: &libc::xdp_ring_offset, entries: u32, entry: usize, pgoff: i64) -> Result<XskRing, Error> {
        let len = off.desc as usize + entries as usize * entry;
        // SAFETY: a fresh shared mapping of the socket's ring at an address of the kernel's
        // choosing; it aliases no Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os("mapping an AF_XDP ring"));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::Os {
            what: "mapping an AF_XDP ring",
            source: io::Error::other("mmap returned NULL"),
        })?;
        let at = |o: u64| ptr.as_ptr().wrapping_add(o as usize);
        Ok(XskRing {
            ptr,
            len,
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            desc: at(off.desc),
            mask: entries - 1,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the kernel placed the 4-byte aligned u32 index at this offset of the mapping,
        // which lives as long as `self`; both sides access it atomically.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.flags }
    }
}

impl Drop for XskRing {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `map`; no borrow of it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// One AF_XDP socket bound to one receive queue, with its own UMEM.
pub struct XskSocket {
    // Field order is drop order: unmap the rings, close the socket, then free the UMEM.
    rx: XskRing,
    fill: XskRing,
    fd: OwnedFd,
    umem: AlignedBuf,
    /// RX entries read by `peek` and not yet released.
    pending: u32,
    /// Local copies of the indexes this side owns.
    rx_cons: u32,
    fill_prod: u32,
    zerocopy: bool,
    queue: u32,
    ifname: String,
}

// SAFETY: the socket exclusively owns its fd, UMEM and ring mappings; nothing in it is tied to
// the thread that created it, so it may move to a capture thread. Not `Sync`: reading needs `&mut`.
unsafe impl Send for XskSocket {}

/// One RX descriptor's frame bytes.
#[derive(Debug, Clone, Copy)]
pub struct Desc<'a> {
    pub data: &'a [u8],
    /// The frame continues in the next descriptor (`XDP_PKT_CONTD`).
    pub more: bool,
}

impl XskSocket {
    /// Opens a socket on queue `queue` of `ifname` with a UMEM of `frames` chunks (a power of
    /// two, at least 64) and RX and fill rings of as many entries.
    pub fn open(ifname: &str, queue: u32, frames: u32) -> Result<XskSocket, Error> {
        let ifindex = netif::ifindex(ifname)?;
        if !netif::is_up(ifname)? {
            return Err(crate::error::Error::InterfaceDown(ifname.to_owned()).into());
        }
        let frames = frames.max(64).next_power_of_two();
        // SAFETY: plain socket(2) call.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        let fd = fd_from(raw as libc::c_long, "opening an AF_XDP socket")?;
        let umem = AlignedBuf::new(frames as usize * CHUNK, true)
            .map_err(|source| Error::Os { what: "allocating the AF_XDP UMEM", source })?;
        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: (frames as usize * CHUNK) as u64,
            chunk_size: CHUNK as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(fd.as_raw_fd(), libc::XDP_UMEM_REG, &reg, "registering the AF_XDP UMEM")?;
        setsockopt(fd.as_raw_fd(), libc::XDP_UMEM_FILL_RING, &frames, "sizing the AF_XDP fill ring")?;
        // Required by bind even for a socket that never sends; it stays unmapped.
        setsockopt(fd.as_raw_fd(), libc::XDP_UMEM_COMPLETION_RING, &64u32, "sizing the AF_XDP completion ring")?;
        setsockopt(fd.as_raw_fd(), libc::XDP_RX_RING, &frames, "sizing the AF_XDP RX ring")?;
        // SAFETY: xdp_mmap_offsets is plain integers; all zero bytes is a valid value.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        getsockopt(fd.as_raw_fd(), libc::XDP_MMAP_OFFSETS, &mut off, "reading the AF_XDP ring offsets")?;
        let rx = XskRing::map(fd.as_raw_fd(), &off.rx, frames, size_of::<libc::xdp_desc>(), libc::XDP_PGOFF_RX_RING)?;
        let fill =
            XskRing::map(fd.as_raw_fd(), &off.fr, frames, size_of::<u64>(), libc::XDP_UMEM_PGOFF_FILL_RING as i64)?;
        let mut s = XskSocket {
            rx,
            fill,
            fd,
            umem,
            pending: 0,
            rx_cons: 0,
            fill_prod: 0,
            zerocopy: false,
            queue,
            ifname: ifname.to_owned(),
        };
        s.rx_cons = s.rx.consumer().load(Ordering::Relaxed);
        s.fill_prod = s.fill.producer().load(Ordering::Relaxed);
        // Every chunk to the kernel.
        for i in 0..frames {
            s.fill_slot(u64::from(i) * CHUNK as u64);
        }
        s.fill.producer().store(s.fill_prod, Ordering::Release);

        let sa = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_USE_NEED_WAKEUP | libc::XDP_USE_SG,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a valid sockaddr_xdp and its size is passed.
        let rc = unsafe {
            libc::bind(
                s.fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_xdp).cast(),
                size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EBUSY) {
                return Err(Error::QueueBusy { ifname: ifname.to_owned(), queue });
            }
            return Err(os("binding the AF_XDP socket to the interface queue"));
        }
        let mut opts = libc::xdp_options { flags: 0 };
        if getsockopt(s.fd.as_raw_fd(), libc::XDP_OPTIONS, &mut opts, "reading the AF_XDP options").is_ok() {
            s.zerocopy = opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0;
        }
        Ok(s)
    }

    /// Writes one address into the next fill slot (not published).
    fn fill_slot(&mut self, addr: u64) {
        let i = (self.fill_prod & self.fill.mask) as usize;
        // SAFETY: slot `i` is within the fill ring's descriptor array (mask = entries - 1); it is
        // ours to write: the UMEM has as many chunks as the ring has slots, so a slot past the
        // kernel's consumer never holds an address the kernel has not taken yet.
        unsafe { self.fill.desc.cast::<u64>().add(i).write_volatile(addr) };
        self.fill_prod = self.fill_prod.wrapping_add(1);
    }

    /// True if the kernel copies frames into the UMEM (the driver has no zero-copy AF_XDP).
    pub fn zerocopy(&self) -> bool {
        self.zerocopy
    }

    /// Entries of the RX ring (= chunks of the UMEM).
    pub fn frames(&self) -> u32 {
        self.rx.mask + 1
    }

    /// The receive queue this socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Number of RX descriptors ready to read (from the last [`release`](Self::release) on).
    /// Waits up to `timeout_ms` (`poll(2)`) when there are none. Descriptors of a frame the
    /// kernel has not finished publishing (the last one has `more`) are not counted.
    pub fn peek(&mut self, timeout_ms: i32) -> Result<u32, Error> {
        let mut n = self.ready();
        if n == 0 && timeout_ms != 0 {
            let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid, exclusively borrowed pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Err(os("waiting for frames (poll on the AF_XDP socket)"));
            }
            n = self.ready();
            if n == 0 && pfd.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                // The kernel unbinds the socket when the interface goes away (ENETDOWN).
                return Err(crate::error::Error::InterfaceDown(self.ifname.clone()).into());
            }
        }
        // Whole frames only.
        while n > 0 && self.desc(n - 1).more {
            n -= 1;
        }
        self.pending = n;
        Ok(n)
    }

    fn ready(&self) -> u32 {
        self.rx.producer().load(Ordering::Acquire).wrapping_sub(self.rx_cons)
    }

    fn raw_desc(&self, i: u32) -> libc::xdp_desc {
        let slot = (self.rx_cons.wrapping_add(i) & self.rx.mask) as usize;
        // SAFETY: `slot` is within the RX ring's descriptor array; the kernel published it
        // (i < producer - consumer, producer loaded with Acquire) and will not touch it until we
        // move the consumer index past it.
        unsafe { self.rx.desc.cast::<libc::xdp_desc>().add(slot).read_volatile() }
    }

    /// Descriptor `i` (below what [`peek`](Self::peek) returned).
    pub fn desc(&self, i: u32) -> Desc<'_> {
        let d = self.raw_desc(i);
        let (addr, len) = (d.addr as usize, d.len as usize);
        let data = if addr.checked_add(len).is_some_and(|end| end <= self.umem.len()) {
            // SAFETY: the range lies inside the UMEM (checked), which lives as long as `self`; the
            // kernel wrote the frame before publishing the descriptor and does not write this
            // chunk again before we hand it back through the fill ring in `release`.
            unsafe { std::slice::from_raw_parts(self.umem.as_ptr().add(addr), len) }
        } else {
            &[]
        };
        Desc { data, more: d.options & libc::XDP_PKT_CONTD != 0 }
    }

    /// The stamp the program put in front of descriptor `i`'s frame (`CLOCK_MONOTONIC`
    /// nanoseconds, see the module documentation), or None when there is none (the driver had
    /// no room for metadata; a frame's later descriptors never carry one). The place is cleared
    /// as it is read, so that a chunk filled later without a stamp never shows this one.
    pub fn take_stamp(&self, i: u32) -> Option<u64> {
        let addr = self.raw_desc(i).addr as usize;
        if addr % CHUNK < STAMP_LEN || addr > self.umem.len() {
            return None;
        }
        // SAFETY: the 8 bytes lie inside the UMEM (checked) and inside the frame's own chunk,
        // just before its first byte: no slice `desc` hands out covers them. The kernel wrote
        // them before publishing the descriptor and does not touch the chunk again before we
        // hand it back in `release`. The UMEM starts zeroed (an anonymous mapping).
        unsafe {
            let p = self.umem.as_ptr().add(addr - STAMP_LEN).cast::<u64>();
            let v = p.read_unaligned();
            p.write_unaligned(0);
            (v != 0).then_some(v)
        }
    }

    /// Hands the `n` first peeked descriptors' chunks back to the kernel, and wakes the driver
    /// when it asks for it (`XDP_RING_NEED_WAKEUP` on the fill ring).
    pub fn release(&mut self, n: u32) {
        let n = n.min(self.pending);
        for i in 0..n {
            let addr = self.raw_desc(i).addr & !(CHUNK as u64 - 1);
            self.fill_slot(addr);
        }
        self.fill.producer().store(self.fill_prod, Ordering::Release);
        self.rx_cons = self.rx_cons.wrapping_add(n);
        self.rx.consumer().store(self.rx_cons, Ordering::Release);
        self.pending -= n;
        if self.fill.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0 {
            // SAFETY: a zero-length, non-blocking recvfrom with no buffer: only kicks the driver.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// The socket's kernel counters (cumulative).
    pub fn stats(&self) -> Result<Stats, Error> {
        // SAFETY: plain integers; all zero bytes is a valid value.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(self.fd.as_raw_fd(), libc::XDP_STATISTICS, &mut s, "reading the AF_XDP counters")?;
        Ok(Stats {
            rx_dropped: s.rx_dropped,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
            rx_invalid_descs: s.rx_invalid_descs,
        })
    }
}

impl std::fmt::Debug for XskSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSocket")
            .field("fd", &self.fd.as_raw_fd())
            .field("queue", &self.queue)
            .field("zerocopy", &self.zerocopy)
            .finish()
    }
}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, val: &T, what: &'static str) -> Result<(), Error> {
    // SAFETY: `val` is a valid `T` for the duration of the call and `size_of::<T>()` is its
    // size; each caller passes the type the option expects.
    let rc = unsafe { libc::setsockopt(fd, libc::SOL_XDP, name, (val as *const T).cast(), size_of::<T>() as _) };
    if rc < 0 {
        return Err(os(what));
    }
    Ok(())
}

fn getsockopt<T>(fd: RawFd, name: libc::c_int, out: &mut T, what: &'static str) -> Result<(), Error> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is valid for writes of `size_of::<T>()` bytes, the length we pass; the kernel
    // writes at most that many. Callers pass plain integer structs (any bytes valid).
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (out as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(os(what));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let p = program(7);
        // struct bpf_insn is 8 bytes: code, dst|src<<4, off, imm.
        assert_eq!(size_of::<Insn>(), 8);
        assert_eq!((p[0].code, p[0].regs), (0xbf, 0x16));
        assert_eq!((p[1].code, p[1].imm), (0x85, 5));
        assert_eq!((p[4].regs, p[4].imm), (2, -8));
        assert_eq!((p[5].code, p[5].imm), (0x85, 54));
        // Both jumps land on the queue index's load.
        assert_eq!(6 + 1 + p[6].off as usize, 13);
        assert_eq!(11 + 1 + p[11].off as usize, 13);
        assert_eq!((p[12].code, p[12].regs), (0x7b, 0x72));
        assert_eq!((p[13].code, p[13].regs, p[13].off), (0x61, 0x62, 16));
        assert_eq!((p[14].code, p[14].regs, p[14].imm), (0x18, 0x11, 7));
        assert_eq!((p[16].regs, p[16].imm), (3, XDP_PASS));
        assert_eq!((p[17].code, p[17].imm), (0x85, 51));
        assert_eq!(p[18].code, 0x95);
    }

    #[test]
    fn loads_when_root() {
        // SAFETY: plain getuid(2).
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let p = XdpProgram::load(4).unwrap();
        assert_eq!(p.queues(), 4);
        p.remove(0).unwrap();
    }
}
