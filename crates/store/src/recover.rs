//! Finding the valid part of a capture file that was not closed cleanly
//! (a write error, a crash): the longest prefix made of complete records.

use crate::Format;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use wv_wire::{pcap, pcapng};

/// The valid prefix of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidPrefix {
    /// Bytes from the start of the file up to the end of the last complete record.
    pub len: u64,
    pub packets: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub linktype: u32,
    pub snaplen: u32,
}

/// Walks a file wirevault wrote (LE ns pcap or its pcapng layout) and returns
/// its valid prefix. A record is complete when all its bytes are present and
/// its header is plausible (caplen within the snaplen bound, not an all-zero
/// header: zeros are what an unwritten hole or preallocated tail reads as).
pub fn valid_prefix(path: &Path, format: Format) -> io::Result<ValidPrefix> {
    let mut r = BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut v = ValidPrefix {
        len: 0,
        packets: 0,
        first_ns: None,
        last_ns: None,
        linktype: 0,
        snaplen: 0,
    };
    let mut data = vec![0u8; wv_wire::MAX_SNAPLEN as usize + 8];
    match format {
        Format::Pcap => {
            let mut h = [0u8; pcap::FILE_HEADER_LEN];
            if !read_full(&mut r, &mut h)? {
                return Ok(v);
            }
            let Some(fh) = pcap::FileHeader::parse(&h) else {
                return Ok(v);
            };
            if fh.big_endian || fh.precision != pcap::Precision::Nano {
                return Ok(v);
            }
            v.len = h.len() as u64;
            v.linktype = fh.linktype();
            v.snaplen = fh.snaplen;
            let bound = fh.effective_snaplen().max(wv_wire::MAX_SNAPLEN);
            loop {
                let mut rh = [0u8; pcap::RECORD_HEADER_LEN];
                if !read_full(&mut r, &mut rh)? || rh == [0u8; 16] {
                    break;
                }
                let rec = pcap::RecordHeader::parse(&rh, false, pcap::Precision::Nano);
                let nsec = u32::from_le_bytes(rh[4..8].try_into().expect("4 bytes"));
                if rec.caplen > bound || nsec >= 1_000_000_000 {
                    break;
                }
                if !read_full(&mut r, &mut data[..rec.caplen as usize])? {
                    break;
                }
                v.record(
                    rec.ts_ns,
                    (pcap::RECORD_HEADER_LEN + rec.caplen as usize) as u64,
                );
            }
        }
        Format::Pcapng => {
            let mut h = [0u8; pcapng::PREAMBLE_LEN];
            if !read_full(&mut r, &mut h)? {
                return Ok(v);
            }
            if u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) != pcapng::BT_SHB {
                return Ok(v);
            }
            v.len = h.len() as u64;
            v.linktype = u16::from_le_bytes(h[36..38].try_into().expect("2 bytes")) as u32;
            v.snaplen = u32::from_le_bytes(h[40..44].try_into().expect("4 bytes"));
            loop {
                let mut bh = [0u8; pcapng::EPB_HEADER_LEN];
                if !read_full(&mut r, &mut bh)? {
                    break;
                }
                let le = |i: usize| u32::from_le_bytes(bh[i..i + 4].try_into().expect("4 bytes"));
                let (bt, total, caplen) = (le(0), le(4) as usize, le(20));
                if bt != pcapng::BT_EPB
                    || caplen > wv_wire::MAX_SNAPLEN
                    || total != pcapng::epb_len(caplen)
                {
                    break;
                }
                let rest = total - pcapng::EPB_HEADER_LEN;
                if !read_full(&mut r, &mut data[..rest])? {
                    break;
                }
                let trailer =
                    u32::from_le_bytes(data[rest - 4..rest].try_into().expect("4 bytes")) as usize;
                if trailer != total {
                    break;
                }
                v.record((le(12) as u64) << 32 | le(16) as u64, total as u64);
            }
        }
    }
    Ok(v)
}

impl ValidPrefix {
    fn record(&mut self, ts_ns: u64, len: u64) {
        self.len += len;
        self.packets += 1;
        self.first_ns.get_or_insert(ts_ns);
        self.last_ns = Some(ts_ns);
    }
}

/// Fills `buf` completely; false at (a possibly partial) end of file.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => return Ok(false),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}
