//! `wirevault query STORE [--from T] [--to T] [EXPRESSION...]`: select
//! packets by time and tcpdump filter; write nanosecond pcap.

use crate::log::Level;
use crate::{exit, fail};
use std::io::{IsTerminal, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

/// What to read: a store or capture file, a time range and a filter
/// (shared by `query` and `analyze`).
#[derive(clap::Args)]
pub struct Selection {
    /// The store (or a single capture file). With --store or --fleet there is
    /// none: the first word is the expression's.
    #[arg(required_unless_present_any = ["stores", "fleet"])]
    pub store: Option<PathBuf>,
    #[command(flatten)]
    pub sources: super::fleet::Sources,
    /// Earliest packet time, inclusive: RFC 3339, epoch seconds[.fraction], or `10m ago`.
    // A value may begin with `-` (`--from -5`), to be told the forms a time takes.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// End of the time range, exclusive (same forms as --from).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// tcpdump filter expression (the words are joined with spaces, as tcpdump does).
    /// Options may come before or after it; after `--` every word is filter text.
    #[arg(value_name = "EXPRESSION")]
    pub expression: Vec<String>,
}

impl Selection {
    /// The query this selection makes (times checked, one sentence when wrong).
    pub fn query(&self, limit: Option<u64>) -> anyhow::Result<wv_query::Query> {
        let (from_ns, to_ns) = super::time_range(&self.from, &self.to, ("--from", "--to"))?;
        let Some(store) = self.store.clone().filter(|_| !self.sources.given()) else {
            return Err(fail(
                exit::USAGE,
                "this command reads one store: give it as STORE, without --store or --fleet",
            ));
        };
        Ok(wv_query::Query { store, from_ns, to_ns, expr: self.expression.join(" "), limit })
    }

    /// The store path as the user gave it (empty with --store or --fleet).
    pub fn store_path(&self) -> &std::path::Path {
        self.store.as_deref().unwrap_or(std::path::Path::new(""))
    }
}

/// Arguments of `wirevault query`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub sel: Selection,
    /// Write pcap to FILE instead of standard output.
    #[arg(short = 'w', value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Print only the number of matching packets.
    #[arg(long)]
    pub count: bool,
    /// Stop after N matching packets (1 or more, as the API's `limit`).
    #[arg(long, value_name = "N", value_parser = super::packet_limit)]
    pub limit: Option<u64>,
    /// Print what the query read (files, blocks) on standard error.
    #[arg(long)]
    pub stats: bool,
    /// Exit with code 1 if a catalogued file was missing, short or unreadable
    /// (the answer still holds every readable packet).
    #[arg(long)]
    pub strict: bool,
    /// The output's container: pcap (nanoseconds), or pcapng with one
    /// interface per source, named after it (its URL or path in the
    /// description).
    #[arg(long, value_enum, default_value_t = OutFormat::Pcap)]
    pub format: OutFormat,
}

/// `--format`.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    Pcap,
    Pcapng,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // `-w -` is standard output, as in tcpdump.
    let write = args.write.as_ref().filter(|p| p.as_os_str() != "-");
    if args.count && args.write.is_some() {
        return Err(fail(exit::USAGE, "--count prints a number and -w writes packets: give one of them"));
    }
    if !args.count && write.is_none() && std::io::stdout().is_terminal() {
        return Err(fail(
            exit::USAGE,
            "standard output is a terminal and query writes binary pcap: use -w FILE, a pipe (| tcpdump -r -) or --count",
        ));
    }
    // Several sources, or pcapng (one interface per source): the fleet's
    // merge. One store in pcap keeps its own path (splice, threads).
    if args.sel.sources.given() || args.format == OutFormat::Pcapng {
        return super::fleet::query(&args, write.map(PathBuf::as_path));
    }
    let query = args.sel.query(args.limit)?;
    let prepared = wv_query::prepare(query).map_err(prepare_error)?;
    // Said when nothing matched, as `/api/v1/count` answers in `outside`.
    let outside = prepared.outside();
    let result = if args.count {
        wv_query::run(prepared, wv_query::Sink::Count)
    } else if let Some(path) = write {
        let mut f = create_output(&prepared, path)?;
        let r = wv_query::run(prepared, wv_query::Sink::Pcap(&mut f));
        // A query that fails midway (several link types in one capture
        // file, an unreadable store) leaves no partial answer behind that
        // could pass for the whole one.
        match r {
            Err(e) if !e.is_broken_pipe() && f.metadata().is_ok_and(|m| m.is_file()) => {
                let removed = std::fs::remove_file(path).is_ok();
                let what = if removed { "removed" } else { "left incomplete" };
                return Err(fail(exit::ERROR, format!("{e}; {} {what}", path.display())));
            }
            r => r,
        }
    } else {
        to_stdout(prepared)?
    };
    let report = match result {
        Ok(r) => r,
        // The reader of our output went away (`| head`): not an error.
        Err(e) if e.is_broken_pipe() => return Ok(exit::OK),
        Err(e) => return Err(fail(exit::ERROR, e.to_string())),
    };
    say_report(&args, &report, outside.as_deref())
}

/// The selection in pcap on standard output: through a pipe or FIFO as it suits, never into a
/// file of the store.
fn to_stdout(prepared: wv_query::Prepared) -> anyhow::Result<Result<wv_query::Report, wv_query::QueryError>> {
    let (mut out, pipe, fifo) = stdout_file()?;
    // `query S >> S/stream-000/X.pcap`: the shell opened the output, so
    // the check is on what standard output is, by device and inode.
    if out.metadata().is_ok_and(|m| m.is_file()) {
        if let Err(wv_query::QueryError::OutputInStore { store, .. }) =
            wv_query::check_output(&prepared, std::path::Path::new("/proc/self/fd/1"))
        {
            return Err(fail(
                exit::USAGE,
                format!(
                    "refusing to write to standard output: it is a file inside the store {} or one of its stored files; redirect it elsewhere",
                    store.display()
                ),
            ));
        }
    }
    Ok(if fifo {
        wv_query::run(prepared, wv_query::Sink::PcapPipe(&mut out))
    } else if pipe {
        wv_query::run(prepared, wv_query::Sink::PcapThreaded(&mut out))
    } else {
        wv_query::run(prepared, wv_query::Sink::Pcap(&mut out))
    })
}

/// The sentences after a query: the reader's warnings, why nothing matched, the files left
/// out, `--stats`, the count, and `--strict`'s verdict.
pub(crate) fn say_report(args: &Args, report: &wv_query::Report, outside: Option<&str>) -> anyhow::Result<u8> {
    say_warnings(&report.warnings);
    if let (0, Some(why)) = (report.matched, outside) {
        info!("no packet matched: {why}");
    }
    if report.part_files > 0 && report.recording {
        info!("{} file(s) still being written are not included (the store is being recorded)", report.part_files);
    } else if report.part_files > 0 {
        message!(
            Level::Warn,
            "{} partial file(s) left by a crash are not included; run `wirevault repair {}` to keep their packets",
            report.part_files,
            args.sel.store_path().display()
        );
    }
    if args.stats {
        info!(
            "{} matched; files: {} in catalog, {} skipped by time, {} via index, {} scanned; blocks read {} of {}",
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
    if args.strict && report.damaged + report.on_unusable_volume > 0 {
        message!(Level::Error, "--strict: {} damaged or missing file(s)", report.damaged + report.on_unusable_volume);
        return Ok(exit::ERROR);
    }
    Ok(exit::OK)
}

/// A reader's warnings (`wv_query::Report::warnings`: a file damaged, missing,
/// read in part), one line each as the reader words them (`FILE: why`
/// mostly), at warn level.
pub(crate) fn say_warnings(warnings: &[String]) {
    for w in warnings {
        message!(Level::Warn, "{w}");
    }
}

/// The exit code of a failed `wv_query::prepare`: a filter that does not
/// compile is a usage error; a store or file that is missing, not a store or
/// capture, or unreadable is a runtime error (the `exit` module's rule).
pub(crate) fn prepare_error(e: wv_query::QueryError) -> anyhow::Error {
    match e {
        wv_query::QueryError::BadExpression { .. } => fail(exit::USAGE, e.to_string()),
        other => fail(exit::ERROR, other.to_string()),
    }
}

/// Opens `-w FILE`: never the store or a file in it (checked by device and
/// inode before anything is created or truncated), truncated only once what
/// was opened has been checked again (the path may have changed meanwhile).
fn create_output(prepared: &wv_query::Prepared, path: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    wv_query::check_output(prepared, path).map_err(|e| fail(exit::USAGE, e.to_string()))?;
    let cannot = |e: std::io::Error| fail(exit::ERROR, format!("cannot create {}: {e}", path.display()));
    let f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path).map_err(cannot)?;
    let opened = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
    if let Err(wv_query::QueryError::OutputInStore { store, .. }) = wv_query::check_output(prepared, &opened) {
        let e = wv_query::QueryError::OutputInStore { out: path.to_path_buf(), store };
        return Err(fail(exit::USAGE, e.to_string()));
    }
    if f.metadata().map_err(cannot)?.is_file() {
        f.set_len(0).map_err(cannot)?;
    }
    Ok(f)
}

/// Standard output as a file of its own (no line buffering of binary pcap),
/// and whether it is a pipe or socket. A pipe is grown to the system's
/// maximum and written from a second thread: with the default 64 KiB pipe
/// and the copy into it on the query's own thread, `| cat` took twice as
/// long as `-w /dev/null`.
pub(crate) fn stdout_file() -> anyhow::Result<(std::fs::File, bool, bool)> {
    use std::os::fd::AsFd;
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| fail(exit::ERROR, format!("cannot use standard output: {e}")))?;
    let f = std::fs::File::from(fd);
    let kind = f.metadata().map(|m| m.file_type());
    let fifo = kind.as_ref().is_ok_and(|t| t.is_fifo());
    if fifo {
        let _ = wv_sys::pipe::grow(&f, 4 << 20);
    }
    Ok((f, fifo || kind.is_ok_and(|t| t.is_socket()), fifo))
}
