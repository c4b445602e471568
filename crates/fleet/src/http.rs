//! A small blocking HTTP/1.1 client for the recorders' API: one GET per
//! connection (`Connection: close`), plain on loopback, rustls elsewhere
//! (the node's CA, optionally a client certificate), a bearer token from a
//! file. Blocking sockets keep the node timeout exact: it is the socket's
//! read timeout, so a node that sends nothing for that long fails its
//! read, whatever it sent before.

use crate::config::Credentials;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A recorder's address and what it takes to be let in.
#[derive(Clone)]
pub struct Remote {
    /// As given, without a trailing slash.
    pub url: String,
    host: String,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
    token: Option<String>,
}

impl std::fmt::Debug for Remote {
    // The token stays out of debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).field("token", &self.token.is_some()).finish()
    }
}

/// Why a source cannot be used: its address or the options are wrong
/// (`usage`: the command line or the fleet file must change), or a file it
/// names (token, CA, certificate, key) is missing or unreadable.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SourceError {
    pub usage: bool,
    pub message: String,
}

impl SourceError {
    pub fn usage(message: impl Into<String>) -> SourceError {
        SourceError { usage: true, message: message.into() }
    }

    pub fn file(message: impl Into<String>) -> SourceError {
        SourceError { usage: false, message: message.into() }
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
}

impl Remote {
    /// Parses `http://HOST:PORT` (loopback only) or `https://HOST:PORT` and
    /// loads the token and TLS files; one sentence when something is wrong.
    pub fn new(url: &str, creds: &Credentials) -> Result<Remote, SourceError> {
        let (tls, rest) = match url.split_once("://") {
            Some(("https", r)) => (true, r),
            Some(("http", r)) => (false, r),
            _ => return Err(SourceError::usage(format!("{url:?} is not an http:// or https:// URL"))),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !path.is_empty() {
            return Err(SourceError::usage(format!(
                "{url:?} has a path; give the recorder's address only (https://HOST:PORT)"
            )));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                let port = p
                    .parse::<u16>()
                    .map_err(|_| SourceError::usage(format!("{url:?}: the port {p:?} is not a number")))?;
                (h.trim_start_matches('[').trim_end_matches(']').to_string(), port)
            }
            _ => (authority.trim_start_matches('[').trim_end_matches(']').to_string(), if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(SourceError::usage(format!("{url:?} names no host")));
        }
        if !tls && !is_loopback(&host) {
            return Err(SourceError::usage(format!(
                "{url:?}: plain http is for loopback only (a token would cross the network in clear); use https:// with the node's CA"
            )));
        }
        let token = creds.token_file.as_deref().map(read_token).transpose().map_err(SourceError::file)?;
        let tls = if tls { Some(client_config(creds)?) } else { None };
        Ok(Remote { url: url.trim_end_matches('/').to_string(), host, port, tls, token })
    }
}

/// The first token of a token file in the server's format (`NAME:TOKEN`
/// or `TOKEN` per line, `#` comments), so one file serves both sides.
fn read_token(path: &Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once(':').map_or(l, |(_, t)| t.trim()).to_string())
        .ok_or_else(|| format!("the token file {} holds no token", path.display()))
}

fn client_config(creds: &Credentials) -> Result<Arc<rustls::ClientConfig>, SourceError> {
    let file = |what: &str, p: &Path, e: &dyn std::fmt::Display| {
        SourceError::file(format!("cannot read {what} {}: {e}", p.display()))
    };
    let ca = creds.ca.as_deref().ok_or_else(|| {
        SourceError::usage(
            "https needs the CA that signed the node's certificate: give ca = FILE in the fleet file (or --ca FILE)",
        )
    })?;
    let certs = |what: &str, p: &Path| -> Result<Vec<CertificateDer<'static>>, SourceError> {
        let v: Vec<_> = CertificateDer::pem_file_iter(p)
            .map_err(|e| file(what, p, &e))?
            .collect::<Result<_, _>>()
            .map_err(|e| file(what, p, &e))?;
        if v.is_empty() {
            return Err(SourceError::file(format!("{what} {} holds no PEM certificate", p.display())));
        }
        Ok(v)
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in certs("the CA", ca)? {
        roots.add(c).map_err(|e| file("the CA", ca, &e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SourceError::file(format!("TLS setup failed: {e}")))?
        .with_root_certificates(roots);
    let cfg = match (&creds.cert, &creds.key) {
        (Some(c), Some(k)) => {
            let key = PrivateKeyDer::from_pem_file(k).map_err(|e| file("the key", k, &e))?;
            b.with_client_auth_cert(certs("the certificate", c)?, key).map_err(|e| {
                SourceError::file(format!(
                    "the certificate {} and key {} do not go together: {e}",
                    c.display(),
                    k.display()
                ))
            })?
        }
        (None, None) => b.with_no_client_auth(),
        _ => return Err(SourceError::usage("a client certificate needs both cert and key")),
    };
    Ok(Arc::new(cfg))
}

/// Why a request failed, before or during its answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot connect: {0}")]
    Connect(io::Error),
    #[error("the TLS handshake failed: {0}")]
    Tls(String),
    #[error("sent nothing for {} s", .0.as_secs_f64())]
    Stalled(Duration),
    #[error("{0}")]
    Io(io::Error),
}

impl HttpError {
    /// Sorts an error of reading or writing the connection.
    pub fn of(e: io::Error, timeout: Duration) -> HttpError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HttpError::Stalled(timeout),
            io::ErrorKind::InvalidData if e.get_ref().is_some_and(|i| i.is::<rustls::Error>()) => {
                HttpError::Tls(e.to_string())
            }
            _ => HttpError::Io(e),
        }
    }
}

enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// An answer: status, headers (names in lower case), and its body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Response {
    /// The values of header `name`, in order.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The `{"error": "..."}` sentence of an error answer (else the body as text).
    pub fn error_sentence(mut self) -> String {
        let mut b = Vec::new();
        let _ = (&mut self.body).take(64 << 10).read_to_end(&mut b);
        serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&b).trim().to_string())
    }
}

/// How the body ends.
enum Framing {
    Length(u64),
    Chunked { left: u64, done: bool },
    Close,
}

/// A body as it arrives; a body cut before its end (the connection closed
/// inside a chunk or before the last one: the node gave up mid-answer) is
/// an `UnexpectedEof` error, never a short answer.
pub struct Body {
    r: BufReader<Conn>,
    framing: Framing,
}

fn cut() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "the answer broke off before its end")
}

impl Body {
    fn line(&mut self) -> io::Result<String> {
        let mut l = String::new();
        if self.r.read_line(&mut l)? == 0 {
            return Err(cut());
        }
        Ok(l.trim_end().to_string())
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match self.framing {
            Framing::Close => self.r.read(buf),
            Framing::Length(0) => Ok(0),
            Framing::Length(left) => {
                let want = left.min(buf.len() as u64) as usize;
                let n = self.r.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(cut());
                }
                self.framing = Framing::Length(left - n as u64);
                Ok(n)
            }
            Framing::Chunked { done: true, .. } => Ok(0),
            Framing::Chunked { left: 0, .. } => {
                let l = self.line()?;
                let size = l.split(';').next().unwrap_or("").trim();
                let size = u64::from_str_radix(size, 16)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad chunk size {l:?}")))?;
                if size == 0 {
                    while !self.line()?.is_empty() {}
                    self.framing = Framing::Chunked { left: 0, done: true };
                    return Ok(0);
                }
                self.framing = Framing::Chunked { left: size, done: false };
                self.read(buf)
            }
            Framing::Chunked { left, .. } => {
                let want = left.min(buf.len() as u64) as usize;
                let n = self.r.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(cut());
                }
                let left = left - n as u64;
                if left == 0 && !self.line()?.is_empty() {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "a chunk does not end with CRLF"));
                }
                self.framing = Framing::Chunked { left, done: false };
                Ok(n)
            }
        }
    }
}

/// `%`-encodes a query parameter's value.
pub fn encode(v: &str) -> String {
    percent_encoding::utf8_percent_encode(v, UNRESERVED_KEPT).to_string()
}

/// Every byte but RFC 3986's unreserved characters is encoded.
const UNRESERVED_KEPT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// `GET path_and_query` of `remote`: connects (each address in turn, within
/// `connect`), then reads with `idle` as the socket timeout.
pub fn get(remote: &Remote, path_and_query: &str, connect: Duration, idle: Duration) -> Result<Response, HttpError> {
    let addrs = (remote.host.as_str(), remote.port).to_socket_addrs().map_err(HttpError::Connect)?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{} has no address", remote.host));
    let mut tcp = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, connect) {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let tcp = tcp.ok_or(HttpError::Connect(last))?;
    let _ = tcp.set_nodelay(true);
    tcp.set_read_timeout(Some(idle)).map_err(HttpError::Io)?;
    tcp.set_write_timeout(Some(idle)).map_err(HttpError::Io)?;
    let mut conn = match &remote.tls {
        None => Conn::Plain(tcp),
        Some(cfg) => {
            let name = ServerName::try_from(remote.host.clone()).map_err(|e| HttpError::Tls(e.to_string()))?;
            let c = rustls::ClientConnection::new(cfg.clone(), name).map_err(|e| HttpError::Tls(e.to_string()))?;
            Conn::Tls(Box::new(rustls::StreamOwned::new(c, tcp)))
        }
    };
    let host = if remote.host.contains(':') { format!("[{}]", remote.host) } else { remote.host.clone() };
    let mut req = format!(
        "GET {path_and_query} HTTP/1.1\r\nHost: {host}:{}\r\nUser-Agent: wirevault-fleet\r\nConnection: close\r\n",
        remote.port
    );
    if let Some(t) = &remote.token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    conn.write_all(req.as_bytes()).and_then(|()| conn.flush()).map_err(|e| HttpError::of(e, idle))?;
    // Small: reads of a packet answer larger than it bypass it (the bytes go
    // from the socket straight into the merge's batches); it holds the head
    // and the chunk-size lines.
    let mut body = Body { r: BufReader::with_capacity(16 << 10, conn), framing: Framing::Close };
    let status_line = body.line().map_err(|e| HttpError::of(e, idle))?;
    let status = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| {
        HttpError::Io(io::Error::new(io::ErrorKind::InvalidData, format!("not an HTTP answer: {status_line:?}")))
    })?;
    let mut headers = Vec::new();
    loop {
        let l = body.line().map_err(|e| HttpError::of(e, idle))?;
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let find = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    body.framing = if find("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        Framing::Chunked { left: 0, done: false }
    } else if let Some(n) = find("content-length").and_then(|v| v.parse().ok()) {
        Framing::Length(n)
    } else {
        Framing::Close
    };
    Ok(Response { status, headers, body })
}
