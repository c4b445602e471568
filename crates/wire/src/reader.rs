//! Streaming reader of pcap and pcapng files (`--read`, ingest of foreign
//! captures), built to deliver exactly the packets `tcpdump -r FILE` sees.
//!
//! The semantics follow libpcap 1.10 (`sf-pcap.c`, `sf-pcapng.c`), because a
//! file that tcpdump reads one way and wirevault another would be a silent
//! data difference:
//!
//! * pcap: all four magics (µs/ns × LE/BE) and Kuznetzov's patched format;
//!   a record longer than the file's snapshot length is truncated to it (the
//!   rest skipped), one longer than the link type's maximum is an error; the
//!   caplen/origlen swap of version ≤ 2.3 files is undone.
//! * pcapng: SPB, EPB and the obsolete PB are packets, IDBs and SHBs change
//!   state, every other block type is skipped. Block lengths are validated
//!   (both copies, multiple of 4, at least 12, at most [`MAX_BLOCK_LEN`]).
//!   An EPB whose caplen exceeds its interface's snaplen is an error (libpcap
//!   does not truncate in pcapng).
//!
//! Deliberate differences from libpcap, all in the direction of reading more:
//! interfaces of one file may have different link types and snaplens, and
//! sections may change byte order (libpcap stops with an error at such an
//! IDB/SHB). Records above [`MAX_BLOCK_LEN`] are rejected even for the link
//! types (D-Bus, EBHSCR) for which libpcap accepts up to 128 MiB, so that a
//! hostile length field can never make us allocate more than that.
//!
//! Performance: one internal buffer (default 1 MiB) is filled straight from
//! the inner reader, and packets are handed out as slices of it, so each byte
//! is copied once and nothing is allocated per packet. Pass a plain `File`,
//! not a `BufReader`, to avoid a second copy.

use std::fmt;
use std::io::{self, Read};

use crate::octets::{Endian, Octets};
use crate::pcap::{self, Precision, RecordHeader};
use crate::pcapng::{
    self, BlockHeader, EnhancedPacket, InterfaceDescription, SectionHeader, BLOCK_HEADER_LEN, BLOCK_TRAILER_LEN,
    BT_EPB, BT_IDB, BT_PB, BT_SHB, BT_SPB, EPB_BODY_LEN, IDB_BODY_LEN, MIN_BLOCK_LEN, SHB_BODY_LEN, SPB_BODY_LEN,
};

mod idb;

#[cfg(test)]
use idb::Scale;
use idb::{parse_idb, Interface};

/// Size of the internal buffer [`Reader::new`] allocates.
pub const DEFAULT_BUFFER_LEN: usize = 1 << 20;
/// Largest pcapng block, and largest pcap record, the reader accepts. It
/// bounds the memory a hostile length field can make us allocate; libpcap
/// starts its own limit at the same 16 MiB.
pub const MAX_BLOCK_LEN: u32 = 16 << 20;
/// libpcap's sanity limit for the first Section Header Block
/// (`BT_SHB_INSANE_MAX`).
const MAX_FIRST_SHB_LEN: u32 = 1 << 20;
/// Most interfaces one section may declare; each costs us a few dozen bytes,
/// so this keeps a file of nothing but IDBs from growing memory without end.
pub const MAX_INTERFACES: usize = 1 << 20;

use crate::linktype::{effective_snaplen, max_snaplen as max_snaplen_for_linktype};

pub use crate::format::Format;

/// One packet, borrowed from the reader's buffer until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Nanoseconds since the epoch (pcapng: after `if_tsresol` and
    /// `if_tsoffset`; clamped to the `u64` range).
    pub ts_ns: u64,
    /// Captured length, always `data.len()`.
    pub caplen: u32,
    /// Length of the packet on the wire.
    pub origlen: u32,
    /// LINKTYPE_* of the packet's interface (pcap: the file's, FCS bits masked).
    pub linktype: u32,
    /// Effective snapshot length of the packet's interface (libpcap's rule:
    /// zero or above the link type's maximum means that maximum).
    pub snaplen: u32,
    /// Byte offset in the file of the record header (pcap) or block (pcapng).
    pub offset: u64,
    /// The pcap record header's bytes as stored (16, or 24 in the modified
    /// format); empty for pcapng. A record whose stored header equals the one
    /// written for (`ts_ns`, `caplen`, `origlen`) in a nanosecond
    /// little-endian file is stored exactly as it would be written.
    pub stored_header: &'a [u8],
    pub data: &'a [u8],
    /// The resolution the file declares for this packet's stamp (pcap: the
    /// magic's µs or ns; pcapng: its interface's `if_tsresol`).
    pub resolution: TsResolution,
    /// pcap: the record's sub-second field is out of range (µs ≥ 10^6 in a
    /// microsecond file, ns ≥ 10^9 in a nanosecond one). `ts_ns` carries it
    /// into the seconds; tshark shows it as invalid ("Fractional second ...
    /// is invalid") and the frame as a step in time. Always false for pcapng.
    pub fraction_out_of_range: bool,
}

/// The resolution a capture file declares for a stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TsResolution {
    /// 10^-n s (pcap: 6 or 9; pcapng `if_tsresol` n, 6 when absent).
    Decimal(u8),
    /// 2^-n s (pcapng `if_tsresol` with its high bit set).
    Binary(u8),
}

impl TsResolution {
    /// One unit in nanoseconds (not a whole number for most powers of two).
    pub fn unit_ns(self) -> f64 {
        match self {
            TsResolution::Decimal(n) => 1e9 / 10f64.powi(i32::from(n)),
            TsResolution::Binary(n) => 1e9 / 2f64.powi(i32::from(n)),
        }
    }
}

/// `10^-6 s (1 us)`, `2^-20 s (~954 ns)`.
impl fmt::Display for TsResolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.unit_ns();
        let (v, unit) = if ns >= 1e9 {
            (ns / 1e9, "s")
        } else if ns >= 1e6 {
            (ns / 1e6, "ms")
        } else if ns >= 1e3 {
            (ns / 1e3, "us")
        } else {
            (ns, "ns")
        };
        let exact = (v - v.round()).abs() < 1e-9;
        let v = if exact || v >= 10.0 { format!("{v:.0}") } else { format!("{v:.3}") };
        let about = if exact { "" } else { "~" };
        match self {
            TsResolution::Decimal(n) => write!(f, "10^-{n} s ({about}{v} {unit})"),
            TsResolution::Binary(n) => write!(f, "2^-{n} s ({about}{v} {unit})"),
        }
    }
}

/// Why a capture file cannot be read (further). Every variant names the
/// byte offset at which the problem is.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum ReadError {
    #[error("I/O error reading the capture file at offset {offset}: {source}")]
    Io {
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error("not a pcap or pcapng file (magic 0x{magic:08x})")]
    NotCapture { magic: u32 },
    #[error("truncated {what} at offset {offset}: needs {need} bytes, only {have} remain")]
    Truncated { what: &'static str, offset: u64, need: u64, have: u64 },
    #[error("truncated record at offset {offset}: header says {caplen} captured bytes, only {have} remain")]
    TruncatedRecord { offset: u64, caplen: u32, have: u64 },
    #[error("unsupported {format} version {major}.{minor} at offset {offset}")]
    UnsupportedVersion { format: Format, offset: u64, major: u16, minor: u16 },
    #[error("invalid packet capture length {caplen} at offset {offset}: bigger than the {limit} of {max}")]
    CaplenTooLarge { offset: u64, caplen: u32, limit: &'static str, max: u32 },
    #[error("block at offset {offset} has invalid total length {len}: {reason}")]
    BadBlockLength { offset: u64, len: u32, reason: &'static str },
    #[error("block at offset {offset} has total length {header} in its header but {trailer} in its trailer")]
    BlockLengthMismatch { offset: u64, header: u32, trailer: u32 },
    #[error("block of type 0x{block_type:08x} at offset {offset} is too short: {what} needs {need} bytes, the block body has {have}")]
    BlockTooShort { offset: u64, block_type: u32, what: &'static str, need: u64, have: u64 },
    #[error("section header block at offset {offset} has a bad byte-order magic 0x{magic:08x}")]
    BadByteOrderMagic { offset: u64, magic: u32 },
    #[error("interface description block at offset {offset}: {problem}")]
    BadInterface { offset: u64, problem: String },
    #[error("packet block at offset {offset} refers to interface {interface_id}, but its section has only {count} interface description blocks")]
    UnknownInterface { offset: u64, interface_id: u32, count: usize },
    #[error("more than {max} interface description blocks in one section (at offset {offset})")]
    TooManyInterfaces { offset: u64, max: usize },
    #[error("pcapng file has no interface description block (end of file at offset {offset})")]
    NoInterfaces { offset: u64 },
}

impl ReadError {
    /// The input had nothing to read yet and said so instead of waiting
    /// (`io::ErrorKind::WouldBlock`); the reader can be asked again.
    pub fn is_would_block(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == io::ErrorKind::WouldBlock)
    }

    /// The byte offset in the file the error refers to, when there is one.
    pub fn offset(&self) -> Option<u64> {
        use ReadError::*;
        match self {
            NotCapture { .. } => Some(0),
            Io { offset, .. }
            | Truncated { offset, .. }
            | TruncatedRecord { offset, .. }
            | UnsupportedVersion { offset, .. }
            | CaplenTooLarge { offset, .. }
            | BadBlockLength { offset, .. }
            | BlockLengthMismatch { offset, .. }
            | BlockTooShort { offset, .. }
            | BadByteOrderMagic { offset, .. }
            | BadInterface { offset, .. }
            | UnknownInterface { offset, .. }
            | TooManyInterfaces { offset, .. }
            | NoInterfaces { offset } => Some(*offset),
        }
    }
}

/// How a pcap file stores caplen and origlen (they were swapped before 2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LengthOrder {
    Normal,
    Swapped,
    /// Version 2.3: some writers swapped, some did not; libpcap swaps when
    /// caplen > origlen.
    Maybe,
}

#[derive(Debug, Clone, Copy)]
struct PcapState {
    endian: Endian,
    precision: Precision,
    header_len: usize,
    lengths: LengthOrder,
    linktype: u32,
    snaplen: u32,
    max_caplen: u32,
}

#[derive(Debug)]
struct PcapngState {
    /// Byte order of the current section.
    endian: Endian,
    /// Interfaces of the current section, by interface id.
    interfaces: Vec<Interface>,
    /// Whether any IDB appeared in the file (libpcap refuses a file without).
    seen_idb: bool,
}

#[derive(Debug)]
enum Kind {
    Pcap(PcapState),
    Pcapng(PcapngState),
}

/// Where a packet lies in the buffer, plus its header fields; turned into a
/// [`Packet`] only at the very end so that the borrow of the buffer starts
/// after all mutation.
struct Found {
    ts_ns: u64,
    caplen: u32,
    origlen: u32,
    linktype: u32,
    snaplen: u32,
    offset: u64,
    /// Start in the buffer of the pcap record header (`data_start` for pcapng).
    header_start: usize,
    data_start: usize,
    resolution: TsResolution,
    fraction_out_of_range: bool,
}

/// A validated pcapng block sitting in the buffer.
struct Block {
    offset: u64,
    block_type: u32,
    endian: Endian,
    /// Body (between header and trailer) as a range of `Reader::buf`.
    body_start: usize,
    body_end: usize,
}

/// A streaming reader of pcap and pcapng files; see the module docs.
pub struct Reader<R: Read> {
    inner: R,
    /// The buffer; its length is its usable size. Grows (up to about
    /// `MAX_BLOCK_LEN`) only when one block does not fit.
    buf: Vec<u8>,
    /// Unconsumed bytes are `buf[pos..end]`.
    pos: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    /// The inner reader returned 0: no more reads.
    eof: bool,
    /// An error was returned: every later call returns `Ok(None)`.
    failed: bool,
    /// A packet was returned.
    returned: bool,
    /// A section header or interface description block came after a packet.
    late_structure: bool,
    kind: Kind,
}

impl<R: Read> fmt::Debug for Reader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").field("offset", &self.offset()).field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl<R: Read> Reader<R> {
    /// Reads the file header (pcap) or first Section Header Block (pcapng)
    /// and returns a reader positioned at the first record.
    pub fn new(inner: R) -> Result<Self, ReadError> {
        Self::with_buffer_len(inner, DEFAULT_BUFFER_LEN)
    }

    /// Like [`Reader::new`] with a given initial buffer size (at least 64 KiB
    /// is used). Blocks larger than the buffer grow it.
    pub fn with_buffer_len(inner: R, len: usize) -> Result<Self, ReadError> {
        let mut r = Reader {
            inner,
            buf: vec![0; len.max(64 << 10)],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            failed: false,
            returned: false,
            late_structure: false,
            kind: Kind::Pcap(PcapState {
                endian: Endian::Little,
                precision: Precision::Micro,
                header_len: pcap::RECORD_HEADER_LEN,
                lengths: LengthOrder::Normal,
                linktype: 0,
                snaplen: 0,
                max_caplen: 0,
            }),
        };
        let have = r.fill(4)?;
        if have < 4 {
            return Err(r.truncated("file header", 4, have));
        }
        let is_pcapng = r.avail().first_chunk().is_some_and(|m| Format::sniff(*m) == Format::Pcapng);
        r.kind = if is_pcapng { Kind::Pcapng(r.open_pcapng()?) } else { Kind::Pcap(r.open_pcap()?) };
        Ok(r)
    }

    /// The container format of the file.
    pub fn format(&self) -> Format {
        match self.kind {
            Kind::Pcap(_) => Format::Pcap,
            Kind::Pcapng(_) => Format::Pcapng,
        }
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// True once a pcapng section header or interface description block
    /// has come after a packet (concatenated files, an interface added
    /// while capturing): the packets behind it cannot be read from their
    /// offsets with only the blocks before the first packet in front.
    pub fn structure_after_packets(&self) -> bool {
        self.late_structure
    }

    /// Byte offset of the next unread record or block.
    pub fn offset(&self) -> u64 {
        self.base.saturating_add(self.pos as u64)
    }

    /// The next packet; `Ok(None)` at the clean end of the file. After an
    /// error the reader is spent and returns `Ok(None)`, except after one
    /// that [`ReadError::is_would_block`]: an input that has nothing yet (a
    /// pipe read without waiting) leaves the reader as it was; call again.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, ReadError> {
        if self.failed {
            return Ok(None);
        }
        let found = match self.kind {
            Kind::Pcap(st) => self.next_pcap(st),
            Kind::Pcapng(_) => self.next_pcapng(),
        };
        let found = match found {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => {
                // Every fill comes before the record or block is consumed.
                self.failed = !e.is_would_block();
                return Err(e);
            }
        };
        self.returned = true;
        let data_end = found.data_start.saturating_add(found.caplen as usize);
        Ok(Some(Packet {
            ts_ns: found.ts_ns,
            caplen: found.caplen,
            origlen: found.origlen,
            linktype: found.linktype,
            snaplen: found.snaplen,
            offset: found.offset,
            stored_header: self.buf.get(found.header_start..found.data_start).unwrap_or(&[]),
            data: self.buf.get(found.data_start..data_end).unwrap_or(&[]),
            resolution: found.resolution,
            fraction_out_of_range: found.fraction_out_of_range,
        }))
    }

    // ---- buffer -------------------------------------------------------

    fn avail(&self) -> &[u8] {
        self.buf.get(self.pos..self.end).unwrap_or(&[])
    }

    /// Makes at least `need` unconsumed bytes available unless the input
    /// ends first; returns how many are available. `need` must already be
    /// bounded by the caller (it sizes the buffer).
    fn fill(&mut self, need: usize) -> Result<usize, ReadError> {
        let have = self.end - self.pos;
        if have >= need || self.eof {
            return Ok(have);
        }
        if self.buf.len() - self.pos < need {
            // Move the partial record to the front; it is small compared
            // with the buffer, except for the rare block bigger than it.
            self.buf.copy_within(self.pos..self.end, 0);
            self.base = self.base.saturating_add(self.pos as u64);
            self.end = have;
            self.pos = 0;
            if self.buf.len() < need {
                self.buf.resize(need, 0);
            }
        }
        while self.end - self.pos < need {
            let Some(space) = self.buf.get_mut(self.end..) else {
                break;
            };
            match self.inner.read(space) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n.min(space.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(ReadError::Io { offset: self.base.saturating_add(self.end as u64), source }),
            }
        }
        Ok(self.end - self.pos)
    }

    fn truncated(&self, what: &'static str, need: usize, have: usize) -> ReadError {
        ReadError::Truncated { what, offset: self.offset(), need: need as u64, have: have as u64 }
    }

    // ---- pcap ---------------------------------------------------------

    fn open_pcap(&mut self) -> Result<PcapState, ReadError> {
        let first: [u8; 4] = *self.avail().first_chunk().ok_or_else(|| self.truncated("file header", 4, 0))?;
        // Shown as the bytes appear in the file.
        let magic = pcap::Magic::parse(first).ok_or(ReadError::NotCapture { magic: u32::from_be_bytes(first) })?;
        let have = self.fill(pcap::FILE_HEADER_LEN)?;
        let h = pcap::FileHeader::parse(self.avail())
            .ok_or_else(|| self.truncated("pcap file header", pcap::FILE_HEADER_LEN, have))?;
        let (major, minor) = (h.version_major, h.version_minor);
        let linktype = h.linktype();
        // libpcap reads 2.0 to 2.4, and 543.0 (DG/UX).
        if !((major == 2 && minor <= 4) || (major == 543 && minor == 0)) {
            return Err(ReadError::UnsupportedVersion { format: Format::Pcap, offset: 4, major, minor });
        }
        let lengths = match (major, minor) {
            (2, 0..=2) | (543, _) => LengthOrder::Swapped,
            (2, 3) => LengthOrder::Maybe,
            _ => LengthOrder::Normal,
        };
        let mut snap = effective_snaplen(linktype, h.snaplen);
        if magic.patched && linktype == crate::linktype::ETHERNET {
            // libpcap assumes such Ethernet captures were cooked, with a
            // fake 14-byte Ethernet header added on top of the snaplen.
            snap = snap.saturating_add(14).min(i32::MAX as u32);
        }
        self.pos += pcap::FILE_HEADER_LEN;
        Ok(PcapState {
            endian: magic.endian,
            precision: magic.precision,
            header_len: magic.record_header_len(),
            lengths,
            linktype,
            snaplen: snap,
            max_caplen: max_snaplen_for_linktype(linktype),
        })
    }

    fn next_pcap(&mut self, st: PcapState) -> Result<Option<Found>, ReadError> {
        let offset = self.offset();
        let have = self.fill(st.header_len)?;
        if have == 0 {
            return Ok(None);
        }
        if have < st.header_len {
            return Err(self.truncated("record header", st.header_len, have));
        }
        let rh = RecordHeader::parse(&mut Octets::new(self.avail(), st.endian), st.precision)
            .ok_or_else(|| self.truncated("record header", st.header_len, have))?;
        // The sub-second field (bytes 4..8), checked against its unit.
        let units = if st.precision == Precision::Micro { 1_000_000 } else { 1_000_000_000 };
        let frac = self.avail().get(4..8).and_then(|b| Octets::new(b, st.endian).get_u32());
        let fraction_out_of_range = frac.is_some_and(|f| f >= units);
        let (caplen, origlen) = match st.lengths {
            LengthOrder::Normal => (rh.caplen, rh.origlen),
            LengthOrder::Maybe if rh.caplen <= rh.origlen => (rh.caplen, rh.origlen),
            LengthOrder::Maybe | LengthOrder::Swapped => (rh.origlen, rh.caplen),
        };
        if caplen > st.max_caplen {
            let (limit, max) = if caplen > st.snaplen { ("snaplen", st.snaplen) } else { ("maximum", st.max_caplen) };
            return Err(ReadError::CaplenTooLarge { offset, caplen, limit, max });
        }
        if caplen > MAX_BLOCK_LEN {
            return Err(ReadError::CaplenTooLarge {
                offset,
                caplen,
                limit: "reader's record size limit",
                max: MAX_BLOCK_LEN,
            });
        }
        // Both terms are bounded (24 + 16 MiB), so the sum cannot overflow.
        let total = st.header_len + caplen as usize;
        let have = self.fill(total)?;
        if have < total {
            return Err(ReadError::TruncatedRecord { offset, caplen, have: (have - st.header_len) as u64 });
        }
        let header_start = self.pos;
        let data_start = self.pos + st.header_len;
        self.pos += total;
        // libpcap hands out at most the snapshot length and skips the rest
        // (files written by broken or fuzzed writers).
        Ok(Some(Found {
            ts_ns: rh.ts_ns,
            caplen: caplen.min(st.snaplen),
            origlen,
            linktype: st.linktype,
            snaplen: st.snaplen,
            offset,
            header_start,
            data_start,
            resolution: TsResolution::Decimal(if st.precision == Precision::Micro { 6 } else { 9 }),
            fraction_out_of_range,
        }))
    }

    // ---- pcapng -------------------------------------------------------

    /// Reads the first SHB. libpcap is laxer here than for later blocks: it
    /// checks only the length range and the version, not the trailer.
    fn open_pcapng(&mut self) -> Result<PcapngState, ReadError> {
        let endian = self.shb_endian(0)?;
        let mut o = Octets::new(self.avail(), endian);
        let len = BlockHeader::parse(&mut o).ok_or_else(|| self.truncated("section header block", 12, 0))?.total_len;
        let min = (BLOCK_HEADER_LEN + SHB_BODY_LEN + BLOCK_TRAILER_LEN) as u32;
        if !(min..=MAX_FIRST_SHB_LEN).contains(&len) {
            return Err(ReadError::BadBlockLength {
                offset: 0,
                len,
                reason: "a section header block must be 28 bytes to 1 MiB long",
            });
        }
        let have = self.fill(len as usize)?;
        if have < len as usize {
            return Err(self.truncated("section header block", len as usize, have));
        }
        let body = self.avail().get(BLOCK_HEADER_LEN..).unwrap_or(&[]);
        let shb = SectionHeader::parse(body).ok_or_else(|| self.truncated("section header block", len as usize, 0))?;
        let (major, minor) = (shb.major, shb.minor);
        // 1.2 is written by some tools and read as 1.0.
        if !(major == 1 && (minor == 0 || minor == 2)) {
            return Err(ReadError::UnsupportedVersion { format: Format::Pcapng, offset: 12, major, minor });
        }
        self.pos += len as usize;
        Ok(PcapngState { endian, interfaces: Vec::new(), seen_idb: false })
    }

    /// The byte order of the SHB at the current position, from its
    /// byte-order magic (`offset` is the block's, for the error).
    fn shb_endian(&mut self, offset: u64) -> Result<Endian, ReadError> {
        let have = self.fill(12)?;
        let bom: [u8; 4] = *self
            .avail()
            .get(8..)
            .and_then(|b| b.first_chunk())
            .ok_or_else(|| self.truncated("section header block", 12, have))?;
        pcapng::section_endian(bom).ok_or(ReadError::BadByteOrderMagic { offset, magic: u32::from_le_bytes(bom) })
    }

    /// Reads and validates the next block; `None` at a clean end of file.
    fn next_block(&mut self, section: Endian) -> Result<Option<Block>, ReadError> {
        let offset = self.offset();
        let have = self.fill(BLOCK_HEADER_LEN)?;
        if have == 0 {
            return Ok(None);
        }
        if have < BLOCK_HEADER_LEN {
            return Err(self.truncated("block header", BLOCK_HEADER_LEN, have));
        }
        let mut endian = section;
        // The SHB type reads the same in both byte orders; its byte-order
        // magic decides how to read its length and the section after it.
        if Octets::le(self.avail()).peek_u32() == Some(BT_SHB) {
            endian = self.shb_endian(offset)?;
        }
        let BlockHeader { block_type, total_len: len } = BlockHeader::parse(&mut Octets::new(self.avail(), endian))
            .ok_or_else(|| self.truncated("block header", BLOCK_HEADER_LEN, have))?;
        let bad = |reason| ReadError::BadBlockLength { offset, len, reason };
        if len < MIN_BLOCK_LEN {
            return Err(bad("shorter than the 12-byte minimum"));
        }
        if !len.is_multiple_of(4) {
            return Err(bad("not a multiple of 4"));
        }
        if len > MAX_BLOCK_LEN {
            return Err(bad("larger than the 16 MiB limit"));
        }
        let total = len as usize;
        let have = self.fill(total)?;
        if have < total {
            return Err(self.truncated("block", total, have));
        }
        let trailer = self
            .avail()
            .get(total - BLOCK_TRAILER_LEN..)
            .and_then(|t| Octets::new(t, endian).get_u32())
            .ok_or_else(|| self.truncated("block", total, have))?;
        if trailer != len {
            return Err(ReadError::BlockLengthMismatch { offset, header: len, trailer });
        }
        let body_start = self.pos + BLOCK_HEADER_LEN;
        let body_end = self.pos + total - BLOCK_TRAILER_LEN;
        self.pos += total;
        Ok(Some(Block { offset, block_type, endian, body_start, body_end }))
    }

    fn next_pcapng(&mut self) -> Result<Option<Found>, ReadError> {
        loop {
            let section = match &self.kind {
                Kind::Pcapng(ng) => ng.endian,
                Kind::Pcap(_) => return Ok(None),
            };
            let Some(blk) = self.next_block(section)? else {
                return match &self.kind {
                    Kind::Pcapng(ng) if !ng.seen_idb => Err(ReadError::NoInterfaces { offset: self.offset() }),
                    _ => Ok(None),
                };
            };
            let Kind::Pcapng(ng) = &mut self.kind else {
                return Ok(None);
            };
            let body = self.buf.get(blk.body_start..blk.body_end).unwrap_or(&[]);
            let endian = blk.endian;
            let too_short = |what, need: usize| ReadError::BlockTooShort {
                offset: blk.offset,
                block_type: blk.block_type,
                what,
                need: need as u64,
                have: body.len() as u64,
            };
            let unknown = |interface_id, count| ReadError::UnknownInterface { offset: blk.offset, interface_id, count };
            match blk.block_type {
                BT_EPB | BT_PB => {
                    let Some(EnhancedPacket { interface_id, ts: t, caplen, origlen }) =
                        EnhancedPacket::parse(&mut Octets::new(body, endian), blk.block_type == BT_PB)
                    else {
                        return Err(too_short("the fixed part", EPB_BODY_LEN));
                    };
                    let iface = ng
                        .interfaces
                        .get(interface_id as usize)
                        .ok_or_else(|| unknown(interface_id, ng.interfaces.len()))?;
                    if caplen > iface.snaplen {
                        return Err(ReadError::CaplenTooLarge {
                            offset: blk.offset,
                            caplen,
                            limit: "snaplen",
                            max: iface.snaplen,
                        });
                    }
                    let need = EPB_BODY_LEN + caplen as usize;
                    if body.len() < need {
                        return Err(too_short("the packet data", need));
                    }
                    return Ok(Some(Found {
                        ts_ns: iface.ts_ns(t),
                        caplen,
                        origlen,
                        linktype: iface.linktype,
                        snaplen: iface.snaplen,
                        offset: blk.offset,
                        header_start: blk.body_start + EPB_BODY_LEN,
                        data_start: blk.body_start + EPB_BODY_LEN,
                        resolution: iface.resolution(),
                        fraction_out_of_range: false,
                    }));
                }
                BT_SPB => {
                    let Some(origlen) = Octets::new(body, endian).get_u32() else {
                        return Err(too_short("the fixed part", SPB_BODY_LEN));
                    };
                    // SPB packets belong to the first interface, have no
                    // timestamp, and are cut at that interface's snaplen.
                    let iface = ng.interfaces.first().ok_or_else(|| unknown(0, ng.interfaces.len()))?;
                    let caplen = origlen.min(iface.snaplen);
                    let need = SPB_BODY_LEN + caplen as usize;
                    if body.len() < need {
                        return Err(too_short("the packet data", need));
                    }
                    return Ok(Some(Found {
                        ts_ns: iface.ts_ns(0),
                        caplen,
                        origlen,
                        linktype: iface.linktype,
                        snaplen: iface.snaplen,
                        offset: blk.offset,
                        header_start: blk.body_start + SPB_BODY_LEN,
                        data_start: blk.body_start + SPB_BODY_LEN,
                        resolution: iface.resolution(),
                        fraction_out_of_range: false,
                    }));
                }
                BT_IDB => {
                    if ng.interfaces.len() >= MAX_INTERFACES {
                        return Err(ReadError::TooManyInterfaces { offset: blk.offset, max: MAX_INTERFACES });
                    }
                    let mut o = Octets::new(body, endian);
                    let Some(fixed) = InterfaceDescription::parse(&mut o) else {
                        return Err(too_short("the fixed part", IDB_BODY_LEN));
                    };
                    let iface = parse_idb(fixed, o)
                        .map_err(|problem| ReadError::BadInterface { offset: blk.offset, problem })?;
                    ng.interfaces.push(iface);
                    ng.seen_idb = true;
                    self.late_structure |= self.returned;
                }
                BT_SHB => {
                    // next_block read this SHB's byte order from its magic.
                    let Some(shb) = SectionHeader::parse(body) else {
                        return Err(too_short("the fixed part", SHB_BODY_LEN));
                    };
                    if shb.major != 1 {
                        return Err(ReadError::UnsupportedVersion {
                            format: Format::Pcapng,
                            offset: blk.offset + 12,
                            major: shb.major,
                            minor: shb.minor,
                        });
                    }
                    // A new section brings its own interfaces (and maybe
                    // its own byte order).
                    ng.interfaces.clear();
                    ng.endian = endian;
                    self.late_structure |= self.returned;
                }
                // Name resolution, statistics, custom, decryption secrets...:
                // nothing a packet depends on.
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NANOS_PER_SEC: u64 = 1_000_000_000;
    use crate::pcapng::BYTE_ORDER_MAGIC;

    fn pcap_header(big: bool, magic: u32, snaplen: u32, linktype: u32) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut b = Vec::new();
        b.extend(w32(magic));
        b.extend(w16(2));
        b.extend(w16(4));
        b.extend([0; 8]);
        b.extend(w32(snaplen));
        b.extend(w32(linktype));
        b
    }

    fn pcap_record(b: &mut Vec<u8>, big: bool, sec: u32, frac: u32, data: &[u8], origlen: u32) {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        b.extend(w32(sec));
        b.extend(w32(frac));
        b.extend(w32(data.len() as u32));
        b.extend(w32(origlen));
        b.extend(data);
    }

    /// ts_ns, caplen, origlen, linktype, offset, data.
    type Row = (u64, u32, u32, u32, u64, Vec<u8>);

    fn read_all(bytes: &[u8]) -> (Vec<Row>, Option<ReadError>) {
        let mut out = Vec::new();
        let mut r = match Reader::new(bytes) {
            Ok(r) => r,
            Err(e) => return (out, Some(e)),
        };
        loop {
            match r.next_packet() {
                Ok(Some(p)) => {
                    assert_eq!(p.caplen as usize, p.data.len());
                    out.push((p.ts_ns, p.caplen, p.origlen, p.linktype, p.offset, p.data.to_vec()))
                }
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn pcap_le_micro() {
        let mut b = pcap_header(false, pcap::MAGIC_MICROS, 65535, 1 | 0x1000_0000);
        pcap_record(&mut b, false, 1_700_000_000, 999_999, &[1, 2, 3], 60);
        pcap_record(&mut b, false, 1_700_000_001, 5, &[4; 60], 60);
        let mut r = Reader::new(&b[..]).unwrap();
        assert_eq!(r.format(), Format::Pcap);
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.ts_ns, 1_700_000_000_999_999_000);
        assert_eq!((p.caplen, p.origlen, p.linktype, p.snaplen), (3, 60, 1, 65535));
        assert_eq!((p.offset, p.data), (24, &[1, 2, 3][..]));
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!((p.ts_ns, p.offset, p.caplen), (1_700_000_001_000_005_000, 43, 60));
        assert!(r.next_packet().unwrap().is_none());
        assert!(r.next_packet().unwrap().is_none());
    }

    #[test]
    fn pcap_be_nano() {
        let mut b = pcap_header(true, pcap::MAGIC_NANOS, 0, 105);
        pcap_record(&mut b, true, 1, 123_456_789, &[0xaa; 10], 1000);
        let (pkts, err) = read_all(&b);
        assert!(err.is_none());
        assert_eq!(pkts, vec![(1_123_456_789, 10, 1000, 105, 24, vec![0xaa; 10])]);
        let mut r = Reader::new(&b[..]).unwrap();
        assert_eq!(r.next_packet().unwrap().unwrap().snaplen, crate::MAX_SNAPLEN);
    }

    #[test]
    fn pcap_old_version_swaps_lengths() {
        let mut b = pcap_header(false, pcap::MAGIC_MICROS, 100, 1);
        b[6] = 2; // version 2.2: caplen and origlen are stored the other way round
        pcap_record(&mut b, false, 0, 0, &[7; 4], 4);
        b[32..36].copy_from_slice(&60u32.to_le_bytes());
        b[36..40].copy_from_slice(&4u32.to_le_bytes());
        let (pkts, err) = read_all(&b);
        assert!(err.is_none());
        assert_eq!((pkts[0].1, pkts[0].2), (4, 60));
    }

    #[test]
    fn pcap_caplen_over_snaplen_is_truncated() {
        // libpcap delivers the first snaplen bytes and skips the rest.
        let mut b = pcap_header(false, pcap::MAGIC_MICROS, 8, 1);
        let data: Vec<u8> = (0..20).collect();
        pcap_record(&mut b, false, 0, 0, &data, 20);
        pcap_record(&mut b, false, 0, 1, &[9; 8], 8);
        let (pkts, err) = read_all(&b);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(pkts.len(), 2);
        assert_eq!((pkts[0].1, pkts[0].2, &pkts[0].5[..]), (8, 20, &data[..8]));
        assert_eq!((pkts[1].4, &pkts[1].5[..]), (24 + 16 + 20, &[9; 8][..]));
    }

    #[test]
    fn pcap_caplen_over_maximum_is_an_error() {
        let mut b = pcap_header(false, pcap::MAGIC_MICROS, 100, 1);
        pcap_record(&mut b, false, 0, 0, &[1], 1);
        let at = b.len();
        pcap_record(&mut b, false, 0, 0, &[], 0);
        b[at + 8..at + 12].copy_from_slice(&262_145u32.to_le_bytes());
        let (pkts, err) = read_all(&b);
        assert_eq!(pkts.len(), 1);
        let err = err.unwrap();
        assert_eq!(err.offset(), Some(at as u64));
        assert_eq!(
            err.to_string(),
            "invalid packet capture length 262145 at offset 41: bigger than the snaplen of 100"
        );
    }

    #[test]
    fn pcap_huge_record_for_dbus_hits_reader_limit() {
        // D-Bus allows 128 MiB records; we refuse above 16 MiB without
        // allocating, even though the file is tiny.
        let mut b = pcap_header(false, pcap::MAGIC_MICROS, 0, crate::linktype::DBUS);
        pcap_record(&mut b, false, 0, 0, &[], 0);
        b[32..36].copy_from_slice(&(100u32 << 20).to_le_bytes());
        let (_, err) = read_all(&b);
        assert!(matches!(err, Some(ReadError::CaplenTooLarge { offset: 24, .. })));
    }

    #[test]
    fn pcap_truncated_record() {
        let mut b = pcap_header(false, pcap::MAGIC_MICROS, 65535, 1);
        pcap_record(&mut b, false, 0, 0, &[1; 10], 10);
        let at = b.len();
        pcap_record(&mut b, false, 0, 0, &[2; 1514], 1514);
        b.truncate(at + 16 + 200);
        let (pkts, err) = read_all(&b);
        assert_eq!(pkts.len(), 1);
        assert_eq!(
            err.unwrap().to_string(),
            "truncated record at offset 50: header says 1514 captured bytes, only 200 remain"
        );
        // A cut inside the record header.
        let (pkts, err) = read_all(&b[..at + 5]);
        assert_eq!(pkts.len(), 1);
        assert_eq!(err.unwrap().to_string(), "truncated record header at offset 50: needs 16 bytes, only 5 remain");
    }

    #[test]
    fn not_a_capture() {
        let err = Reader::new(&[0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0][..]).unwrap_err();
        assert_eq!(err.to_string(), "not a pcap or pcapng file (magic 0x12345678)");
        assert_eq!(err.offset(), Some(0));
        assert!(matches!(Reader::new(&[0xd4, 0xc3][..]).unwrap_err(), ReadError::Truncated { have: 2, .. }));
        assert!(Reader::new(&[][..]).is_err());
        let mut b = pcap_header(false, pcap::MAGIC_MICROS, 0, 1);
        b[4] = 3; // version 3.4
        assert!(matches!(Reader::new(&b[..]).unwrap_err(), ReadError::UnsupportedVersion { major: 3, .. }));
    }

    /// Builds pcapng blocks in either byte order.
    struct Ng {
        big: bool,
        b: Vec<u8>,
    }

    impl Ng {
        fn new(big: bool) -> Ng {
            let mut ng = Ng { big, b: Vec::new() };
            ng.shb();
            ng
        }
        fn w32(&self, v: u32) -> [u8; 4] {
            if self.big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        fn w16(&self, v: u16) -> [u8; 2] {
            if self.big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        fn block(&mut self, ty: u32, body: &[u8]) -> usize {
            let at = self.b.len();
            let len = (12 + body.len().next_multiple_of(4)) as u32;
            self.b.extend(self.w32(ty));
            self.b.extend(self.w32(len));
            self.b.extend(body);
            self.b.resize(at + len as usize - 4, 0);
            self.b.extend(self.w32(len));
            at
        }
        fn shb(&mut self) -> usize {
            let mut body = Vec::new();
            body.extend(self.w32(BYTE_ORDER_MAGIC));
            body.extend(self.w16(1));
            body.extend(self.w16(0));
            body.extend([0xff; 8]);
            self.block(BT_SHB, &body)
        }
        /// An IDB with optional (code, value) options.
        fn idb(&mut self, linktype: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> usize {
            let mut body = Vec::new();
            body.extend(self.w16(linktype));
            body.extend(self.w16(0));
            body.extend(self.w32(snaplen));
            for (code, v) in opts {
                body.extend(self.w16(*code));
                body.extend(self.w16(v.len() as u16));
                body.extend(*v);
                body.resize(body.len().next_multiple_of(4), 0);
            }
            if !opts.is_empty() {
                body.extend([0; 4]);
            }
            self.block(BT_IDB, &body)
        }
        fn epb(&mut self, iface: u32, t: u64, data: &[u8], origlen: u32) -> usize {
            let mut body = Vec::new();
            body.extend(self.w32(iface));
            body.extend(self.w32((t >> 32) as u32));
            body.extend(self.w32(t as u32));
            body.extend(self.w32(data.len() as u32));
            body.extend(self.w32(origlen));
            body.extend(data);
            self.block(BT_EPB, &body)
        }
    }

    #[test]
    fn pcapng_interfaces_with_different_resolutions() {
        let mut ng = Ng::new(false);
        ng.idb(1, 0, &[]); // µs, the default
        ng.block(0x0000_0004, &[1, 2, 3, 4]); // name resolution: skipped
        let off = 10i64.to_le_bytes();
        ng.idb(101, 128, &[(9, &[9]), (14, &off)]); // ns, +10 s
        ng.idb(113, 65535, &[(9, &[0x80 | 20])]); // 2^-20 s
        let e0 = ng.epb(0, 1_700_000_000_123_456, &[1; 5], 5);
        let e1 = ng.epb(1, 1_700_000_000_123_456_789, &[2; 7], 9);
        let e2 = ng.epb(2, (5 << 20) | (1 << 19), &[3; 1], 1);
        ng.block(0xdead_beef, &[0; 8]); // unknown: skipped
                                        // Obsolete PB on interface 1: u16 interface id, u16 drops.
        let mut pb = Vec::new();
        pb.extend(1u16.to_le_bytes());
        pb.extend(0u16.to_le_bytes());
        pb.extend(0u32.to_le_bytes());
        pb.extend(42u32.to_le_bytes());
        pb.extend(2u32.to_le_bytes());
        pb.extend(2u32.to_le_bytes());
        pb.extend([8, 9]);
        let p0 = ng.block(BT_PB, &pb);
        // SPB: interface 0, no timestamp, caplen = min(origlen, snaplen).
        let mut spb = 3u32.to_le_bytes().to_vec();
        spb.extend([4, 5, 6]);
        let s0 = ng.block(BT_SPB, &spb);

        let mut r = Reader::new(&ng.b[..]).unwrap();
        assert_eq!(r.format(), Format::Pcapng);
        let mut got = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            got.push((p.ts_ns, p.caplen, p.origlen, p.linktype, p.snaplen, p.offset, p.data.to_vec()));
        }
        assert_eq!(
            got,
            vec![
                (1_700_000_000_123_456_000, 5, 5, 1, 262_144, e0 as u64, vec![1; 5]),
                (1_700_000_010_123_456_789, 7, 9, 101, 128, e1 as u64, vec![2; 7]),
                (5_500_000_000, 1, 1, 113, 65535, e2 as u64, vec![3]),
                (10_000_000_042, 2, 2, 101, 128, p0 as u64, vec![8, 9]),
                (0, 3, 3, 1, 262_144, s0 as u64, vec![4, 5, 6]),
            ]
        );
    }

    #[test]
    fn pcapng_big_endian_and_new_section() {
        let mut ng = Ng::new(true);
        ng.idb(1, 0, &[(9, &[3])]); // ms
        ng.epb(0, 1_500, &[1, 2], 2);
        // A second, little-endian section with its own interface 0.
        let mut le = Ng::new(false);
        le.idb(101, 0, &[]);
        le.epb(0, 7, &[3], 1);
        ng.b.extend(&le.b);
        let (pkts, err) = read_all(&ng.b);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(pkts.len(), 2);
        assert_eq!((pkts[0].0, pkts[0].3, &pkts[0].5[..]), (1_500_000_000, 1, &[1, 2][..]));
        assert_eq!((pkts[1].0, pkts[1].3), (7_000, 101));
    }

    #[test]
    fn pcapng_bogus_lengths() {
        let mut ng = Ng::new(false);
        ng.idb(1, 0, &[]);
        let good = ng.b.len();
        ng.epb(0, 0, &[1; 8], 8);
        let set_len = |b: &mut Vec<u8>, v: u32| b[good + 4..good + 8].copy_from_slice(&v.to_le_bytes());
        let cases: [(u32, &str); 4] = [
            (10, "shorter than the 12-byte minimum"),
            (45, "not a multiple of 4"),
            (32 << 20, "larger than the 16 MiB limit"),
            (u32::MAX, "not a multiple of 4"),
        ];
        for (v, reason) in cases {
            let mut b = ng.b.clone();
            set_len(&mut b, v);
            let (pkts, err) = read_all(&b);
            assert!(pkts.is_empty());
            let err = err.unwrap();
            assert_eq!(err.offset(), Some(good as u64));
            assert!(err.to_string().ends_with(reason), "{err}");
        }
        // Header and trailer disagree (the next block supplies the bytes).
        let mut b = ng.b.clone();
        set_len(&mut b, 48);
        b.extend_from_slice(&ng.b[good..]);
        assert!(matches!(read_all(&b).1, Some(ReadError::BlockLengthMismatch { header: 48, .. })));
        // Longer than the file.
        let mut b = ng.b.clone();
        set_len(&mut b, 4096);
        assert!(matches!(read_all(&b).1, Some(ReadError::Truncated { need: 4096, .. })));
        // caplen larger than the block.
        let mut b = ng.b.clone();
        b[good + 20..good + 24].copy_from_slice(&12u32.to_le_bytes());
        assert!(matches!(read_all(&b).1, Some(ReadError::BlockTooShort { need: 32, have: 28, .. })));
    }

    #[test]
    fn pcapng_errors_libpcap_makes() {
        // EPB on an interface the section does not declare.
        let mut ng = Ng::new(false);
        ng.idb(1, 0, &[]);
        ng.epb(0, 0, &[1], 1);
        let at = ng.epb(3, 0, &[1], 1);
        let (pkts, err) = read_all(&ng.b);
        assert_eq!(pkts.len(), 1);
        let err = err.unwrap();
        assert!(matches!(err, ReadError::UnknownInterface { interface_id: 3, count: 1, .. }));
        assert_eq!(err.offset(), Some(at as u64));
        // A packet before any IDB.
        let mut ng = Ng::new(false);
        ng.epb(0, 0, &[1], 1);
        assert!(matches!(read_all(&ng.b).1, Some(ReadError::UnknownInterface { count: 0, .. })));
        // No IDB at all.
        let ng = Ng::new(false);
        assert!(matches!(read_all(&ng.b).1, Some(ReadError::NoInterfaces { .. })));
        // caplen above the interface's snaplen is an error in pcapng.
        let mut ng = Ng::new(false);
        ng.idb(1, 4, &[]);
        ng.epb(0, 0, &[1; 5], 5);
        assert!(matches!(read_all(&ng.b).1, Some(ReadError::CaplenTooLarge { caplen: 5, max: 4, .. })));
        // Bad options.
        for opts in
            [&[(9u16, &[0x80 | 64][..])][..], &[(9, &[20])], &[(9, &[6, 6])], &[(14, &[0; 4])], &[(9, &[6]), (9, &[6])]]
        {
            let mut ng = Ng::new(false);
            ng.idb(1, 0, opts);
            assert!(matches!(read_all(&ng.b).1, Some(ReadError::BadInterface { .. })), "{opts:?}");
        }
    }

    #[test]
    fn every_prefix_and_byte_flip_is_handled() {
        let mut ng = Ng::new(false);
        ng.idb(1, 0, &[(9, &[9])]);
        ng.epb(0, 1, &[1; 13], 13);
        ng.block(BT_SPB, &[2, 0, 0, 0, 7, 7]);
        let mut b = pcap_header(true, pcap::MAGIC_NANOS, 0, 1);
        pcap_record(&mut b, true, 1, 2, &[3; 9], 9);
        pcap_record(&mut b, true, 1, 2, &[4; 3], 3);
        for file in [&ng.b, &b] {
            let (full, _) = read_all(file);
            for cut in 0..file.len() {
                let (pkts, err) = read_all(&file[..cut]);
                assert!(pkts.len() <= full.len());
                if let Some(e) = err {
                    assert!(e.offset().is_some_and(|o| o <= cut as u64), "{e}");
                }
            }
            for at in 0..file.len() {
                for v in [0x00, 0x7f, 0x80, 0xff] {
                    let mut m = file.clone();
                    m[at] = v;
                    let _ = read_all(&m);
                }
            }
        }
    }

    /// A reader that hands out one byte per call, to exercise refills.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((b, rest)), Some(dst)) => {
                    *dst = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn small_buffer_and_short_reads() {
        // Records bigger than the buffer make it grow; many records make
        // it wrap around; one-byte reads make every fill loop.
        let mut b = pcap_header(false, pcap::MAGIC_NANOS, 0, 1);
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        for i in 0..50u32 {
            pcap_record(&mut b, false, i, 0, &big[..(i as usize * 4099) % 200_000], 200_000);
        }
        let mut r = Reader::with_buffer_len(&b[..], 0).unwrap();
        let mut n = 0;
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!(p.data, &big[..(n * 4099) % 200_000]);
            assert_eq!(p.ts_ns, n as u64 * NANOS_PER_SEC);
            n += 1;
        }
        assert_eq!(n, 50);
        assert_eq!(r.offset(), b.len() as u64);
        // Header, empty record, 4099-byte record, and part of the third.
        let mut r = Reader::new(Trickle(&b[..24 + 16 + 16 + 4099 + 16 + 100])).unwrap();
        assert_eq!(r.next_packet().unwrap().unwrap().caplen, 0);
        assert_eq!(r.next_packet().unwrap().unwrap().caplen, 4099);
        assert!(matches!(r.next_packet(), Err(ReadError::TruncatedRecord { caplen: 8198, have: 100, .. })));
        assert!(r.next_packet().unwrap().is_none());
    }

    /// A pipe read without waiting: every other call has nothing yet.
    struct Hesitant<'a> {
        data: &'a [u8],
        ready: bool,
    }
    impl Read for Hesitant<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.ready = !self.ready;
            if !self.ready {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Trickle(self.data).read(buf).inspect(|n| self.data = &self.data[*n..])
        }
    }

    #[test]
    fn an_input_with_nothing_yet_can_be_asked_again() {
        let mut b = pcap_header(false, pcap::MAGIC_NANOS, 0, 1);
        for i in 0..20u32 {
            pcap_record(&mut b, false, i, 0, &vec![i as u8; i as usize * 7], 65535);
        }
        let mut ng = Ng::new(true);
        ng.idb(1, 0, &[]);
        for i in 0..20u32 {
            ng.epb(0, u64::from(i), &vec![i as u8; i as usize * 7], i * 7);
        }
        ng.shb();
        ng.idb(1, 0, &[]);
        ng.epb(0, 20, &[20; 140], 140);
        for (file, n) in [(&b, 20), (&ng.b, 21)] {
            // The file's first bytes are there when it is opened (as the
            // record source peeks them), then every other read has nothing.
            let (head, rest) = file.split_at(40);
            let mut r = Reader::new(head.chain(Hesitant { data: rest, ready: true })).unwrap();
            let (mut got, mut waits) = (0u32, 0);
            loop {
                match r.next_packet() {
                    Ok(Some(p)) => {
                        assert_eq!(p.data, &vec![got as u8; got as usize * 7][..]);
                        got += 1;
                    }
                    Ok(None) => break,
                    Err(e) if e.is_would_block() => waits += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(got, n);
            assert!(waits > 100, "{waits}");
        }
    }

    #[test]
    fn timestamp_conversion_does_not_overflow() {
        let mk = |tsresol, scale, tsoffset| Interface { linktype: 1, snaplen: 1, tsresol, scale, tsoffset };
        assert_eq!(mk(1, Scale::Mul(NANOS_PER_SEC), 0).ts_ns(u64::MAX), u64::MAX);
        assert_eq!(mk(1_000_000, Scale::Mul(1000), i64::MIN).ts_ns(5), 0);
        assert_eq!(mk(1 << 63, Scale::Binary, 0).ts_ns(u64::MAX), 1_999_999_999);
        // Declared resolutions, as `wirevault timestamps` shows them.
        assert_eq!(mk(1 << 20, Scale::Binary, 0).resolution(), TsResolution::Binary(20));
        assert_eq!(mk(1 << 20, Scale::Binary, 0).resolution().to_string(), "2^-20 s (~954 ns)");
        assert_eq!(mk(1, Scale::Binary, 0).resolution().to_string(), "2^-0 s (1 s)");
        assert_eq!(mk(1 << 30, Scale::Binary, 0).resolution().to_string(), "2^-30 s (~0.931 ns)");
        assert_eq!(mk(1_000_000, Scale::Mul(1000), 0).resolution().to_string(), "10^-6 s (1 us)");
        assert_eq!(mk(NANOS_PER_SEC, Scale::Nanos, 0).resolution(), TsResolution::Decimal(9));
        assert_eq!(mk(10u64.pow(12), Scale::Div(1000), 0).resolution().to_string(), "10^-12 s (~0.001 ns)");
        assert_eq!(mk(10u64.pow(19), Scale::Div(10u64.pow(10)), 0).ts_ns(u64::MAX), 1_844_674_407);
    }
}
