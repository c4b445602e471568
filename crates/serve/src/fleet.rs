//! `wirevault serve --fleet FILE`: the API over many recorders and stores at once.
//!
//! `/api/v1/query` and `/api/v1/count` answer over every node of the fleet as `wirevault
//! query --fleet` does (one answer merged by timestamp: `wv_fleet`), and say which nodes gave
//! theirs: the `X-Wirevault-Nodes` header (JSON, the nodes' states known before the first
//! byte), and for a pcap answer the same header as an HTTP trailer with each node's final
//! state, packets, bytes and time (sent when the client asks for trailers with `TE:
//! trailers`, as HTTP/1.1 wants). A node lost mid-answer is also named in a pcapng answer's
//! next packet comment. `/api/v1/fleet` is each node's own status; `/metrics` counts each
//! node's answers and says whether it is up.

use crate::api::{params, selection, ApiError, Params};
use crate::server::State;
use crate::status::Status;
use crate::store_view::StoreView;
use axum::extract::{Query, State as Ax};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use hyper::body::Frame;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The nodes a fleet server answers for, and what it counted of them.
pub struct Fleet {
    nodes: Vec<wv_fleet::Node>,
    /// Each local store node's view (its catalog read again only when it changed).
    views: Vec<Option<StoreView>>,
    /// Per node: answers it gave whole, answers it was left out of (in part or whole).
    answered: Vec<(AtomicU64, AtomicU64)>,
}

impl Fleet {
    pub fn new(nodes: Vec<wv_fleet::Node>) -> Fleet {
        let views = nodes
            .iter()
            .map(|n| match &n.source {
                wv_fleet::Source::Local(p) => Some(StoreView::new(p)),
                wv_fleet::Source::Remote(_) => None,
            })
            .collect();
        let answered = nodes.iter().map(|_| (AtomicU64::new(0), AtomicU64::new(0))).collect();
        Fleet { nodes, views, answered }
    }

    pub fn nodes(&self) -> &[wv_fleet::Node] {
        &self.nodes
    }

    fn counted(&self, lost: &[wv_fleet::Lost]) {
        for (i, (whole, left)) in self.answered.iter().enumerate() {
            let c = if lost.iter().any(|l| l.node == i) { left } else { whole };
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The version of the `/api/v1/fleet` answer's shape.
pub const FLEET_VERSION: u32 = 1;

/// `GET /api/v1/fleet`: each node's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetStatus {
    pub version: u32,
    pub nodes: Vec<NodeStatus>,
}

/// One node's status as the fleet server got it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub name: String,
    /// Its URL or store path.
    pub location: String,
    pub up: bool,
    /// Why it is not up: what happened and what to do.
    pub error: Option<String>,
    /// Its own `/api/v1/status` (a local store's, as `serve` would answer it).
    pub status: Option<Box<Status>>,
}

/// How a node's part of one answer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerState {
    /// Still answering (in the header of a pcap answer: known before the first byte).
    Answering,
    /// Its whole answer is in.
    Complete,
    /// It failed after some of its packets were merged: the rest is missing.
    Partial,
    /// None of its answer is in.
    LeftOut,
}

/// One node in `X-Wirevault-Nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeAnswer {
    pub node: String,
    pub location: String,
    pub state: AnswerState,
    /// Its packets in the answer (for a count: its count).
    pub packets: u64,
    /// Bytes of packet data it gave (pcap answers).
    pub bytes: u64,
    /// Seconds until its answer ended or it was lost.
    pub seconds: f64,
    pub error: Option<String>,
}

/// The header carrying the nodes' states.
pub const NODES_HEADER: &str = "x-wirevault-nodes";

/// JSON with every character outside printable ASCII escaped, as a header value must be.
fn header_json<T: Serialize>(v: &T) -> HeaderValue {
    let text = serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    HeaderValue::from_str(&out).unwrap_or_else(|_| HeaderValue::from_static("[]"))
}

/// The nodes' states before the first byte: those lost so far are left out, the rest answering.
fn at_start(nodes: &[wv_fleet::Node], lost: &[wv_fleet::Lost]) -> Vec<NodeAnswer> {
    (0..nodes.len())
        .map(|i| {
            let l = lost.iter().find(|l| l.node == i);
            NodeAnswer {
                node: nodes[i].name.clone(),
                location: nodes[i].location(),
                state: if l.is_some() { AnswerState::LeftOut } else { AnswerState::Answering },
                packets: 0,
                bytes: 0,
                seconds: 0.0,
                error: l.map(|l| l.to_string()),
            }
        })
        .collect()
}

/// The nodes' states when the merge ended.
fn at_end(nodes: &[wv_fleet::Node], o: &wv_fleet::Outcome) -> Vec<NodeAnswer> {
    (0..nodes.len())
        .map(|i| {
            let l = o.lost.iter().find(|l| l.node == i);
            let state = match l {
                None => AnswerState::Complete,
                Some(l) if l.merged > 0 => AnswerState::Partial,
                Some(_) => AnswerState::LeftOut,
            };
            NodeAnswer {
                node: nodes[i].name.clone(),
                location: nodes[i].location(),
                state,
                packets: o.packets[i],
                bytes: o.bytes[i],
                seconds: (o.seconds[i] * 1000.0).round() / 1000.0,
                error: l.map(|l| l.to_string()),
            }
        })
        .collect()
}

/// A merge that failed as a whole: the query is wrong (400), or the output broke.
fn merge_failed(e: wv_fleet::MergeError) -> ApiError {
    match e {
        wv_fleet::MergeError::Usage(s) => ApiError::BadRequest(s),
        wv_fleet::MergeError::Output(e) => ApiError::BadRequest(e.to_string()),
    }
}

/// No node gave its answer: the answer would be empty for a reason that is not the data's.
fn none_answered(lost: &[wv_fleet::Lost]) -> ApiError {
    let why: Vec<String> = lost.iter().map(|l| l.to_string()).collect();
    ApiError::BadGateway(format!("no node of the fleet answered: {}", why.join("; ")))
}

fn fleet_of(state: &State) -> Result<Arc<Fleet>, ApiError> {
    state.cfg.fleet.clone().ok_or_else(|| ApiError::NotFound("this server serves one store, not a fleet".into()))
}

fn fleet_selection(m: &std::collections::HashMap<String, String>) -> Result<wv_fleet::Selection, ApiError> {
    let s = selection(m)?;
    Ok(wv_fleet::Selection { from_ns: s.from, to_ns: s.to, expr: s.expr, limit: s.limit })
}

/// The body of a fleet answer: data frames, then the trailers; an error cuts the transfer
/// (the client sees a broken chunked body, never a short answer that looks whole).
struct Frames(tokio::sync::mpsc::Receiver<std::io::Result<Frame<Bytes>>>);

impl hyper::body::Body for Frames {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::io::Result<Frame<Bytes>>>> {
        self.0.poll_recv(cx)
    }
}

/// The merged stream's bytes into the body's channel (the merge's own buffer makes the chunks),
/// at most `cap` bytes (`--max-bytes`): past it the write fails and the transfer is cut, as a
/// store's export is.
struct ToBody {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Frame<Bytes>>>,
    sent: u64,
    cap: u64,
}

impl std::io::Write for ToBody {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.sent + buf.len() as u64 > self.cap {
            return Err(std::io::Error::other(format!("the answer would exceed --max-bytes ({} bytes)", self.cap)));
        }
        self.sent += buf.len() as u64;
        self.tx
            .blocking_send(Ok(Frame::data(Bytes::copy_from_slice(buf))))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `GET /api/v1/query` over the fleet: pcap (or `format=pcapng`, one interface per node).
pub(crate) async fn query(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    let fleet = fleet_of(&state)?;
    let m = params(&q, &["from", "to", "filter", "limit", "format"])?;
    let sel = fleet_selection(&m)?;
    let format = match m.get("format").map(String::as_str).filter(|f| !f.is_empty()) {
        None | Some("pcap") => wv_fleet::Format::Pcap,
        Some("pcapng") => wv_fleet::Format::Pcapng,
        Some(f) => return Err(ApiError::BadRequest(format!("format {f:?} is not pcap or pcapng"))),
    };
    let permit = crate::export::permit(&state).await?;
    let (head_tx, head_rx) = tokio::sync::oneshot::channel::<Result<HeaderValue, ApiError>>();
    let (body_tx, body_rx) = tokio::sync::mpsc::channel(4);
    let started = std::time::Instant::now();
    let cap = state.cfg.max_bytes;
    let done = crate::export::spawn(&state, permit, move |st| {
        let nodes = fleet.nodes();
        let mut head_tx = Some(head_tx);
        let mut none = false;
        let mut begun = |lost: &[wv_fleet::Lost]| {
            let head = if lost.len() == nodes.len() {
                // The 502 goes out now; the merge then fails on its first write.
                fleet.counted(lost);
                none = true;
                Err(none_answered(lost))
            } else {
                Ok(header_json(&at_start(nodes, lost)))
            };
            if let Some(t) = head_tx.take() {
                let _ = t.send(head);
            }
        };
        let mut out = ToBody { tx: body_tx.clone(), sent: 0, cap };
        let r = wv_fleet::write_watched(nodes, &sel, format, &mut out, &mut |_| true, &mut begun);
        st.metrics.query_done("query", started.elapsed());
        let how = match r {
            Ok(o) => {
                fleet.counted(&o.lost);
                let mut t = HeaderMap::new();
                t.insert(NODES_HEADER, header_json(&at_end(nodes, &o)));
                let _ = body_tx.blocking_send(Ok(Frame::trailers(t)));
                format!("{} packets, {} of {} nodes whole", o.matched, nodes.len() - o.lost.len(), nodes.len())
            }
            Err(_) if none => "no node answered (502)".to_string(),
            Err(e) => {
                let why = e.to_string();
                match head_tx.take() {
                    Some(t) => {
                        let _ = t.send(Err(merge_failed(e)));
                    }
                    None => {
                        let _ = body_tx.blocking_send(Err(std::io::Error::other(why.clone())));
                    }
                }
                format!("failed: {why}")
            }
        };
        (st.cfg.log)(
            crate::LogLevel::Info,
            &format!("api: fleet query: {how} in {:.3} s", started.elapsed().as_secs_f64()),
        );
    })?;
    drop(done);
    let nodes = head_rx.await.map_err(|_| ApiError::Internal("the query thread ended without an answer".into()))??;
    let mut r = Response::new(axum::body::Body::new(Frames(body_rx)));
    let h = r.headers_mut();
    let kind = match format {
        wv_fleet::Format::Pcap => "application/vnd.tcpdump.pcap",
        wv_fleet::Format::Pcapng => "application/x-pcapng",
    };
    h.insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(NODES_HEADER, nodes);
    h.insert(axum::http::header::TRAILER, HeaderValue::from_static("X-Wirevault-Nodes"));
    Ok(r)
}

/// The count answer over the fleet.
#[derive(Debug, Serialize, Deserialize)]
pub struct FleetCount {
    /// The sum of the counts of the nodes that answered (at most `limit`).
    pub matched: u64,
    pub limit: Option<u64>,
    pub nodes: Vec<NodeAnswer>,
    pub warnings: Vec<String>,
}

/// `GET /api/v1/count` over the fleet.
pub(crate) async fn count(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    let fleet = fleet_of(&state)?;
    let sel = fleet_selection(&params(&q, &["from", "to", "filter", "limit"])?)?;
    let limit = sel.limit;
    let f = fleet.clone();
    let c =
        crate::api::on_query_thread(&state, "count", move |_| wv_fleet::count(f.nodes(), &sel).map_err(merge_failed))
            .await?;
    let nodes = fleet.nodes();
    fleet.counted(&c.lost);
    if c.lost.len() == nodes.len() {
        return Err(none_answered(&c.lost));
    }
    let answers: Vec<NodeAnswer> = at_start(nodes, &c.lost)
        .into_iter()
        .zip(&c.per_node)
        .map(|(mut a, n)| {
            if let Some(n) = n {
                (a.state, a.packets) = (AnswerState::Complete, *n);
            }
            a
        })
        .collect();
    let head = header_json(&answers);
    let mut r = Json(FleetCount { matched: c.matched, limit, nodes: answers, warnings: c.warnings }).into_response();
    r.headers_mut().insert(NODES_HEADER, head);
    Ok(r)
}

/// The longest a node's status is waited for (connect, and then its answer).
const STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Every node's status, asked at once.
fn statuses(fleet: &Fleet) -> FleetStatus {
    let nodes = fleet.nodes();
    let one = |i: usize| -> Result<Status, String> {
        match &fleet.views[i] {
            Some(view) => {
                let limits = crate::status::Limits { max_queries: 0, max_bytes: 0, queries_running: 0 };
                let wv_fleet::Source::Local(p) = &nodes[i].source else { unreachable!("a view is a local node's") };
                crate::server::store_status(view, p, None, 0.0, limits).map_err(|e| e.to_string())
            }
            None => {
                // A status is asked on every /metrics scrape and console poll: a stalled node
                // must not hold them for its query timeout (Prometheus gives up after 10 s).
                let mut node = nodes[i].clone();
                let t = &mut node.timeouts;
                (t.connect, t.node, t.retries) = (t.connect.min(STATUS_WAIT), t.node.min(STATUS_WAIT), 0);
                let v = wv_fleet::get_json(&node, i, "/api/v1/status").map_err(|l| l.to_string())?;
                serde_json::from_value(v).map_err(|e| {
                    format!(
                        "node {} sent a status this version does not read ({e}); run the same wirevault on every node",
                        nodes[i].name
                    )
                })
            }
        }
    };
    let got: Vec<Result<Status, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..nodes.len()).map(|i| s.spawn(move || one(i))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("its status thread failed".into()))).collect()
    });
    FleetStatus {
        version: FLEET_VERSION,
        nodes: nodes
            .iter()
            .zip(got)
            .map(|(n, r)| NodeStatus {
                name: n.name.clone(),
                location: n.location(),
                up: r.is_ok(),
                error: r.as_ref().err().cloned(),
                status: r.ok().map(Box::new),
            })
            .collect(),
    }
}

/// `GET /api/v1/fleet`.
pub(crate) async fn fleet(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    if let Some((k, _)) = q.first() {
        return Err(ApiError::BadRequest(format!("unknown parameter {k:?}; this endpoint takes none")));
    }
    let fleet = fleet_of(&state)?;
    let s = tokio::task::spawn_blocking(move || statuses(&fleet))
        .await
        .map_err(|_| ApiError::Internal("the status thread failed".into()))?;
    Ok(Json(s).into_response())
}

/// The API endpoints a fleet server does not answer.
pub(crate) async fn unknown_api() -> ApiError {
    ApiError::NotFound(
        "a fleet server answers /api/v1/fleet (also as /api/v1/status), query and count; ask a node itself for \
         files, histogram, packets and flows"
            .into(),
    )
}

/// What a fleet server's `/metrics` adds: each node up (its status answered now) and its answers.
#[derive(Debug)]
pub(crate) struct FleetScrape {
    pub up: Vec<(String, bool)>,
    pub answered: Vec<(String, u64, u64)>,
}

impl FleetScrape {
    pub fn of(fleet: &Fleet) -> FleetScrape {
        let s = statuses(fleet);
        FleetScrape {
            up: s.nodes.iter().map(|n| (n.name.clone(), n.up)).collect(),
            answered: fleet
                .nodes()
                .iter()
                .zip(&fleet.answered)
                .map(|(n, (w, l))| (n.name.clone(), w.load(Ordering::Relaxed), l.load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<wv_fleet::Node> {
        let over = wv_fleet::Overrides::default();
        let creds = wv_fleet::Credentials::default();
        wv_fleet::config::nodes_of(&["/tmp/a".into(), "/tmp/b".into(), "/tmp/c".into()], &over, &creds).unwrap()
    }

    fn lost(node: usize, merged: u64) -> wv_fleet::Lost {
        wv_fleet::Lost {
            node,
            name: format!("n{node}"),
            location: "x".into(),
            merged,
            what: "stalled past its timeout (10 s) – «à»".into(),
            todo: "check it".into(),
        }
    }

    #[test]
    fn the_header_is_printable_ascii_json_that_reads_back() {
        let v = vec![lost(0, 0).to_string()];
        let h = header_json(&v);
        let text = h.to_str().expect("printable ASCII");
        assert!(text.contains("\\u00ab\\u00e0\\u00bb") && text.contains("\\u2013"), "{text}");
        assert_eq!(serde_json::from_str::<Vec<String>>(text).unwrap(), v);
    }

    #[test]
    fn each_node_is_complete_partial_or_left_out() {
        let nodes = nodes();
        let o = wv_fleet::Outcome {
            matched: 7,
            packets: vec![5, 2, 0],
            bytes: vec![500, 200, 0],
            seconds: vec![0.12345, 0.2, 0.01],
            lost: vec![lost(1, 2), lost(2, 0)],
            warnings: vec![],
        };
        let got: Vec<(AnswerState, u64, f64)> =
            at_end(&nodes, &o).iter().map(|a| (a.state, a.packets, a.seconds)).collect();
        assert_eq!(
            got,
            [(AnswerState::Complete, 5, 0.123), (AnswerState::Partial, 2, 0.2), (AnswerState::LeftOut, 0, 0.01)]
        );
        let start: Vec<AnswerState> = at_start(&nodes, &o.lost[1..]).iter().map(|a| a.state).collect();
        assert_eq!(start, [AnswerState::Answering, AnswerState::Answering, AnswerState::LeftOut]);
        assert_eq!(serde_json::to_value(AnswerState::LeftOut).unwrap(), "left_out");
    }
}
