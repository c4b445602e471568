//! The exporter: a bounded queue the recorder's flow taps offer records to (never waiting:
//! a full queue refuses, and the tap counts the record dropped), and a thread of its own that
//! encodes them and sends them to one collector over UDP or TCP.
//!
//! UDP: messages of at most [`crate::encode::UDP_MAX`] bytes, the templates sent first and
//! again every [`ExportConfig::template_secs`] or [`ExportConfig::template_msgs`] messages
//! (RFC 7011 section 10.3.6, a collector that starts later learns them). TCP: the templates
//! once per connection; a connection lost is made again, waiting longer after each failure.

use crate::encode::{Encoder, TCP_MAX, UDP_MAX};
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use wv_flows::FlowRecord;

/// How records travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// A collector: `udp://HOST:PORT` or `tcp://HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub transport: Transport,
    pub host: String,
    pub port: u16,
}

impl Destination {
    /// Parses `udp://HOST:PORT` or `tcp://HOST:PORT` (an IPv6 address in brackets); the error
    /// is a sentence saying what was wrong.
    pub fn parse(s: &str) -> Result<Destination, String> {
        let want = "give udp://HOST:PORT or tcp://HOST:PORT (IPFIX's port is 4739)";
        let (transport, rest) = match s.split_once("://") {
            Some(("udp", r)) => (Transport::Udp, r),
            Some(("tcp", r)) => (Transport::Tcp, r),
            _ => return Err(format!("IPFIX collector {s:?} has no udp:// or tcp:// in front: {want}")),
        };
        let (host, port) = rest.rsplit_once(':').ok_or_else(|| format!("IPFIX collector {s:?} has no port: {want}"))?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let port = port.parse::<u16>().ok().filter(|p| *p > 0);
        match port {
            Some(port) if !host.is_empty() && !host.contains(['/', '[', ']']) => {
                Ok(Destination { transport, host: host.to_string(), port })
            }
            None => Err(format!("IPFIX collector {s:?} has no valid port (1-65535): {want}")),
            Some(_) => Err(format!("IPFIX collector {s:?} has no valid host: {want}")),
        }
    }

    /// As it was given.
    pub fn url(&self) -> String {
        let scheme = if self.transport == Transport::Udp { "udp" } else { "tcp" };
        if self.host.contains(':') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }

    fn resolve(&self) -> std::io::Result<SocketAddr> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::other("the name has no address"))
    }
}

/// How an exporter runs.
#[derive(Debug, Clone, Copy)]
pub struct ExportConfig {
    /// Records the queue holds (each about 200 bytes): beyond, records are dropped.
    pub queue: usize,
    /// Observation domain id of the messages.
    pub domain: u32,
    /// UDP: the templates are sent again after this many seconds...
    pub template_secs: u64,
    /// ...or this many messages, whichever comes first.
    pub template_msgs: u32,
    /// At the end, how long the queue may take to go out.
    pub drain: Duration,
}

impl Default for ExportConfig {
    fn default() -> ExportConfig {
        ExportConfig { queue: 65536, domain: 0, template_secs: 30, template_msgs: 100, drain: Duration::from_secs(3) }
    }
}

/// One collector's exporter.
pub struct Exporter {
    dest: Destination,
    tx: SyncSender<FlowRecord>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    notes: Arc<Mutex<Vec<String>>>,
    /// Records sent, and records that could not be (the collector refused or went away).
    pub sent: Arc<AtomicU64>,
    pub lost: Arc<AtomicU64>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("dest", &self.dest).finish()
    }
}

impl Exporter {
    /// Starts the exporter's thread (`wv-ipfix`).
    pub fn start(dest: Destination, cfg: ExportConfig) -> std::io::Result<Arc<Exporter>> {
        let (tx, rx) = sync_channel(cfg.queue.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let notes = Arc::new(Mutex::new(Vec::new()));
        let (sent, lost) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let run = Run {
            dest: dest.clone(),
            cfg,
            rx,
            stop: stop.clone(),
            notes: notes.clone(),
            sent: sent.clone(),
            lost: lost.clone(),
            said_down: false,
        };
        let thread = std::thread::Builder::new().name("wv-ipfix".into()).spawn(move || run.run())?;
        Ok(Arc::new(Exporter { dest, tx, stop, thread: Mutex::new(Some(thread)), notes, sent, lost }))
    }

    pub fn destination(&self) -> &Destination {
        &self.dest
    }

    /// Queues `r` without waiting; false: the queue is full, `r` is dropped.
    #[inline]
    pub fn offer(&self, r: FlowRecord) -> bool {
        self.tx.try_send(r).is_ok()
    }

    /// What the exporter has had to say since the last call (one sentence each).
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Sends what the queue holds (for at most [`ExportConfig::drain`]) and stops the thread.
    pub fn finish(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl wv_flows::tap::FlowSink for Exporter {
    fn offer(&self, r: FlowRecord) -> bool {
        Exporter::offer(self, r)
    }
}

/// A connection to the collector.
enum Conn {
    Udp { sock: UdpSocket, last_templates: Option<Instant>, since: u32 },
    Tcp { sock: TcpStream, templates_sent: bool },
}

/// The exporter thread's state.
struct Run {
    dest: Destination,
    cfg: ExportConfig,
    rx: Receiver<FlowRecord>,
    stop: Arc<AtomicBool>,
    notes: Arc<Mutex<Vec<String>>>,
    sent: Arc<AtomicU64>,
    lost: Arc<AtomicU64>,
    /// The collector's being down was said (once until it is up again).
    said_down: bool,
}

/// Records taken off the queue at most, waiting to be sent (TCP: while the connection is
/// down, the queue behind them fills and the taps count what it refuses).
const PENDING_MAX: usize = 4096;

impl Run {
    fn note(&self, s: String) {
        self.notes.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }

    fn run(mut self) {
        let mut pending: Vec<FlowRecord> = Vec::new();
        let mut conn: Option<(Conn, Encoder)> = None;
        let mut retry_at = Instant::now();
        let mut backoff = Duration::from_millis(250);
        let mut deadline: Option<Instant> = None;
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            if stopping && deadline.is_none() {
                deadline = Some(Instant::now() + self.cfg.drain);
            }
            if pending.len() < PENDING_MAX {
                match self.rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(r) => pending.push(r),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => deadline = deadline.or(Some(Instant::now())),
                }
                while pending.len() < PENDING_MAX {
                    match self.rx.try_recv() {
                        Ok(r) => pending.push(r),
                        Err(_) => break,
                    }
                }
            } else {
                std::thread::sleep(Duration::from_millis(50));
            }
            if conn.is_none() && Instant::now() >= retry_at {
                match self.connect() {
                    Ok(c) => {
                        conn = Some(c);
                        backoff = Duration::from_millis(250);
                    }
                    Err(e) => {
                        self.down(&e);
                        retry_at = Instant::now() + backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                    }
                }
            }
            if let Some((c, enc)) = &mut conn {
                if let Err(e) = self.send(c, enc, &mut pending) {
                    self.down(&e);
                    conn = None;
                    retry_at = Instant::now() + backoff;
                }
            }
            let drained = pending.is_empty() && self.rx.try_recv().map(|r| pending.push(r)).is_err();
            if deadline.is_some_and(|d| drained || Instant::now() >= d) {
                break;
            }
        }
        let left = pending.len() as u64 + self.rx.try_iter().count() as u64;
        if left > 0 {
            self.lost.fetch_add(left, Ordering::Relaxed);
        }
        let lost = self.lost.load(Ordering::Relaxed);
        if lost > 0 {
            self.note(format!("{lost} flow records were not delivered to the IPFIX collector {}", self.dest.url()));
        }
    }

    /// Says once that the collector is not there, until it is again.
    fn down(&mut self, e: &std::io::Error) {
        if !self.said_down {
            self.said_down = true;
            let what = match self.dest.transport {
                Transport::Udp => "records sent to it meanwhile are lost",
                Transport::Tcp => "trying again, records wait in a bounded queue",
            };
            self.note(format!(
                "IPFIX collector {} is not reachable ({e}); recording goes on, {what}; start the collector or fix --flows-to",
                self.dest.url()
            ));
        }
    }

    fn connect(&self) -> std::io::Result<(Conn, Encoder)> {
        let addr = self.dest.resolve()?;
        let domain = self.cfg.domain;
        Ok(match self.dest.transport {
            Transport::Udp => {
                let any: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
                let sock = UdpSocket::bind(any)?;
                sock.connect(addr)?;
                (Conn::Udp { sock, last_templates: None, since: 0 }, Encoder::new(domain, UDP_MAX))
            }
            Transport::Tcp => {
                let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
                sock.set_write_timeout(Some(Duration::from_secs(2)))?;
                let _ = sock.set_nodelay(true);
                (Conn::Tcp { sock, templates_sent: false }, Encoder::new(domain, TCP_MAX))
            }
        })
    }

    /// Sends `pending` (and the templates when due); on an error, what was not sent stays
    /// (TCP) or is counted lost (UDP).
    fn send(&mut self, c: &mut Conn, enc: &mut Encoder, pending: &mut Vec<FlowRecord>) -> std::io::Result<()> {
        let now_secs = || SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as u32);
        match c {
            Conn::Udp { sock, last_templates, since } => {
                // An ICMP port unreachable of an earlier datagram shows here.
                if let Some(e) = sock.take_error()? {
                    return Err(e);
                }
                let due = |l: &Option<Instant>, since: u32| {
                    l.is_none_or(|t| t.elapsed().as_secs() >= self.cfg.template_secs) || since >= self.cfg.template_msgs
                };
                let mut at = 0;
                while at < pending.len() || due(last_templates, *since) {
                    let templates = due(last_templates, *since);
                    let (msg, n) = enc.message(now_secs(), templates, &pending[at..]);
                    if templates {
                        *last_templates = Some(Instant::now());
                        *since = 0;
                    }
                    *since += 1;
                    let r = sock.send(&msg);
                    at += n;
                    if let Err(e) = r {
                        self.lost.fetch_add(n as u64 + (pending.len() - at) as u64, Ordering::Relaxed);
                        pending.clear();
                        return Err(e);
                    }
                    self.sent.fetch_add(n as u64, Ordering::Relaxed);
                }
                pending.clear();
            }
            Conn::Tcp { sock, templates_sent } => {
                let mut at = 0;
                while at < pending.len() || !*templates_sent {
                    let (msg, n) = enc.message(now_secs(), !*templates_sent, &pending[at..]);
                    if let Err(e) = sock.write_all(&msg) {
                        pending.drain(..at);
                        return Err(e);
                    }
                    *templates_sent = true;
                    at += n;
                    self.sent.fetch_add(n as u64, Ordering::Relaxed);
                    // A TCP collector that takes records is up (a UDP one may not be).
                    self.said_down = false;
                }
                pending.clear();
            }
        }
        Ok(())
    }
}
