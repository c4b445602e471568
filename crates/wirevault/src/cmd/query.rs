//! `wirevault query STORE [--from T] [--to T] [EXPRESSION...]`: select
//! packets by time and tcpdump filter; write nanosecond pcap.

use crate::{exit, fail};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `wirevault query`.
#[derive(clap::Args)]
pub struct Args {
    /// The store (or a single capture file).
    pub store: PathBuf,
    /// Earliest packet time, inclusive: RFC 3339, epoch seconds[.fraction], or `10m ago`.
    #[arg(long, value_name = "T")]
    pub from: Option<String>,
    /// End of the time range, exclusive (same forms as --from).
    #[arg(long, value_name = "T")]
    pub to: Option<String>,
    /// Write pcap to FILE instead of standard output.
    #[arg(short = 'w', value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Print only the number of matching packets.
    #[arg(long)]
    pub count: bool,
    /// Stop after N matching packets.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Print what the query read (files, blocks) on standard error.
    #[arg(long)]
    pub stats: bool,
    /// tcpdump filter expression (the words are joined with spaces, as tcpdump does).
    /// Options may come before or after it; after `--` every word is filter text.
    #[arg(value_name = "EXPRESSION")]
    pub expression: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let time = |s: &Option<String>| -> anyhow::Result<Option<u64>> {
        s.as_deref().map(|t| wv_query::parse_time(t, now).map_err(|e| fail(exit::USAGE, e.to_string()))).transpose()
    };
    let (from_ns, to_ns) = (time(&args.from)?, time(&args.to)?);
    if let (Some(f), Some(t)) = (from_ns, to_ns) {
        if f >= t {
            return Err(fail(exit::USAGE, "--from must be earlier than --to"));
        }
    }
    let query = wv_query::Query {
        store: args.store.clone(),
        from_ns,
        to_ns,
        expr: args.expression.join(" "),
        limit: args.limit,
    };
    let prepared = wv_query::prepare(query).map_err(|e| match e {
        wv_query::QueryError::BadExpression { .. } => fail(exit::USAGE, e.to_string()),
        wv_query::QueryError::NotAStore { .. } => fail(exit::USAGE, e.to_string()),
        other => fail(exit::ERROR, other.to_string()),
    })?;
    let result = if args.count {
        wv_query::run(prepared, wv_query::Sink::Count)
    } else if let Some(path) = &args.write {
        let mut f = std::fs::File::create(path)
            .map_err(|e| fail(exit::ERROR, format!("cannot create {}: {e}", path.display())))?;
        wv_query::run(prepared, wv_query::Sink::Pcap(&mut f))
    } else {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        wv_query::run(prepared, wv_query::Sink::Pcap(&mut lock))
    };
    let report = match result {
        Ok(r) => r,
        // The reader of our output went away (`| head`): not an error.
        Err(e) if e.is_broken_pipe() => return Ok(exit::OK),
        Err(e) => return Err(fail(exit::ERROR, e.to_string())),
    };
    for w in &report.warnings {
        eprintln!("wirevault: {w}");
    }
    if report.part_files > 0 {
        eprintln!(
            "wirevault: {} file(s) still being written are not included (the store is being recorded)",
            report.part_files
        );
    }
    if args.stats {
        eprintln!(
            "wirevault: {} matched; files: {} in catalog, {} skipped by time, {} via index, {} scanned; blocks read {} of {}",
            report.matched,
            report.files,
            report.files_skipped_by_time,
            report.files_indexed,
            report.files_scanned,
            report.blocks_read,
            report.blocks_total
        );
    }
    if args.count {
        let mut out = std::io::stdout();
        if let Err(e) = writeln!(out, "{}", report.matched) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(fail(exit::ERROR, format!("cannot write the count: {e}")));
            }
        }
    }
    Ok(exit::OK)
}
