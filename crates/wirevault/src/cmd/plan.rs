//! `wirevault plan`: the capacity questions before deployment. For a link
//! speed and frame sizes, a mix or the sizes of a capture or store: frames
//! per second, bits of frames and of the wire, the storage rate per capture
//! format and of the index, bytes per hour and day, how long a volume lasts
//! and, with a disk-bench result, how many volumes and what buffer.
//!
//! The arithmetic lives in `wv_plan`; this module parses, validates, wires
//! and prints.

use crate::{exit, fail};
use std::path::PathBuf;
use wv_plan::bench::DiskBench;
use wv_plan::formats::INDEX_BYTES_PER_PACKET;
use wv_plan::report::{Context, FromDetails, Observed, Row};
use wv_plan::{mix, Distribution, Mix, SizeConvention, StoreFormat};

/// The paper's Table 1 sizes, without FCS.
const DEFAULT_SIZES: [u64; 8] = [60, 64, 128, 256, 512, 1024, 1280, 1514];
/// RFC 2544's sizes, with FCS (used with --size-includes-fcs).
const DEFAULT_SIZES_FCS: [u64; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// The default link.
const DEFAULT_LINK: &str = "10gbps";

/// The capture format a store's size is planned for.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PlanFormat {
    Pcap,
    PcapNs,
    Pcapng,
    Raw,
}

impl From<PlanFormat> for StoreFormat {
    fn from(f: PlanFormat) -> StoreFormat {
        match f {
            PlanFormat::Pcap => StoreFormat::Pcap,
            PlanFormat::PcapNs => StoreFormat::PcapNs,
            PlanFormat::Pcapng => StoreFormat::Pcapng,
            PlanFormat::Raw => StoreFormat::Raw,
        }
    }
}

/// Arguments of `wirevault plan`.
#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_name = "RATE", default_value = DEFAULT_LINK,
        help = format!("Link rate in {}", wv_units::RATE_FORMS))]
    pub link: String,
    /// Frame size(s): 1514 or 60,64,128,...,1514 (may be repeated). Without FCS
    /// unless --size-includes-fcs. Default (no --size, --mix, --from): the paper's
    /// Table 1 sizes 60,64,128,256,512,1024,1280,1514 (with FCS: 64,...,1518).
    #[arg(long, value_name = "N[,N...]")]
    pub size: Vec<String>,
    /// Sizes given to --size and --mix include the 4-byte FCS (64, 1518 style).
    #[arg(long)]
    pub size_includes_fcs: bool,
    /// A mix of sizes on the link: `imix` (7×60, 4×590, 1×1514 without FCS:
    /// IP packets of 40/576/1500 bytes) or SIZE:WEIGHT,... (e.g. 64:7,576:4,1518:1).
    #[arg(long, value_name = "MIX")]
    pub mix: Vec<String>,
    /// The size distribution of a capture file (pcap/pcapng) or a store: its
    /// original lengths on the wire, its captured lengths for storage.
    #[arg(long, value_name = "FILE_OR_STORE")]
    pub from: Option<PathBuf>,
    /// With --from: only packets from this time on (RFC 3339, epoch seconds, `2h ago`).
    #[arg(long, value_name = "T", requires = "from")]
    pub from_time: Option<String>,
    /// With --from: only packets before this time.
    #[arg(long, value_name = "T", requires = "from")]
    pub to_time: Option<String>,
    /// Store at most N bytes of each frame (record --snaplen).
    #[arg(long, value_name = "N")]
    pub snaplen: Option<u32>,
    /// The capture format the store is planned in (bytes per hour and day,
    /// disk, volumes, buffer); every format's rate is shown either way.
    #[arg(long, value_enum, default_value = "pcap")]
    pub format: PlanFormat,
    /// Plan without wirevault's index (record --no-index).
    #[arg(long)]
    pub no_index: bool,
    #[arg(long, value_name = "SIZE", help = format!("A volume's size, to say how long it lasts; {}", wv_units::SIZE_FORMS))]
    pub disk: Option<String>,
    /// A `wirevault disk-bench --json` result: how many such volumes are
    /// needed and the buffer that absorbs their measured dips.
    #[arg(long, value_name = "FILE")]
    pub bench: Option<PathBuf>,
    /// Print a JSON array, one object per size or mix, instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// What `plan` computes, after validation.
struct Plan {
    link_bps: f64,
    conv: SizeConvention,
    /// (mix, size as given when it is one size, --from details, index bytes per packet)
    rows: Vec<(Mix, Option<u64>, Option<FromDetails>, f64)>,
    format: StoreFormat,
    index: bool,
    disk: Option<u64>,
    bench: Option<(PathBuf, DiskBench)>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let plan = validate(&args)?;
    let cx = Context {
        link_bps: plan.link_bps,
        conv: plan.conv,
        format: plan.format,
        index: plan.index,
        disk: plan.disk,
        bench: plan.bench.as_ref().map(|(path, b)| (path.as_path(), b)),
    };
    let rows: Vec<Row> =
        plan.rows.iter().map(|(m, size, from, idx)| Row::new(&cx, m, *size, from.clone(), *idx)).collect();
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&rows).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        s.push('\n');
        s
    } else {
        table(&plan, &rows)
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(exit::OK),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        Err(e) => Err(fail(exit::ERROR, format!("cannot write the plan: {e}"))),
    }
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

fn validate(args: &Args) -> anyhow::Result<Plan> {
    let link_bps = wv_units::parse_bit_rate(&args.link)
        .map_err(|e| usage(wv_units::rate_error("--link", &args.link, e, false)))?;
    let conv = if args.size_includes_fcs { SizeConvention::WithFcs } else { SizeConvention::WithoutFcs };
    let snaplen = match args.snaplen {
        Some(0) => return Err(usage("--snaplen must be at least 1 byte")),
        s => s.map(u64::from),
    };
    let disk = match &args.disk {
        None => None,
        Some(s) => Some(super::size_arg("--disk", s, false)?),
    };
    let bench = match &args.bench {
        None => None,
        Some(p) => Some((
            p.clone(),
            DiskBench::read(p).map_err(|e| match e {
                // A file that cannot be read is the host's matter; what it says, the command line's.
                wv_plan::bench::BenchError::Io { .. } => fail(exit::ERROR, e.to_string()),
                e => usage(e.to_string()),
            })?,
        )),
    };
    let mut rows = Vec::new();
    for s in &args.size {
        for frame in mix::parse_sizes(s, conv).map_err(usage)? {
            let given = conv.size_of(frame);
            rows.push((
                Mix::single(frame, given.to_string()).with_snaplen(snaplen),
                Some(given),
                None,
                INDEX_BYTES_PER_PACKET,
            ));
        }
    }
    for m in &args.mix {
        rows.push((Mix::parse(m, conv).map_err(usage)?.with_snaplen(snaplen), None, None, INDEX_BYTES_PER_PACKET));
    }
    if let Some(path) = &args.from {
        rows.push(from_row(args, path, snaplen)?);
    }
    if rows.is_empty() {
        let sizes: &[u64] = if args.size_includes_fcs { &DEFAULT_SIZES_FCS } else { &DEFAULT_SIZES };
        for &given in sizes {
            let frame = conv.frame_len(given).expect("default sizes are valid");
            rows.push((
                Mix::single(frame, given.to_string()).with_snaplen(snaplen),
                Some(given),
                None,
                INDEX_BYTES_PER_PACKET,
            ));
        }
    }
    Ok(Plan { link_bps, conv, rows, format: args.format.into(), index: !args.no_index, disk, bench })
}

/// The row of `--from`: the distribution read through the query layer.
fn from_row(
    args: &Args,
    path: &std::path::Path,
    snaplen: Option<u64>,
) -> anyhow::Result<(Mix, Option<u64>, Option<FromDetails>, f64)> {
    let (from_ns, to_ns) = super::time_range(&args.from_time, &args.to_time, ("--from-time", "--to-time"))?;
    let query = wv_query::Query { store: path.to_path_buf(), from_ns, to_ns, expr: String::new(), limit: None };
    let (dist, report) = Distribution::read(query).map_err(|e| match e {
        wv_query::QueryError::Missing { .. } => {
            fail(exit::ERROR, format!("{} does not exist; --from takes a capture file or a store", path.display()))
        }
        other => fail(exit::ERROR, other.to_string()),
    })?;
    super::query::say_warnings(&report.warnings);
    if dist.packets == 0 {
        let range = if from_ns.is_some() || to_ns.is_some() { " in the time range given" } else { "" };
        return Err(usage(format!("{} holds no packets{range}: nothing to plan from", path.display())));
    }
    if !dist.other_linktypes.is_empty() {
        note!(
            "{}: link type(s) {:?} are not Ethernet; their lengths were taken as Ethernet frames",
            path.display(),
            dist.other_linktypes
        );
    }
    let measured = dist.index_bytes_per_packet();
    let secs = dist.last_ns.saturating_sub(dist.first_ns) as f64 / 1e9;
    let orig: u64 = dist.counts.iter().map(|(&(o, _), &n)| o * n).sum();
    let cap: u64 = dist.counts.iter().map(|(&(_, c), &n)| c * n).sum();
    let observed = (secs > 0.0).then(|| Observed {
        pps: dist.packets as f64 / secs,
        frame_bps: orig as f64 * 8.0 / secs,
        captured_bps: cap as f64 * 8.0 / secs,
    });
    let details = FromDetails {
        path: path.display().to_string(),
        packets: dist.packets,
        first_ns: dist.first_ns,
        last_ns: dist.last_ns,
        distinct_lengths: dist.by_origlen().len(),
        index_bytes_per_packet_measured: measured,
        observed,
    };
    let label = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok((dist.to_mix(label).with_snaplen(snaplen), None, Some(details), measured.unwrap_or(INDEX_BYTES_PER_PACKET)))
}

/// Bits/s as Gb/s with two decimals.
fn gbps(bps: f64) -> String {
    format!("{:.3}", bps / 1e9)
}

/// Bytes in binary units (the units --disk and record --buffer take): the one formatter.
fn bytes(b: f64) -> String {
    wv_units::format_bytes(b.round() as u64)
}

/// A duration in the largest unit that keeps it readable.
fn duration(s: f64) -> String {
    if !s.is_finite() {
        "forever".into()
    } else if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 2.0 * 86400.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} days", s / 86400.0)
    }
}

/// Thousands separators for a whole number.
fn grouped(x: f64) -> String {
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn table(plan: &Plan, rows: &[Row]) -> String {
    let mut out = columns(plan, rows);
    out.push_str(&sources(rows));
    if let Some((path, b)) = &plan.bench {
        out.push_str(&bench_line(path, b));
    }
    out
}

/// The table itself: a header line, the columns' rule, a row per frame size.
fn columns(plan: &Plan, rows: &[Row]) -> String {
    let mut head = vec![
        "size",
        "frames/s",
        "frames Gb/s",
        "pcap Gb/s",
        "pcapng Gb/s",
        "RAW Gb/s",
        "index Gb/s",
        "store/hour",
        "store/day",
    ];
    if plan.disk.is_some() {
        head.push("disk lasts");
    }
    if plan.bench.is_some() {
        head.extend(["volumes (mean/worst 10 s)", "buffer", "record --buffer"]);
    }
    let mut cells: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for v in rows {
        let st = &v.rates.storage_bps;
        let mut c = vec![
            v.label.clone(),
            grouped(v.rates.pps),
            gbps(v.rates.frame_bps),
            gbps(st.pcap),
            gbps(st.pcapng),
            gbps(st.raw),
            gbps(st.wirevault_index),
            bytes(v.bytes_per_hour),
            bytes(v.bytes_per_day),
        ];
        if let Some(lasts) = v.disk_lasts_s {
            c.push(duration(lasts));
        }
        if let Some(b) = &v.bench {
            let worst = match b.volumes_at_worst_10s {
                Some(n) => n.to_string(),
                None if b.worst_10s_bytes_per_s.is_none() => "?".to_string(),
                None => "none suffices".to_string(),
            };
            c.push(format!("{}/{}", b.volumes_at_throughput, worst));
            c.push(match (b.buffer_bytes, b.sustained) {
                (Some(x), Some(true)) => bytes(x),
                (_, Some(false)) => "never drains".into(),
                _ => "no series".into(),
            });
            c.push(b.record_buffer_bytes.map_or("-".into(), |x| format!("{}M", x >> 20)));
        }
        cells.push(c);
    }
    let widths: Vec<usize> = (0..cells[0].len()).map(|i| cells.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    let sizes = if plan.conv == SizeConvention::WithFcs {
        "sizes include the 4-byte FCS (1518 style), the FCS counted once: on the wire a frame costs its size + 8 preamble/SFD + 12 gap, and is stored without the FCS; frames under 64 B are padded"
    } else {
        "sizes are frames without FCS (1514 style, as pcap stores them): on the wire a frame costs its size + 4 FCS + 8 preamble/SFD + 12 gap; frames under 60 B are padded"
    };
    out.push_str(&format!("link {} Gb/s, saturated; {sizes}\n", gbps(plan.link_bps)));
    out.push_str(&format!(
        "store = {}{} (record headers: pcap/pcap-ns 16 B, pcapng EPB 32 B + data padded to 4, RAW 12 B)\n\n",
        plan.format.name(),
        if plan.index { " + index" } else { "" }
    ));
    for (ri, r) in cells.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| if i == 0 { format!("{c:<w$}", w = widths[i]) } else { format!("{c:>w$}", w = widths[i]) })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if ri == 0 {
            out.push_str(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
            out.push('\n');
        }
    }
    out
}

/// A line per `--from` capture the rows were measured on.
fn sources(rows: &[Row]) -> String {
    let mut out = String::new();
    for v in rows {
        if let Some(fr) = &v.from {
            out.push_str(&format!(
                "\n{}: {} packets, {} lengths; index {}",
                fr.path,
                fr.packets,
                fr.distinct_lengths,
                match fr.index_bytes_per_packet_measured {
                    Some(x) => format!("{x:.2} B/packet measured on its indexes"),
                    None => format!("{INDEX_BYTES_PER_PACKET} B/packet (no index found; the worst-case constant)"),
                }
            ));
            if let Some(o) = &fr.observed {
                out.push_str(&format!(
                    "; as recorded: {} frames/s, {} Gb/s of frames",
                    grouped(o.pps),
                    gbps(o.frame_bps)
                ));
            }
            out.push('\n');
        }
    }
    out
}

/// What the disk-bench result of `--bench` measured, and how the volumes and buffer follow.
fn bench_line(path: &std::path::Path, b: &DiskBench) -> String {
    format!(
            "\n{} ({}, {}): {:.0} MB/s written over the run, files' mean {:.0} MB/s (99% CI {:.0}-{:.0}), worst 10 s {}; \
             volumes: ceil(store rate / the run's rate) and / worst 10 s; \
             buffer: the largest backlog of that many volumes following its per-second series together, record --buffer adds {:.0}%\n",
            path.display(),
            b.dir,
            b.mode,
            b.throughput() / 1e6,
            b.mean_bytes_per_s / 1e6,
            b.ci99_bytes_per_s[0] / 1e6,
            b.ci99_bytes_per_s[1] / 1e6,
            b.worst_10s_bytes_per_s.map_or("unknown (a run shorter than 10 s: ? below)".to_string(), |w| format!("{:.0} MB/s", w / 1e6)),
            wv_plan::bench::BUFFER_MARGIN * 100.0
    )
}
