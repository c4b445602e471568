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
use wv_wire::pcap::{self, RecordHeader};

/// Bytes of packet data in a batch before it is handed over.
const BATCH_BYTES: usize = 256 << 10;
/// Batches in flight per node. With the one the merge reads, the one being
/// filled and the next, at most six batches of a node exist (under 2 MiB).
const BATCHES: usize = 3;

/// Packets of one node, in its order: a buffer holding them as wirevault
/// pcap records (as a recorder's answer arrived, or written so from a local
/// store), and for each its timestamp, original length, link type and where
/// its bytes are in the buffer.
#[derive(Default)]
pub(crate) struct Batch {
    pub data: Vec<u8>,
    pub pkts: Vec<(u64, u32, u32, usize, usize)>,
}

impl Batch {
    /// Bytes of a remote node's batch buffer: a batch is handed over once
    /// its whole records pass [`BATCH_BYTES`], so the rest is room for the
    /// record that crosses that line (a larger one grows the buffer).
    const REMOTE_LEN: usize = BATCH_BYTES + (64 << 10);

    /// Appends a packet as a wirevault pcap record (its header, then its
    /// bytes), as a recorder's answer arrives: every batch holds each
    /// packet's record just before its bytes ([`Batch::record`]).
    fn push(&mut self, ts_ns: u64, origlen: u32, linktype: u32, data: &[u8]) {
        let mut h = [0u8; pcap::RECORD_HEADER_LEN];
        pcap::emit_record_header(&mut h, ts_ns, data.len() as u32, origlen);
        self.data.extend_from_slice(&h);
        self.pkts.push((ts_ns, origlen, linktype, self.data.len(), data.len()));
        self.data.extend_from_slice(data);
    }

    /// The pcap record (header and bytes, as wirevault writes it) of the
    /// packet whose bytes are `data[at..at + len]`.
    pub fn record(&self, at: usize, len: usize) -> &[u8] {
        &self.data[at - pcap::RECORD_HEADER_LEN..at + len]
    }

    fn full(&self) -> bool {
        self.full_at(self.data.len())
    }

    /// Full with `bytes` of it used.
    fn full_at(&self, bytes: usize) -> bool {
        bytes >= BATCH_BYTES || self.pkts.len() >= 4096
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

/// The merge's side of a node: its messages, and the way back for the
/// batches the merge is done with, so that a node's thread reuses a few
/// buffers (fresh memory is slow to touch on a VM) instead of allocating
/// one per batch.
pub(crate) struct Channel {
    pub rx: Receiver<Msg>,
    pub spent: SyncSender<Batch>,
}

/// A node thread's spent batches, handed back by the merge.
struct Pool(Receiver<Batch>);

impl Pool {
    /// A batch to fill: a spent one emptied, or a new one.
    fn take(&self) -> Batch {
        match self.0.try_recv() {
            Ok(mut b) => {
                b.pkts.clear();
                b
            }
            Err(_) => Batch::default(),
        }
    }

    /// A batch to fill from its start (a local store's packets are pushed).
    fn empty(&self) -> Batch {
        let mut b = self.take();
        b.data.clear();
        b
    }
}

/// Starts the thread of node `node` for `sel` and returns its channel.
pub(crate) fn start(node: &Node, sel: &Selection) -> Channel {
    let (tx, rx) = sync_channel(BATCHES);
    let (spent, back) = sync_channel(BATCHES + 2);
    let (node, sel) = (node.clone(), sel.clone());
    let name = format!("wv-fleet-{}", node.name);
    let spawned = std::thread::Builder::new().name(name).spawn({
        let tx = tx.clone();
        move || {
            let pool = Pool(back);
            let end = match &node.source {
                Source::Local(path) => local(path, &sel, &tx, &pool),
                Source::Remote(r) => remote(r, &node, &sel, &tx, &pool),
            };
            let _ = tx.send(Msg::End(end));
        }
    });
    if let Err(e) = spawned {
        let _ = tx.try_send(Msg::End(Err(Failure::node(format!("cannot start its reader thread ({e})"), "retry"))));
    }
    Channel { rx, spent }
}

/// A local store, through wv-query (the single-store merge and reader).
fn local(path: &std::path::Path, sel: &Selection, tx: &SyncSender<Msg>, pool: &Pool) -> Result<(), Failure> {
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
    let mut b = pool.empty();
    let mut each = |pk: wv_query::PacketRef<'_>| -> io::Result<()> {
        b.push(pk.ts_ns, pk.origlen, pk.linktype, pk.data);
        if b.full() {
            let full = std::mem::replace(&mut b, pool.empty());
            tx.send(Msg::Batch(full)).map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
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
fn remote(r: &Remote, node: &Node, sel: &Selection, tx: &SyncSender<Msg>, pool: &Pool) -> Result<(), Failure> {
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
    let broke = |e: io::Error| match HttpError::of(e, idle) {
        HttpError::Stalled(d) => Failure::node(
            format!("stalled, sending nothing for {} s", d.as_secs_f64()),
            "check that its server runs (not stopped or overloaded), or raise --node-timeout",
        ),
        e => Failure::node(format!("broke off ({e})"), "check its server's log, then ask again"),
    };
    let not_pcap = |what: String| {
        Failure::node(format!("sent an answer that is not pcap ({what})"), "check its server's version and log")
    };
    Answer { body: resp.body, tx, pool, broke: &broke, not_pcap: &not_pcap, head: None }.stream()
}

/// A recorder's pcap answer, read straight into batches: the body's bytes
/// land in a batch's buffer and its packets are indexed where they lie (no
/// copy between the socket and the merge); the record that a batch's end
/// cuts moves to the next batch. A recorder answers in the pcap it writes
/// (little-endian, nanoseconds: [`pcap::FileHeader::wirevault`]); any other
/// is refused as not its answer.
struct Answer<'a, R> {
    body: R,
    tx: &'a SyncSender<Msg>,
    pool: &'a Pool,
    broke: &'a dyn Fn(io::Error) -> Failure,
    not_pcap: &'a dyn Fn(String) -> Failure,
    /// The link type and snapshot length, until told (with the first
    /// packet; an answer without one has no link type).
    head: Option<(u32, u32)>,
}

impl<R: Read> Answer<'_, R> {
    /// Reads into `buf` until it is full or the body ends; the bytes read.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Failure> {
        let mut n = 0;
        while n < buf.len() {
            match self.body.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err((self.broke)(e)),
            }
        }
        Ok(n)
    }

    fn stream(mut self) -> Result<(), Failure> {
        let mut fh = [0u8; pcap::FILE_HEADER_LEN];
        let have = self.fill(&mut fh)?;
        let head = pcap::FileHeader::parse(&fh[..have]).filter(|h| h.magic == pcap::FileHeader::wirevault(0, 0).magic);
        let Some(head) = head else {
            return Err((self.not_pcap)(format!("its first {have} bytes are not a wirevault pcap header")));
        };
        let linktype = head.linktype();
        let max_caplen = wv_wire::linktype::max_snaplen(linktype);
        self.head = Some((linktype, head.effective_snaplen()));
        let mut b = self.batch();
        // b.data[..parsed] are whole records, indexed; [parsed..filled] read, not yet.
        let (mut parsed, mut filled) = (0, 0);
        // Bytes of the answer before b.data[0], for the errors' offsets.
        let mut base = pcap::FILE_HEADER_LEN as u64;
        loop {
            while let Some(h) = b.data[parsed..filled].first_chunk::<{ pcap::RECORD_HEADER_LEN }>() {
                let Some(rh) = RecordHeader::parse_wirevault(h).filter(|rh| rh.caplen <= max_caplen) else {
                    self.hand(b);
                    return Err((self.not_pcap)(format!("a bad record header at byte {}", base + parsed as u64)));
                };
                let at = parsed + pcap::RECORD_HEADER_LEN;
                let end = at + rh.caplen as usize;
                if end > filled {
                    if end > b.data.len() {
                        b.data.resize(end, 0);
                    }
                    break;
                }
                b.pkts.push((rh.ts_ns, rh.origlen, linktype, at, rh.caplen as usize));
                parsed = end;
            }
            if b.full_at(parsed) {
                let rest = filled - parsed;
                let mut next = self.batch();
                // What was read past the last whole record (a buffer grown for a large
                // record may hold more than a fresh one), with room to read on.
                if next.data.len() < rest + (64 << 10) {
                    next.data.resize(rest + (64 << 10), 0);
                }
                next.data[..rest].copy_from_slice(&b.data[parsed..filled]);
                base += parsed as u64;
                (parsed, filled) = (0, rest);
                if !self.hand(std::mem::replace(&mut b, next)) {
                    return Ok(());
                }
                continue;
            }
            let n = match self.body.read(&mut b.data[filled..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.hand(b);
                    return Err((self.broke)(e));
                }
            };
            if n == 0 {
                self.hand(b);
                if filled > parsed {
                    let e = io::Error::new(io::ErrorKind::UnexpectedEof, "its answer ends inside a packet");
                    return Err((self.broke)(e));
                }
                return Ok(());
            }
            filled += n;
        }
    }

    /// Hands `b` to the merge, the head first when `b` has the first
    /// packet or is the last batch; false when the merge has gone.
    fn hand(&mut self, b: Batch) -> bool {
        if let Some((linktype, snaplen)) = self.head.take() {
            let start = match b.pkts.is_empty() {
                false => Msg::Start { linktype: Some(linktype), snaplen },
                true => Msg::Start { linktype: None, snaplen: 0 },
            };
            if self.tx.send(start).is_err() {
                return false;
            }
        }
        self.tx.send(Msg::Batch(b)).is_ok()
    }

    /// A batch to fill, its buffer at its full length.
    fn batch(&self) -> Batch {
        let mut b = self.pool.take();
        if b.data.len() < Batch::REMOTE_LEN {
            b.data.resize(Batch::REMOTE_LEN, 0);
        }
        b
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out varying amounts up to `most` bytes a read, as a socket does.
    struct Dribble {
        data: Vec<u8>,
        at: usize,
        reads: usize,
        most: usize,
    }

    impl Read for Dribble {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            let n = buf.len().min(self.data.len() - self.at).min(1 + (self.reads * 7_919_003) % self.most);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn pcap_of(linktype: u32, packets: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut out = vec![0u8; pcap::FILE_HEADER_LEN];
        pcap::emit_file_header(out.as_mut_slice().try_into().unwrap(), 262_144, linktype);
        for (ts, p) in packets {
            let mut h = [0u8; pcap::RECORD_HEADER_LEN];
            pcap::emit_record_header(&mut h, *ts, p.len() as u32, p.len() as u32 + 4);
            out.extend_from_slice(&h);
            out.extend_from_slice(p);
        }
        out
    }

    /// A packet as the merge sees it: timestamp, original length, bytes.
    type Seen = (u64, u32, Vec<u8>);

    /// Streams `body` in reads of up to `most` bytes, the pool holding `spent`, and returns
    /// its packets as the merge sees them, and the end.
    fn stream_with(body: Vec<u8>, most: usize, spent: Vec<Batch>) -> (Vec<Seen>, Result<(), Failure>) {
        let (tx, rx) = sync_channel(1 << 16);
        let (give, back) = sync_channel(spent.len().max(1));
        for b in spent {
            give.send(b).unwrap();
        }
        let pool = Pool(back);
        let broke = |e: io::Error| Failure::node(format!("broke off ({e})"), "");
        let not_pcap = |w: String| Failure::node(format!("not pcap ({w})"), "");
        let a = Answer {
            body: Dribble { data: body, at: 0, reads: 0, most },
            tx: &tx,
            pool: &pool,
            broke: &broke,
            not_pcap: &not_pcap,
            head: None,
        };
        let end = a.stream();
        drop(tx);
        let mut got = Vec::new();
        for m in rx {
            if let Msg::Batch(b) = m {
                for &(ts, orig, _, at, len) in &b.pkts {
                    got.push((ts, orig, b.data[at..at + len].to_vec()));
                }
            }
        }
        (got, end)
    }

    fn stream(body: Vec<u8>) -> (Vec<Seen>, Result<(), Failure>) {
        stream_with(body, 70_000, Vec::new())
    }

    #[test]
    fn an_answer_read_into_batches_gives_every_packet_whole() {
        // Sizes that cut records at batch ends, one larger than a batch's buffer.
        let packets: Vec<(u64, Vec<u8>)> = (0..5000u64)
            .map(|i| {
                let len = if i == 1234 { 200_000 } else { 60 + (i as usize * 131) % 1400 };
                (1_700_000_000_000_000_000 + i * 1000, (0..len).map(|k| (k as u64 + i) as u8).collect())
            })
            .collect();
        let (got, end) = stream(pcap_of(1, &packets));
        assert!(end.is_ok());
        assert_eq!(got.len(), packets.len());
        for ((ts, orig, data), (ets, edata)) in got.iter().zip(&packets) {
            assert_eq!((*ts, *orig as usize, data), (*ets, edata.len() + 4, edata));
        }
        // D-Bus records of up to 128 MiB: buffers grow, and what follows a grown one moves
        // whole into the next batch.
        let dbus = wv_wire::linktype::DBUS;
        let packets: Vec<(u64, Vec<u8>)> = [100, 3 << 20, 70_000, 300_000, 1 << 20, 50]
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as u64, vec![i as u8; n]))
            .collect();
        let (got, end) = stream(pcap_of(dbus, &packets));
        assert!(end.is_ok());
        assert_eq!(got.iter().map(|g| (g.0, g.2.clone())).collect::<Vec<_>>(), packets);
        // A grown buffer handed back, then reads of megabytes: the part of a large record
        // read past the batch's end is more than a fresh batch holds.
        let packets: Vec<(u64, Vec<u8>)> = (0..50)
            .map(|_| 1000)
            .chain([1 << 20, 3 << 20, 3 << 20, 50])
            .enumerate()
            .map(|(i, n)| (i as u64, vec![i as u8; n]))
            .collect();
        let big = Batch { data: vec![0; 8 << 20], pkts: Vec::new() };
        let (got, end) = stream_with(pcap_of(dbus, &packets), 6 << 20, vec![big]);
        assert!(end.is_ok());
        assert_eq!(got.iter().map(|g| (g.0, g.2.clone())).collect::<Vec<_>>(), packets);
    }

    #[test]
    fn an_answer_cut_inside_a_packet_broke_off_after_the_whole_ones() {
        let packets: Vec<(u64, Vec<u8>)> = (0..10u64).map(|i| (i, vec![i as u8; 100])).collect();
        let mut body = pcap_of(1, &packets);
        body.truncate(body.len() - 50);
        let (got, end) = stream(body);
        assert_eq!(got.len(), 9);
        assert!(end.unwrap_err().what.contains("ends inside a packet"));
        let (got, end) = stream(b"HTTP/1.1 200 OK\r\n\r\nnot a capture".to_vec());
        assert!(got.is_empty());
        assert!(end.unwrap_err().what.contains("not pcap"));
    }
}
