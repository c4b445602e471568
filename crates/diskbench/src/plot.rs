//! The per-second series as a chart (SVG or PNG, by the file's extension),
//! with the mean and, when given, the rate to sustain.
//!
//! Text needs a font: plotters is built without its system-font stack
//! (font-kit, fontconfig) and lays out and draws text with `ab_glyph` from a
//! TrueType file read at run time: DejaVu Sans (Debian's `fonts-dejavu-core`)
//! or Liberation Sans where they are usually installed, or the file named by
//! `WIREVAULT_FONT`.

use crate::BenchError;
use plotters::prelude::*;
use std::path::Path;
use wv_chart::font;

/// What to draw.
pub struct Chart<'a> {
    /// Bytes written in each second.
    pub per_second: &'a [u64],
    /// Mean per-file throughput, bytes per second.
    pub mean: f64,
    /// The rate to sustain, bytes per second.
    pub rate: Option<f64>,
    pub title: &'a str,
}

/// The image format, from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "svg" => Some(Format::Svg),
            "png" => Some(Format::Png),
            _ => None,
        }
    }
}

/// Draws the chart into `path` (SVG or PNG by its extension).
pub fn draw(path: &Path, chart: &Chart) -> Result<(), BenchError> {
    let format = Format::of(path)
        .ok_or_else(|| BenchError::Plot(format!("{}: the plot must end in .svg or .png", path.display())))?;
    font().map_err(BenchError::Plot)?;
    let size = (1000, 500);
    let r = match format {
        Format::Svg => draw_on(SVGBackend::new(path, size).into_drawing_area(), chart),
        Format::Png => draw_on(BitMapBackend::new(path, size).into_drawing_area(), chart),
    };
    r.map_err(|e| BenchError::Plot(format!("cannot draw {}: {e}", path.display())))
}

fn draw_on<DB: DrawingBackend>(area: DrawingArea<DB, plotters::coord::Shift>, c: &Chart) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(err)?;
    const GB: f64 = 1e9;
    let ys: Vec<f64> = c.per_second.iter().map(|&b| b as f64 / GB).collect();
    let top = ys.iter().copied().chain([c.mean / GB, c.rate.unwrap_or(0.0) / GB]).fold(0.0f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let secs = c.per_second.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&area)
        .caption(c.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..secs, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("written per second (GB/s)")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    // A step per second: each second's bytes over its whole window.
    let points = ys.iter().enumerate().flat_map(|(i, &y)| [(i as f64, y), ((i + 1) as f64, y)]);
    chart
        .draw_series(LineSeries::new(points, BLUE.stroke_width(2)))
        .map_err(err)?
        .label("written per second")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    let hline = |y: f64| vec![(0.0, y), (secs, y)];
    chart
        .draw_series(LineSeries::new(hline(c.mean / GB), GREEN.stroke_width(2)))
        .map_err(err)?
        .label(format!("mean per file {:.3} GB/s", c.mean / GB))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN.stroke_width(2)));
    if let Some(rate) = c.rate {
        chart
            .draw_series(LineSeries::new(hline(rate / GB), RED.stroke_width(2)))
            .map_err(err)?
            .label(format!("rate {:.3} GB/s ({:.2} Gb/s)", rate / GB, rate * 8.0 / GB))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(())
}
