//! `wirevault timestamps [STORE|FILE...] [-i IFACE...]`: how good the stored
//! stamps are (resolution, steps back, shared stamps, gaps; per stream of a
//! store, per file otherwise), the kernel's clock source and what a NIC
//! offers for stamping.
//!
//! The statistics are `wv_query::stamps` over the query layer; the clock
//! source and the NIC's capabilities are `wv_sys::tsinfo`.

use crate::{exit, fail};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Arguments of `wirevault timestamps`.
#[derive(clap::Args)]
pub struct Args {
    /// Stores (statistics per stream) or capture files (per file).
    #[arg(value_name = "STORE|FILE")]
    pub paths: Vec<PathBuf>,
    /// An interface whose timestamping capabilities to show (ETHTOOL_GET_TS_INFO, as `ethtool -T`).
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interfaces: Vec<String>,
    /// Only packets from this time on (RFC 3339, epoch seconds, `2h ago`).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// Only packets before this time.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Recorders (and stores) by --store or --fleet: a store path as STORE, a recorder per
    /// node over the packets its API answers, which come in time order (its streams merged,
    /// so no step back shows).
    #[command(flatten)]
    pub sources: super::fleet::Sources,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let (from_ns, to_ns) = super::time_range(&args.from, &args.to, ("--from", "--to"))?;
    // Check everything before reading anything.
    let mut ifaces = Vec::new();
    for name in &args.interfaces {
        match wv_sys::tsinfo::ts_info(name) {
            Ok(i) => ifaces.push((name.clone(), i)),
            Err(e @ wv_sys::error::Error::NoSuchInterface(_)) => return Err(fail(exit::ERROR, e.to_string())),
            Err(e) => return Err(fail(exit::ERROR, format!("{name}: {e}"))),
        }
    }
    let nodes = if args.sources.given() { args.sources.nodes(None)? } else { Vec::new() };
    // A node that is a store on this machine is read as STORE is: per stream.
    let mut paths = args.paths.clone();
    let mut remote = Vec::new();
    let all = nodes.len();
    for n in nodes {
        match &n.source {
            wv_fleet::Source::Local(p) => paths.push(p.clone()),
            wv_fleet::Source::Remote(_) => remote.push(n),
        }
    }
    let mut prepared = Vec::new();
    for p in &paths {
        let query = wv_query::Query { store: p.clone(), from_ns, to_ns, expr: String::new(), limit: None };
        let is_store = p.is_dir();
        prepared.push((p.clone(), is_store, wv_query::prepare(query).map_err(super::query::prepare_error)?));
    }
    let clock = wv_sys::tsinfo::clock_source().ok();
    let (mut inputs, damaged) = local_stamps(prepared)?;
    let (nodes, partial) = remote_stamps(&remote, all, &args, (from_ns, to_ns))?;
    inputs.extend(nodes);
    let out = json!({
        "clock_source": clock.as_ref().map(|c| json!({"current": c.current, "available": c.available})),
        "interfaces": ifaces.iter().map(|(n, i)| json!({
            "name": n,
            "capabilities": i.capabilities(),
            "hardware_receive": i.hardware_receive(),
            "phc_index": i.phc_index,
            "rx_filters": i.rx_filter_names(),
            "tx_types": i.tx_types,
        })).collect::<Vec<_>>(),
        "inputs": inputs,
    });
    print(&out, args.json)?;
    Ok(if damaged { exit::ERROR } else { partial })
}

/// The statistics of each store (per stream) or capture file read here, as report inputs;
/// and whether a file was damaged.
fn local_stamps(prepared: Vec<(PathBuf, bool, wv_query::Prepared)>) -> anyhow::Result<(Vec<Value>, bool)> {
    let mut inputs = Vec::new();
    let mut damaged = false;
    for (path, is_store, p) in prepared {
        let (streams, report) =
            wv_query::stamps::per_stream(p).map_err(|e| fail(exit::ERROR, format!("{}: {e}", path.display())))?;
        super::query::say_warnings(&report.warnings);
        damaged |= report.damaged + report.on_unusable_volume > 0;
        let sources = if is_store { stamp_sources(&path) } else { Default::default() };
        inputs.push(json!({
            "path": path.display().to_string(),
            "kind": if is_store { "store" } else { "file" },
            "streams": streams.iter().map(|(id, s)| {
                let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                if let Some(o) = v.as_object_mut() {
                    o.insert("stream".into(), json!(id));
                    if is_store {
                        o.insert("sources".into(), json!(sources.get(id).cloned().unwrap_or_default()));
                    }
                }
                v
            }).collect::<Vec<_>>(),
            "damaged_files": report.damaged,
        }));
    }
    Ok((inputs, damaged))
}

/// The report on standard output, as JSON or text; a closed pipe is no error.
fn print(out: &Value, json: bool) -> anyhow::Result<()> {
    let text = if json {
        let mut s = serde_json::to_string_pretty(out).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        s.push('\n');
        s
    } else {
        text(out)
    };
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(fail(exit::ERROR, format!("cannot write the report: {e}"))),
    }
    Ok(())
}

/// The statistics of each recorder in `nodes` over the packets its API answers (one merge
/// over them all, each packet counted for its node), as report inputs; and the exit code of
/// the nodes left out (each named) of `all` nodes.
fn remote_stamps(
    nodes: &[wv_fleet::Node],
    all: usize,
    args: &Args,
    (from_ns, to_ns): (Option<u64>, Option<u64>),
) -> anyhow::Result<(Vec<Value>, u8)> {
    if nodes.is_empty() {
        return Ok((Vec::new(), exit::OK));
    }
    let mut stats = vec![wv_query::stamps::StampStats::default(); nodes.len()];
    let sel = wv_fleet::Selection { from_ns, to_ns, expr: String::new(), limit: None };
    let mut add = |p: wv_fleet::MergedPacket<'_>| {
        stats[p.node].add(p.ts_ns);
        Ok(())
    };
    let outcome = wv_fleet::each(nodes, &sel, &mut add).map_err(|e| match e {
        wv_fleet::MergeError::Usage(m) => fail(exit::USAGE, m),
        e => fail(exit::ERROR, e.to_string()),
    })?;
    let code = super::fleet::say_lost(&outcome.lost, &outcome.warnings, args.sources.allow_partial, all);
    let inputs = nodes
        .iter()
        .zip(stats)
        .enumerate()
        .filter(|(i, _)| !outcome.lost.iter().any(|l| l.node == *i))
        .map(|(_, (n, mut st))| {
            st.finish();
            let mut v = serde_json::to_value(&st).unwrap_or(Value::Null);
            let streams = if st.packets == 0 { Vec::new() } else { vec![v.take()] };
            json!({ "path": n.location(), "name": n.name, "kind": "node", "streams": streams, "damaged_files": 0 })
        })
        .collect();
    Ok((inputs, code))
}

/// Per stream of a store, how many of its cataloged files have each
/// timestamp source (the catalog's `timestamps`; `unknown` for lines written
/// before it existed, by `repair` or by `index`).
fn stamp_sources(
    store: &std::path::Path,
) -> std::collections::HashMap<usize, std::collections::BTreeMap<&'static str, u64>> {
    let mut by_stream: std::collections::HashMap<usize, std::collections::BTreeMap<&'static str, u64>> =
        Default::default();
    // Damaged catalogs were already reported by the query layer above.
    for e in wv_store::catalog::read_checked(store).map(|r| r.entries).unwrap_or_default() {
        let name = e.timestamps.map_or("unknown", wv_store::catalog::Stamps::name);
        *by_stream.entry(e.stream).or_default().entry(name).or_default() += 1;
    }
    by_stream
}

/// A nanosecond amount in a readable unit.
fn ns(v: &Value) -> String {
    match v.as_u64() {
        None => "-".into(),
        Some(x) if x >= 1_000_000_000 => format!("{:.3} s", x as f64 / 1e9),
        Some(x) if x >= 1_000_000 => format!("{:.3} ms", x as f64 / 1e6),
        Some(x) if x >= 1_000 => format!("{:.3} us", x as f64 / 1e3),
        Some(x) => format!("{x} ns"),
    }
}

/// The resolution of a stream: the power of ten its stamps have, or, for
/// stamps a file declares in powers of two, that declaration.
fn resolution(st: &Value) -> String {
    let declared = st["declared_resolution"]
        .as_array()
        .map_or(String::new(), |a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "));
    match st["resolution_ns"].as_u64() {
        Some(_) => ns(&st["resolution_ns"]),
        None if !declared.is_empty() => declared,
        None => "-".into(),
    }
}

/// `frames 2, 3 of FILE; frame 7 of OTHER` (and how many more than listed).
fn frames(at: &Value, total: u64) -> String {
    let mut by_file: Vec<(String, Vec<String>)> = Vec::new();
    let list = at.as_array().cloned().unwrap_or_default();
    for a in &list {
        let file = a["file"].as_str().unwrap_or("").to_string();
        let frame = a["frame"].to_string();
        match by_file.last_mut() {
            Some((f, v)) if *f == file => v.push(frame),
            _ => by_file.push((file, vec![frame])),
        }
    }
    let mut s = by_file
        .iter()
        .map(|(f, v)| format!("frame{} {} of {f}", if v.len() == 1 { "" } else { "s" }, v.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    if total > list.len() as u64 {
        s.push_str(&format!(" (and {} more)", total - list.len() as u64));
    }
    s
}

fn text(out: &Value) -> String {
    let mut s = String::new();
    match out["clock_source"].as_object() {
        Some(c) => s.push_str(&format!(
            "clock source: {} (available: {})\n",
            c["current"].as_str().unwrap_or("?"),
            c["available"].as_array().map_or(String::new(), |a| a
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "))
        )),
        None => s.push_str("clock source: unknown (/sys/devices/system/clocksource not readable)\n"),
    }
    for i in out["interfaces"].as_array().into_iter().flatten() {
        let list = |k: &str| {
            i[k].as_array().map_or(String::new(), |a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
        };
        s.push_str(&format!(
            "{}: {} stamping; capabilities: {}; PTP clock: {}; hardware receive filters: {}\n",
            i["name"].as_str().unwrap_or(""),
            if i["hardware_receive"].as_bool() == Some(true) { "hardware" } else { "software (kernel)" },
            list("capabilities"),
            i["phc_index"].as_u64().map_or("none".into(), |n| format!("/dev/ptp{n}")),
            if list("rx_filters").is_empty() { "none".into() } else { list("rx_filters") },
        ));
    }
    for inp in out["inputs"].as_array().into_iter().flatten() {
        let streams = inp["streams"].as_array().cloned().unwrap_or_default();
        if streams.is_empty() {
            s.push_str(&format!("{}: no packets\n", inp["path"].as_str().unwrap_or("")));
        }
        for st in streams {
            let who = if inp["kind"] == "store" {
                format!("{} stream {}", inp["path"].as_str().unwrap_or(""), st["stream"])
            } else if inp["kind"] == "node" {
                format!("node {} ({})", inp["name"].as_str().unwrap_or(""), inp["path"].as_str().unwrap_or(""))
            } else {
                inp["path"].as_str().unwrap_or("").to_string()
            };
            let from = st["sources"].as_object().map(|o| {
                let each: Vec<String> = o
                    .iter()
                    .map(|(k, n)| format!("{k} ({n} file{})", if n.as_u64() == Some(1) { "" } else { "s" }))
                    .collect();
                format!("; stamped by: {}", each.join(", "))
            });
            s.push_str(&format!(
                "{who}: {} packets{}; resolution {}; smallest gap > 0 {}; {} backwards (largest step back {}); {} share the previous stamp (longest run {}); gap min {} median {}{} max {}\n",
                st["packets"],
                from.unwrap_or_default(),
                resolution(&st),
                ns(&st["min_nonzero_gap_ns"]),
                st["backwards"],
                ns(&st["max_step_back_ns"]),
                st["same_as_previous"],
                st["longest_same_run"],
                ns(&st["min_gap_ns"]),
                ns(&st["median_gap_ns"]),
                if st["median_exact"] == false { " (sampled)" } else { "" },
                ns(&st["max_gap_ns"]),
            ));
            if let Some(n) = st["fraction_out_of_range"].as_u64().filter(|n| *n > 0) {
                s.push_str(&format!("{who}: {n} record(s) with a sub-second field out of range (µs ≥ 10^6 or ns ≥ 10^9; carried into the seconds, where tshark says \"Fractional second ... is invalid\"): {}\n", frames(&st["fraction_out_of_range_at"], n)));
            }
        }
    }
    s
}
