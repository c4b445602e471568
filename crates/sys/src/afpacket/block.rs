//! The blocks of a TPACKET_V3 ring while user space owns them, and the
//! walk over their packets (kernel structs read from the shared bytes with
//! the bounds-checked [`Octets`] reader: offsets come from the kernel and
//! are checked, never trusted).

use super::*;
use wv_wire::octets::{Endian, Octets};

/// A block of packets owned by user space until dropped.
///
/// Invariant: `ptr..ptr + len` is one block of the ring's mapping whose status word had
/// `TP_STATUS_USER` when the block was created (loaded with `Acquire`), so the kernel does not
/// write it until `drop` stores `TP_STATUS_KERNEL`; the `&mut Ring` borrow keeps the mapping
/// alive and prevents a second `Block` from existing.
pub struct Block<'a> {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
    pub(super) status: u32,
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
    fn bytes(&self) -> &[u8] {
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

    /// The block was handed over by the retire timer, not because it was full.
    pub fn timed_out(&self) -> bool {
        self.status & libc::TP_STATUS_BLK_TMO != 0
    }

    /// The kernel dropped packets since the counters were last read (`TP_STATUS_LOSING`).
    pub fn losing(&self) -> bool {
        self.status & libc::TP_STATUS_LOSING != 0
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        // SAFETY: the status word is inside the block (BLOCK_STATUS + 4 <= block size) and
        // 4-byte aligned (blocks are page aligned); the kernel accesses it concurrently, so it
        // is only accessed atomically. No slice of the block is alive (they all borrow `self`).
        // Release orders all our reads of the block before the kernel, which checks the status
        // before reusing a block, can see it as its own again and overwrite it.
        let status = unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(BLOCK_STATUS).cast()) };
        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
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
        if off < BLOCK_HDR_LEN || off.checked_add(PKT_HDR_LEN)? > self.block.len() {
            return None;
        }
        // The kernel's tpacket3_hdr, in the machine's byte order, read
        // field by field at its offsets (all inside PKT_HDR_LEN, checked above).
        let h = Octets::new(self.block.get(off..off + PKT_HDR_LEN)?, Endian::NATIVE);
        use libc::{tpacket3_hdr as T, tpacket_hdr_variant1 as V};
        let u32_at = |o: usize| h.at(o).and_then(|mut f| f.get_u32());
        let u16_at = |o: usize| h.at(o).and_then(|mut f| f.get_u16());
        let next = u32_at(offset_of!(T, tp_next_offset))? as usize;
        let sec = u32_at(offset_of!(T, tp_sec))?;
        let nsec = u32_at(offset_of!(T, tp_nsec))?;
        let snaplen = u32_at(offset_of!(T, tp_snaplen))? as usize;
        let wire_len = u32_at(offset_of!(T, tp_len))?;
        let status = u32_at(offset_of!(T, tp_status))?;
        let mac = u16_at(offset_of!(T, tp_mac))? as usize;
        let hv1 = offset_of!(T, hv1);
        let tci = u32_at(hv1 + offset_of!(V, tp_vlan_tci))?;
        let tpid = u16_at(hv1 + offset_of!(V, tp_vlan_tpid))?;

        let start = off.checked_add(mac)?;
        let data = self.block.get(start..start.checked_add(snaplen)?)?;
        let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(Vlan {
            tpid: if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 { tpid } else { 0x8100 },
            tci: tci as u16,
        });

        self.left -= 1;
        // The last packet has tp_next_offset 0; a 0 before it would loop on one packet.
        self.off = if self.left > 0 && next != 0 { off.checked_add(next)? } else { usize::MAX };
        let hw_stamp = status & libc::TP_STATUS_TS_RAW_HARDWARE != 0;
        Some(Frame { ts_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec), hw_stamp, wire_len, data, vlan })
    }
}

/// A field of the block header (`tpacket_block_desc`), in the machine's byte order.
fn read_u32(b: &[u8], off: usize) -> Option<u32> {
    Octets::new(b, Endian::NATIVE).at(off)?.get_u32()
}
