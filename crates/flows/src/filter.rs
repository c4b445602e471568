//! The part of the tcpdump language a flow key answers: `host`, `net`, `port`, `proto`,
//! `tcp`/`udp`/`icmp`/`icmp6`/`sctp`, `ip`/`ip6`, `vlan`, joined by `and`/`or`/`not` (`&&`,
//! `||`, `!`) and parentheses. A record matches a primitive when either of its endpoints does
//! (a flow is both directions). Anything else (`src`, `tcp[13]`, `greater`, ...) is refused
//! with one sentence naming the word.

use crate::record::{FlowRecord, IpAddr16};

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Expr {
    #[default]
    All,
    Host(IpAddr16),
    /// A prefix of the 16-byte address (IPv4 prefixes count from its mapped form).
    Net(IpAddr16, u8),
    Port(u16),
    Proto(u8),
    Version(u8),
    /// `vlan` (any tag) or `vlan N` (any of its tags).
    Vlan(Option<u16>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// Why an expression was refused: one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(pub String);

const KNOWN: &str = "flows answer host, net, port, proto, tcp, udp, icmp, icmp6, sctp, ip, ip6 and vlan, joined by and, or, not and parentheses";

impl Expr {
    /// Parses `s` (empty: every flow).
    pub fn parse(s: &str) -> Result<Expr, FilterError> {
        let toks = tokens(s);
        if toks.is_empty() {
            return Ok(Expr::All);
        }
        let mut p = Parser { toks, at: 0 };
        let e = p.or()?;
        match p.peek() {
            None => Ok(e),
            Some(t) => Err(refuse(t)),
        }
    }

    pub fn matches(&self, r: &FlowRecord) -> bool {
        match self {
            Expr::All => true,
            Expr::Host(a) => r.client == *a || r.server == *a,
            Expr::Net(a, len) => in_net(&r.client, a, *len) || in_net(&r.server, a, *len),
            Expr::Port(p) => matches!(r.protocol, 6 | 17 | 132) && (r.client_port == *p || r.server_port == *p),
            Expr::Proto(p) => r.protocol == *p,
            Expr::Version(v) => r.client.version() == *v,
            Expr::Vlan(None) => !r.vlans.is_empty(),
            Expr::Vlan(Some(v)) => r.vlans.contains(v),
            Expr::Not(e) => !e.matches(r),
            Expr::And(a, b) => a.matches(r) && b.matches(r),
            Expr::Or(a, b) => a.matches(r) || b.matches(r),
        }
    }
}

impl Expr {
    /// Addresses one of which every matching flow has as client or server, if the expression
    /// says so (`host A and port 53`: A; `host A or host B`: A, B; `not host A`: none): a flow
    /// file whose bloom filters hold none of them has no match.
    pub fn hosts(&self) -> Option<Vec<IpAddr16>> {
        match self {
            Expr::Host(a) => Some(vec![*a]),
            Expr::And(a, b) => match (a.hosts(), b.hosts()) {
                (Some(x), Some(y)) => Some(if x.len() <= y.len() { x } else { y }),
                (x, y) => x.or(y),
            },
            Expr::Or(a, b) => {
                let (mut x, y) = (a.hosts()?, b.hosts()?);
                x.extend(y);
                Some(x)
            }
            _ => None,
        }
    }
}

fn in_net(a: &IpAddr16, net: &IpAddr16, len: u8) -> bool {
    let (full, rest) = (usize::from(len / 8), len % 8);
    a.0[..full] == net.0[..full] && (rest == 0 || (a.0[full] ^ net.0[full]) >> (8 - rest) == 0)
}

fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let two = |n: Option<&char>, want| n == Some(&want);
        if c.is_whitespace() || c == '(' || c == ')' || c == '!' || (c == '&' || c == '|') {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            match c {
                '(' | ')' | '!' => out.push(c.to_string()),
                '&' | '|' if two(chars.peek(), c) => {
                    chars.next();
                    out.push(format!("{c}{c}"));
                }
                '&' | '|' => out.push(c.to_string()),
                _ => {}
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn refuse(word: &str) -> FilterError {
    FilterError(format!("flows cannot answer \"{word}\": {KNOWN}"))
}

struct Parser {
    toks: Vec<String>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.at).map(|s| s.as_str())
    }
    fn next(&mut self) -> Option<String> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }
    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.and()?;
        while matches!(self.peek(), Some("or" | "||")) {
            self.at += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }
    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.unary()?;
        while matches!(self.peek(), Some("and" | "&&")) {
            self.at += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }
    fn unary(&mut self) -> Result<Expr, FilterError> {
        match self.peek() {
            Some("not" | "!") => {
                self.at += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some("(") => {
                self.at += 1;
                let e = self.or()?;
                match self.next().as_deref() {
                    Some(")") => Ok(e),
                    Some(t) => Err(refuse(t)),
                    None => Err(FilterError("the expression ends before its closing parenthesis".into())),
                }
            }
            _ => self.primitive(),
        }
    }
    fn value(&mut self, after: &str) -> Result<String, FilterError> {
        self.next().ok_or_else(|| FilterError(format!("\"{after}\" needs a value after it")))
    }
    fn primitive(&mut self) -> Result<Expr, FilterError> {
        let Some(w) = self.next() else { return Err(FilterError("the expression ends after an operator".into())) };
        let lower = w.to_ascii_lowercase();
        Ok(match lower.as_str() {
            "host" => {
                let v = self.value(&w)?;
                Expr::Host(addr(&v).ok_or_else(|| FilterError(format!("\"{v}\" is not an IP address (host)")))?)
            }
            "net" => {
                let v = self.value(&w)?;
                let (a, len) = v.split_once('/').unwrap_or((v.as_str(), ""));
                let ip =
                    addr(a).ok_or_else(|| FilterError(format!("\"{v}\" is not a network like 10.0.0.0/8 (net)")))?;
                let v4 = ip.version() == 4;
                let max = if v4 { 32 } else { 128 };
                let len: u8 = if len.is_empty() {
                    max
                } else {
                    len.parse()
                        .ok()
                        .filter(|l| *l <= max)
                        .ok_or_else(|| FilterError(format!("\"{v}\": the prefix length must be 0..={max} (net)")))?
                };
                Expr::Net(ip, if v4 { len + 96 } else { len })
            }
            "port" => {
                let v = self.value(&w)?;
                Expr::Port(v.parse().map_err(|_| FilterError(format!("\"{v}\" is not a port number (port)")))?)
            }
            "proto" => {
                let v = self.value(&w)?;
                Expr::Proto(match v.to_ascii_lowercase().as_str() {
                    "tcp" => 6,
                    "udp" => 17,
                    "icmp" => 1,
                    "icmp6" => 58,
                    "sctp" => 132,
                    n => n.parse().map_err(|_| FilterError(format!("\"{v}\" is not an IP protocol (proto)")))?,
                })
            }
            // `tcp port 443`: tcpdump's `tcp and port 443`.
            "tcp" | "udp" | "sctp" if self.peek() == Some("port") => {
                let proto = Expr::parse(&lower)?;
                Expr::And(Box::new(proto), Box::new(self.primitive()?))
            }
            "tcp" => Expr::Proto(6),
            "udp" => Expr::Proto(17),
            "icmp" => Expr::Proto(1),
            "icmp6" => Expr::Proto(58),
            "sctp" => Expr::Proto(132),
            "ip" => Expr::Version(4),
            "ip6" => Expr::Version(6),
            "vlan" => match self.peek().map(|t| t.parse::<u16>()) {
                Some(Ok(v)) if v < 4096 => {
                    self.at += 1;
                    Expr::Vlan(Some(v))
                }
                _ => Expr::Vlan(None),
            },
            _ => return Err(refuse(&w)),
        })
    }
}

fn addr(s: &str) -> Option<IpAddr16> {
    match s.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(a) => Some(IpAddr16::v4(a.octets())),
        std::net::IpAddr::V6(a) => Some(IpAddr16(a.octets())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> FlowRecord {
        FlowRecord {
            vlans: vec![10],
            client: IpAddr16::v4([10, 0, 0, 7]),
            server: IpAddr16::v4([192, 168, 1, 1]),
            protocol: 6,
            client_port: 40000,
            server_port: 443,
            ..FlowRecord::default()
        }
    }

    #[test]
    fn the_hosts_a_match_needs() {
        let h = |s: &str| Expr::parse(s).unwrap().hosts();
        let a = |x: u8| IpAddr16::v4([10, 0, 0, x]);
        assert_eq!(h("host 10.0.0.1"), Some(vec![a(1)]));
        assert_eq!(h("host 10.0.0.1 and port 53"), Some(vec![a(1)]));
        assert_eq!(h("(host 10.0.0.1 or host 10.0.0.2) and udp"), Some(vec![a(1), a(2)]));
        assert_eq!(h("host 10.0.0.1 or port 53"), None);
        assert_eq!(h("not host 10.0.0.1"), None);
        assert_eq!(h("net 10.0.0.0/24"), None);
        assert_eq!(h(""), None);
    }

    #[test]
    fn answers_what_a_key_holds() {
        let r = rec();
        for (e, want) in [
            ("", true),
            ("host 10.0.0.7", true),
            ("host 10.0.0.8", false),
            ("net 192.168.0.0/16 and tcp port 443", true),
            ("net 192.168.2.0/24", false),
            ("udp or port 80", false),
            ("not udp && (port 443 || port 80)", true),
            ("vlan 10 and ip", true),
            ("vlan and ip6", false),
            ("proto 6", true),
        ] {
            assert_eq!(Expr::parse(e).unwrap().matches(&r), want, "{e}");
        }
    }

    #[test]
    fn refuses_the_rest_naming_the_word() {
        for (e, word) in [("tcp[13] & 2 != 0", "tcp[13]"), ("src host 10.0.0.7", "src"), ("greater 100", "greater")] {
            let err = Expr::parse(e).unwrap_err().0;
            assert!(err.contains(&format!("\"{word}\"")), "{e}: {err}");
        }
        assert!(Expr::parse("host").is_err());
        assert!(Expr::parse("host 10.0.0.300").is_err());
    }
}
