//! Charts as SVG files (plotters): throughput over time, the frame size
//! histogram, and the jitter of each RTP stream and plain UDP stream.

use crate::Report;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot draw {}: {message}", path.display())]
pub struct PlotError {
    pub path: PathBuf,
    pub message: String,
}

fn err(path: &Path) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError { path: path.to_path_buf(), message }
}

/// Writes `throughput.svg`, `sizes.svg` and (with RTP streams, or UDP streams
/// long enough for a jitter) `jitter.svg` into `dir`; returns the files written.
pub fn write_all(r: &Report, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut out = Vec::new();
    let p = dir.join("throughput.svg");
    wv_chart::font().map_err(err(&p))?;
    throughput(r, &p).map_err(err(&p))?;
    out.push(p);
    let p = dir.join("sizes.svg");
    sizes(r, &p).map_err(err(&p))?;
    out.push(p);
    let bars = jitter_bars(r);
    if !bars.is_empty() {
        let p = dir.join("jitter.svg");
        jitter(&bars, &p).map_err(err(&p))?;
        out.push(p);
    }
    Ok(out)
}

/// Most points of the throughput line: about two per pixel of the chart.
const MAX_POINTS: usize = 2000;

/// The throughput line's points, (seconds since the first frame, mean
/// Mbit/s, peak Mbit/s): one per interval, or one per run of `k` intervals
/// when there are more than [`MAX_POINTS`] (the mean over the run's time
/// and its highest interval, so that a burst still shows).
fn throughput_points(t: &crate::qos::io::IoReport) -> (Vec<(f64, f64, f64)>, usize) {
    let k = t.intervals.len().div_ceil(MAX_POINTS).max(1);
    let step = t.step_ns as f64 / 1e9;
    let points = t
        .intervals
        .chunks(k)
        .enumerate()
        .map(|(j, run)| {
            let bytes: u64 = run.iter().map(|i| i.bytes).sum();
            let peak = run.iter().map(|i| i.bits_per_second).fold(0.0, f64::max);
            ((j * k) as f64 * step, bytes as f64 * 8.0 / (run.len() as f64 * step) / 1e6, peak / 1e6)
        })
        .collect();
    (points, k)
}

fn throughput(r: &Report, path: &Path) -> Result<(), String> {
    let t = &r.throughput;
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let xmax = t.intervals.len().max(1) as f64 * t.step_ns as f64 / 1e9;
    let ymax = t.peak_bits_per_second.max(1.0) / 1e6 * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput", ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(|e| e.to_string())?;
    let (points, k) = throughput_points(t);
    // Steps: each point's value holds over its run of intervals (a line
    // through one point per interval drew nothing for a one-interval capture).
    let width = k as f64 * t.step_ns as f64 / 1e9;
    let steps = |value: fn(&(f64, f64, f64)) -> f64| {
        points.iter().flat_map(move |p| [(p.0, value(p)), ((p.0 + width).min(xmax), value(p))])
    };
    // Runs of intervals merged into one point: the run's length and one interval's.
    let merged = (k > 1).then(|| {
        let text = crate::report::duration_text;
        (text(t.step_ns.saturating_mul(k as u64)), text(t.step_ns))
    });
    let x_desc = match &merged {
        Some((per, _)) => format!("time since first frame (s); mean per {per}"),
        None => "time since first frame (s)".to_string(),
    };
    chart.configure_mesh().x_desc(x_desc).y_desc("Mbit/s").draw().map_err(|e| e.to_string())?;
    if let Some((_, each)) = &merged {
        chart
            .draw_series(LineSeries::new(steps(|p| p.2), RED.mix(0.5)))
            .map_err(|e| e.to_string())?
            .label(format!("peak {each} interval"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.mix(0.5)));
    }
    let mean = chart.draw_series(LineSeries::new(steps(|p| p.1), &BLUE)).map_err(|e| e.to_string())?;
    if let Some((per, _)) = &merged {
        mean.label(format!("mean per {per}")).legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

fn sizes(r: &Report, path: &Path) -> Result<(), String> {
    let s = &r.mix.sizes;
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let ymax = s.iter().map(|b| b.packets).max().unwrap_or(0).max(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("Frame sizes", ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0..s.len()).into_segmented(), 0f64..ymax)
        .map_err(|e| e.to_string())?;
    let labels: Vec<String> = s
        .iter()
        .map(|b| match b.max {
            Some(m) => format!("{}-{m}", b.min),
            None => format!("{}+", b.min),
        })
        .collect();
    chart
        .configure_mesh()
        .x_desc("bytes on the wire")
        .y_desc("frames")
        // Frames are counted whole: 200, not 200.0.
        .y_label_formatter(&|y| format!("{y:.0}"))
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(BLUE.filled())
                .margin(4)
                .data(s.iter().enumerate().map(|(i, b)| (i, b.packets as f64))),
        )
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// Most streams `jitter.svg` draws: about 20 pixels a bar.
const MAX_JITTER_BARS: usize = 48;

/// One stream's bar in `jitter.svg`.
struct JitterBar {
    rtp: bool,
    /// The x axis' name of the stream: an RTP stream's SSRC (as tshark's RTP streams name
    /// it), a plain UDP stream's destination.
    name: String,
    mean_ms: f64,
    max_ms: f64,
}

/// The streams with a jitter, RTP streams first, then plain UDP streams, each in report
/// order (by packets). A stream of one packet has none (an RTP stream's would read 0), and
/// is left out.
fn jitter_bars(r: &Report) -> Vec<JitterBar> {
    let rtp = r
        .rtp
        .streams
        .iter()
        .filter(|x| x.packets >= 2)
        .map(|x| (true, format!("0x{:08x}", x.ssrc), x.mean_jitter_ms, x.max_jitter_ms));
    let udp = r
        .udp_streams
        .streams
        .iter()
        .map(|x| (false, format!("{}:{}", x.dst.text(), x.dst_port), x.mean_jitter_ms, x.max_jitter_ms));
    rtp.chain(udp)
        .filter_map(|(rtp, name, mean, max)| Some(JitterBar { rtp, name, mean_ms: mean?, max_ms: max.unwrap_or(0.0) }))
        .collect()
}

fn jitter(all: &[JitterBar], path: &Path) -> Result<(), String> {
    let s = &all[..all.len().min(MAX_JITTER_BARS)];
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let ymax = s.iter().map(|x| x.max_ms).fold(0.0, f64::max).max(0.001) * 1.15;
    let first = if all.len() > s.len() { format!(", the first {} of {}", s.len(), all.len()) } else { String::new() };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Jitter per stream, mean and max (ms){first}"), ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(150)
        .y_label_area_size(70)
        .build_cartesian_2d((0..s.len()).into_segmented(), 0f64..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("stream: RTP by SSRC, then plain UDP by destination (report order)")
        .y_desc("ms")
        .x_label_formatter(&|_| String::new())
        .draw()
        .map_err(|e| e.to_string())?;
    // Every bar named below it, reading downwards from the axis (up to 21 characters: 48
    // names side by side would not fit upright; plotters' own rotated labels are centred
    // on the axis and run into the bars).
    let name_style = ("sans-serif", 11).into_font().transform(FontTransform::Rotate90).into_text_style(&root);
    let name_style = name_style.pos(Pos::new(HPos::Left, VPos::Center));
    for (i, bar) in s.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(i), 0.0));
        root.draw_text(&bar.name, &name_style, (x, y + 6)).map_err(|e| e.to_string())?;
    }
    // RTP: RFC 3550 against its timestamps; plain UDP: against the stream's mean delta.
    for (rtp, max_color, mean_color, name) in [(true, RED, BLUE, "RTP"), (false, MAGENTA, RGBColor(0, 140, 60), "UDP")]
    {
        if !s.iter().any(|x| x.rtp == rtp) {
            continue;
        }
        let mine = || s.iter().enumerate().filter(move |(_, x)| x.rtp == rtp);
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(max_color.mix(0.4).filled())
                    .margin(6)
                    .data(mine().map(|(i, x)| (i, x.max_ms))),
            )
            .map_err(|e| e.to_string())?
            .label(format!("{name} max"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], max_color.mix(0.4).filled()));
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(mean_color.filled())
                    .margin(14)
                    .data(mine().map(|(i, x)| (i, x.mean_ms))),
            )
            .map_err(|e| e.to_string())?
            .label(format!("{name} mean"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], mean_color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use crate::qos::io::{Interval, IoReport};
    use crate::Count;

    fn report(bytes: &[u64], step_ns: u64) -> IoReport {
        let secs = step_ns as f64 / 1e9;
        let intervals = bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| Interval {
                start_ns: i as u64 * step_ns,
                packets: 1,
                bytes: b,
                bits_per_second: b as f64 * 8.0 / secs,
                packets_per_second: 1.0 / secs,
            })
            .collect();
        IoReport {
            step_ns,
            requested_step_ns: step_ns,
            first_ns: 0,
            intervals,
            beyond: Count::default(),
            max_intervals: usize::MAX,
            peak_bits_per_second: 0.0,
            peak_packets_per_second: 0.0,
        }
    }

    /// Up to 2,000 intervals, a point each; beyond, one per run of k: the
    /// mean over the run's own time (the last run may be shorter) and the
    /// run's highest interval.
    #[test]
    fn the_throughput_line_merges_runs_of_intervals_into_mean_and_peak() {
        let (points, k) = super::throughput_points(&report(&[125_000; 2000], 1_000_000_000));
        assert_eq!((points.len(), k), (2000, 1));
        assert!(points.iter().all(|&(_, mean, peak)| mean == 1.0 && peak == 1.0), "{:?}", &points[..3]);
        // 4,001 intervals of 1 s: runs of 3, the last of 2.
        let bytes: Vec<u64> = (0..4001u64).map(|i| if i == 4000 { 250_000 } else { 125_000 * (i % 3) }).collect();
        let (points, k) = super::throughput_points(&report(&bytes, 1_000_000_000));
        assert_eq!((points.len(), k), (1334, 3));
        // A run of 0, 1 and 2 Mbit/s: mean 1, peak 2; at 3 s per point.
        assert_eq!(points[1], (3.0, 1.0, 2.0));
        // The last run, two intervals (0 and 2 Mbit/s): mean over its own
        // 2 s, 1 Mbit/s (over 3 s it would read 0.67).
        assert_eq!(points[1333], (3999.0, 1.0, 2.0));
    }
}
