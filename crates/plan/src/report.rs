//! A plan's rows as `wirevault plan --json` writes them (an array of
//! [`Row`], each versioned) and as its table and `disk-bench --rate FILE`
//! read them back.

use crate::bench::{advised_buffer, buffer_for, DiskBench};
use crate::capacity::{Rates, Storage};
use crate::ethernet::SizeConvention;
use crate::formats::StoreFormat;
use crate::mix::Mix;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The version of [`Row`]: raised when a field changes meaning or goes
/// away, not when one is added.
pub const VERSION: u64 = 1;

/// One size, mix or `--from` distribution on the link, and what storing it costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// [`VERSION`].
    pub version: u64,
    pub label: String,
    /// The size as given, when the row is one size.
    pub size: Option<u64>,
    pub size_includes_fcs: bool,
    /// The mix as given, when the row is a mix.
    pub mix: Option<String>,
    pub classes: Vec<ClassRow>,
    /// The rates of [`Rates`], bits per second and bytes per frame.
    pub link_bps: f64,
    pub frame_bytes: f64,
    pub captured_bytes: f64,
    pub wire_bytes: f64,
    pub pps: f64,
    pub frame_bps: f64,
    pub wire_bps: f64,
    pub storage_bps: Storage,
    pub index_bytes_per_packet: f64,
    /// The capture format planned (`StoreFormat::name`) and whether the index is kept.
    pub store_format: String,
    pub store_index: bool,
    pub store_bytes_per_s: f64,
    pub bytes_per_hour: f64,
    pub bytes_per_day: f64,
    /// The capture or store the row's distribution was read from (`--from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<FromDetails>,
    /// `--disk`: the volume's size and how long it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_lasts_s: Option<f64>,
    /// `--bench`: the volumes and buffer a disk-bench result asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<BenchRow>,
}

/// One frame size of a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassRow {
    pub frame: u64,
    pub captured: u64,
    pub weight: f64,
}

/// Where a `--from` row's distribution comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FromDetails {
    pub path: String,
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub distinct_lengths: usize,
    /// `None` when no index was found beside the captures.
    pub index_bytes_per_packet_measured: Option<f64>,
    /// The rates as recorded (`None` for a capture of one instant).
    pub observed: Option<Observed>,
}

/// The rates a capture was recorded at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub pps: f64,
    pub frame_bps: f64,
    pub captured_bps: f64,
}

/// What a disk-bench result says of a row's store rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    /// The disk-bench file.
    pub file: String,
    pub dir: String,
    pub mode: String,
    pub throughput_bytes_per_s: f64,
    pub mean_bytes_per_s: f64,
    pub ci99_bytes_per_s: [f64; 2],
    pub worst_10s_bytes_per_s: Option<f64>,
    pub volumes_at_throughput: u64,
    /// `None` when no number of volumes suffices or the run was shorter than 10 s.
    pub volumes_at_worst_10s: Option<u64>,
    /// `None` when the result has no per-second series.
    pub buffer_bytes: Option<f64>,
    pub sustained: Option<bool>,
    pub record_buffer_bytes: Option<u64>,
}

/// What every row of a plan shares.
pub struct Context<'a> {
    pub link_bps: f64,
    pub conv: SizeConvention,
    pub format: StoreFormat,
    pub index: bool,
    /// `--disk`, bytes.
    pub disk: Option<u64>,
    /// `--bench`: the file and what it holds.
    pub bench: Option<(&'a Path, &'a DiskBench)>,
}

impl Row {
    /// The row of `mix` (of one `size` as given, or read `from` a capture)
    /// saturating the link, with an index of `index_bpp` bytes per packet.
    pub fn new(cx: &Context<'_>, mix: &Mix, size: Option<u64>, from: Option<FromDetails>, index_bpp: f64) -> Row {
        let r = Rates::saturated(mix, cx.link_bps, index_bpp);
        let store_bps = r.store_bytes_per_s(cx.format, cx.index);
        let bench = cx.bench.map(|(path, b)| {
            let vols = b.volumes(store_bps);
            // The buffer in front of `at_throughput` such volumes, whose dips
            // come at the same time (the worst case): n × the buffer at rate/n each.
            let n = vols.at_throughput as f64;
            let buf = (!b.per_second_bytes.is_empty()).then(|| buffer_for(store_bps / n, &b.per_second_bytes));
            BenchRow {
                file: path.display().to_string(),
                dir: b.dir.clone(),
                mode: b.mode.clone(),
                throughput_bytes_per_s: b.throughput(),
                mean_bytes_per_s: b.mean_bytes_per_s,
                ci99_bytes_per_s: b.ci99_bytes_per_s,
                worst_10s_bytes_per_s: b.worst_10s_bytes_per_s,
                volumes_at_throughput: vols.at_throughput,
                volumes_at_worst_10s: vols.at_worst_10s,
                buffer_bytes: buf.map(|x| x.bytes * n),
                sustained: buf.map(|x| x.sustained),
                record_buffer_bytes: buf.filter(|x| x.sustained).map(|x| advised_buffer(x.bytes * n)),
            }
        });
        Row {
            version: VERSION,
            label: mix.label.clone(),
            size,
            size_includes_fcs: cx.conv == SizeConvention::WithFcs,
            mix: (size.is_none() && from.is_none()).then(|| mix.label.clone()),
            classes: mix
                .classes
                .iter()
                .map(|c| ClassRow { frame: c.frame, captured: c.captured, weight: c.weight })
                .collect(),
            link_bps: r.link_bps,
            frame_bytes: r.frame_bytes,
            captured_bytes: r.captured_bytes,
            wire_bytes: r.wire_bytes,
            pps: r.pps,
            frame_bps: r.frame_bps,
            wire_bps: r.wire_bps,
            storage_bps: r.storage_bps,
            index_bytes_per_packet: index_bpp,
            store_format: cx.format.name().to_string(),
            store_index: cx.index,
            store_bytes_per_s: store_bps,
            bytes_per_hour: store_bps * 3600.0,
            bytes_per_day: store_bps * 86400.0,
            from,
            disk_bytes: cx.disk,
            disk_lasts_s: cx.disk.map(|d| d as f64 / store_bps),
            bench,
        }
    }
}
