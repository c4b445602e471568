//! Charts as SVG files (plotters): throughput over time, the frame size
//! histogram, and the jitter of each RTP stream.

use crate::Report;
use plotters::prelude::*;
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

/// Writes `throughput.svg`, `sizes.svg` and (with RTP streams) `jitter.svg`
/// into `dir`; returns the files written.
pub fn write_all(r: &Report, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut out = Vec::new();
    let p = dir.join("throughput.svg");
    wv_chart::font().map_err(err(&p))?;
    throughput(r, &p).map_err(err(&p))?;
    out.push(p);
    let p = dir.join("sizes.svg");
    sizes(r, &p).map_err(err(&p))?;
    out.push(p);
    if !r.rtp.streams.is_empty() {
        let p = dir.join("jitter.svg");
        jitter(r, &p).map_err(err(&p))?;
        out.push(p);
    }
    Ok(out)
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
    chart.configure_mesh().x_desc("time since first frame (s)").y_desc("Mbit/s").draw().map_err(|e| e.to_string())?;
    let step = t.step_ns as f64 / 1e9;
    chart
        .draw_series(LineSeries::new(
            t.intervals.iter().enumerate().map(|(i, v)| (i as f64 * step, v.bits_per_second / 1e6)),
            &BLUE,
        ))
        .map_err(|e| e.to_string())?;
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

fn jitter(r: &Report, path: &Path) -> Result<(), String> {
    let s = &r.rtp.streams;
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let ymax = s.iter().filter_map(|x| x.max_jitter_ms).fold(0.0, f64::max).max(0.001) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("RTP jitter per stream (mean and max, ms)", ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0..s.len()).into_segmented(), 0f64..ymax)
        .map_err(|e| e.to_string())?;
    chart.configure_mesh().x_desc("stream (report order)").y_desc("ms").draw().map_err(|e| e.to_string())?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(RED.mix(0.5).filled())
                .margin(6)
                .data(s.iter().enumerate().map(|(i, x)| (i, x.max_jitter_ms.unwrap_or(0.0)))),
        )
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(BLUE.filled())
                .margin(14)
                .data(s.iter().enumerate().map(|(i, x)| (i, x.mean_jitter_ms.unwrap_or(0.0)))),
        )
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
