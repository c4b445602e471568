//! The k-way merge of the nodes' answers by timestamp.
//!
//! Each node's packets come in its own order (wv-query's: by timestamp,
//! ties by the store's file order). The merge keeps one head per node in a
//! heap keyed by (timestamp, node's rank), so equal timestamps go out by
//! node, in the order of the fleet file or of `--store`, then in each
//! node's order: the rule wv-query applies to the files of one store,
//! one level up. A packet goes out as soon as every node still answering
//! has shown a head at least as late; before waiting on a node, what is
//! written is flushed, so the first packets leave before the slowest node
//! has finished.
//!
//! A node that fails (down, refused, an error, stalled past its timeout)
//! leaves the merge where it failed: what it sent before is merged, the
//! rest of the nodes go on, and the node is named in the outcome.

use crate::config::Node;
use crate::node::{self, Batch, Failure, Msg};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};

/// What to select on every node.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
    pub expr: String,
    pub limit: Option<u64>,
}

/// One packet of the merged stream.
#[derive(Debug, Clone, Copy)]
pub struct MergedPacket<'a> {
    /// The node's rank (its place in the fleet).
    pub node: usize,
    pub ts_ns: u64,
    pub origlen: u32,
    pub linktype: u32,
    pub data: &'a [u8],
    /// The packet as a wirevault pcap record: its 16-byte header (`ts_ns`,
    /// the length of `data`, `origlen`), then `data`.
    pub record: &'a [u8],
}

/// A node left out of the answer, in whole or from some packet on.
#[derive(Debug, Clone)]
pub struct Lost {
    pub node: usize,
    pub name: String,
    pub location: String,
    /// Its packets that are in the answer (merged before it failed).
    pub merged: u64,
    pub what: String,
    pub todo: String,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = if self.merged > 0 {
            format!("is missing from the answer after {} of its packets", self.merged)
        } else {
            "is left out of the answer".into()
        };
        write!(f, "node {} ({}) {part}: it {}; {}", self.name, self.location, self.what, self.todo)
    }
}

/// What each node gave, when the merge ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Packets merged, in all.
    pub matched: u64,
    /// Per node (by rank): packets and bytes of packet data merged.
    pub packets: Vec<u64>,
    pub bytes: Vec<u64>,
    /// Per node: seconds from the merge's start until its answer ended, it
    /// was lost, or the merge stopped (whichever came first).
    pub seconds: Vec<f64>,
    pub lost: Vec<Lost>,
    /// What the nodes said about their answers, as `node NAME: ...`.
    pub warnings: Vec<String>,
}

/// Why the merge failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The query is wrong (every node would refuse it).
    #[error("{0}")]
    Usage(String),
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
}

impl MergeError {
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, MergeError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// A node's answer as known before the first packet goes out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Head {
    pub linktype: Option<u32>,
    pub snaplen: u32,
}

/// Where the merged stream goes.
pub trait Output {
    /// Before the first packet: every node's head, the nodes lost so far.
    fn begin(&mut self, nodes: &[Node], heads: &[Head], lost: &[Lost]) -> io::Result<()>;
    fn packet(&mut self, p: MergedPacket<'_>) -> io::Result<()>;
    /// A node lost after the first packet went out (it stalled or broke
    /// off mid-answer): the output may say so where it is.
    fn lost(&mut self, _lost: &Lost) {}
    /// Called before the merge waits on a node.
    fn flush(&mut self) -> io::Result<()>;
    fn finish(&mut self) -> io::Result<()>;
}

struct Lane {
    rx: Option<Receiver<Msg>>,
    /// Where the batches the merge is done with go back to the node's thread.
    spent: SyncSender<Batch>,
    batch: Batch,
    pos: usize,
    head: Head,
}

struct Merge<'a> {
    nodes: &'a [Node],
    started: std::time::Instant,
    lanes: Vec<Lane>,
    outcome: Outcome,
    begun: bool,
}

impl Merge<'_> {
    /// Lane `i` gave its last message: its time is taken.
    fn ended(&mut self, i: usize) {
        self.lanes[i].rx = None;
        self.outcome.seconds[i] = self.started.elapsed().as_secs_f64();
    }

    fn lose(&mut self, i: usize, f: Failure, out: &mut dyn Output) {
        self.ended(i);
        let n = &self.nodes[i];
        let lost = Lost {
            node: i,
            name: n.name.clone(),
            location: n.location(),
            merged: self.outcome.packets[i],
            what: f.what,
            todo: f.todo,
        };
        if self.begun {
            out.lost(&lost);
        }
        self.outcome.lost.push(lost);
    }

    /// Makes lane `i` show its next packet; false when it has no more
    /// (ended, or failed and recorded as lost).
    fn next(&mut self, i: usize, out: &mut dyn Output) -> Result<bool, MergeError> {
        loop {
            let lane = &mut self.lanes[i];
            if lane.pos < lane.batch.pkts.len() {
                return Ok(true);
            }
            let Some(rx) = &lane.rx else { return Ok(false) };
            let msg = match rx.try_recv() {
                Ok(m) => Ok(m),
                Err(TryRecvError::Empty) => {
                    if self.begun {
                        out.flush().map_err(MergeError::Output)?;
                    }
                    rx.recv().map_err(|_| ())
                }
                Err(TryRecvError::Disconnected) => Err(()),
            };
            let lane = &mut self.lanes[i];
            match msg {
                Ok(Msg::Batch(b)) => {
                    lane.pos = 0;
                    // Full when the thread has ended or has new ones: dropped then.
                    let _ = lane.spent.try_send(std::mem::replace(&mut lane.batch, b));
                }
                Ok(Msg::Start { linktype, snaplen }) => lane.head = Head { linktype, snaplen },
                Ok(Msg::Warn(w)) => self.outcome.warnings.push(format!("node {}: {w}", self.nodes[i].name)),
                Ok(Msg::End(Ok(()))) => self.ended(i),
                Ok(Msg::End(Err(f))) if f.usage => return Err(MergeError::Usage(f.what)),
                Ok(Msg::End(Err(f))) => self.lose(i, f, out),
                Err(()) => {
                    let f = Failure { usage: false, what: "lost its reader thread".into(), todo: "retry".into() };
                    self.lose(i, f, out);
                }
            }
        }
    }

    fn ts(&self, i: usize) -> u64 {
        let l = &self.lanes[i];
        l.batch.pkts[l.pos].0
    }
}

/// Merges the answers of `nodes` to `sel` into `out`; stops after
/// `sel.limit` packets (each node is asked for at most that many: the
/// first N of the merge are among the first N of each node).
pub fn merge(nodes: &[Node], sel: &Selection, out: &mut dyn Output) -> Result<Outcome, MergeError> {
    let lanes = nodes
        .iter()
        .map(|n| {
            let c = node::start(n, sel);
            Lane { rx: Some(c.rx), spent: c.spent, batch: Batch::default(), pos: 0, head: Head::default() }
        })
        .collect();
    let n = nodes.len();
    let outcome = Outcome { packets: vec![0; n], bytes: vec![0; n], seconds: vec![0.0; n], ..Outcome::default() };
    let mut m = Merge { nodes, started: std::time::Instant::now(), lanes, outcome, begun: false };
    let mut heap = BinaryHeap::with_capacity(nodes.len());
    for i in 0..nodes.len() {
        if m.next(i, out)? {
            heap.push(Reverse((m.ts(i), i)));
        }
    }
    let heads: Vec<Head> = m.lanes.iter().map(|l| l.head).collect();
    out.begin(nodes, &heads, &m.outcome.lost).map_err(MergeError::Output)?;
    m.begun = true;
    let limit = sel.limit.unwrap_or(u64::MAX);
    while m.outcome.matched < limit {
        let Some(Reverse((_, i))) = heap.pop() else { break };
        // Lane i goes on while its packets come before every other head
        // (a run of one node's packets costs no heap operation each).
        let until = heap.peek().map(|Reverse(h)| *h);
        loop {
            let lane = &m.lanes[i];
            let (ts_ns, origlen, linktype, at, len) = lane.batch.pkts[lane.pos];
            let (data, record) = (&lane.batch.data[at..at + len], lane.batch.record(at, len));
            out.packet(MergedPacket { node: i, ts_ns, origlen, linktype, data, record }).map_err(MergeError::Output)?;
            m.lanes[i].pos += 1;
            m.outcome.matched += 1;
            m.outcome.packets[i] += 1;
            m.outcome.bytes[i] += len as u64;
            if !m.next(i, out)? {
                break;
            }
            let head = (m.ts(i), i);
            if m.outcome.matched >= limit || until.is_some_and(|u| head > u) {
                heap.push(Reverse(head));
                break;
            }
        }
    }
    out.finish().map_err(MergeError::Output)?;
    for i in 0..n {
        if m.lanes[i].rx.is_some() {
            m.outcome.seconds[i] = m.started.elapsed().as_secs_f64();
        }
    }
    // Past the limit, the nodes still answering are not waited for: their
    // threads stop at their next batch (the channel is gone).
    Ok(m.outcome)
}

/// Merges `sel` over `nodes` into `f`, packet by packet: for the tools
/// that read packets rather than write a file (`analyze`).
pub fn each(
    nodes: &[Node],
    sel: &Selection,
    f: &mut dyn FnMut(MergedPacket<'_>) -> io::Result<()>,
) -> Result<Outcome, MergeError> {
    struct Each<'a>(&'a mut dyn FnMut(MergedPacket<'_>) -> io::Result<()>);
    impl Output for Each<'_> {
        fn begin(&mut self, _: &[Node], _: &[Head], _: &[Lost]) -> io::Result<()> {
            Ok(())
        }
        fn packet(&mut self, p: MergedPacket<'_>) -> io::Result<()> {
            (self.0)(p)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn finish(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    merge(nodes, sel, &mut Each(f))
}

/// The exact count of a selection over the nodes.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    /// The sum of the nodes' counts (at most the limit).
    pub matched: u64,
    /// Per node: its count, `None` when it is lost.
    pub per_node: Vec<Option<u64>>,
    pub lost: Vec<Lost>,
    pub warnings: Vec<String>,
}

/// Counts `sel` on every node at once and adds the counts up.
pub fn count(nodes: &[Node], sel: &Selection) -> Result<Counted, MergeError> {
    let results: Vec<Result<(u64, Vec<String>), Failure>> = std::thread::scope(|s| {
        let hs: Vec<_> = nodes.iter().map(|n| s.spawn(move || node::count(n, sel))).collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Failure { usage: false, what: "lost its counting thread".into(), todo: "retry".into() })
                })
            })
            .collect()
    });
    let mut c = Counted::default();
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok((n, w)) => {
                c.matched = c.matched.saturating_add(n);
                c.per_node.push(Some(n));
                c.warnings.extend(w.into_iter().map(|w| format!("node {}: {w}", nodes[i].name)));
            }
            Err(f) if f.usage => return Err(MergeError::Usage(f.what)),
            Err(f) => {
                c.per_node.push(None);
                let n = &nodes[i];
                c.lost.push(Lost {
                    node: i,
                    name: n.name.clone(),
                    location: n.location(),
                    merged: 0,
                    what: f.what,
                    todo: f.todo,
                });
            }
        }
    }
    if let Some(l) = sel.limit {
        c.matched = c.matched.min(l);
    }
    Ok(c)
}
