//! The blocks of a TPACKET_V3 ring while user space owns them, and the
//! walk over their packets (kernel structs read from the shared bytes,
//! each through a view checked once to lie inside the block: offsets come
//! from the kernel and are checked, never trusted).

use super::*;
use wv_wire::octets::{Endian, Octets};

/// A block of packets owned by user space until dropped (from [`Ring::next_block`]), or a view
/// of a block a [`super::BlockWriter`] holds (which hands it back itself).
///
/// Invariant: `ptr..ptr + len` is one block of the ring's mapping whose status word had
/// `TP_STATUS_USER` when the block was created (loaded with `Acquire`), so the kernel does not
/// write it until `TP_STATUS_KERNEL` is stored (by `drop` when `release`, else by the
/// `BlockWriter`); the `&mut Ring` (or `&mut BlockWriter`) borrow keeps the mapping alive and
/// prevents a second `Block` from existing; no write of the block is in flight while it exists.
pub struct Block<'a> {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
    pub(super) status: u32,
    /// Dropping the block hands it back to the kernel.
    pub(super) release: bool,
    pub(super) _ring: PhantomData<&'a mut Ring>,
}

impl std::fmt::Debug for Block<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("seq_num", &self.seq_num())
            .field("num_frames", &self.num_frames())
            .field("status", &format_args!("{:#x}", self.status))
            .finish()
    }
}

impl Block<'_> {
    /// The block's bytes (header and packets).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: see the type invariant: the range is mapped and the kernel leaves it alone
        // while we own the block; the slice borrows `self`, so it ends before `drop` hands the
        // block back.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The packets of this block, in arrival order.
    pub fn frames(&self) -> Frames<'_> {
        let block = self.bytes();
        Frames {
            block,
            off: read_u32(block, BLOCK_FIRST_PKT).map_or(usize::MAX, |o| o as usize),
            left: self.num_frames(),
        }
    }

    /// Number of packets the kernel says the block holds.
    pub fn num_frames(&self) -> u32 {
        read_u32(self.bytes(), BLOCK_NUM_PKTS).unwrap_or(0)
    }

    /// The kernel's sequence number of this block (increments by one per block handed over).
    pub fn seq_num(&self) -> u64 {
        Octets::new(self.bytes(), Endian::NATIVE).at(BLOCK_SEQ_NUM).and_then(|mut o| o.get_u64()).unwrap_or(0)
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        if !self.release {
            return;
        }
        // SAFETY: the status word is inside the block (BLOCK_STATUS + 4 <= block size) and
        // 4-byte aligned (blocks are page aligned); the kernel accesses it concurrently, so it
        // is only accessed atomically. No slice of the block is alive (they all borrow `self`).
        // Release orders all our reads of the block before the kernel, which checks the status
        // before reusing a block, can see it as its own again and overwrite it.
        let status = unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(BLOCK_STATUS).cast()) };
        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
}

/// One packet of a block that [`Block::rewrite_pcapng`] turned into an Enhanced Packet Block in
/// place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZcRecord {
    /// Offset of the EPB in the block (4-byte aligned).
    pub epb: u32,
    /// The EPB's total length (header, padded data, options if any, trailer).
    pub len: u32,
    /// Receive time, nanoseconds since the epoch.
    pub ts_ns: u64,
    /// Bytes stored (after the VLAN tag went back in and the snapshot length cut).
    pub caplen: u32,
    /// Length on the wire (with a re-inserted VLAN tag).
    pub origlen: u32,
}

/// A frame's kernel header, checked (see [`header_at`]).
#[derive(Debug, Clone, Copy)]
struct Header {
    /// Offset of the frame's data in the block.
    at: usize,
    caplen: usize,
    origlen: u32,
    ts_ns: u64,
    hw_stamp: bool,
    vlan: Option<Vlan>,
}

impl ZcRecord {
    /// Offset of the stored bytes in the block.
    pub fn data(&self) -> usize {
        self.epb as usize + wv_wire::pcapng::EPB_HEADER_LEN
    }
}

/// What [`Block::rewrite_pcapng`] made of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rewritten {
    /// Bytes from the block's start to write: the records and the blocks that cover the gaps,
    /// up to a 4 KiB boundary (0: no packet).
    pub len: usize,
    /// Frames that could not be turned into a record where they lie (not 4-byte aligned: a ring
    /// opened without [`Ring::open_zero_copy`], or a link type whose header is not 14 + 4n
    /// bytes). They are covered by skip blocks, not stored.
    pub misplaced: u32,
    /// Of the records: the sum of their stored and wire lengths, and how many have a hardware
    /// stamp (the counters, without a second walk over the records).
    pub stored_bytes: u64,
    pub wire_bytes: u64,
    pub hw_stamps: u32,
}

const SKIP_ALIGN: usize = 4096;

/// How many frames ahead [`ahead`] asks for lines. Measured with bench/live.sh: in the zero-copy
/// rewrite, four frames ahead left half its time on the header loads; sixteen cut the path's CPU
/// per 1514-byte packet by about a fifth (thirty-two did no better), and asking from frames 64
/// bytes apart (not 256) saved about a sixth at 64-byte frames (160 bytes apart).
const PREFETCH_FRAMES: usize = 16;

/// Asks for the lines of the frame [`PREFETCH_FRAMES`] ahead of `h` (a frame just read),
/// guessing where it is from `stride`, the distance to the next frame: the
/// kernel wrote the ring's lines on the sender's core, and a walk from header to header is a
/// chain of dependent loads that the hardware prefetcher does not follow once frames are a few
/// lines apart. Floods and bulk transfers keep one frame length, so the guess is usually right;
/// a wrong one costs a wasted line, never a fault. Asks, with the intent to write them, for the
/// line of the kernel header before the data, the data's first line and its last.
#[inline(always)]
fn ahead(b: &[u8], h: &Header, stride: usize) {
    if (64..1 << 16).contains(&stride) {
        let a = b.as_ptr().wrapping_add(h.at + PREFETCH_FRAMES * stride);
        let lines = [a.wrapping_sub(wv_wire::pcapng::EPB_HEADER_LEN + 64), a, a.wrapping_add(h.caplen)];
        lines.into_iter().for_each(crate::mem::prefetch_write);
    }
}

/// The kernel's header (`tpacket3_hdr`) at `off` of block `b`, and its `tp_next_offset` as it
/// is in memory now; none unless the header and its frame lie inside the block. The header is
/// read field by field at its offsets from a fixed-size view (the one bounds check is that the
/// header lies inside the block; the offsets are constants, so the reads need none).
#[inline(always)]
fn header_at(b: &[u8], off: usize) -> Option<(Header, u32)> {
    if off < BLOCK_HDR_LEN {
        return None;
    }
    let h: &[u8; PKT_HDR_LEN] = b.get(off..)?.first_chunk()?;
    use libc::{tpacket3_hdr as T, tpacket_hdr_variant1 as V};
    let u32_at = |o: usize| u32::from_ne_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let u16_at = |o: usize| u16::from_ne_bytes([h[o], h[o + 1]]);
    let next = u32_at(offset_of!(T, tp_next_offset));
    let sec = u32_at(offset_of!(T, tp_sec));
    let nsec = u32_at(offset_of!(T, tp_nsec));
    let snaplen = u32_at(offset_of!(T, tp_snaplen)) as usize;
    let wire_len = u32_at(offset_of!(T, tp_len));
    let status = u32_at(offset_of!(T, tp_status));
    let mac = u16_at(offset_of!(T, tp_mac)) as usize;
    let hv1 = offset_of!(T, hv1);
    let tci = u32_at(hv1 + offset_of!(V, tp_vlan_tci));
    let tpid = u16_at(hv1 + offset_of!(V, tp_vlan_tpid));
    let start = off.checked_add(mac)?;
    if start.checked_add(snaplen)? > b.len() {
        return None;
    }
    let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(Vlan {
        tpid: if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { tpid } else { 0x8100 },
        tci: tci as u16,
    });
    let hw_stamp = status & libc::TP_STATUS_TS_RAW_HARDWARE != 0;
    let ts_ns = u64::from(sec) * 1_000_000_000 + u64::from(nsec);
    Some((Header { at: start, caplen: snaplen, origlen: wire_len, ts_ns, hw_stamp, vlan }, next))
}

impl Block<'_> {
    /// The block's bytes, writable: the block is ours until dropped.
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: see the type invariant: the range is mapped and the kernel does not touch it
        // while we own the block; `&mut self` makes this the only slice of it, and it ends before
        // `drop` hands the block back.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Rewrites the block in place into a run of pcapng blocks (the zero-copy path): each frame's
    /// kernel header becomes an Enhanced Packet Block header right before the frame's bytes
    /// (28 bytes, which the kernel's header and `sockaddr_ll` leave room for), the frame's data
    /// stays where the kernel put it, padded to 4 bytes and followed by the EPB's trailing
    /// length; the block descriptor, the gaps between frames and the rest up to the next 4 KiB
    /// boundary become local-use blocks readers skip ([`wv_wire::pcapng::BT_LOCAL_SKIP`]); a gap
    /// too small for a block (4 or 8 bytes) becomes an option of the EPB before it
    /// (`opt_endofopt`, or `epb_flags` = 0). A stripped VLAN tag goes back after the MAC
    /// addresses (`reinsert_vlan`, Ethernet: the 12 address bytes move 4 bytes forward), then the
    /// record is cut at `snaplen`. The records go into `out` (cleared first), in block order.
    ///
    /// One pass, each record written right after its frame's header is read, while its lines
    /// are in the cache (a whole block's headers first, then its records, made every line of a
    /// 4 MiB block of small frames come from memory twice; 64 headers at a time, then their
    /// records, cost 285 instructions per 64-byte frame against 197 for a pass). An EPB's
    /// padding and trailer may cover the first word of the next frame's kernel header, its
    /// `tp_next_offset`, which is therefore read before the record is written and carried to
    /// the next turn. They cannot reach further: the kernel starts each frame at the frame
    /// before's end rounded up to 8 bytes (`TOTAL_PKT_LEN_INCL_ALIGN`), and the trailer starts
    /// at the data's end rounded up to 4. Had a kernel packed frames tighter (without
    /// overlapping them), the trailer would reach the next header's `tp_sec` at most: a wrong
    /// second in that frame's stamp, never a frame lost or a record that does not parse. A block
    /// whose frames overlap (a `tp_next_offset` shorter than the frame: never from the kernel)
    /// may have a header's later fields covered before they are read: the walk visits the same
    /// frames, each checked to lie in the block, but such a frame's length, stamp or placement
    /// may be wrong.
    /// (Instructions per 64-byte frame, `afpacket::cost::rewrite_cost` under callgrind,
    /// 2026-11-28: the whole next header read first and both frames' fields kept, 176; the
    /// next frame's first word only, 155.)
    pub fn rewrite_pcapng(&mut self, snaplen: u32, reinsert_vlan: bool, out: &mut Vec<ZcRecord>) -> Rewritten {
        self.rewrite_pcapng_each(snaplen, reinsert_vlan, out, |_, _| {})
    }

    /// [`Block::rewrite_pcapng`], handing each record to `each` with the block's bytes right
    /// after it is written, while its lines are in the cache (the zero-copy writer indexes it
    /// there instead of walking the block again). A record's fields and bytes are final then;
    /// only its length may still grow by the options that cover a 4- or 8-byte gap after it.
    pub fn rewrite_pcapng_each(
        &mut self,
        snaplen: u32,
        reinsert_vlan: bool,
        out: &mut Vec<ZcRecord>,
        mut each: impl FnMut(&[u8], &ZcRecord),
    ) -> Rewritten {
        use wv_wire::pcapng::{pad4, BT_EPB, BT_LOCAL_SKIP, EPB_HEADER_LEN, MIN_BLOCK_LEN};
        out.clear();
        let first = self.frames();
        let (mut off, mut left) = (first.off, first.left);
        let b = self.bytes_mut();
        let put = |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        let mut res = Rewritten::default();
        let mut cursor = 0usize;
        // The `tp_next_offset` of the frame at `off`, read before the record before it was
        // written (see above).
        let mut next = if left > 0 { read_u32(b, off) } else { None };
        while let Some(stride) = next {
            let Some((h, _)) = header_at(b, off) else { break };
            left -= 1;
            // The walk's rule (`Frames::parse`), written out here: as a shared function it
            // cost 8 instructions a frame.
            let next_off = if left > 0 && stride != 0 { off.saturating_add(stride as usize) } else { usize::MAX };
            next = read_u32(b, next_off);
            if next.is_some() {
                ahead(b, &h, stride as usize);
            }
            let (mut d, mut n, mut orig) = (h.at, h.caplen, h.origlen);
            if let (Some(v), true) = (h.vlan, reinsert_vlan && n >= 12 && d >= 4) {
                b.copy_within(d..d + 12, d - 4);
                b[d + 8..d + 10].copy_from_slice(&v.tpid.to_be_bytes());
                b[d + 10..d + 12].copy_from_slice(&v.tci.to_be_bytes());
                d -= 4;
                n += 4;
                orig += 4;
            }
            let caplen = n.min(snaplen as usize);
            let padded = pad4(caplen);
            let total = EPB_HEADER_LEN + padded + 4;
            let placed = d.is_multiple_of(4) && d >= cursor + EPB_HEADER_LEN && d + padded + 4 <= b.len();
            let epb = d.wrapping_sub(EPB_HEADER_LEN);
            // The gap before the record: most often a skip block (a kernel header, or more),
            // written here; 4 or 8 bytes go into the record before it (`cover`).
            let covered = placed
                && if epb - cursor >= MIN_BLOCK_LEN as usize {
                    put(b, cursor, BT_LOCAL_SKIP);
                    put(b, cursor + 4, (epb - cursor) as u32);
                    put(b, epb - 4, (epb - cursor) as u32);
                    true
                } else {
                    cover(b, cursor, epb, out)
                };
            if covered {
                // The header as seven words into one 28-byte view, then the data's padding
                // (0-3 bytes) as one 4-byte store of zeros, which the trailing length
                // written next overlaps where the padding is shorter (a fill of a run-time
                // length is a call to memset: 5.7% of the capture thread's samples at
                // 1514 B, 2026-11-28).
                let words = [BT_EPB, total as u32, 0, (h.ts_ns >> 32) as u32, h.ts_ns as u32, caplen as u32, orig];
                let head: &mut [u8; EPB_HEADER_LEN] = (&mut b[epb..d]).try_into().expect("28 bytes");
                for (w, v) in head.chunks_exact_mut(4).zip(words) {
                    w.copy_from_slice(&v.to_le_bytes());
                }
                // In the block: d + padded + 4 <= b.len() (placed), caplen + 4 <= padded + 4.
                let tail = &mut b[d..d + padded + 4];
                tail[caplen..caplen + 4].copy_from_slice(&[0; 4]);
                tail[padded..padded + 4].copy_from_slice(&(total as u32).to_le_bytes());
                let rec = ZcRecord {
                    epb: epb as u32,
                    len: total as u32,
                    ts_ns: h.ts_ns,
                    caplen: caplen as u32,
                    origlen: orig,
                };
                each(b, &rec);
                out.push(rec);
                res.stored_bytes += caplen as u64;
                res.wire_bytes += u64::from(orig);
                res.hw_stamps += u32::from(h.hw_stamp);
                cursor = epb + total;
            } else {
                res.misplaced += 1;
            }
            off = next_off;
        }
        if out.is_empty() {
            return res;
        }
        let end = cursor.next_multiple_of(SKIP_ALIGN).min(b.len());
        if cover(b, cursor, end, out) {
            res.len = end;
        } else {
            // Cannot happen (a gap below 12 bytes always follows a record), but never write a
            // block that would not parse.
            res.misplaced += out.len() as u32;
            out.clear();
            (res.stored_bytes, res.wire_bytes, res.hw_stamps) = (0, 0, 0);
        }
        res
    }

    /// Turns record `r` of a rewritten block into a block readers skip (`skip`), or back into
    /// its EPB: the two differ only in the block type, so a record can be left out of one file
    /// and written to the next (a time boundary inside a ring block), or dropped (the count
    /// limit) without moving a byte.
    pub fn set_skipped(&mut self, r: &ZcRecord, skip: bool) {
        use wv_wire::pcapng::{BT_EPB, BT_LOCAL_SKIP};
        let at = r.epb as usize;
        let t = if skip { BT_LOCAL_SKIP } else { BT_EPB };
        if let Some(w) = self.bytes_mut().get_mut(at..at + 4) {
            w.copy_from_slice(&t.to_le_bytes());
        }
    }
}

/// Covers `[from, to)` of a block being rewritten with pcapng: nothing if empty, a local-use
/// block if it can hold one (12 bytes or more), else (4 or 8 bytes) options appended to the
/// record just before it (`opt_endofopt`, or `epb_flags` = 0). False if none of these fits.
fn cover(b: &mut [u8], from: usize, to: usize, before: &mut [ZcRecord]) -> bool {
    use wv_wire::pcapng::{BT_LOCAL_SKIP, EPB_FLAGS, MIN_BLOCK_LEN, OPT_ENDOFOPT};
    let put = |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let gap = to - from;
    if gap == 0 {
        return true;
    }
    if gap >= MIN_BLOCK_LEN as usize {
        put(b, from, BT_LOCAL_SKIP);
        put(b, from + 4, gap as u32);
        put(b, to - 4, gap as u32);
        return true;
    }
    let Some(r) = before.last_mut().filter(|r| r.epb as usize + r.len as usize == from && gap.is_multiple_of(4)) else {
        return false;
    };
    // The old trailer's place starts the options.
    let opts = from - 4;
    if gap == 4 {
        put(b, opts, u32::from(OPT_ENDOFOPT));
    } else {
        put(b, opts, u32::from(EPB_FLAGS) | 4 << 16);
        put(b, opts + 4, 0);
    }
    r.len += gap as u32;
    put(b, r.epb as usize + 4, r.len);
    put(b, to - 4, r.len);
    true
}

/// Iterator over the packets of a [`Block`]. Offsets come from the kernel and are checked: a
/// packet header or frame that does not lie inside the block ends the walk.
#[derive(Debug, Clone)]
pub struct Frames<'b> {
    pub(super) block: &'b [u8],
    pub(super) off: usize,
    pub(super) left: u32,
}

impl<'b> Iterator for Frames<'b> {
    type Item = Frame<'b>;

    fn next(&mut self) -> Option<Frame<'b>> {
        if self.left == 0 {
            return None;
        }
        let frame = self.parse();
        if frame.is_none() {
            self.left = 0;
        }
        frame
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

impl<'b> Frames<'b> {
    fn parse(&mut self) -> Option<Frame<'b>> {
        let off = self.off;
        let (h, next) = header_at(self.block, off)?;
        self.left -= 1;
        // The last packet has tp_next_offset 0; a 0 before it would loop on one packet.
        self.off = if self.left > 0 && next != 0 { off.checked_add(next as usize)? } else { usize::MAX };
        let data = &self.block[h.at..h.at + h.caplen];
        Some(Frame { ts_ns: h.ts_ns, hw_stamp: h.hw_stamp, wire_len: h.origlen, data, vlan: h.vlan })
    }
}

/// The word at `off` of `b` in the machine's byte order (a field of the block header,
/// `tpacket_block_desc`, or a frame's `tp_next_offset`), if it lies inside.
#[inline(always)]
fn read_u32(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..)?.first_chunk().map(|w| u32::from_ne_bytes(*w))
}
