//! Each request is logged and counted once (`wirevault_http_requests_total`),
//! when its answer ends, under the code that says how it ended: the status
//! sent, for an answer whose body the server handed over whole; 499 (nginx's
//! "client closed request") for a client that went away before the answer
//! ended, before its head or during its body; 408 for a client given up
//! after `--send-timeout` without taking data (the connection is reset: the
//! client sees a failed transfer); 500 for a body the server cut after its
//! head because reading the store failed (the transfer fails the same way).
//! An export's 200 therefore never counts a transfer that did not complete.

use crate::auth::Peer;
use crate::conn::Link;
use crate::server::State;
use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Body as _, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

/// One request being answered, for its log line and its count.
pub(crate) struct Answer {
    pub state: Arc<State>,
    pub peer: Peer,
    /// `GET /path?query`.
    pub what: String,
    /// Said after the request in the log (a refused request's `Host`).
    pub note: String,
    pub started: Instant,
    pub link: Option<Arc<Link>>,
}

/// How an answer's body ended.
enum End {
    Whole,
    /// The body failed after its head (the server cut it), with why.
    Cut(String),
    /// The body was dropped before its end: the connection closed under it.
    Dropped,
}

impl Answer {
    /// Logs and counts the answer: `status` and `bytes` of body handed over.
    fn finish(self, status: u16, bytes: u64, end: End) {
        let (code, how) = match end {
            End::Whole => (status, format!("{bytes} bytes")),
            End::Cut(why) => (500, format!("cut after {bytes} bytes (its head said {status}): {why}")),
            End::Dropped if self.link.as_ref().is_some_and(|l| l.gave_up()) => {
                if let Some(l) = &self.link {
                    l.tell();
                }
                let secs = self.state.cfg.send_timeout.as_secs();
                (
                    408,
                    format!(
                        "given up after {bytes} bytes: the client took no data for {secs} s (--send-timeout); the connection is reset"
                    ),
                )
            }
            End::Dropped => (499, format!("the client went away after {bytes} bytes of the answer")),
        };
        self.log(code, &how);
    }

    /// Counts `code` and writes the request's log line.
    pub fn log(&self, code: u16, how: &str) {
        self.state.metrics.request(code);
        (self.state.cfg.log)(
            crate::LogLevel::Info,
            &format!(
                "api: {} \"{}\"{} {code} {how} {:.1} ms",
                self.peer,
                self.what,
                self.note,
                self.started.elapsed().as_secs_f64() * 1e3
            ),
        );
    }

    /// The response, its body watched to its end (or counted at once when
    /// it has none to send: HEAD).
    pub fn track(self, resp: axum::response::Response, head_only: bool) -> axum::response::Response {
        let status = resp.status().as_u16();
        if head_only {
            self.log(status, "head only");
            return resp;
        }
        resp.map(|inner| Body::new(Tracked { inner, status, bytes: 0, answer: Some(self) }))
    }
}

/// A response body that reports its answer when it ends.
struct Tracked {
    inner: Body,
    status: u16,
    bytes: u64,
    answer: Option<Answer>,
}

impl Tracked {
    fn end(&mut self, end: End) {
        if let Some(a) = self.answer.take() {
            a.finish(self.status, self.bytes, end);
        }
    }
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(frame))) => {
                self.bytes += frame.data_ref().map_or(0, |d| d.len() as u64);
                if self.inner.is_end_stream() {
                    self.end(End::Whole);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let why = e.to_string();
                self.end(End::Cut(why));
            }
            Poll::Ready(None) => self.end(End::Whole),
            Poll::Pending => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        // hyper drops a body without polling it when it has nothing to send.
        let end = if self.inner.is_end_stream() { End::Whole } else { End::Dropped };
        self.end(end);
    }
}

/// A request between its head and its answer's: when the client goes away
/// meanwhile, hyper drops the handler's future and this with it, and the
/// request is still logged and counted, as 499.
pub(crate) struct Unanswered(pub Option<Answer>);

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            a.log(499, "the client went away before the answer");
        }
    }
}
