//! `wirevault flows STORE [--from --to] [EXPR]`: the flow records of a store (its
//! `flows/*.parquet`, docs/flows.md), chosen by time and by the part of the tcpdump language a
//! flow key answers (`wv_flows::filter`), as a table, JSON or CSV. `--rebuild` makes the
//! flow files of a store's packets again, reading them through the query layer. With
//! `--store`/`--fleet`, the flows of every node (a store's files, a recorder's
//! `/api/v1/flows`); `--packets -w FILE` writes the matched flows' packets, fetched through
//! the fleet merge that `query` uses.

use crate::{exit, fail};
use std::path::{Path, PathBuf};
use wv_flows::record::FlowRecord;

/// Arguments of `wirevault flows`.
#[derive(clap::Args)]
pub struct Args {
    /// The store (not with --clickhouse, --store or --fleet: its words are all the expression).
    #[arg(value_name = "STORE", required_unless_present_any = ["clickhouse", "stores", "fleet"])]
    pub store: Option<PathBuf>,
    /// Flows of host, net, port, proto, tcp/udp/icmp, vlan, joined by and/or/not (the words are joined with spaces).
    #[arg(value_name = "EXPRESSION")]
    pub expression: Vec<String>,
    /// Only flows with packets from this time on (RFC 3339, epoch seconds, `2h ago`).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Only flows with packets before this time.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Order of the records: by bytes or packets (both directions, most first) or by start.
    #[arg(long, value_enum, default_value_t = SortBy::Start)]
    pub sort: SortBy,
    /// One JSON array of records.
    #[arg(long, conflicts_with_all = ["csv", "packets"])]
    pub json: bool,
    /// CSV with a header line.
    #[arg(long, conflicts_with = "packets")]
    pub csv: bool,
    /// Read the records from this ClickHouse table instead of a store's files:
    /// http://HOST:8123/DB (or /DB/TABLE; docs/clickhouse.md).
    #[arg(long, value_name = "URL", conflicts_with = "rebuild")]
    pub clickhouse: Option<String>,
    /// The ClickHouse user and password: a file with USER:PASSWORD on its first line.
    #[arg(long, value_name = "FILE", requires = "clickhouse")]
    pub clickhouse_auth: Option<PathBuf>,
    /// Make the store's flow files again from its packets (read through the query layer),
    /// replacing those there are; then list as asked.
    #[arg(long)]
    pub rebuild: bool,
    /// Write the matched flows' packets (with -w) instead of listing the flows: what `query`
    /// over the same sources returns for each flow's key within its own first and last
    /// packet times, merged by time (docs/flows.md).
    #[arg(long)]
    pub packets: bool,
    /// Write the matched flows' packets to FILE (`-`: standard output); implies --packets,
    /// as tcpdump's -w writes packets.
    #[arg(short = 'w', value_name = "FILE", conflicts_with_all = ["json", "csv"])]
    pub write: Option<PathBuf>,
    /// The container --packets writes: pcap (nanoseconds) or pcapng with one interface per source.
    #[arg(long, value_enum, default_value_t = super::query::OutFormat::Pcap)]
    pub format: super::query::OutFormat,
    #[command(flatten)]
    pub sources: super::fleet::Sources,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Bytes,
    Packets,
    Start,
}

pub fn run(mut a: Args) -> anyhow::Result<u8> {
    a.packets |= a.write.is_some();
    let several = a.sources.given();
    if a.packets && a.write.is_none() {
        return Err(fail(
            exit::USAGE,
            "--packets writes the flows' packets: give -w FILE (or -w - for standard output)",
        ));
    }
    if a.rebuild && several {
        return Err(fail(
            exit::USAGE,
            "--rebuild makes one store's flow files: give it as STORE, without --store or --fleet",
        ));
    }
    let (words, store) = words_and_store(&a)?;
    let filter = wv_flows::filter::Expr::parse(&words.join(" ")).map_err(|e| fail(exit::USAGE, e.0))?;
    let (from_ns, to_ns) = super::time_range(&a.from, &a.to, ("--from", "--to"))?;
    let sort = match a.sort {
        SortBy::Start => wv_flows::find::Sort::Start,
        SortBy::Bytes => wv_flows::find::Sort::Bytes,
        SortBy::Packets => wv_flows::find::Sort::Packets,
    };
    let find = wv_flows::find::Find { filter, from_ns, to_ns, sort, limit: None };
    // The nodes: those given, or the one store (for --packets through the same merge).
    let mut nodes = if several || store.is_some() { a.sources.nodes(store)? } else { Vec::new() };
    let mut code = exit::OK;
    let recs = match (&a.clickhouse, store) {
        (Some(url), _) => {
            let mut recs = from_clickhouse(url, a.clickhouse_auth.as_deref(), &find)?;
            recs.retain(|r| find.wants(r));
            find.order(&mut recs);
            recs
        }
        (None, Some(store)) => from_store(store, a.rebuild, &find)?,
        (None, None) => {
            let (recs, c, lost) = from_nodes(&nodes, &find, &words.join(" "), a.sources.allow_partial);
            // A node named as left out of the flows is not asked for their packets (and
            // named again).
            nodes = nodes.into_iter().enumerate().filter(|(i, _)| !lost.contains(i)).map(|(_, n)| n).collect();
            code = c;
            recs
        }
    };
    if a.packets {
        if !several && store.is_none() {
            return Err(fail(
                exit::USAGE,
                "--packets reads the packets from stores or recorders: give them with --store or --fleet",
            ));
        }
        let written = write_packets(&a, &recs, &nodes)?;
        return Ok(code.max(written));
    }
    print(&a, &recs, code)
}

/// The expression's words and the one store (`None` with --clickhouse, --store or --fleet,
/// where there is no STORE: a first word taken for one is the expression's, and a path there
/// is a store given the wrong way, as `query` says).
fn words_and_store(a: &Args) -> anyhow::Result<(Vec<String>, Option<&Path>)> {
    let mut words = a.expression.clone();
    let mut store = None;
    if let Some(first) = &a.store {
        if a.clickhouse.is_none() && !a.sources.given() {
            store = Some(first.as_path());
        } else if a.clickhouse.is_none() && first.exists() {
            return Err(fail(
                exit::USAGE,
                format!("{} is a path: with --store or --fleet give every store as --store SRC", first.display()),
            ));
        } else {
            words.insert(0, first.to_string_lossy().into_owned());
        }
    }
    Ok((words, store))
}

/// The records on standard output, as a table, `--json` or `--csv`; a closed pipe is no error.
fn print(a: &Args, recs: &[FlowRecord], code: u8) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    let r = if a.json {
        let v: Vec<_> = recs.iter().map(wv_flows::find::to_json).collect();
        serde_json::to_writer_pretty(&mut out, &v).map_err(std::io::Error::other).and_then(|()| {
            use std::io::Write;
            writeln!(out)
        })
    } else if a.csv {
        write_csv(&mut out, recs)
    } else {
        write_table(&mut out, recs)
    };
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(code),
        Err(e) => Err(fail(exit::ERROR, format!("cannot write the flows: {e}"))),
        Ok(()) => Ok(code),
    }
}

/// The records `find` asks for on every node at once (a store's files, a recorder's
/// `/api/v1/flows`), each one's `node` the node's name, in `find`'s order; and the exit code
/// of the nodes that gave none (each named once, as `query --fleet` names them) and their ranks.
fn from_nodes(
    nodes: &[wv_fleet::Node],
    find: &wv_flows::find::Find,
    expr: &str,
    allow_partial: bool,
) -> (Vec<FlowRecord>, u8, Vec<usize>) {
    type Answer = Result<(Vec<FlowRecord>, Vec<String>), wv_fleet::Lost>;
    let answers: Vec<Answer> = std::thread::scope(|s| {
        let hs: Vec<_> = nodes.iter().enumerate().map(|(i, n)| s.spawn(move || node_flows(n, i, find, expr))).collect();
        hs.into_iter()
            .zip(nodes.iter().enumerate())
            .map(|(h, (i, n))| {
                h.join().unwrap_or_else(|_| {
                    Err(wv_fleet::Lost {
                        node: i,
                        name: n.name.clone(),
                        location: n.location(),
                        merged: 0,
                        what: "lost its reading thread".into(),
                        todo: "retry".into(),
                    })
                })
            })
            .collect()
    });
    let (mut recs, mut lost, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
    for (a, n) in answers.into_iter().zip(nodes) {
        match a {
            Ok((mut r, w)) => {
                r.iter_mut().for_each(|r| r.node = n.name.clone());
                recs.extend(r);
                warnings.extend(w.into_iter().map(|w| format!("node {}: {w}", n.name)));
            }
            Err(l) => lost.push(l),
        }
    }
    find.order(&mut recs);
    let code = super::fleet::say_lost(&lost, &warnings, allow_partial, nodes.len());
    (recs, code, lost.iter().map(|l| l.node).collect())
}

/// One node's records for `find` and what it said about them (flow files it could not read).
fn node_flows(
    n: &wv_fleet::Node,
    rank: usize,
    find: &wv_flows::find::Find,
    expr: &str,
) -> Result<(Vec<FlowRecord>, Vec<String>), wv_fleet::Lost> {
    let lost = |what: String, todo: &str| wv_fleet::Lost {
        node: rank,
        name: n.name.clone(),
        location: n.location(),
        merged: 0,
        what,
        todo: todo.into(),
    };
    if let wv_fleet::Source::Local(path) = &n.source {
        if !path.is_dir() {
            return Err(lost("is not a store directory".into(), "check the store path"));
        }
        let found = wv_flows::find::find(path, find);
        let w = found.unreadable.iter().map(|(f, e)| format!("{}: {e}; its records are left out", f.display()));
        return Ok((found.records, w.collect()));
    }
    let sel = wv_fleet::Selection { from_ns: find.from_ns, to_ns: find.to_ns, expr: expr.to_string(), limit: None };
    let v = wv_fleet::get_json(n, rank, &format!("/api/v1/flows?{}", wv_fleet::query_params(&sel)))?;
    let not_flows =
        |why: String| lost(format!("sent an answer that is not its flows ({why})"), "check its server's version");
    let flows = v["flows"].as_array().ok_or_else(|| not_flows("no \"flows\" array".into()))?;
    let recs = flows.iter().map(wv_flows::find::from_json).collect::<Result<Vec<_>, _>>().map_err(not_flows)?;
    let w = v["unreadable"]
        .as_array()
        .map_or(Vec::new(), |a| a.iter().filter_map(|w| w.as_str().map(str::to_string)).collect());
    // A record's own filter is checked again here, as for ClickHouse's answer.
    Ok((recs.into_iter().filter(|r| find.wants(r)).collect(), w))
}

/// Writes the packets of `recs` from `nodes` to `-w`: ONE fleet query (the OR of the
/// records' `packet_filter`s from the first record's first packet to the last one's last),
/// of whose packets those are kept that match a record's filter within that record's own
/// [first, last]: the query alone would also take the packets of another flow with the same
/// key (a port used again) outside every record's time. Over [`MAX_WORDS`] words (about 16
/// distinct keys) the expression would take libpcap's optimiser too long: the query then takes every packet of
/// the range and the check alone chooses. Returns the exit code of the nodes left out.
fn write_packets(a: &Args, recs: &[FlowRecord], nodes: &[wv_fleet::Node]) -> anyhow::Result<u8> {
    let write = a.write.as_deref().filter(|p| p.as_os_str() != "-");
    if write.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(fail(
            exit::USAGE,
            "standard output is a terminal and --packets writes binary pcap: use -w FILE or a pipe (| tcpdump -r -)",
        ));
    }
    // Each key once, with the time ranges of its records.
    let mut keys: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
    for r in recs {
        keys.entry(wv_flows::find::packet_filter(r)).or_default().push((r.first_ns, r.last_ns));
    }
    let keys: Vec<(String, Vec<(u64, u64)>)> = keys.into_iter().collect();
    // libpcap's `vlan` moves the offsets of every term after it, in any branch of an `or`: the
    // untagged keys come first, then the one tagged key, or with several just `vlan` (each
    // tagged packet is then chosen by the check alone).
    let (tagged, untagged): (Vec<&String>, Vec<&String>) =
        keys.iter().map(|(f, _)| f).partition(|f| f.starts_with("vlan"));
    let mut terms: Vec<String> = untagged.iter().map(|f| format!("({f})")).collect();
    match tagged[..] {
        [] => {}
        [one] => terms.push(format!("({one})")),
        _ => terms.push("vlan".into()),
    }
    let expr = terms.join(" or ");
    let expr = if expr.split_whitespace().count() <= MAX_WORDS {
        expr
    } else {
        info!(
            "{} flow keys: the packets of the whole time range are read and each is checked against them",
            keys.len()
        );
        String::new()
    };
    let sel = wv_fleet::Selection {
        from_ns: recs.iter().map(|r| r.first_ns).min(),
        to_ns: recs.iter().map(|r| r.last_ns.saturating_add(1)).max(),
        expr,
        limit: None,
    };
    let format = match a.format {
        super::query::OutFormat::Pcap => wv_fleet::Format::Pcap,
        super::query::OutFormat::Pcapng => wv_fleet::Format::Pcapng,
    };
    // No record, no query: an empty answer (the file header only).
    let nodes = if recs.is_empty() { &[][..] } else { nodes };
    // Each key's filter compiled once per link type, when a packet of that type comes.
    let mut compiled: std::collections::HashMap<u32, Vec<Option<Option<wv_filter::Filter>>>> = Default::default();
    let mut keep = |p: &wv_fleet::MergedPacket<'_>| {
        let filters = compiled.entry(p.linktype).or_insert_with(|| vec![None; keys.len()]);
        keys.iter().zip(filters.iter_mut()).any(|((expr, ranges), f)| {
            ranges.iter().any(|&(first, last)| (first..=last).contains(&p.ts_ns))
                // A key's filter that this link type cannot hold matches none of its packets.
                && f.get_or_insert_with(|| wv_filter::compile(expr, p.linktype, wv_wire::MAX_SNAPLEN).ok())
                    .as_ref()
                    .is_some_and(|f| f.matches(p.data, p.origlen))
        })
    };
    let Some(outcome) = super::fleet::write_merged(nodes, &sel, format, write, &mut keep)? else {
        return Ok(exit::OK);
    };
    Ok(super::fleet::say_lost(&outcome.lost, &outcome.warnings, a.sources.allow_partial, nodes.len()))
}

/// Most words of the expression `--packets` gives its query (a key's filter has about 36;
/// libpcap's optimiser grows with the cube of the program, `wv_filter::MAX_WORDS`).
const MAX_WORDS: usize = wv_filter::MAX_WORDS / 2;

/// The records of a store's flow files that `find` asks for (made again first with `--rebuild`).
fn from_store(store: &Path, rebuild_first: bool, find: &wv_flows::find::Find) -> anyhow::Result<Vec<FlowRecord>> {
    if !store.is_dir() {
        return Err(fail(exit::ERROR, format!("{} is not a store directory", store.display())));
    }
    if rebuild_first {
        let n = rebuild(store, None)?;
        info!("rebuilt {n} flow records of {}", store.display());
    }
    let found = wv_flows::find::find(store, find);
    for (f, e) in &found.unreadable {
        warn!("{}: {e}; its records are left out", f.display());
    }
    Ok(found.records)
}

/// The records a ClickHouse table holds for the expression and range (the WHERE clause is
/// theirs, `wv_flows::clickhouse::where_clause`; they are checked again here all the same).
fn from_clickhouse(url: &str, auth: Option<&Path>, find: &wv_flows::find::Find) -> anyhow::Result<Vec<FlowRecord>> {
    let auth = auth.map(wv_flows::clickhouse::read_auth).transpose().map_err(|e| fail(exit::USAGE, e))?;
    let t = wv_flows::clickhouse::Target::parse(url, auth).map_err(|e| fail(exit::USAGE, e))?;
    t.select(&find.filter, find.from_ns, find.to_ns)
        .map_err(|e| fail(exit::ERROR, format!("ClickHouse at {} did not give the flows: it {e}", t.url())))
}

fn addr(a: &wv_flows::IpAddr16) -> String {
    a.to_std().to_string()
}

fn endpoint(a: &wv_flows::IpAddr16, port: u16, proto: u8) -> String {
    match (a.version(), matches!(proto, 6 | 17 | 132)) {
        (4, true) => format!("{}:{port}", addr(a)),
        (_, true) => format!("[{}]:{port}", addr(a)),
        _ => addr(a),
    }
}

fn proto_name(p: u8) -> String {
    match p {
        6 => "tcp".into(),
        17 => "udp".into(),
        1 => "icmp".into(),
        58 => "icmp6".into(),
        132 => "sctp".into(),
        n => n.to_string(),
    }
}

const CSV_HEADER: &str = "first_ns,last_ns,protocol,client,client_port,server,server_port,vlans,icmp_type,icmp_code,\
to_server_packets,to_server_bytes,to_server_ip_bytes,to_client_packets,to_client_bytes,to_client_ip_bytes,end_reason,node,stream";

fn write_csv(out: &mut impl std::io::Write, recs: &[FlowRecord]) -> std::io::Result<()> {
    writeln!(out, "{CSV_HEADER}")?;
    for r in recs {
        let vl: Vec<String> = r.vlans.iter().map(|v| v.to_string()).collect();
        let node = r.node.replace('"', "\"\"");
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{node}\",{}",
            r.first_ns,
            r.last_ns,
            r.protocol,
            addr(&r.client),
            r.client_port,
            addr(&r.server),
            r.server_port,
            vl.join(" "),
            r.icmp_type,
            r.icmp_code,
            r.to_server.packets,
            r.to_server.frame_bytes,
            r.to_server.ip_bytes,
            r.to_client.packets,
            r.to_client.frame_bytes,
            r.to_client.ip_bytes,
            r.end.name(),
            r.stream
        )?;
    }
    Ok(())
}

fn write_table(out: &mut impl std::io::Write, recs: &[FlowRecord]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<30} {:>10} {:<5} {:<40} {:<40} {:>9} {:>9} {:>12} {:>12} {:<7}",
        "start", "duration", "proto", "client", "server", "pkts->", "pkts<-", "bytes->", "bytes<-", "end"
    )?;
    for r in recs {
        let proto = match r.protocol {
            1 | 58 => format!("{}/{}", proto_name(r.protocol), r.icmp_type),
            p => proto_name(p),
        };
        let vlan = if r.vlans.is_empty() {
            String::new()
        } else {
            format!(" vlan {}", r.vlans.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("."))
        };
        writeln!(
            out,
            "{:<30} {:>10.3} {:<5} {:<40} {:<40} {:>9} {:>9} {:>12} {:>12} {}{vlan}",
            wv_wire::time::utc_rfc3339(r.first_ns),
            (r.last_ns - r.first_ns) as f64 / 1e9,
            proto,
            endpoint(&r.client, r.client_port, r.protocol),
            endpoint(&r.server, r.server_port, r.protocol),
            r.to_server.packets,
            r.to_client.packets,
            r.to_server.frame_bytes,
            r.to_client.frame_bytes,
            r.end.name(),
        )?;
    }
    Ok(())
}

/// After `repair`: the flow files of the catalogued files that have none (the files it
/// recovered or catalogued), in a store that records flows (it has `flows/`). Their stream
/// is rebuilt over those files only: flows that began in an earlier file and were open at
/// the crash keep only their packets in these files. Returns the records written.
pub fn rebuild_missing(store: &Path) -> anyhow::Result<u64> {
    if !store.join(wv_store::layout::FLOWS).is_dir() {
        return Ok(0);
    }
    let entries = wv_store::catalog::read_checked(store).map(|r| r.entries).unwrap_or_default();
    let missing: Vec<_> =
        entries.iter().filter(|e| !store.join(wv_store::layout::flows_rel(&e.file)).exists()).collect();
    if missing.is_empty() {
        return Ok(0);
    }
    let from = missing.iter().map(|e| e.first_ns).min();
    let to = missing.iter().map(|e| e.last_ns.saturating_add(1)).max();
    let only: std::collections::HashSet<String> = missing.iter().map(|e| e.file.clone()).collect();
    rebuild(store, Some((&only, from, to)))
}

/// Which files to rebuild (catalog paths) and the time range that holds them.
type Only<'a> = (&'a std::collections::HashSet<String>, Option<u64>, Option<u64>);

/// Makes the flow files of every catalogued file of `store` (or of `only`'s) from its
/// packets, read through the query layer (`wv_query::visit`: each stream's files in
/// recording order), with the recorder's own tap and default timeouts. Returns the records
/// written.
fn rebuild(store: &Path, only: Option<Only<'_>>) -> anyhow::Result<u64> {
    use wv_store::StreamTap;
    let (from_ns, to_ns) = only.map_or((None, None), |o| (o.1, o.2));
    let query = wv_query::Query { store: store.to_path_buf(), from_ns, to_ns, expr: String::new(), limit: None };
    let prepared = wv_query::prepare(query).map_err(super::query::prepare_error)?;
    let cfg = wv_flows::tap::TapConfig {
        table: wv_flows::FlowConfig::default(),
        store: store.to_path_buf(),
        node: wv_flows::tap::host_name(),
        sinks: Vec::new(),
    };
    let shared = std::sync::Arc::new(wv_store::writer::WriterShared::default());
    let mut taps: std::collections::BTreeMap<usize, (wv_flows::tap::FlowTap, PathBuf)> = Default::default();
    let mut skipped = 0u64;
    let report = wv_query::visit(prepared, |file, pk| {
        let (tap, open) = taps
            .entry(file.stream)
            .or_insert_with(|| (wv_flows::tap::FlowTap::new(&cfg, file.stream, shared.clone(), None), PathBuf::new()));
        if open != file.path {
            // Files on other volumes than the store's have no catalog path here: left out.
            let Some(rel) = file.path.strip_prefix(store).ok().and_then(|p| p.to_str()) else {
                skipped += 1;
                return true;
            };
            if only.is_some_and(|(o, _, _)| !o.contains(rel)) {
                return true;
            }
            if !open.as_os_str().is_empty() {
                tap.close(true);
            }
            tap.open(rel, pk.linktype);
            *open = file.path.to_path_buf();
        }
        tap.add(pk.ts_ns, pk.data, pk.origlen);
        true
    })
    .map_err(|e| fail(exit::ERROR, format!("{}: {e}", store.display())))?;
    super::query::say_warnings(&report.warnings);
    for (tap, open) in taps.values_mut() {
        if !open.as_os_str().is_empty() {
            tap.close(true);
        }
        tap.stop();
    }
    for w in std::mem::take(&mut *shared.warnings.lock().unwrap_or_else(|p| p.into_inner())) {
        warn!("{w}");
    }
    if skipped > 0 {
        warn!("{skipped} packets on other volumes than the store's were left out of the rebuilt flows");
    }
    Ok(shared.flows_written.load(std::sync::atomic::Ordering::Relaxed))
}
