//! The part of a tcpdump filter expression an index can use.
//!
//! This is *not* a filter: libpcap's compiled program decides every packet.
//! The parser only finds, for an expression, a condition on index keys that
//! every packet the real filter selects satisfies (a superset). Anything it
//! does not understand becomes [`Plan::All`] (no narrowing), and an
//! expression it cannot parse at all is unindexable (scan the time range).
//!
//! libpcap semantics reproduced here, because getting them wrong would drop
//! packets:
//! * `and` and `or` have the *same* precedence and associate to the left
//!   (`a or b and c` is `(a or b) and c`); `not` binds tighter.
//! * A bare value repeats the previous qualifiers: `host a or b` is
//!   `host a or host b`, `port 80 and not 443` is `port 80 and not port 443`.
//! * `vlan`, `mpls`, `pppoes`, `geneve` move the offsets at which every
//!   *later* primitive of the expression (in text order, whatever the
//!   and/or structure) looks, so after the first of them nothing narrows.
//! * `not P` does not narrow: the posting lists are supersets, so their
//!   complement is not.
//! * Index keys are undirected: `src host a` narrows like `host a`.

use std::net::{Ipv4Addr, Ipv6Addr};

/// An index condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Every packet (no narrowing).
    All,
    /// IPv4 address (or ARP address) in the inclusive range.
    V4(u32, u32),
    /// IPv6 address in the inclusive range.
    V6(u128, u128),
    /// TCP/UDP/SCTP port (either direction) in the inclusive range.
    Port(u16, u16),
    /// IP protocol / IPv6 next header.
    Proto(u8),
    /// VLAN id (any tag of the stack) in the inclusive range; Ethernet only.
    Vlan(u16, u16),
    And(Box<Plan>, Box<Plan>),
    Or(Box<Plan>, Box<Plan>),
}

impl Plan {
    fn and(a: Plan, b: Plan) -> Plan {
        match (a, b) {
            (Plan::All, x) | (x, Plan::All) => x,
            (a, b) => Plan::And(Box::new(a), Box::new(b)),
        }
    }
    fn or(a: Plan, b: Plan) -> Plan {
        match (a, b) {
            (Plan::All, _) | (_, Plan::All) => Plan::All,
            (a, b) => Plan::Or(Box::new(a), Box::new(b)),
        }
    }
    /// Whether the plan narrows at all.
    pub fn narrows(&self) -> bool {
        !matches!(self, Plan::All)
    }
}

/// Parses the indexable part of `expr`. `None` means the expression is
/// beyond this parser (scan); an empty expression is `Some(Plan::All)`.
pub fn plan(expr: &str) -> Option<Plan> {
    let toks = tokenize(expr)?;
    if toks.is_empty() {
        return Some(Plan::All);
    }
    // The plan is a tree walked recursively for every candidate block: past
    // these bounds the expression is left to the scan (the exact filter still
    // decides), so no input can exhaust the stack.
    if toks.len() > MAX_TOKENS {
        return None;
    }
    let mut p = Parser { toks, pos: 0, quals: None, shifted: false, last_was_bare: false, depth: 0 };
    let plan = p.expr()?;
    (p.pos == p.toks.len()).then_some(plan)
}

fn tokenize(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'(' || c == b')' {
            out.push((c as char).to_string());
            i += 1;
        } else if c == b'!' && b.get(i + 1) != Some(&b'=') {
            out.push("!".into());
            i += 1;
        } else if (c == b'&' || c == b'|') && b.get(i + 1) == Some(&c) {
            out.push(if c == b'&' { "and".into() } else { "or".into() });
            i += 2;
        } else if c.is_ascii_alphanumeric() || matches!(c, b'.' | b':' | b'/' | b'-' | b'_' | b'\\') {
            let st = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'.' | b':' | b'/' | b'-' | b'_' | b'\\'))
            {
                i += 1;
            }
            out.push(s[st..i].to_string());
        } else {
            // Brackets, comparisons, arithmetic: packet-data expressions.
            return None;
        }
    }
    Some(out)
}

/// Qualifiers that a bare value inherits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quals {
    /// Protocol qualifier (ip, ip6, tcp, udp, sctp, arp, rarp) or none.
    proto: Option<&'static str>,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Net,
    Port,
    PortRange,
    /// A qualifier this module does not narrow by (ether host, gateway, ...):
    /// its values still need consuming.
    Opaque,
}

struct Parser {
    toks: Vec<String>,
    pos: usize,
    quals: Option<Quals>,
    shifted: bool,
    last_was_bare: bool,
    /// Nesting of `(` and `not` at the current position.
    depth: usize,
}

/// Bounds on what the planner takes (see [`plan`]).
const MAX_TOKENS: usize = 4096;
const MAX_DEPTH: usize = 64;

const PROTO_QUALS: &[&str] = &["ip", "ip6", "tcp", "udp", "sctp", "arp", "rarp"];
const OPAQUE_PROTO_QUALS: &[&str] =
    &["ether", "fddi", "tr", "wlan", "ppp", "slip", "link", "decnet", "atalk", "aarp", "iso", "ipx", "netbeui"];
const SHIFTERS: &[&str] = &["vlan", "mpls", "pppoes", "geneve", "vxlan"];
/// Primitives of their own (no value) that this module does not narrow by.
const OPAQUE_WORDS: &[&str] = &[
    "broadcast",
    "multicast",
    "inbound",
    "outbound",
    "igmp",
    "igrp",
    "pim",
    "ah",
    "esp",
    "vrrp",
    "carp",
    "stp",
    "ipx",
    "netbeui",
    "atalk",
    "aarp",
    "decnet",
    "lat",
    "sca",
    "moprc",
    "mopdl",
    "iso",
    "esis",
    "isis",
    "clnp",
    "l1",
    "l2",
    "iih",
    "lsp",
    "snp",
    "csnp",
    "psnp",
    "pppoed",
    "llc",
    "radio",
    "atm",
    "lane",
    "oamf4",
    "oamf4ec",
    "oamf4sc",
    "oam",
    "metac",
    "bcc",
    "sc",
    "ilmic",
    "connectmsg",
    "metaconnect",
    "arp",
    "rarp",
    "ip",
    "ip6",
];

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(String::as_str)
    }
    fn peek_at(&self, k: usize) -> Option<&str> {
        self.toks.get(self.pos + k).map(String::as_str)
    }
    fn next(&mut self) -> Option<String> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    /// expr := term (('and'|'or') term)*, left-associative, one precedence.
    fn expr(&mut self) -> Option<Plan> {
        let mut acc = self.term()?;
        while let Some(op) = self.peek() {
            let is_and = match op {
                "and" => true,
                "or" => false,
                _ => break,
            };
            self.pos += 1;
            let rhs = self.term()?;
            acc = if is_and { Plan::and(acc, rhs) } else { Plan::or(acc, rhs) };
        }
        Some(acc)
    }

    fn term(&mut self) -> Option<Plan> {
        self.depth += 1;
        let r = if self.depth > MAX_DEPTH { None } else { self.term_inner() };
        self.depth -= 1;
        r
    }

    fn term_inner(&mut self) -> Option<Plan> {
        match self.peek()? {
            "not" | "!" => {
                self.pos += 1;
                // Parsed for its qualifiers and shifts; never narrows.
                self.term()?;
                Some(Plan::All)
            }
            "(" => {
                self.pos += 1;
                // A bare value right after '(' inherits in ways we do not model.
                if self.peek().is_some_and(|t| is_value(t) && !is_keyword(t)) {
                    return None;
                }
                let e = self.expr()?;
                (self.next()? == ")").then_some(e)
            }
            _ => self.primitive(),
        }
    }

    fn primitive(&mut self) -> Option<Plan> {
        let start = self.pos;
        let plan = self.primitive_inner()?;
        // Only a `[proto] [dir] kind value` primitive sets the qualifiers a
        // bare value repeats; after anything else, libpcap's inheritance is
        // not modelled, so a bare value makes the expression unindexable.
        if !self.toks[start..self.pos].iter().any(|t| is_kind(t)) && !self.last_was_bare {
            self.quals = None;
        }
        self.last_was_bare = false;
        Some(plan)
    }

    fn primitive_inner(&mut self) -> Option<Plan> {
        let t = self.peek()?.to_string();
        let shifted = self.shifted;
        let narrow = |p: Plan| if shifted { Plan::All } else { p };

        if SHIFTERS.contains(&t.as_str()) {
            self.pos += 1;
            let arg = self.peek().filter(|v| v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty());
            let id = arg.and_then(|v| v.parse::<u32>().ok());
            if arg.is_some() {
                self.pos += 1;
            }
            let plan = if t == "vlan" && !self.shifted {
                match id {
                    Some(id) if id <= 4095 => Plan::Vlan(id as u16, id as u16),
                    Some(_) => Plan::All,
                    None => Plan::Vlan(0, 4095),
                }
            } else {
                Plan::All
            };
            self.shifted = true;
            return Some(plan);
        }
        match t.as_str() {
            "tcp" | "udp" | "sctp" | "icmp" | "icmp6"
                if !matches!(self.peek_at(1), Some("src" | "dst" | "port" | "portrange" | "host" | "net")) =>
            {
                self.pos += 1;
                let p = match t.as_str() {
                    "tcp" => 6,
                    "udp" => 17,
                    "sctp" => 132,
                    "icmp" => 1,
                    _ => 58,
                };
                return Some(narrow(Plan::Proto(p)));
            }
            "less" | "greater" => {
                self.pos += 1;
                self.next()?;
                return Some(Plan::All);
            }
            _ => {}
        }
        // ip proto N / ip6 proto N / proto N
        let save = self.pos;
        if matches!(t.as_str(), "ip" | "ip6" | "proto") {
            if t != "proto" {
                self.pos += 1;
            }
            if self.peek() == Some("proto") {
                self.pos += 1;
                let v = self.next()?;
                return Some(narrow(proto_value(&v).map_or(Plan::All, Plan::Proto)));
            }
            if matches!(self.peek(), Some("protochain")) {
                self.pos += 1;
                self.next()?;
                return Some(Plan::All);
            }
            self.pos = save;
        }

        // [proto] [dir] [kind] value
        let mut proto: Option<&'static str> = None;
        let mut opaque = false;
        let mut any_qual = false;
        if let Some(p) = PROTO_QUALS.iter().find(|p| **p == t) {
            if self.peek_at(1).is_some_and(|n| is_dir(n) || is_kind(n)) {
                proto = Some(p);
                any_qual = true;
                self.pos += 1;
            }
        } else if OPAQUE_PROTO_QUALS.contains(&t.as_str())
            && self
                .peek_at(1)
                .is_some_and(|n| is_dir(n) || is_kind(n) || n == "proto" || n == "broadcast" || n == "multicast")
        {
            opaque = true;
            any_qual = true;
            self.pos += 1;
            if matches!(self.peek(), Some("proto")) {
                self.pos += 1;
                self.next()?;
                return Some(Plan::All);
            }
            if matches!(self.peek(), Some("broadcast" | "multicast")) {
                self.pos += 1;
                return Some(Plan::All);
            }
        }
        if self.peek().is_some_and(is_dir) {
            any_qual = true;
            self.pos += 1;
            // `src or dst host x`, `src and dst host x`
            if matches!(self.peek(), Some("or" | "and")) && self.peek_at(1).is_some_and(|d| d == "src" || d == "dst") {
                self.pos += 2;
            }
            // Directions of link-layer address families.
            if matches!(self.peek(), Some("addr1" | "addr2" | "addr3" | "addr4" | "ra" | "ta")) {
                return None;
            }
        }
        let kind = match self.peek() {
            Some("host") => Some(Kind::Host),
            Some("net") => Some(Kind::Net),
            Some("port") => Some(Kind::Port),
            Some("portrange") => Some(Kind::PortRange),
            Some("gateway") => Some(Kind::Opaque),
            _ => None,
        };
        let kind = match kind {
            Some(k) => {
                self.pos += 1;
                if opaque {
                    Kind::Opaque
                } else {
                    k
                }
            }
            None if any_qual => {
                if opaque {
                    Kind::Opaque
                } else {
                    Kind::Host
                }
            }
            None => {
                // No qualifier: a primitive word, or a value repeating the last qualifiers.
                let w = self.peek()?.to_string();
                if OPAQUE_WORDS.contains(&w.as_str()) {
                    self.pos += 1;
                    return Some(Plan::All);
                }
                if is_keyword(&w) || !is_value(&w) {
                    return None;
                }
                let q = self.quals?;
                self.pos += 1;
                self.last_was_bare = true;
                return Some(narrow(value_plan(q, &w, None)?));
            }
        };
        let q = Quals { proto, kind };
        self.quals = Some(q);
        let v = self.next()?;
        if is_keyword(&v) {
            return None;
        }
        let mask = if q.kind == Kind::Net && self.peek() == Some("mask") {
            self.pos += 1;
            Some(self.next()?)
        } else {
            None
        };
        Some(narrow(value_plan(q, &v, mask.as_deref())?))
    }
}

fn is_dir(t: &str) -> bool {
    t == "src" || t == "dst"
}
fn is_kind(t: &str) -> bool {
    matches!(t, "host" | "net" | "port" | "portrange" | "gateway")
}
fn is_keyword(t: &str) -> bool {
    matches!(t, "and" | "or" | "not" | "!" | "(" | ")" | "mask")
        || is_dir(t)
        || is_kind(t)
        || PROTO_QUALS.contains(&t)
        || OPAQUE_PROTO_QUALS.contains(&t)
        || SHIFTERS.contains(&t)
        || OPAQUE_WORDS.contains(&t)
        || matches!(t, "icmp" | "icmp6" | "proto" | "protochain" | "less" | "greater" | "len")
}
fn is_value(t: &str) -> bool {
    t != "(" && t != ")" && t != "!"
}

fn proto_value(v: &str) -> Option<u8> {
    let v = v.trim_start_matches('\\');
    match v {
        "tcp" => Some(6),
        "udp" => Some(17),
        "icmp" => Some(1),
        "sctp" => Some(132),
        "icmp6" => Some(58),
        _ => v.parse().ok(),
    }
}

/// The plan of one value under qualifiers `q`; `None` when the value is
/// one we cannot classify in a way that is certainly a superset.
fn value_plan(q: Quals, v: &str, mask: Option<&str>) -> Option<Plan> {
    let proto_of = |p: Plan| match q.proto {
        Some("tcp") => Plan::and(Plan::Proto(6), p),
        Some("udp") => Plan::and(Plan::Proto(17), p),
        Some("sctp") => Plan::and(Plan::Proto(132), p),
        _ => p,
    };
    match q.kind {
        Kind::Opaque => Some(Plan::All),
        Kind::Host => {
            if let Ok(a) = v.parse::<Ipv4Addr>() {
                let a = u32::from(a);
                Some(Plan::V4(a, a))
            } else if let Ok(a) = v.parse::<Ipv6Addr>() {
                let a = u128::from(a);
                Some(Plan::V6(a, a))
            } else {
                // Host names and libpcap's short forms: no narrowing.
                Some(Plan::All)
            }
        }
        Kind::Net => Some(net_plan(v, mask).unwrap_or(Plan::All)),
        Kind::Port | Kind::PortRange => {
            let (lo, hi) = match v.split_once('-') {
                Some((a, b)) => (a.parse::<u16>().ok(), b.parse::<u16>().ok()),
                None => {
                    let p = v.parse::<u16>().ok();
                    (p, p)
                }
            };
            match (lo, hi) {
                (Some(a), Some(b)) => Some(proto_of(Plan::Port(a.min(b), a.max(b)))),
                // Service names: no narrowing.
                _ => Some(Plan::All),
            }
        }
    }
}

fn net_plan(v: &str, mask: Option<&str>) -> Option<Plan> {
    let (addr, len) = match v.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u32>().ok()?)),
        None => (v, None),
    };
    if addr.contains(':') {
        let a = u128::from(addr.parse::<Ipv6Addr>().ok()?);
        let len = len.unwrap_or(128);
        if len > 128 || mask.is_some() {
            return None;
        }
        let m = if len == 0 { 0 } else { u128::MAX << (128 - len) };
        return Some(Plan::V6(a & m, a | !m));
    }
    // libpcap's short dotted forms: `net 10` = 10/8, `net 10.1` = 10.1/16.
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut a = 0u32;
    for p in &parts {
        a = (a << 8) | p.parse::<u8>().ok()? as u32;
    }
    a <<= 8 * (4 - parts.len() as u32);
    let m: u32 = if let Some(mask) = mask {
        u32::from(mask.parse::<Ipv4Addr>().ok()?)
    } else {
        let len = len.unwrap_or(8 * parts.len() as u32);
        if len > 32 {
            return None;
        }
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - len)
        }
    };
    Some(Plan::V4(a & m, a | !m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> u32 {
        u32::from(s.parse::<Ipv4Addr>().unwrap())
    }

    #[test]
    fn hosts_and_repetition() {
        let a = v4("10.0.0.1");
        let b = v4("10.0.0.2");
        assert_eq!(plan("host 10.0.0.1"), Some(Plan::V4(a, a)));
        assert_eq!(
            plan("host 10.0.0.1 or 10.0.0.2"),
            Some(Plan::Or(Box::new(Plan::V4(a, a)), Box::new(Plan::V4(b, b))))
        );
        assert_eq!(plan("src host 10.0.0.1 and not 10.0.0.2"), Some(Plan::V4(a, a)));
        assert_eq!(plan("not host 10.0.0.1"), Some(Plan::All));
    }

    #[test]
    fn same_precedence_left_assoc() {
        // (port 53 or port 80) and tcp
        let p = plan("port 53 or port 80 and tcp").unwrap();
        assert_eq!(
            p,
            Plan::And(
                Box::new(Plan::Or(Box::new(Plan::Port(53, 53)), Box::new(Plan::Port(80, 80)))),
                Box::new(Plan::Proto(6))
            )
        );
    }

    #[test]
    fn protos_ports_nets() {
        assert_eq!(plan("tcp port 80"), Some(Plan::And(Box::new(Plan::Proto(6)), Box::new(Plan::Port(80, 80)))));
        assert_eq!(plan("portrange 1-1024"), Some(Plan::Port(1, 1024)));
        assert_eq!(plan("ip proto 17"), Some(Plan::Proto(17)));
        assert_eq!(plan("ip6 proto \\tcp"), Some(Plan::Proto(6)));
        assert_eq!(plan("icmp6"), Some(Plan::Proto(58)));
        assert_eq!(plan("net 10"), Some(Plan::V4(v4("10.0.0.0"), v4("10.255.255.255"))));
        assert_eq!(plan("dst net 192.168.0.0/16"), Some(Plan::V4(v4("192.168.0.0"), v4("192.168.255.255"))));
        assert_eq!(plan("net 172.16.0.0 mask 255.240.0.0"), Some(Plan::V4(v4("172.16.0.0"), v4("172.31.255.255"))));
        assert_eq!(plan("ip6 host ::1"), Some(Plan::V6(1, 1)));
        assert_eq!(plan("ip and udp"), Some(Plan::Proto(17)));
        assert_eq!(plan("ether host 00:11:22:33:44:55"), Some(Plan::All));
        assert_eq!(plan("port http"), Some(Plan::All));
    }

    #[test]
    fn vlan_shifts_later_primitives() {
        assert_eq!(plan("vlan 100 and host 10.0.0.1"), Some(Plan::Vlan(100, 100)));
        assert_eq!(
            plan("host 10.0.0.1 and vlan"),
            Some(Plan::And(Box::new(Plan::V4(v4("10.0.0.1"), v4("10.0.0.1"))), Box::new(Plan::Vlan(0, 4095))))
        );
        assert_eq!(plan("vlan 1 or vlan 2"), Some(Plan::All));
    }

    #[test]
    fn bounded() {
        let deep = |n: usize| format!("{}host 10.0.0.1{}", "(".repeat(n), ")".repeat(n));
        assert!(plan(&deep(MAX_DEPTH - 1)).is_some());
        assert_eq!(plan(&deep(100_000)), None);
        assert_eq!(plan(&"not ".repeat(100_000)), None);
        let long = vec!["port 1"; 2000].join(" or ");
        assert_eq!(plan(&long), None);
    }

    #[test]
    fn unindexable() {
        assert_eq!(plan("tcp[13] & 2 != 0"), None);
        assert_eq!(plan("len > 100"), None);
        assert_eq!(plan("host"), None);
        assert_eq!(plan("(host 1.2.3.4"), None);
        assert_eq!(plan(""), Some(Plan::All));
        assert_eq!(plan("greater 100 and port 22"), Some(Plan::Port(22, 22)));
    }
}
