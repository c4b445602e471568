//! wirevault: a lossless network traffic recorder.
//!
//! This crate is glue: it parses and validates arguments, builds the real
//! objects from the validated plan, and maps errors to exit codes. The
//! mechanisms live in the library crates.

#![deny(unsafe_code)]

// First: its macros (`info!`, `note!`, `warn!`, `error!`, `message!`,
// `say!`, `log!`) are for every module after it.
#[macro_use]
mod log;
mod cmd;
mod notify;

use clap::Subcommand;
use std::process::ExitCode;

/// Exit codes: the binary's one definition of them. [`exit::MEANINGS`] says
/// what each means, once for every subcommand; `wirevault --help`, the man
/// pages' EXIT STATUS and the README's table are rendered from it. The same
/// mistake gets the same code in every subcommand: 2 when the command line
/// itself must change, 1 when it is right but the host or the data are not as
/// it says.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// A runtime error: an interface, store, capture or config file, or directory
    /// the command line names is missing, unreadable or not what it should be (no
    /// such interface, not a store, not a capture file, a file where a directory
    /// belongs); I/O, permissions, the kernel; a check that found problems.
    pub const ERROR: u8 = 1;
    /// Invalid arguments: an unknown option, a value of the wrong form or out of
    /// range, options that conflict, a filter expression or time that does not
    /// parse, a refusal an option lifts (`--force`).
    pub const USAGE: u8 = 2;
    /// The store's disk is full (or `--on-full stop` hit the budget): recording stopped cleanly.
    pub const DISK_FULL: u8 = 3;

    /// Every code with what it means, in every subcommand (a subcommand's
    /// help and man page say which of its cases fall under which code).
    pub const MEANINGS: [(u8, &str); 4] = [
        (OK, "success; also when a stop signal (SIGINT, SIGTERM, SIGHUP, ...) ends record, replay or serve"),
        (
            ERROR,
            "a runtime error, or the job was not done in full: an interface, store, capture or config \
             file, or directory the command line names is missing, unreadable or not what it should be; a \
             capture, I/O, permission or kernel error; an input read only in part (what could be read was used; with --strict, a damaged file); packets replay \
             could not send; damage repair could not mend; a bad tune finding; index or disk-bench \
             interrupted; counters that do not add up",
        ),
        (
            USAGE,
            "invalid arguments: an unknown option, a value of the wrong form or out of range, options that \
             conflict, a filter expression or time that does not parse, what a config file says",
        ),
        (
            DISK_FULL,
            "the store's disk is full, or --on-full stop reached --max-size: recording stopped, every file \
             is closed and valid",
        ),
    ];
}

#[derive(clap::Parser)]
#[command(
    name = "wirevault",
    version,
    about = "Lossless network traffic recorder: capture, store as pcap, index, query."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    log: log::LogArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Record packets from an interface, pcap files or the synthetic generator into a store.
    Record(Box<cmd::record::Args>),
    /// Build index files for existing pcap/pcapng files or a store.
    Index(cmd::index::Args),
    /// Select packets from a store by time range and tcpdump filter expression; writes pcap.
    Query(cmd::query::Args),
    /// Flow records of a store (STORE/flows/, Parquet): by time and host, net, port, proto, vlan; table, JSON or CSV.
    Flows(cmd::flows::Args),
    /// Statistics over stored packets: duplicates, malformed frames, traffic mix, throughput, TCP, RTP, delay.
    Analyze(Box<cmd::analyze::Args>),
    /// Make a store consistent after a crash: keep partial files up to their last complete packet.
    Repair(cmd::repair::Args),
    /// Gauge a volume with the recorder's own writer: throughput statistics and the buffer a rate needs.
    DiskBench(cmd::disk_bench::Args),
    /// Send stored packets (a store or capture files) out of an interface, at recorded timing or a given rate.
    Replay(Box<cmd::replay::Args>),
    /// Serve a store over HTTP(S): JSON API, pcap export, Prometheus metrics and a web console.
    Serve(Box<cmd::serve::Args>),
    /// Check the host for recording from an interface (NUMA, IRQs, queues, offloads, disks) and print the fixes.
    Tune(cmd::tune::Args),
    /// Plan capacity: packets/s, bits/s and storage rate per capture format for a link and frame sizes.
    Plan(cmd::plan::Args),
    /// Timestamp quality of stores or files (resolution, steps back, shared stamps), the clock source, a NIC's stamping.
    Timestamps(cmd::timestamps::Args),
    /// Write the man pages and shell completions (bash, zsh, fish) into a directory.
    #[command(hide = true)]
    GenerateDocs(cmd::docs::Args),
}

/// An error that carries the exit code it maps to. Everything else is `ERROR`.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
impl std::error::Error for Exit {}

/// Builds an error that exits with `code`.
pub fn fail(code: u8, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit { code, message: message.into() })
}

impl Command {
    /// Whether the command installs handlers for the stop signals: it ends
    /// the hold of `cmd::hold_signals` itself, once they are installed.
    fn catches_signals(&self) -> bool {
        matches!(
            self,
            Command::Record(_) | Command::Index(_) | Command::DiskBench(_) | Command::Replay(_) | Command::Serve(_)
        )
    }
}

fn main() -> ExitCode {
    // Before anything else: a signal that comes while arguments are parsed
    // waits for the handlers instead of killing the process.
    cmd::hold_signals();
    let cli = match cmd::config::parse_cli() {
        Ok(c) => c,
        Err(e) => {
            message!(log::Level::Error, "{e}");
            // A config file that cannot be read is 1, what it says 2 (`cmd::config`).
            return ExitCode::from(e.downcast_ref::<Exit>().map_or(exit::USAGE, |x| x.code));
        }
    };
    log::init(&cli.log);
    if !cli.command.catches_signals() {
        cmd::release_signals();
    }
    let result = match cli.command {
        Command::Record(a) => cmd::record::run(*a),
        Command::Index(a) => cmd::index::run(a),
        Command::Query(a) => cmd::query::run(a),
        Command::Flows(a) => cmd::flows::run(a),
        Command::Repair(a) => cmd::repair::run(a),
        Command::Analyze(a) => cmd::analyze::run(*a),
        Command::DiskBench(a) => cmd::disk_bench::run(a),
        Command::Replay(a) => cmd::replay::run(*a),
        Command::Serve(a) => cmd::serve::run(*a),
        Command::Tune(a) => cmd::tune::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Timestamps(a) => cmd::timestamps::run(a),
        Command::GenerateDocs(a) => cmd::docs::run(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let code = e.downcast_ref::<Exit>().map_or(exit::ERROR, |x| x.code);
            // One sentence per cause, no backtrace.
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                msg.push_str(": ");
                msg.push_str(&cause.to_string());
            }
            message!(log::Level::Error, "{msg}");
            ExitCode::from(code)
        }
    }
}
