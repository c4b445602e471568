//! One connection: its socket watched for progress, served by hyper, given
//! up when its client stops taking data (`--send-timeout`), and the answers
//! hyper gives on its own (400, 414, 431: a request head that does not
//! parse or is too large, before any route sees it) logged and counted.
//!
//! Progress is what the client's TCP acknowledges, not what the socket
//! accepts: the kernel wakes a blocked writer only once a third of the send
//! buffer is free, which for a client reading 2 KB/s from a 4 MB buffer
//! takes ten minutes, while its TCP acknowledges a window every second or
//! so. So a connection is given up when a write of it has waited for room
//! and, for the whole `--send-timeout`, neither a byte was written nor one
//! acknowledged (`wv_sys::sock::unacknowledged`). It is then reset (zero
//! linger): the client sees a failed transfer at once, never a body that
//! ends as if whole, and the kernel frees the unsent bytes.

use crate::auth::Peer;
use crate::server::State;
use axum::extract::Request;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What one connection's socket took, shared by its [`Watched`] stream
/// (under hyper and TLS), its watchdog and its requests (a request
/// extension, [`Conn`]).
pub(crate) struct Link {
    fd: RawFd,
    /// Bytes the socket accepted.
    written: AtomicU64,
    /// A write waits for room in the socket.
    stuck: AtomicBool,
    /// Wakes the watchdog when a write starts to wait.
    stuck_now: tokio::sync::Notify,
    gave_up: AtomicBool,
    /// The give-up was logged with the answer it cut.
    told: AtomicBool,
}

impl Link {
    /// True once the watchdog gave the client up (the connection is reset).
    pub fn gave_up(&self) -> bool {
        self.gave_up.load(Relaxed)
    }

    /// Marks the give-up as logged by the answer it cut.
    pub fn tell(&self) {
        self.told.store(true, Relaxed);
    }

    /// Bytes the client's TCP has acknowledged: those written less those
    /// still queued (those written, where the queue cannot be read).
    fn taken(&self) -> u64 {
        let queued = wv_sys::sock::unacknowledged(self.fd).unwrap_or(0);
        self.written.load(Relaxed).saturating_sub(queued)
    }
}

/// The connection a request came on.
#[derive(Clone)]
pub(crate) struct Conn(pub Arc<Link>);

/// A TCP stream that counts what its socket accepts and says when a write
/// waits; reset instead of closed once its client was given up.
pub(crate) struct Watched {
    tcp: TcpStream,
    link: Arc<Link>,
}

impl Watched {
    pub fn new(tcp: TcpStream) -> Watched {
        let link = Arc::new(Link {
            fd: tcp.as_raw_fd(),
            written: AtomicU64::new(0),
            stuck: AtomicBool::new(false),
            stuck_now: tokio::sync::Notify::new(),
            gave_up: AtomicBool::new(false),
            told: AtomicBool::new(false),
        });
        Watched { tcp, link }
    }

    pub fn link(&self) -> Arc<Link> {
        self.link.clone()
    }

    fn note(&self, r: &Poll<io::Result<usize>>) {
        match r {
            Poll::Pending => {
                if !self.link.stuck.swap(true, Relaxed) {
                    self.link.stuck_now.notify_one();
                }
            }
            Poll::Ready(r) => {
                if let Ok(n) = r {
                    self.link.written.fetch_add(*n as u64, Relaxed);
                }
                self.link.stuck.store(false, Relaxed);
            }
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.link.gave_up() {
            // A reset: the client learns at once that the answer is not
            // whole, and the unsent bytes are freed now, not after the
            // kernel's zero-window probes give up.
            let _ = self.tcp.set_zero_linger();
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.note(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.note(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Returns once the connection's client took nothing for `limit` while a
/// write waited: no byte written, none acknowledged. Asleep while no write
/// waits (an idle keep-alive connection costs no timer).
async fn watchdog(link: &Link, limit: Duration) {
    let tick = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    loop {
        link.stuck_now.notified().await;
        let (mut taken, mut since) = (link.taken(), Instant::now());
        while link.stuck.load(Relaxed) {
            tokio::time::sleep(tick).await;
            let now = link.taken();
            if now != taken {
                (taken, since) = (now, Instant::now());
            } else if since.elapsed() >= limit {
                link.gave_up.store(true, Relaxed);
                return;
            }
        }
    }
}

/// Serves one connection; a TLS one (`retire`) closes after its current
/// request once a reload changed the client CA or CRL.
pub(crate) async fn serve<I>(
    io: TokioIo<I>,
    link: Arc<Link>,
    app: Router,
    peer: Peer,
    state: Arc<State>,
    mut retire: Option<tokio::sync::watch::Receiver<u64>>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use tower::ServiceExt;
    let (who, on) = (peer.clone(), Conn(link.clone()));
    let svc = app.map_request(move |mut req: Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(who.clone());
        req.extensions_mut().insert(on.clone());
        req
    });
    let svc = hyper_util::service::TowerToHyperService::new(svc);
    let mut conn = Box::pin(
        hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(20))
            .serve_connection(io, svc),
    );
    let limit = state.cfg.send_timeout;
    let dog = watchdog(&link, limit);
    tokio::pin!(dog);
    let mut retiring = false;
    let ended = loop {
        tokio::select! {
            r = conn.as_mut() => break Some(r),
            _ = &mut dog => break None,
            _ = retired(&mut retire), if !retiring => {
                conn.as_mut().graceful_shutdown();
                retiring = true;
            }
        }
    };
    match ended {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            if let Some((code, why)) = automatic_answer(&e) {
                state.metrics.request(code);
                (state.cfg.log)(crate::LogLevel::Info, &format!("api: {peer} \"-\" {code} {why}"));
            }
        }
        None => {
            // Dropped first: an answer cut by it logs itself as given up.
            drop(conn);
            if !link.told.load(Relaxed) {
                (state.cfg.log)(
                    crate::LogLevel::Info,
                    &format!(
                    "api: {peer} given up: the client took no data for {} s (--send-timeout) with part of an answer unsent; the connection is reset",
                    limit.as_secs()
                ));
            }
        }
    }
}

/// Waits for a reload that retires TLS connections (for ever without one).
async fn retired(retire: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    let gone = match retire {
        Some(r) => r.changed().await.is_err(),
        None => true,
    };
    if gone {
        std::future::pending::<()>().await;
    }
}

/// The answer hyper gave itself to a request head it refused, as its code
/// and what was wrong (`None`: it closed the connection without one).
/// Mirrors hyper's `Server::on_error`; the integration tests pin it.
fn automatic_answer(e: &hyper::Error) -> Option<(u16, String)> {
    if !e.is_parse() || e.is_parse_version_h2() || e.is_parse_status() {
        return None;
    }
    let what = e.to_string();
    if e.is_parse_too_large() {
        return Some(if what.starts_with("URI") {
            (414, "the request's URI is longer than 65,534 bytes (refused before any route)".into())
        } else {
            (
                431,
                "the request's head is too large: more than 100 header fields or 408 KiB (refused before any route)"
                    .into(),
            )
        });
    }
    if what.starts_with("internal error") {
        return None;
    }
    Some((400, format!("the request does not parse as HTTP/1.1: {what}")))
}
