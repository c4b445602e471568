//! A small blocking HTTP/1.0 client for ClickHouse's HTTP interface: one POST per
//! connection, plain TCP (port 8123), timeouts on every step. HTTP/1.0 so that the server
//! answers without chunking and closes the connection at the end of the answer; no crate for
//! that (the workspace has none, and one request shape is all ClickHouse needs).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How a request failed; what the inserter may do next depends on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Nothing reached the server (no connection): safe to send again.
    Down(String),
    /// The request was sent but no whole answer came: it may or may not have been done.
    Unsure(String),
    /// The server answered with an error (its first line).
    Refused(u16, String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Down(e) => write!(f, "does not answer ({e})"),
            Failure::Unsure(e) => write!(f, "did not finish its answer ({e})"),
            Failure::Refused(s, m) => write!(f, "refused it (HTTP {s}: {m})"),
        }
    }
}

/// Where and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    /// User and password (HTTP basic authentication, which ClickHouse 18.16 takes).
    pub auth: Option<(String, String)>,
    pub connect_timeout: Duration,
    pub timeout: Duration,
}

impl Endpoint {
    /// POSTs `body` to `/?params` and returns the answer's body (status 200) .
    pub fn post(&self, params: &[(&str, &str)], body: &[u8]) -> Result<Vec<u8>, Failure> {
        let addrs: Vec<_> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| Failure::Down(format!("cannot resolve {}: {e}", self.host)))?
            .collect();
        let mut last = Failure::Down(format!("{} has no address", self.host));
        let mut conn = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, self.connect_timeout) {
                Ok(c) => {
                    conn = Some(c);
                    break;
                }
                Err(e) => last = Failure::Down(e.to_string()),
            }
        }
        let mut c = conn.ok_or(last)?;
        let unsure = |e: std::io::Error| Failure::Unsure(e.to_string());
        c.set_write_timeout(Some(self.timeout)).map_err(unsure)?;
        c.set_read_timeout(Some(self.timeout)).map_err(unsure)?;
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
        let mut head = format!(
            "POST /?{} HTTP/1.0\r\nHost: {}:{}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n",
            query.join("&"),
            self.host,
            self.port,
            body.len()
        );
        if let Some((u, p)) = &self.auth {
            head.push_str(&format!("Authorization: Basic {}\r\n", base64(format!("{u}:{p}").as_bytes())));
        }
        head.push_str("\r\n");
        c.write_all(head.as_bytes()).and_then(|()| c.write_all(body)).map_err(unsure)?;
        let mut answer = Vec::new();
        c.read_to_end(&mut answer).map_err(unsure)?;
        parse_answer(&answer)
    }
}

/// The status and body of an HTTP/1.x answer.
fn parse_answer(a: &[u8]) -> Result<Vec<u8>, Failure> {
    let end = a
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| Failure::Unsure("the answer ended inside its header".into()))?;
    let head = String::from_utf8_lossy(&a[..end]);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Failure::Unsure(format!("not an HTTP answer: {:.40}", head)))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let raw = &a[end + 4..];
    let body = if chunked { dechunk(raw)? } else { raw.to_vec() };
    if status == 200 {
        Ok(body)
    } else {
        let text = String::from_utf8_lossy(&body);
        let line = text.lines().next().unwrap_or("").trim();
        Err(Failure::Refused(status, clean(line)))
    }
}

/// ClickHouse's message without its repeated `e.what()` tail.
fn clean(line: &str) -> String {
    let line = line.split(", e.what()").next().unwrap_or(line);
    line.replace("e.displayText() = ", "")
}

fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    loop {
        let nl =
            raw.windows(2).position(|w| w == b"\r\n").ok_or_else(|| Failure::Unsure("a chunk ended early".into()))?;
        let size = std::str::from_utf8(&raw[..nl]).ok().and_then(|s| usize::from_str_radix(s.trim(), 16).ok());
        let size = size.ok_or_else(|| Failure::Unsure("a bad chunk size".into()))?;
        raw = &raw[nl + 2..];
        if size == 0 {
            return Ok(out);
        }
        if raw.len() < size {
            return Err(Failure::Unsure("a chunk ended early".into()));
        }
        out.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..).unwrap_or(&[]);
    }
}

/// Percent-encodes a query parameter's value.
fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED_KEPT).to_string()
}

/// Every byte but RFC 3986's unreserved characters is encoded.
const UNRESERVED_KEPT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::new();
    for c in b.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                o.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_the_rfcs_say() {
        assert_eq!(base64(b"wv:s3cret"), "d3Y6czNjcmV0");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(encode("SELECT 1 = 'a'"), "SELECT%201%20%3D%20%27a%27");
        assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap(), b"abcde");
        let e = parse_answer(b"HTTP/1.0 500 Internal\r\nX: y\r\n\r\nCode: 193, e.displayText() = DB::Exception: Wrong password for user wv, e.what() = DB::Exception\n");
        assert_eq!(e, Err(Failure::Refused(500, "Code: 193, DB::Exception: Wrong password for user wv".into())));
    }
}
