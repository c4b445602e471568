//! The one flow record every sink writes (Parquet, ClickHouse, IPFIX) and every reader
//! (`wirevault flows`, the API) reads: the field list here is the schema.

use serde::{Deserialize, Serialize};

/// An IP address in 16 bytes: IPv6 as it is, IPv4 as an IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`, RFC 4291), so that one fixed-width column holds both
/// (ClickHouse 18.16 has no IPv4/IPv6 types: FixedString(16)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct IpAddr16(pub [u8; 16]);

impl IpAddr16 {
    /// An IPv4 address, mapped.
    pub fn v4(a: [u8; 4]) -> IpAddr16 {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&a);
        IpAddr16(b)
    }

    /// The IPv4 address, if this is one (mapped).
    pub fn as_v4(&self) -> Option<[u8; 4]> {
        (self.0[..10] == [0; 10] && self.0[10..12] == [0xff, 0xff]).then(|| self.0[12..].try_into().unwrap())
    }

    /// 4 or 6.
    pub fn version(&self) -> u8 {
        if self.as_v4().is_some() {
            4
        } else {
            6
        }
    }

    pub fn to_std(&self) -> std::net::IpAddr {
        match self.as_v4() {
            Some(a) => std::net::IpAddr::from(a),
            None => std::net::IpAddr::from(self.0),
        }
    }
}

/// Why a record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// TCP FIN seen from both sides.
    Fin,
    /// TCP RST seen.
    Rst,
    /// No packet for `--flow-idle-timeout`.
    Idle,
    /// Open for `--flow-active-timeout`: the flow goes on in a new record.
    Active,
    /// Pushed out of the bounded table by a new flow (counted, `flows_evicted`).
    Evicted,
    /// The recording stopped.
    #[default]
    Stop,
}

impl EndReason {
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Idle => "idle",
            EndReason::Active => "active",
            EndReason::Evicted => "evicted",
            EndReason::Stop => "stop",
        }
    }

    /// The reason of [`EndReason::name`].
    pub fn from_name(s: &str) -> Option<EndReason> {
        [EndReason::Fin, EndReason::Rst, EndReason::Idle, EndReason::Active, EndReason::Evicted, EndReason::Stop]
            .into_iter()
            .find(|r| r.name() == s)
    }
}

/// One direction of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Direction {
    pub packets: u64,
    /// Frame bytes (original length on the wire, as tshark's conversations count them).
    pub frame_bytes: u64,
    /// IP bytes (the IP header's total length; RFC 7011's octetDeltaCount).
    pub ip_bytes: u64,
    /// TCP flags seen in this direction, OR-ed (0 for other protocols).
    pub tcp_flags: u16,
}

/// One flow record: a bidirectional key, with the client being the side that sent the
/// first packet seen.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FlowRecord {
    /// VLAN ids, outermost first (empty: untagged).
    pub vlans: Vec<u16>,
    pub client: IpAddr16,
    pub server: IpAddr16,
    /// IP protocol (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, ...).
    pub protocol: u8,
    /// Ports for TCP/UDP/SCTP (0 otherwise).
    pub client_port: u16,
    pub server_port: u16,
    /// ICMP/ICMPv6 type and code of the first packet (0 otherwise).
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// First and last packet time, ns since the epoch.
    pub first_ns: u64,
    pub last_ns: u64,
    /// Client to server, server to client.
    pub to_server: Direction,
    pub to_client: Direction,
    pub end: EndReason,
    /// The recorder's node name (`--node-name`, default the host name).
    pub node: String,
    /// The store's stream (capture worker) and the files (relative to the store) that hold
    /// its packets.
    pub stream: u32,
    pub files: Vec<String>,
}
