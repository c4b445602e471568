//! `wirevault index PATH`: build index files for existing captures.

use crate::log::Level;
use crate::{exit, fail};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Arguments of `wirevault index`.
#[derive(clap::Args)]
pub struct Args {
    /// A pcap/pcapng file (writes FILE.idx), a store (indexes the catalog's
    /// unindexed files) or a directory of captures (indexes them and creates
    /// its catalog.jsonl, so that `wirevault query DIR` works).
    pub path: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let path = &args.path;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(fail(exit::ERROR, format!("{} does not exist", path.display())))
        }
        Err(e) => return Err(fail(exit::ERROR, format!("{}: {e}", path.display()))),
    };
    // `index /dev/stdin` or a FIFO would block, or put FILE.idx beside a device.
    if !meta.is_dir() && !meta.is_file() {
        return Err(fail(
            exit::ERROR,
            format!(
                "{} is not a regular file (a pipe, device or socket); index needs a capture file or a directory of them",
                path.display()
            ),
        ));
    }
    // Every signal that stops `record` stops indexing between packets: the
    // file being indexed gets no index (nothing partial is left), what is
    // done is kept.
    let stop = Arc::new(AtomicBool::new(false));
    crate::cmd::catch_signals(crate::cmd::stop_signals(), |_| Arc::clone(&stop))?;
    // A store or directory: one writer at a time (a recorder, repair or index).
    let _lock = if meta.is_dir() {
        Some(wv_store::lock::StoreLock::exclusive(path, "index").map_err(|e| fail(exit::ERROR, e.to_string()))?)
    } else {
        None
    };
    let opts = wv_index::IndexOptions { cancel: Some(&stop), ..Default::default() };
    let report = match wv_index::index_path_opts(path, &opts) {
        Ok(r) => r,
        Err(wv_index::IndexError::Interrupted) => {
            return Err(fail(exit::ERROR, format!("interrupted; {} was not indexed", path.display())))
        }
        Err(e) => return Err(fail(exit::ERROR, e.to_string())),
    };
    say_report(&report, path);
    if report.interrupted {
        return Err(fail(
            exit::ERROR,
            format!(
                "interrupted; the indexes written are complete, no partial index is left; run `wirevault index {}` again to finish",
                path.display()
            ),
        ));
    }
    if report.indexed.is_empty() && !report.failed.is_empty() {
        return Ok(exit::ERROR);
    }
    Ok(exit::OK)
}

/// What indexing did, file by file where it matters, and in one line in all.
fn say_report(report: &wv_index::IndexReport, path: &std::path::Path) {
    for (p, why) in &report.rebuilt {
        info!("{}: indexing again: {why}", p.display());
    }
    for f in &report.indexed {
        if let Some(why) = &f.truncated {
            message!(
                Level::Warn,
                "{}: indexed the {} packets before: {why}",
                f.index_path.display(),
                f.summary.packets
            );
        }
    }
    for (p, why) in &report.failed {
        message!(Level::Warn, "{}: not indexed: {why}", p.display());
    }
    for f in &report.gone {
        info!("{f}: no longer in {}; left out of its catalog", path.display());
    }
    let packets: u64 = report.indexed.iter().map(|f| f.summary.packets).sum();
    let idx_bytes: u64 = report.indexed.iter().map(|f| f.summary.index_bytes).sum();
    let cap_bytes: u64 = report.indexed.iter().map(|f| f.bytes).sum();
    // A share of the capture only where there are packets: a header-only file's 24 bytes
    // made a 320-byte index "1333.33%" of it.
    let share = if packets > 0 && cap_bytes > 0 {
        format!(" ({:.2}% of {cap_bytes} capture bytes)", 100.0 * idx_bytes as f64 / cap_bytes as f64)
    } else {
        format!(" for {cap_bytes} capture bytes without a packet")
    };
    info!(
        "indexed {} file(s), {packets} packets; index {idx_bytes} bytes{share}{}{}",
        report.indexed.len(),
        if report.already > 0 { format!("; {} already indexed", report.already) } else { String::new() },
        report.catalog.as_ref().map_or(String::new(), |c| format!("; wrote {}", c.display())),
    );
}
