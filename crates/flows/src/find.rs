//! Finding flows in a store's flow files (`STORE/flows/`): by time, by a flow expression
//! ([`crate::filter`]), sorted; each record as JSON, and the tcpdump expression that selects
//! its packets. One answer for `wirevault flows` and `/api/v1/flows`.

use crate::filter::Expr;
use crate::record::{Direction, FlowRecord, IpAddr16};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The order of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// Both directions' frame bytes, most first.
    Bytes,
    /// Both directions' packets, most first.
    Packets,
    /// First packet time, oldest first.
    #[default]
    Start,
}

impl Sort {
    pub fn parse(s: &str) -> Option<Sort> {
        match s {
            "bytes" => Some(Sort::Bytes),
            "packets" => Some(Sort::Packets),
            "start" => Some(Sort::Start),
            _ => None,
        }
    }
}

/// Which flows: those with a packet in `from_ns..to_ns` that `filter` matches.
#[derive(Debug, Clone, Default)]
pub struct Find {
    pub filter: Expr,
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
    pub sort: Sort,
    /// At most this many records (after sorting).
    pub limit: Option<usize>,
}

/// The records found, and the flow files that could not be read (path and why; their
/// records are left out).
#[derive(Debug, Default)]
pub struct Found {
    pub records: Vec<FlowRecord>,
    /// Matching records before `limit`.
    pub matched: usize,
    pub unreadable: Vec<(PathBuf, String)>,
}

/// The flows of `store` that `q` asks for.
pub fn find(store: &Path, q: &Find) -> Found {
    let mut found = Found::default();
    let hosts = q.filter.hosts();
    for f in flow_files(&store.join(wv_store::layout::FLOWS)) {
        // The row groups whose footer (times) and bloom filters (addresses) rule them out are
        // not read: one host's flows of a day are then a few files' worth of reading. Of those,
        // only the rows with one of the hosts are decoded whole (every match has one).
        let read = std::fs::File::open(&f).map_err(|e| e.to_string()).and_then(|file| {
            crate::parquet::read_matching(file, q.from_ns, q.to_ns, hosts.as_deref()).map_err(|e| e.to_string())
        });
        match read {
            Ok(recs) => found.records.extend(recs.into_iter().filter(|r| q.wants(r))),
            Err(e) => found.unreadable.push((f, e)),
        }
    }
    q.order(&mut found.records);
    found.matched = found.records.len();
    if let Some(n) = q.limit {
        found.records.truncate(n);
    }
    found
}

impl Find {
    /// `r` is in the time range and matches the filter.
    pub fn wants(&self, r: &FlowRecord) -> bool {
        self.from_ns.is_none_or(|t| r.last_ns >= t)
            && self.to_ns.is_none_or(|t| r.first_ns < t)
            && self.filter.matches(r)
    }

    /// Sorts `recs` as asked (ties by start).
    pub fn order(&self, recs: &mut [FlowRecord]) {
        let total = |r: &FlowRecord, f: fn(&Direction) -> u64| f(&r.to_server) + f(&r.to_client);
        match self.sort {
            Sort::Start => recs.sort_by_key(|r| (r.first_ns, r.last_ns)),
            Sort::Bytes => recs.sort_by_key(|r| (std::cmp::Reverse(total(r, |d| d.frame_bytes)), r.first_ns)),
            Sort::Packets => recs.sort_by_key(|r| (std::cmp::Reverse(total(r, |d| d.packets)), r.first_ns)),
        }
    }
}

/// Every `.parquet` file beneath `dir`, sorted.
pub fn flow_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let (p, t) = (e.path(), e.file_type());
            if t.as_ref().is_ok_and(|t| t.is_dir()) {
                todo.push(p);
            } else if t.is_ok_and(|t| t.is_file())
                && p.to_str().is_some_and(|s| s.ends_with(wv_store::layout::FLOWS_EXT))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn addr(a: &IpAddr16) -> String {
    a.to_std().to_string()
}

/// A record as JSON: the shape of `wirevault flows --json` and `/api/v1/flows`.
pub fn to_json(r: &FlowRecord) -> serde_json::Value {
    let d = |d: &Direction| json!({"packets": d.packets, "bytes": d.frame_bytes, "ip_bytes": d.ip_bytes, "tcp_flags": d.tcp_flags});
    json!({
        "vlans": r.vlans, "ip_version": r.client.version(), "protocol": r.protocol,
        "client": addr(&r.client), "client_port": r.client_port,
        "server": addr(&r.server), "server_port": r.server_port,
        "icmp_type": r.icmp_type, "icmp_code": r.icmp_code,
        "first_ns": r.first_ns, "last_ns": r.last_ns,
        "first": wv_wire::time::utc_rfc3339(r.first_ns), "last": wv_wire::time::utc_rfc3339(r.last_ns),
        "to_server": d(&r.to_server), "to_client": d(&r.to_client),
        "end_reason": r.end.name(), "node": r.node, "stream": r.stream, "files": r.files,
    })
}

/// A record of [`to_json`]'s shape back (a recorder's `/api/v1/flows` answer, read by
/// `wirevault flows` over a fleet); the error names the first field missing or wrong.
pub fn from_json(v: &serde_json::Value) -> Result<FlowRecord, String> {
    let bad = |f: &str| format!("field {f:?} is missing or not what a flow record holds");
    let u = |v: &serde_json::Value, f: &str| v[f].as_u64().ok_or_else(|| bad(f));
    let small = |f: &str, max: u64| u(v, f).and_then(|n| if n <= max { Ok(n) } else { Err(bad(f)) });
    let ip = |f: &str| -> Result<IpAddr16, String> {
        let a: std::net::IpAddr = v[f].as_str().and_then(|s| s.parse().ok()).ok_or_else(|| bad(f))?;
        Ok(match a {
            std::net::IpAddr::V4(a) => IpAddr16::v4(a.octets()),
            std::net::IpAddr::V6(a) => IpAddr16(a.octets()),
        })
    };
    let dir = |f: &str| -> Result<Direction, String> {
        let d = &v[f];
        Ok(Direction {
            packets: u(d, "packets").map_err(|_| bad(f))?,
            frame_bytes: u(d, "bytes").map_err(|_| bad(f))?,
            ip_bytes: u(d, "ip_bytes").map_err(|_| bad(f))?,
            tcp_flags: u16::try_from(u(d, "tcp_flags").map_err(|_| bad(f))?).map_err(|_| bad(f))?,
        })
    };
    let vlans = v["vlans"]
        .as_array()
        .and_then(|a| a.iter().map(|x| x.as_u64().and_then(|n| u16::try_from(n).ok())).collect::<Option<Vec<_>>>())
        .ok_or_else(|| bad("vlans"))?;
    let files = v["files"]
        .as_array()
        .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
        .ok_or_else(|| bad("files"))?;
    Ok(FlowRecord {
        vlans,
        client: ip("client")?,
        server: ip("server")?,
        protocol: small("protocol", 255)? as u8,
        client_port: small("client_port", 65535)? as u16,
        server_port: small("server_port", 65535)? as u16,
        icmp_type: small("icmp_type", 255)? as u8,
        icmp_code: small("icmp_code", 255)? as u8,
        first_ns: u(v, "first_ns")?,
        last_ns: u(v, "last_ns")?,
        to_server: dir("to_server")?,
        to_client: dir("to_client")?,
        end: v["end_reason"].as_str().and_then(crate::record::EndReason::from_name).ok_or_else(|| bad("end_reason"))?,
        node: v["node"].as_str().ok_or_else(|| bad("node"))?.to_string(),
        stream: u32::try_from(u(v, "stream")?).map_err(|_| bad("stream"))?,
        files,
    })
}

/// The tcpdump expression that selects the packets of `r`'s flow key (both directions; its
/// VLAN tags in order; the ports for TCP, UDP and SCTP), to query between `r.first_ns` and
/// `r.last_ns` inclusive. A frame of another flow with the same key in that time (a port
/// reused at once) matches it too, as it would in any capture tool.
pub fn packet_filter(r: &FlowRecord) -> String {
    let (c, s) = (addr(&r.client), addr(&r.server));
    let mut parts: Vec<String> = r.vlans.iter().map(|v| format!("vlan {v}")).collect();
    let ip = if r.client.version() == 4 { "ip" } else { "ip6" };
    let ported = matches!(r.protocol, 6 | 17 | 132);
    let one = |a: &str, ap: u16, b: &str, bp: u16| {
        if ported {
            format!("src host {a} and src port {ap} and dst host {b} and dst port {bp}")
        } else {
            format!("src host {a} and dst host {b}")
        }
    };
    parts.push(format!("{ip} proto {}", r.protocol));
    parts.push(format!(
        "(({}) or ({}))",
        one(&c, r.client_port, &s, r.server_port),
        one(&s, r.server_port, &c, r.client_port)
    ));
    parts.join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(first: u64, bytes: u64) -> FlowRecord {
        FlowRecord {
            client: IpAddr16::v4([10, 0, 0, 1]),
            server: IpAddr16::v4([10, 0, 0, 2]),
            protocol: 6,
            client_port: 40000,
            server_port: 443,
            first_ns: first,
            last_ns: first + 10,
            to_server: Direction { packets: 1, frame_bytes: bytes, ..Direction::default() },
            ..FlowRecord::default()
        }
    }

    #[test]
    fn time_filter_sort_and_limit() {
        let q = Find { from_ns: Some(15), to_ns: Some(40), sort: Sort::Bytes, limit: Some(1), ..Find::default() };
        let mut recs: Vec<_> =
            [rec(0, 5), rec(10, 7), rec(20, 9), rec(40, 100)].into_iter().filter(|r| q.wants(r)).collect();
        assert_eq!(recs.iter().map(|r| r.first_ns).collect::<Vec<_>>(), [10, 20], "last_ns >= from, first_ns < to");
        q.order(&mut recs);
        assert_eq!(recs[0].first_ns, 20, "most bytes first");
    }

    #[test]
    fn a_record_comes_back_from_its_json() {
        let mut r = rec(5, 300);
        r.vlans = vec![7, 8];
        r.to_client = Direction { packets: 3, frame_bytes: 190, ip_bytes: 148, tcp_flags: 0x12 };
        r.end = crate::record::EndReason::Rst;
        r.node = "n1".into();
        r.stream = 2;
        r.files = vec!["stream-002/a.pcap".into()];
        assert_eq!(from_json(&to_json(&r)), Ok(r.clone()));
        r.server = IpAddr16([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(from_json(&to_json(&r)), Ok(r.clone()), "IPv6");
        let mut v = to_json(&r);
        v["client_port"] = 70000.into();
        assert!(from_json(&v).unwrap_err().contains("\"client_port\""));
    }

    #[test]
    fn the_packet_filter_names_both_directions_and_the_tags() {
        let mut r = rec(0, 1);
        assert_eq!(
            packet_filter(&r),
            "ip proto 6 and ((src host 10.0.0.1 and src port 40000 and dst host 10.0.0.2 and dst port 443) or \
             (src host 10.0.0.2 and src port 443 and dst host 10.0.0.1 and dst port 40000))"
        );
        r.vlans = vec![10, 20];
        r.server = IpAddr16([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        r.client = IpAddr16([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        r.protocol = 58;
        assert_eq!(
            packet_filter(&r),
            "vlan 10 and vlan 20 and ip6 proto 58 and ((src host 2001:db8::2 and dst host 2001:db8::1) or \
             (src host 2001:db8::1 and dst host 2001:db8::2))"
        );
    }
}
