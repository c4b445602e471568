//! One reader thread per node: it asks its node (a local store through
//! wv-query, a recorder through its API) and hands the packets, in the
//! node's own order, to the merge in batches through a channel of a few
//! batches: the memory of a node is bounded whatever the answer's size,
//! and a node that is ahead waits for the merge.

use crate::config::{Node, Source};
use crate::http::{self, HttpError, Remote};
use crate::merge::Selection;
use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bytes of packet data in a batch before it is handed over.
const BATCH_BYTES: usize = 256 << 10;
/// Batches in flight per node (so at most about 1 MiB held per node).
const BATCHES: usize = 3;

/// Packets of one node, in its order: their bytes end to end, and for each
/// its timestamp, original length, link type and where its bytes are.
#[derive(Default)]
pub(crate) struct Batch {
    pub data: Vec<u8>,
    pub pkts: Vec<(u64, u32, u32, usize, usize)>,
}

impl Batch {
    fn push(&mut self, ts_ns: u64, origlen: u32, linktype: u32, data: &[u8]) {
        self.pkts.push((ts_ns, origlen, linktype, self.data.len(), data.len()));
        self.data.extend_from_slice(data);
    }

    fn full(&self) -> bool {
        self.data.len() >= BATCH_BYTES || self.pkts.len() >= 4096
    }
}

/// Why a node was left out (in whole or from some packet on).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    /// The query itself is wrong (a filter that does not compile): every
    /// node would say so, and the whole query fails.
    pub usage: bool,
    /// What happened and what to do, as one sentence's two halves.
    pub what: String,
    pub todo: String,
}

impl Failure {
    fn node(what: impl Into<String>, todo: impl Into<String>) -> Failure {
        Failure { usage: false, what: what.into(), todo: todo.into() }
    }
}

/// What a node's thread says to the merge.
pub(crate) enum Msg {
    /// The answer's link type and snapshot length (before any packet).
    Start {
        linktype: Option<u32>,
        snaplen: u32,
    },
    Batch(Batch),
    /// Something the node says about its answer (damaged files, files being written).
    Warn(String),
    /// The node's answer is complete, or it failed.
    End(Result<(), Failure>),
}

/// Starts the thread of node `node` for `sel` and returns its channel.
pub(crate) fn start(node: &Node, sel: &Selection) -> Receiver<Msg> {
    let (tx, rx) = sync_channel(BATCHES);
    let (node, sel) = (node.clone(), sel.clone());
    let name = format!("wv-fleet-{}", node.name);
    let spawned = std::thread::Builder::new().name(name).spawn({
        let tx = tx.clone();
        move || {
            let end = match &node.source {
                Source::Local(path) => local(path, &sel, &tx),
                Source::Remote(r) => remote(r, &node, &sel, &tx),
            };
            let _ = tx.send(Msg::End(end));
        }
    });
    if let Err(e) = spawned {
        let _ = tx.try_send(Msg::End(Err(Failure::node(format!("cannot start its reader thread ({e})"), "retry"))));
    }
    rx
}

/// A local store, through wv-query (the single-store merge and reader).
fn local(path: &std::path::Path, sel: &Selection, tx: &SyncSender<Msg>) -> Result<(), Failure> {
    let q = wv_query::Query {
        store: path.to_path_buf(),
        from_ns: sel.from_ns,
        to_ns: sel.to_ns,
        expr: sel.expr.clone(),
        limit: sel.limit,
    };
    let p = wv_query::prepare(q).map_err(|e| match e {
        wv_query::QueryError::BadExpression { .. } => Failure { usage: true, what: e.to_string(), todo: String::new() },
        _ => Failure::node(e.to_string(), "check the store path"),
    })?;
    let lt = p.linktypes();
    let linktype = (lt.len() == 1).then(|| lt[0]);
    if tx.send(Msg::Start { linktype, snaplen: wv_wire::MAX_SNAPLEN }).is_err() {
        return Ok(());
    }
    let mut b = Batch::default();
    let mut each = |pk: wv_query::PacketRef<'_>| -> io::Result<()> {
        b.push(pk.ts_ns, pk.origlen, pk.linktype, pk.data);
        if b.full() {
            tx.send(Msg::Batch(std::mem::take(&mut b))).map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        }
        Ok(())
    };
    let r = wv_query::run(p, wv_query::Sink::Packets(&mut each));
    match r {
        Ok(report) => {
            let _ = tx.send(Msg::Batch(b));
            for w in report.warnings {
                let _ = tx.send(Msg::Warn(w));
            }
            if report.part_files > 0 && !report.recording {
                let _ = tx.send(Msg::Warn(format!(
                    "{} partial file(s) left by a crash are not included; run `wirevault repair` on it",
                    report.part_files
                )));
            }
            Ok(())
        }
        // The merge has all it wants (a limit) or went away.
        Err(e) if e.is_broken_pipe() => Ok(()),
        Err(e) => {
            Err(Failure::node(format!("its query failed ({e})"), "check the store (`wirevault repair` names damage)"))
        }
    }
}

/// The query string of `sel` for a recorder's API: `from`, `to` (epoch seconds with
/// nanoseconds), `filter`, `limit`.
pub fn query_params(sel: &Selection) -> String {
    let mut p = Vec::new();
    let t = wv_wire::time::epoch_text;
    if let Some(f) = sel.from_ns {
        p.push(format!("from={}", t(f)));
    }
    if let Some(to) = sel.to_ns {
        p.push(format!("to={}", t(to)));
    }
    if !sel.expr.trim().is_empty() {
        p.push(format!("filter={}", http::encode(&sel.expr)));
    }
    if let Some(l) = sel.limit {
        p.push(format!("limit={l}"));
    }
    p.join("&")
}

/// What a failed request means for the user.
fn request_failure(e: &HttpError, node: &Node) -> Failure {
    match e {
        HttpError::Connect(e) => Failure::node(
            format!("cannot be reached ({e})"),
            format!("start its recorder or server, or fix its url ({})", node.location()),
        ),
        HttpError::Tls(e) => Failure::node(
            format!("failed the TLS handshake ({e})"),
            "check its ca, cert and key in the fleet file against the server's --tls-cert and --client-ca",
        ),
        HttpError::Stalled(d) => Failure::node(
            format!("stalled, sending nothing for {} s", d.as_secs_f64()),
            "check that its server runs, or raise --node-timeout",
        ),
        HttpError::Io(e) => Failure::node(format!("failed ({e})"), "retry, or check its server's log"),
    }
}

/// An answer that is not 200, as a failure.
fn status_failure(resp: http::Response) -> Failure {
    let status = resp.status;
    let sentence = resp.error_sentence();
    match status {
        400 => Failure { usage: true, what: format!("refused the query: {sentence}"), todo: String::new() },
        401 | 403 => Failure::node(
            format!("refused the credentials ({status}: {sentence})"),
            "check its token_file (or --token-file) against the server's --token-file",
        ),
        _ => Failure::node(format!("answered {status}: {sentence}"), "check its server's log, then retry"),
    }
}

/// Asks `path` of `r`, trying again (after connection failures, 503) as
/// the node's timeouts say.
fn ask(r: &Remote, node: &Node, path: &str) -> Result<http::Response, Failure> {
    let t = node.timeouts;
    let mut attempt = 0;
    loop {
        let res = http::get(r, path, t.connect, t.node);
        let retry = match &res {
            Ok(resp) => resp.status == 503,
            // A refused handshake would be refused again; a node that
            // accepted and then said nothing for the whole timeout has
            // had its chance (trying again would double the wait).
            Err(HttpError::Tls(_) | HttpError::Stalled(_)) => false,
            Err(_) => true,
        };
        if !retry || attempt >= t.retries {
            return match res {
                Ok(resp) if resp.status == 200 => Ok(resp),
                Ok(resp) => Err(status_failure(resp)),
                Err(e) => Err(request_failure(&e, node)),
            };
        }
        attempt += 1;
        std::thread::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)));
    }
}

/// A recorder, through `GET /api/v1/query`.
fn remote(r: &Remote, node: &Node, sel: &Selection, tx: &SyncSender<Msg>) -> Result<(), Failure> {
    let resp = ask(r, node, &format!("/api/v1/query?{}", query_params(sel)))?;
    // A server cuts an answer at its --max-bytes and says so before the
    // first byte: that answer is not the node's whole one.
    if let Some(cut) = resp.header("x-wirevault-truncated").filter(|c| c.starts_with("max-bytes")) {
        return Err(Failure::node(
            format!("would cut its answer at its {cut}"),
            "narrow the query (time, filter) or raise that server's --max-bytes",
        ));
    }
    for w in resp.all("x-wirevault-warning") {
        if tx.send(Msg::Warn(w.to_string())).is_err() {
            return Ok(());
        }
    }
    let idle = node.timeouts.node;
    // How many of its packets are in the answer the merge says (a node
    // lost mid-answer is named with it).
    let broke = |e: wv_wire::reader::ReadError| match e {
        wv_wire::reader::ReadError::Io { source, .. } => match HttpError::of(source, idle) {
            HttpError::Stalled(d) => Failure::node(
                format!("stalled, sending nothing for {} s", d.as_secs_f64()),
                "check that its server runs (not stopped or overloaded), or raise --node-timeout",
            ),
            e => Failure::node(format!("broke off ({e})"), "check its server's log, then ask again"),
        },
        e => Failure::node(format!("sent an answer that is not pcap ({e})"), "check its server's version and log"),
    };
    let mut reader = wv_wire::reader::Reader::new(resp.body).map_err(broke)?;
    let mut b = Batch::default();
    let mut started = false;
    loop {
        let pk = match reader.next_packet() {
            Ok(Some(pk)) => pk,
            Ok(None) => break,
            Err(e) => {
                let _ = tx.send(Msg::Batch(b));
                return Err(broke(e));
            }
        };
        if !started {
            started = true;
            if tx.send(Msg::Start { linktype: Some(pk.linktype), snaplen: pk.snaplen }).is_err() {
                return Ok(());
            }
        }
        b.push(pk.ts_ns, pk.origlen, pk.linktype, pk.data);
        if b.full() && tx.send(Msg::Batch(std::mem::take(&mut b))).is_err() {
            return Ok(());
        }
    }
    if !started {
        let _ = tx.send(Msg::Start { linktype: None, snaplen: 0 });
    }
    let _ = tx.send(Msg::Batch(b));
    Ok(())
}

/// The exact count of `sel` on `node`: wv-query's count, or `/api/v1/count`.
pub(crate) fn count(node: &Node, sel: &Selection) -> Result<(u64, Vec<String>), Failure> {
    match &node.source {
        Source::Local(path) => {
            let q = wv_query::Query {
                store: path.clone(),
                from_ns: sel.from_ns,
                to_ns: sel.to_ns,
                expr: sel.expr.clone(),
                limit: sel.limit,
            };
            let p = wv_query::prepare(q).map_err(|e| match e {
                wv_query::QueryError::BadExpression { .. } => {
                    Failure { usage: true, what: e.to_string(), todo: String::new() }
                }
                _ => Failure::node(e.to_string(), "check the store path"),
            })?;
            let r = wv_query::run(p, wv_query::Sink::Count)
                .map_err(|e| Failure::node(format!("its count failed ({e})"), "check the store"))?;
            Ok((r.matched, r.warnings))
        }
        Source::Remote(r) => {
            let mut resp = ask(r, node, &format!("/api/v1/count?{}", query_params(sel)))?;
            let mut body = Vec::new();
            (&mut resp.body)
                .take(1 << 20)
                .read_to_end(&mut body)
                .map_err(|e| request_failure(&HttpError::of(e, node.timeouts.node), node))?;
            let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
                Failure::node(format!("sent a count that is not JSON ({e})"), "check its server's version")
            })?;
            let matched = v["matched"]
                .as_u64()
                .ok_or_else(|| Failure::node("sent a count without `matched`", "check its server's version"))?;
            let warnings = v["warnings"]
                .as_array()
                .map(|a| a.iter().filter_map(|w| w.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            Ok((matched, warnings))
        }
    }
}

/// The JSON answer of a node's API endpoint `path` (with its query string), asked as the
/// packets are (the node's token, TLS and timeouts; tried again as its `retries` say):
/// `wirevault flows` over a fleet reads `/api/v1/flows` so. A local store has no API:
/// its node is refused. A node that fails is `Lost` as rank `rank`, nothing merged.
pub fn get_json(node: &Node, rank: usize, path: &str) -> Result<serde_json::Value, crate::merge::Lost> {
    let lost = |f: Failure| crate::merge::Lost {
        node: rank,
        name: node.name.clone(),
        location: node.location(),
        merged: 0,
        what: f.what,
        todo: f.todo,
    };
    let Source::Remote(r) = &node.source else {
        return Err(lost(Failure::node("is a local store, with no API", "read it directly")));
    };
    let mut resp = ask(r, node, path).map_err(lost)?;
    let mut body = Vec::new();
    (&mut resp.body)
        .take(1 << 30)
        .read_to_end(&mut body)
        .map_err(|e| lost(request_failure(&HttpError::of(e, node.timeouts.node), node)))?;
    serde_json::from_slice(&body).map_err(|e| {
        lost(Failure::node(format!("sent an answer that is not JSON ({e})"), "check its server's version"))
    })
}
