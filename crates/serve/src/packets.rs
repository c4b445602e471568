//! `GET /api/v1/packets`: the first matching packets of a selection,
//! decoded for the console's table (time, addresses, ports, protocol,
//! lengths), as JSON.
//!
//! The packets are read through the query layer exactly as `count` and
//! `query` read them (same selection, same order: the first rows are the
//! first packets of `wirevault query -w` for the same arguments), on a
//! query thread under a permit, and decoded with `wv_wire::dissect`. The
//! answer is small by construction: at most [`MAX_LIMIT`] rows; a larger
//! result is what the pcap download is for.

use crate::api::{self, ApiError, Params};
use crate::export::Selection;
use crate::server::State;
use axum::extract::{Query, State as Ax};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use wv_wire::dissect::{dissect, Dissection, LayerKind};

/// Rows when the request gives no limit.
pub(crate) const DEFAULT_LIMIT: u64 = 100;
/// The most rows one answer has.
pub(crate) const MAX_LIMIT: u64 = 1000;

/// One packet, decoded.
#[derive(serde::Serialize, Debug, PartialEq)]
pub(crate) struct Row {
    pub ts_ns: u64,
    /// RFC 3339, UTC, nanoseconds.
    pub time: String,
    /// Length on the wire.
    pub len: u32,
    /// Bytes captured.
    pub caplen: u32,
    /// The IP (or ARP sender) address; the MAC address for other Ethernet frames.
    pub src: Option<String>,
    pub dst: Option<String>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// `TCP`, `UDP`, `ICMP`, `ICMPv6`, `ARP`, another IP protocol or
    /// EtherType name, or the EtherType in hex (`0x88b5`).
    pub proto: String,
    /// VLAN ids, outermost first, when tagged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<Vec<u16>>,
}

/// One answer.
#[derive(serde::Serialize)]
pub(crate) struct Packets {
    pub packets: Vec<Row>,
    pub limit: u64,
    /// More packets match than the rows given.
    pub more: bool,
    /// Why the range selects nothing the store holds, if so.
    pub outside: Option<String>,
    /// Capture files still being written, not read (as the CLI).
    pub open_files_excluded: usize,
    /// What the query could not read (as `count`'s and the CLI's warnings).
    pub warnings: Vec<String>,
}

/// `GET /api/v1/packets?from=&to=&filter=&limit=`.
pub(crate) async fn packets(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    let sel = api::selection(&api::params(&q, &["from", "to", "filter", "limit"])?)?;
    let limit = sel.limit.unwrap_or(DEFAULT_LIMIT);
    if limit > MAX_LIMIT {
        return Err(ApiError::BadRequest(format!(
            "limit {limit}: the packet table shows at most {MAX_LIMIT} packets; download the pcap (/api/v1/query) for more"
        )));
    }
    let p = api::on_query_thread(&state, "packets", move |st| first(st, &sel, limit)).await?;
    Ok(Json(p).into_response())
}

/// The first `limit` packets of `sel`, decoded.
fn first(state: &State, sel: &Selection, limit: u64) -> Result<Packets, ApiError> {
    // One more than asked: whether more match.
    let p = sel.prepare(&state.view, Some(limit + 1))?;
    let span = p.span();
    let (open, recording) = p.open_files();
    let mut rows = Vec::new();
    let mut more = false;
    let mut each = |pk: wv_query::PacketRef<'_>| -> std::io::Result<()> {
        if rows.len() as u64 == limit {
            more = true;
        } else {
            rows.push(row(pk.ts_ns, pk.linktype, pk.data, pk.origlen));
        }
        Ok(())
    };
    let report = wv_query::run(p, wv_query::Sink::Packets(&mut each))
        .map_err(|e| crate::export::query_failed(&state.view, e))?;
    Ok(Packets {
        warnings: crate::export::warnings(report.warnings, open, recording),
        packets: rows,
        limit,
        more,
        outside: crate::store_view::outside(span, sel.from, sel.to),
        open_files_excluded: if recording { open } else { 0 },
    })
}

/// Decodes one frame.
pub(crate) fn row(ts_ns: u64, linktype: u32, data: &[u8], wire_len: u32) -> Row {
    let d = dissect(linktype, data, wire_len);
    let f = &d.flow;
    let addr = |a| Some(wv_wire::names::addr_text(a)).filter(|s| !s.is_empty());
    let (mut src, mut dst) = (addr(&f.src), addr(&f.dst));
    if src.is_none() && dst.is_none() {
        if let Some(e) = d.layer(LayerKind::Ethernet).and_then(|l| data.get(l.offset as usize..)) {
            if let Ok(v) = wv_wire::views::ethernet::Frame::new_checked(e) {
                (src, dst) = (Some(mac(v.src_addr())), Some(mac(v.dst_addr())));
            }
        }
    }
    Row {
        ts_ns,
        time: crate::store_view::time(ts_ns),
        len: wire_len.max(data.len() as u32),
        caplen: data.len() as u32,
        src,
        dst,
        sport: f.ports.map(|p| p.0),
        dport: f.ports.map(|p| p.1),
        proto: proto(&d),
        vlan: Some(f.vlans().to_vec()).filter(|v| !v.is_empty()),
    }
}

/// The protocol column: the transport when there is one, else what the
/// network layer is.
fn proto(d: &Dissection) -> String {
    use wv_wire::names::{ethertype_name, protocol_name};
    let f = &d.flow;
    if !d.linktype_supported {
        return "unknown link type".into();
    }
    if let Some(p) = f.protocol {
        return match protocol_name(p) {
            "" => format!("IP proto {p}"),
            name => name.to_string(),
        };
    }
    match (f.ethertype, ethertype_name(f.ethertype)) {
        (0, _) if d.layer(LayerKind::Llc).is_some() => "LLC".into(),
        (0, _) => "unknown".into(),
        (t, "") => format!("0x{t:04x}"),
        (_, name) => name.to_string(),
    }
}

fn mac(a: [u8; 6]) -> String {
    a.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + VLAN 7 + IPv4 (10.0.0.1 -> 10.0.0.2) + UDP 40000 -> 53, 4 bytes of payload.
    fn vlan_udp() -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x07, 0x08, 0x00];
        let mut ip = [0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let sum = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum::<u32>();
        let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x9c, 0x40, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]);
        f
    }

    #[test]
    fn decodes_a_tagged_udp_frame() {
        let f = vlan_udp();
        let r = row(1_700_000_000_123_456_789, 1, &f, f.len() as u32 + 100);
        assert_eq!(r.time, "2023-11-14T22:13:20.123456789Z");
        assert_eq!((r.len, r.caplen), (f.len() as u32 + 100, f.len() as u32));
        assert_eq!((r.src.as_deref(), r.dst.as_deref()), (Some("10.0.0.1"), Some("10.0.0.2")));
        assert_eq!((r.sport, r.dport), (Some(40000), Some(53)));
        assert_eq!(r.proto, "UDP");
        assert_eq!(r.vlan, Some(vec![7]));
    }

    #[test]
    fn a_frame_without_ip_shows_macs_and_its_ethertype() {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
        f.resize(60, 0xaa);
        let r = row(0, 1, &f, 60);
        assert_eq!((r.src.as_deref(), r.dst.as_deref()), (Some("02:00:00:00:00:01"), Some("02:00:00:00:00:02")));
        assert_eq!((r.sport, r.dport, r.vlan), (None, None, None));
        assert_eq!(r.proto, "0x88b5");
        let short = row(0, 1, &[0u8; 10], 10);
        assert_eq!((short.src, short.len, short.proto.as_str()), (None, 10, "unknown"));
        assert_eq!(row(0, 147, &f, 60).proto, "unknown link type");
    }

    #[test]
    fn an_802_3_frame_is_llc_tagged_or_not() {
        // Spanning tree: an 802.3 length (0x0026), then LLC 42 42 03.
        let mut plain = vec![1, 0x80, 0xc2, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0x00, 0x26, 0x42, 0x42, 0x03];
        plain.resize(60, 0);
        let mut tagged =
            vec![1, 0x80, 0xc2, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x07, 0x00, 0x26, 0x42, 0x42, 0x03];
        tagged.resize(64, 0);
        assert_eq!(row(0, 1, &plain, 60).proto, "LLC");
        let t = row(0, 1, &tagged, 64);
        assert_eq!((t.proto.as_str(), t.vlan), ("LLC", Some(vec![7])));
    }
}
