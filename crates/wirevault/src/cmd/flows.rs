//! `wirevault flows STORE [--from --to] [EXPR]`: the flow records of a store (its
//! `flows/*.parquet`, docs/flows.md), chosen by time and by the part of the tcpdump language a
//! flow key answers (`wv_flows::filter`), as a table, JSON or CSV. `--rebuild` makes the
//! flow files of a store's packets again, reading them through the query layer.

use crate::{exit, fail};
use std::path::{Path, PathBuf};
use wv_flows::record::FlowRecord;

/// Arguments of `wirevault flows`.
#[derive(clap::Args)]
pub struct Args {
    /// The store (not with --clickhouse: its words are all the expression).
    #[arg(value_name = "STORE", required_unless_present = "clickhouse")]
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
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV with a header line.
    #[arg(long)]
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
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Bytes,
    Packets,
    Start,
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    // With --clickhouse there is no store: a first word taken for one is the expression's.
    let words: Vec<String> = match &a.clickhouse {
        Some(_) => a.store.iter().map(|s| s.to_string_lossy().into_owned()).chain(a.expression.clone()).collect(),
        None => a.expression.clone(),
    };
    let filter = wv_flows::filter::Expr::parse(&words.join(" ")).map_err(|e| fail(exit::USAGE, e.0))?;
    let (from_ns, to_ns) = super::time_range(&a.from, &a.to, ("--from", "--to"))?;
    let sort = match a.sort {
        SortBy::Start => wv_flows::find::Sort::Start,
        SortBy::Bytes => wv_flows::find::Sort::Bytes,
        SortBy::Packets => wv_flows::find::Sort::Packets,
    };
    let find = wv_flows::find::Find { filter, from_ns, to_ns, sort, limit: None };
    let recs = match (&a.clickhouse, &a.store) {
        (Some(url), _) => {
            let mut recs = from_clickhouse(url, a.clickhouse_auth.as_deref(), &find)?;
            recs.retain(|r| find.wants(r));
            find.order(&mut recs);
            recs
        }
        (None, Some(store)) => from_store(store, a.rebuild, &find)?,
        (None, None) => return Err(fail(exit::USAGE, "give a STORE or --clickhouse URL")),
    };
    let mut out = std::io::stdout().lock();
    let r = if a.json {
        let v: Vec<_> = recs.iter().map(wv_flows::find::to_json).collect();
        serde_json::to_writer_pretty(&mut out, &v).map_err(std::io::Error::other).and_then(|()| {
            use std::io::Write;
            writeln!(out)
        })
    } else if a.csv {
        write_csv(&mut out, &recs)
    } else {
        write_table(&mut out, &recs)
    };
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        Err(e) => Err(fail(exit::ERROR, format!("cannot write the flows: {e}"))),
        Ok(()) => Ok(exit::OK),
    }
}

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
            .or_insert_with(|| (wv_flows::tap::FlowTap::new(&cfg, file.stream, shared.clone()), PathBuf::new()));
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
