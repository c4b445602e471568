//! `wirevault index PATH`: build index files for existing captures.

use crate::{exit, fail};
use std::path::PathBuf;

/// Arguments of `wirevault index`.
#[derive(clap::Args)]
pub struct Args {
    /// A pcap/pcapng file (writes FILE.idx), a store (indexes the catalog's
    /// unindexed files) or a directory of captures (indexes them and creates
    /// its catalog.jsonl, so that `wirevault query DIR` works).
    pub path: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    if !args.path.exists() {
        return Err(fail(exit::USAGE, format!("{} does not exist", args.path.display())));
    }
    let report = wv_index::index_path(&args.path).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    for f in &report.indexed {
        if let Some(why) = &f.truncated {
            eprintln!("wirevault: {}: indexed the {} packets before: {why}", f.index_path.display(), f.summary.packets);
        }
    }
    for (p, why) in &report.failed {
        eprintln!("wirevault: {}: not indexed: {why}", p.display());
    }
    let packets: u64 = report.indexed.iter().map(|f| f.summary.packets).sum();
    let idx_bytes: u64 = report.indexed.iter().map(|f| f.summary.index_bytes).sum();
    let cap_bytes: u64 = report.indexed.iter().map(|f| f.bytes).sum();
    eprintln!(
        "wirevault: indexed {} file(s), {packets} packets; index {idx_bytes} bytes ({:.2}% of {cap_bytes} capture bytes){}{}",
        report.indexed.len(),
        if cap_bytes > 0 { 100.0 * idx_bytes as f64 / cap_bytes as f64 } else { 0.0 },
        if report.already > 0 { format!("; {} already indexed", report.already) } else { String::new() },
        report.catalog.as_ref().map_or(String::new(), |c| format!("; wrote {}", c.display())),
    );
    if report.indexed.is_empty() && !report.failed.is_empty() {
        return Ok(exit::ERROR);
    }
    Ok(exit::OK)
}
