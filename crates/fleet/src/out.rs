//! The merged stream as a file: nanosecond pcap (one link type for the
//! whole answer, as `wirevault query` writes), or pcapng with one interface
//! per node (named after the node, its URL or path as the description), so
//! that an analyst sees where each packet was captured. A pcapng answer
//! names the nodes left out before its first packet in its section
//! header's comment, and a node lost mid-answer in a comment on the first
//! packet after it left (the section header is written by then).

use crate::config::Node;
use crate::merge::{self, Head, Lost, MergeError, MergedPacket, Outcome, Selection};
use std::io::{self, BufWriter, Write};
use wv_wire::{pcap, pcapng};

/// The container of the merged answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Pcap,
    Pcapng,
}

/// Merges `sel` over `nodes` into `w` in `format`.
pub fn write(nodes: &[Node], sel: &Selection, format: Format, w: &mut dyn Write) -> Result<Outcome, MergeError> {
    write_where(nodes, sel, format, w, &mut |_| true)
}

/// As [`write()`], keeping only the merged packets `keep` accepts (`flows --packets`: a
/// packet of one of the flows' keys within that flow's own time range). The outcome's
/// `matched` and per-node counts are the merge's, before `keep`.
pub fn write_where(
    nodes: &[Node],
    sel: &Selection,
    format: Format,
    w: &mut dyn Write,
    keep: &mut dyn FnMut(&MergedPacket<'_>) -> bool,
) -> Result<Outcome, MergeError> {
    write_watched(nodes, sel, format, w, keep, &mut |_| ())
}

/// As [`write_where`], telling `begun` the nodes lost before the first byte is written (the
/// API names them in a header, which must go before the body).
pub fn write_watched(
    nodes: &[Node],
    sel: &Selection,
    format: Format,
    w: &mut dyn Write,
    keep: &mut dyn FnMut(&MergedPacket<'_>) -> bool,
    begun: &mut dyn FnMut(&[Lost]),
) -> Result<Outcome, MergeError> {
    let w = BufWriter::with_capacity(1 << 20, w);
    match format {
        Format::Pcap => merge::merge(nodes, sel, &mut Where { out: Pcap { w, linktype: None }, keep, begun }),
        Format::Pcapng => merge::merge(
            nodes,
            sel,
            &mut Where { out: Pcapng { w, linktypes: Vec::new(), pending: Vec::new() }, keep, begun },
        ),
    }
}

/// An output that passes on only the packets its `keep` accepts.
struct Where<'k, O> {
    out: O,
    keep: &'k mut dyn FnMut(&MergedPacket<'_>) -> bool,
    begun: &'k mut dyn FnMut(&[Lost]),
}

impl<O: merge::Output> merge::Output for Where<'_, O> {
    fn begin(&mut self, nodes: &[Node], heads: &[Head], lost: &[Lost]) -> io::Result<()> {
        // Told once the head is written (into the buffer, not yet sent): a head refused (link
        // types one pcap cannot hold) is then still the merge's error, not a sent answer's.
        self.out.begin(nodes, heads, lost)?;
        (self.begun)(lost);
        Ok(())
    }

    fn packet(&mut self, p: MergedPacket<'_>) -> io::Result<()> {
        if (self.keep)(&p) {
            self.out.packet(p)
        } else {
            Ok(())
        }
    }

    fn lost(&mut self, lost: &Lost) {
        self.out.lost(lost)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.finish()
    }
}

fn snaplen_of(heads: &[Head]) -> u32 {
    heads.iter().map(|h| h.snaplen).max().filter(|s| *s > 0).unwrap_or(wv_wire::MAX_SNAPLEN)
}

struct Pcap<W: Write> {
    w: W,
    linktype: Option<u32>,
}

impl<W: Write> merge::Output for Pcap<W> {
    fn begin(&mut self, nodes: &[Node], heads: &[Head], _lost: &[Lost]) -> io::Result<()> {
        // One pcap holds one link type: nodes that differ are refused
        // before the first byte, naming them.
        let mut known = nodes.iter().zip(heads).filter_map(|(n, h)| h.linktype.map(|l| (n, l)));
        let first = known.next();
        if let (Some((a, la)), Some((b, lb))) = (first, known.find(|(_, l)| Some(*l) != first.map(|f| f.1))) {
            return Err(io::Error::other(format!(
                "nodes {} and {} hold different link types ({la} and {lb}); one pcap file cannot hold both: use --format pcapng",
                a.name, b.name
            )));
        }
        let lt = first.map_or(wv_wire::linktype::ETHERNET, |f| f.1);
        self.linktype = Some(lt);
        let mut h = [0u8; pcap::FILE_HEADER_LEN];
        pcap::emit_file_header(&mut h, snaplen_of(heads), lt);
        self.w.write_all(&h)
    }

    fn packet(&mut self, p: MergedPacket<'_>) -> io::Result<()> {
        if self.linktype != Some(p.linktype) {
            return Err(io::Error::other(format!(
                "the answer holds packets of link types {} and {}; one pcap file cannot hold both: use --format pcapng or narrow the query by time",
                self.linktype.unwrap_or(0),
                p.linktype
            )));
        }
        self.w.write_all(p.record)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

struct Pcapng<W: Write> {
    w: W,
    /// Each node's interface link type.
    linktypes: Vec<u32>,
    /// Nodes lost since the last packet, for the next packet's comment.
    pending: Vec<String>,
}

/// Appends option `code` with `value`, padded to 4 bytes (little-endian).
fn option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    b.extend(code.to_le_bytes());
    b.extend((value.len() as u16).to_le_bytes());
    b.extend(value);
    b.resize(b.len() + pcapng::pad4(value.len()) - value.len(), 0);
}

/// A block of `kind` around `body` (which must be a multiple of 4 bytes).
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let total = (12 + body.len()) as u32;
    let mut b = Vec::with_capacity(total as usize);
    b.extend(kind.to_le_bytes());
    b.extend(total.to_le_bytes());
    b.extend(body);
    b.extend(total.to_le_bytes());
    b
}

/// Option codes (pcapng specification): comment, SHB user application,
/// interface name, description, timestamp resolution.
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;

impl<W: Write> merge::Output for Pcapng<W> {
    fn begin(&mut self, nodes: &[Node], heads: &[Head], lost: &[Lost]) -> io::Result<()> {
        let mut shb = Vec::new();
        shb.extend(0x1A2B_3C4Du32.to_le_bytes());
        shb.extend(1u16.to_le_bytes());
        shb.extend(0u16.to_le_bytes());
        shb.extend(u64::MAX.to_le_bytes());
        if !lost.is_empty() {
            let names: Vec<String> = lost.iter().map(|l| format!("{} ({})", l.name, l.what)).collect();
            option(&mut shb, OPT_COMMENT, format!("nodes left out of this answer: {}", names.join("; ")).as_bytes());
        }
        option(&mut shb, SHB_USERAPPL, concat!("wirevault ", env!("CARGO_PKG_VERSION"), " (fleet)").as_bytes());
        shb.extend([0u8; 4]);
        self.w.write_all(&block(pcapng::BT_SHB, &shb))?;
        let snaplen = snaplen_of(heads);
        for (n, h) in nodes.iter().zip(heads) {
            let lt = h.linktype.unwrap_or(wv_wire::linktype::ETHERNET);
            self.linktypes.push(lt);
            let mut idb = Vec::new();
            idb.extend((lt as u16).to_le_bytes());
            idb.extend(0u16.to_le_bytes());
            idb.extend(snaplen.to_le_bytes());
            option(&mut idb, IF_NAME, n.name.as_bytes());
            option(&mut idb, IF_DESCRIPTION, n.location().as_bytes());
            option(&mut idb, IF_TSRESOL, &[9]);
            idb.extend([0u8; 4]);
            self.w.write_all(&block(pcapng::BT_IDB, &idb))?;
        }
        Ok(())
    }

    fn packet(&mut self, p: MergedPacket<'_>) -> io::Result<()> {
        if self.linktypes.get(p.node) != Some(&p.linktype) {
            return Err(io::Error::other(format!(
                "node {} answered packets of two link types ({} and {}); narrow the query by time",
                p.node + 1,
                self.linktypes.get(p.node).copied().unwrap_or(0),
                p.linktype
            )));
        }
        let caplen = p.data.len() as u32;
        let mut h = [0u8; pcapng::EPB_HEADER_LEN];
        pcapng::EnhancedPacket { interface_id: p.node as u32, ts: p.ts_ns, caplen, origlen: p.origlen }
            .emit_header(&mut h);
        if !self.pending.is_empty() {
            return self.commented(h, p.data);
        }
        self.w.write_all(&h)?;
        self.w.write_all(p.data)?;
        let mut t = [0u8; 7];
        let n = pcapng::emit_epb_trailer(&mut t, caplen);
        self.w.write_all(&t[..n])
    }

    fn lost(&mut self, l: &Lost) {
        self.pending.push(format!("{} ({}, after {} of its packets)", l.name, l.what, l.merged));
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

impl<W: Write> Pcapng<W> {
    /// The packet of header `h` with the nodes lost before it in its comment.
    fn commented(&mut self, mut h: [u8; pcapng::EPB_HEADER_LEN], data: &[u8]) -> io::Result<()> {
        let text = format!("nodes left out of this answer from here on: {}", self.pending.join("; "));
        self.pending.clear();
        let mut opts = Vec::new();
        option(&mut opts, OPT_COMMENT, &text.as_bytes()[..text.len().min(60_000)]);
        opts.extend([0u8; 4]);
        let padded = pcapng::pad4(data.len());
        let total = (pcapng::EPB_HEADER_LEN + padded + opts.len() + 4) as u32;
        h[4..8].copy_from_slice(&total.to_le_bytes());
        self.w.write_all(&h)?;
        self.w.write_all(data)?;
        self.w.write_all(&[0u8; 3][..padded - data.len()])?;
        self.w.write_all(&opts)?;
        self.w.write_all(&total.to_le_bytes())
    }
}
