//! Frames the unit tests feed, built by hand: Ethernet, IPv4, then UDP or
//! a payload of any protocol, and an RTP header.

use crate::{Analyzer, Frame};
use wv_wire::views::ipv4::Repr;
use wv_wire::views::IpProtocol;

/// An Ethernet/IPv4 frame carrying `l4` as `protocol`, with a right checksum.
pub fn ipv4(src: [u8; 4], dst: [u8; 4], protocol: IpProtocol, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let payload_len = u16::try_from(l4.len()).unwrap();
    Repr { src, dst, protocol, payload_len, ttl: 64, ident: 0, dont_frag: false }.emit(&mut f[14..34]).unwrap();
    f.extend_from_slice(l4);
    f
}

/// An Ethernet/IPv4/UDP frame from `src:sp` to `dst:dp` carrying `payload`.
pub fn udp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&u16::try_from(8 + payload.len()).unwrap().to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    ipv4(src, dst, IpProtocol::Udp, &u)
}

/// An RTP packet (version 2) with 160 bytes of payload; `pt` with 0x80 set is the marker bit.
pub fn rtp(pt: u8, seq: u16, ts: u32, ssrc: u32) -> Vec<u8> {
    let mut p = vec![0x80, pt];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&ts.to_be_bytes());
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.resize(12 + 160, 0xd5);
    p
}

/// Feeds one Ethernet frame at `ts_ns`, its wire length its own.
pub fn feed(a: &mut Analyzer, ts_ns: u64, data: &[u8]) {
    a.feed(&Frame { ts_ns, linktype: 1, wire_len: data.len() as u32, data });
}

/// An Ethernet/IPv4/TCP frame (20-byte header) from `src:sp` to `dst:dp` with `len` bytes of data.
#[allow(clippy::too_many_arguments)]
pub fn tcp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, seq: u32, ack: u32, flags: u16, len: usize) -> Vec<u8> {
    let mut t = vec![0u8; 20 + len];
    t[0..2].copy_from_slice(&sp.to_be_bytes());
    t[2..4].copy_from_slice(&dp.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12..14].copy_from_slice(&(0x5000 | flags).to_be_bytes());
    t[14..16].copy_from_slice(&1000u16.to_be_bytes());
    ipv4(src, dst, IpProtocol::Tcp, &t)
}
