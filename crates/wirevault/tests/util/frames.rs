//! Test frames of known content and the pcap and pcapng files that carry
//! them, written by hand, not by the code under test.

use std::fs;
use std::io::Write;
use std::path::Path;
use wv_wire::views::ones_sum;

/// One frame as sent or as expected on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub ts_ns: u64,
    pub origlen: u32,
    pub data: Vec<u8>,
}

/// What kind of frame [`test_frames`] made; the filter tests need to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// IPv4/UDP with port 53 as source or destination.
    Dns,
    /// IPv4/UDP on another port.
    Udp,
    /// IPv4/TCP to port 53 (must not match `udp port 53`).
    TcpDns,
    /// 802.1Q-tagged (some with priority 7, DEI, VID 0) non-IP frame.
    Vlan,
    /// 802.1ad + 802.1Q (QinQ) non-IP frame.
    QinQ,
    /// Untagged non-IP frame (local experimental EtherType 0x88b5).
    Raw,
    /// IPv6/UDP (checksummed) on a port that is not 53; up to jumbo sizes; every other one
    /// (`seq % 20 == 17`) 802.1Q-tagged.
    Ipv6Udp,
}

pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// The IPv6 addresses of [`Kind::Ipv6Udp`] frames: fd00::1 to fd00::2.
const V6_SRC: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn ipv4_header(total_len: usize, proto: u8, seq: u32) -> [u8; 20] {
    let mut h = [0u8; 20];
    let repr = wv_wire::views::ipv4::Repr {
        src: [10, 0, 0, 1],
        dst: [10, 0, 0, 2],
        protocol: proto.into(),
        payload_len: (total_len - 20) as u16,
        ttl: 64,
        ident: seq as u16,
        dont_frag: true,
    };
    repr.emit(&mut h).expect("20 bytes");
    h
}

/// Builds frame number `seq` of kind `kind`, exactly `size` bytes long, its
/// payload the sequence number followed by a pattern that differs per frame.
pub fn make_frame(seq: u32, kind: Kind, size: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(size);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    match kind {
        Kind::Dns | Kind::Udp | Kind::TcpDns => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            let ip_len = size - 14;
            let proto = if kind == Kind::TcpDns { 6 } else { 17 };
            f.extend_from_slice(&ipv4_header(ip_len, proto, seq));
            let (sport, dport): (u16, u16) = match kind {
                Kind::Dns if seq.is_multiple_of(2) => (40000 + (seq % 1000) as u16, 53),
                Kind::Dns => (53, 40000 + (seq % 1000) as u16),
                Kind::Udp => (40000, 5353 + (seq % 3) as u16),
                _ => (40001, 53),
            };
            f.extend_from_slice(&sport.to_be_bytes());
            f.extend_from_slice(&dport.to_be_bytes());
            if kind == Kind::TcpDns {
                f.extend_from_slice(&seq.to_be_bytes()); // sequence number
                f.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
            } else {
                f.extend_from_slice(&((ip_len - 20) as u16).to_be_bytes());
                f.extend_from_slice(&[0, 0]); // no checksum (allowed in IPv4)
            }
        }
        Kind::Vlan => {
            // Priority 0..7, DEI on every 5th, VID 0 (priority tag) on every 11th.
            let vid = if seq.is_multiple_of(11) { 0 } else { 1 + seq % 4094 };
            let tci = ((seq % 8) << 13) | if seq.is_multiple_of(5) { 1 << 12 } else { 0 } | vid;
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&(tci as u16).to_be_bytes());
            f.extend_from_slice(&0x88b5u16.to_be_bytes());
        }
        Kind::QinQ => {
            f.extend_from_slice(&0x88a8u16.to_be_bytes());
            f.extend_from_slice(&(100 + (seq % 100) as u16).to_be_bytes());
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&(200 + (seq % 100) as u16).to_be_bytes());
            f.extend_from_slice(&0x88b5u16.to_be_bytes());
        }
        Kind::Raw => f.extend_from_slice(&0x88b5u16.to_be_bytes()),
        Kind::Ipv6Udp => {
            if seq % 20 == 17 {
                f.extend_from_slice(&0x8100u16.to_be_bytes());
                f.extend_from_slice(&((1 + seq % 4094) as u16).to_be_bytes());
            }
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            let payload = (size - f.len() - 40) as u16;
            f.extend_from_slice(&(0x6000_0000 | (seq & 0xf_ffff)).to_be_bytes()); // flow label
            f.extend_from_slice(&payload.to_be_bytes());
            f.extend_from_slice(&[17, 64]);
            f.extend_from_slice(&V6_SRC);
            f.extend_from_slice(&V6_DST);
            f.extend_from_slice(&40002u16.to_be_bytes());
            f.extend_from_slice(&(5360 + (seq % 3) as u16).to_be_bytes());
            f.extend_from_slice(&payload.to_be_bytes());
            f.extend_from_slice(&[0, 0]); // the checksum, once the payload is in
        }
    }
    assert!(f.len() + 4 <= size, "frame {seq} of {size} bytes too small for {kind:?}");
    f.extend_from_slice(&seq.to_be_bytes());
    let mut x = seq.wrapping_mul(2_654_435_761);
    while f.len() < size {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        f.push((x >> 24) as u8);
    }
    if kind == Kind::Ipv6Udp {
        // Pseudo-header (addresses, UDP length, next header) and the datagram.
        let ip = if f[12..14] == [0x81, 0] { 18 } else { 14 };
        let len = (f.len() - ip - 40) as u32;
        let pseudo = u32::from(ones_sum(0, &f[ip + 8..ip + 40])) + (len >> 16) + (len & 0xffff) + 17;
        let c = match !ones_sum(pseudo, &f[ip + 40..]) {
            0 => 0xffff,
            c => c,
        };
        f[ip + 46..ip + 48].copy_from_slice(&c.to_be_bytes());
    }
    f
}

/// The shortest frame of `kind` [`make_frame`] builds (60, or its headers and sequence number).
pub fn min_frame_len(kind: Kind) -> usize {
    match kind {
        Kind::Dns | Kind::Udp | Kind::TcpDns => 14 + 20 + 20 + 4,
        Kind::Ipv6Udp => 14 + 4 + 40 + 8 + 4,
        _ => 60,
    }
}

/// The kind of frame number `seq` in [`test_frames`].
pub fn kind_of(seq: u32) -> Kind {
    match seq % 10 {
        0 | 4 => Kind::Dns,
        1 | 8 => Kind::Udp,
        2 => Kind::TcpDns,
        3 | 9 => Kind::Vlan,
        6 => Kind::QinQ,
        7 => Kind::Ipv6Udp,
        _ => Kind::Raw,
    }
}

/// A known sequence of `n` frames with sizes from 60 to 9000 bytes (and the
/// largest an MTU of 9000 admits: 9014 untagged, 9018 with one VLAN tag),
/// of every [`Kind`], each carrying its sequence number, timestamps 1 ms
/// apart starting at `start_ns` (whole microseconds).
pub fn test_frames(n: u32, start_ns: u64) -> Vec<Frame> {
    (0..n)
        .map(|seq| {
            let kind = kind_of(seq);
            let size = match seq {
                1 => 9014,
                3 => 9018,
                _ if seq % 13 == 0 => 60,
                _ if seq % 17 == 0 => 9000,
                _ if seq % 4 == 0 => 60 + (seq as usize * 7) % 200,
                _ => 60 + (seq as usize * 4463) % (9000 - 60 + 1),
            };
            let data = make_frame(seq, kind, size.max(min_frame_len(kind)));
            Frame { ts_ns: start_ns + seq as u64 * 1_000_000, origlen: data.len() as u32, data }
        })
        .collect()
}

/// Writes a little-endian pcap file (µs or ns timestamps) of `frames`.
pub fn write_pcap(path: &Path, linktype: u32, snaplen: u32, nanos: bool, frames: &[Frame]) {
    let mut b = Vec::with_capacity(24 + frames.iter().map(|f| 16 + f.data.len()).sum::<usize>());
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    b.extend_from_slice(&magic.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&snaplen.to_le_bytes());
    b.extend_from_slice(&linktype.to_le_bytes());
    for f in frames {
        let (sec, frac) = if nanos {
            (f.ts_ns / 1_000_000_000, f.ts_ns % 1_000_000_000)
        } else {
            (f.ts_ns / 1_000_000_000, f.ts_ns % 1_000_000_000 / 1000)
        };
        b.extend_from_slice(&(sec as u32).to_le_bytes());
        b.extend_from_slice(&(frac as u32).to_le_bytes());
        b.extend_from_slice(&(f.data.len() as u32).to_le_bytes());
        b.extend_from_slice(&f.origlen.to_le_bytes());
        b.extend_from_slice(&f.data);
    }
    fs::File::create(path)
        .and_then(|mut w| w.write_all(&b))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// An IPv4/UDP packet from port `port` to itself, numbered `seq`.
pub fn udp_packet(port: u16, seq: u32) -> Vec<u8> {
    let mut udp = Vec::new();
    for v in [port, port, 8 + 24, 0] {
        udp.extend_from_slice(&v.to_be_bytes());
    }
    udp.extend_from_slice(&seq.to_be_bytes());
    udp.extend_from_slice(&[b'x'; 20]);
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    ip[2..4].copy_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip.extend(udp);
    ip
}

/// A pcapng file with two interfaces, Ethernet (0) and raw IP (1), whose
/// packets alternate: `n` each, Ethernet ones to UDP port 1000, raw ones
/// to 2000, 1 µs apart from `start_ns`. Returns the frames of each interface.
pub fn write_two_link_types(path: &Path, n: u32, start_ns: u64) -> (Vec<Frame>, Vec<Frame>) {
    let frames: Vec<(u32, Frame)> = (0..2 * n)
        .map(|i| {
            let ifc = i % 2;
            let mut data = udp_packet(1000 + 1000 * ifc as u16, i);
            if ifc == 0 {
                let mut e = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
                e.append(&mut data);
                data = e;
            }
            (ifc, Frame { ts_ns: start_ns + u64::from(i) * 1000, origlen: data.len() as u32, data })
        })
        .collect();
    let packets: Vec<(u32, u64, &[u8])> = frames.iter().map(|(ifc, f)| (*ifc, f.ts_ns, &f.data[..])).collect();
    wv_testkit::write_pcapng_two_interfaces(path, &packets);
    let (eth, raw): (Vec<_>, Vec<_>) = frames.into_iter().partition(|(ifc, _)| *ifc == 0);
    (eth.into_iter().map(|(_, f)| f).collect(), raw.into_iter().map(|(_, f)| f).collect())
}
