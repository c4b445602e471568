//! `wirevault record`: capture packets into a store.
//!
//! In three stages, as ripgrep's binary: [`args`] holds the flags as clap parses them (each
//! value checked by `wv_record::checks`); [`plan`] maps them onto a `wv_record::RecorderConfig`
//! before anything is created; [`run`] wires the recorder (`wv_record`: the whole lifecycle,
//! its loop included), the HTTP server of `--listen`, signals, reloads (`reload`) and the
//! service manager, and reports what the recording hands it (`Status`): the status line
//! every second, the summary, the exit code.

mod args;
mod plan;
mod reload;

pub use args::Args;
/// The recorder's defaults and writer tunings, which `disk-bench` and `tune` take.
pub use wv_record::{defaults, min_budget, Tuning};

use crate::{exit, fail};
use plan::{Plan, SourcePlan};
use reload::Reloader;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_record::{Level, Note, Problem, Recorder, Recording, RecordingStats, Watch};

pub fn run(a: Args) -> anyhow::Result<u8> {
    // Before anything else: the signals held since `main` began (see `cmd::hold_signals`)
    // reach these handlers, so that a signal at any moment stops cleanly. With --config,
    // SIGHUP re-reads it (see `reload`), with --listen the server's tokens and certificates;
    // without either, it stops as tcpdump.
    let (stop, hup) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let reloads = a.config.is_some() || a.listen.listen.is_some();
    crate::cmd::catch_signals(crate::cmd::stop_signals(), |sig| {
        if sig == libc::SIGHUP && reloads {
            hup.clone()
        } else {
            stop.clone()
        }
    })?;
    let Plan { config, output, notes } = plan::plan(&a)?;
    say_notes(notes);
    let store = config.store.clone();
    // The host's tuning findings (NUMA, interrupts, offloads, the store's volume) are gathered
    // meanwhile (~0.1 s: they must not delay capture), as the host is before it records.
    let tune = output.tune_warnings.then(|| {
        let inputs = tune_inputs(&config);
        std::thread::spawn(move || crate::cmd::tune::startup_warnings(&inputs))
    });
    let live = match &config.source {
        SourcePlan::Live { interface, .. } => Some((interface.clone(), config.workers)),
        _ => None,
    };
    let prepared = Recorder::prepare(config, stop).map_err(failed)?;
    crate::cmd::repair::print_report(prepared.repaired(), &store, true);
    let mut reloader = Reloader::new(&a, prepared.budget());
    // The HTTP server binds before capture starts: a taken port or a bad certificate is one
    // sentence, with nothing recorded yet.
    let board = wv_serve::LiveCounters::new();
    let server = serve_api(&a, &store, &board, &mut reloader)?;
    let mut rec = prepared.start().map_err(failed)?;
    // Capture runs: said once (as tcpdump's "listening on"), and to the service manager.
    if let (false, Some((interface, workers))) = (output.quiet, &live) {
        info!("capturing on {interface}: {workers} worker(s), store {}", store.display());
    }
    let mut notifier = crate::notify::Notifier::from_env();
    if let Some(n) = &notifier {
        let what = rec.snapshot().sources.join(", ");
        n.ready(&format!("recording {what} into {}", store.display()));
    }
    for (level, line) in tune.and_then(|t| t.join().ok()).unwrap_or_default() {
        message!(level, "{line}");
    }
    board.set_pressure(Arc::new(rec.arena_pressure()));
    rec.watch(&mut Status {
        hup: &hup,
        reloader,
        server: &server,
        notifier: &mut notifier,
        board: &board,
        output: &output,
    });
    if let Some(n) = &notifier {
        n.send("STOPPING=1");
    }
    finish(rec, &board, server, &output)
}

/// `--listen`: the API and console of this recording, whose tokens and certificates SIGHUP
/// reloads.
fn serve_api(
    a: &Args,
    store: &Path,
    board: &Arc<wv_serve::LiveCounters>,
    reloader: &mut Option<Reloader>,
) -> anyhow::Result<Option<wv_serve::Server>> {
    let Some(cfg) = a.listen.config(store, None)? else { return Ok(None) };
    let server = crate::cmd::serve::start(cfg, Some(board.clone()))?;
    if let Some(r) = reloader {
        let handle = server.reloader();
        // Said only when the server has files to read again: "nothing to reload" beside the
        // budget the same reload changed read as a contradiction.
        r.hook(
            &[],
            Box::new(move |_| {
                handle
                    .reload_changes()
                    .map(|d| (!d.is_empty()).then(|| format!("reloaded {}", d.join(", "))))
                    .map_err(|e| format!("api: {e}"))
            }),
        );
    }
    Ok(Some(server))
}

/// Stops the recording (the writers drain their arenas), publishes and prints its summary and
/// notes, and words the exit code.
fn finish(
    rec: Recording,
    board: &Arc<wv_serve::LiveCounters>,
    server: Option<wv_serve::Server>,
    output: &plan::OutputPlan,
) -> anyhow::Result<u8> {
    let summary = rec.stop();
    board.publish(summary.stats.clone());
    if let Some(server) = server {
        server.stop();
    }
    if output.json {
        out_line(&serde_json::to_string(&summary.stats).unwrap_or_default());
    }
    info!("{}", summary.line);
    say_notes(summary.notes);
    match summary.failure {
        None => Ok(exit::OK),
        Some(e) if e.is_said() => Ok(exit::ERROR),
        Some(e) => Err(failed(e)),
    }
}

/// The recording's reports while it runs: SIGHUP's reloads, the service manager's watchdog,
/// the status line (or `--json`'s counters) and the API's every second, the recorder's notes.
struct Status<'a> {
    hup: &'a AtomicBool,
    reloader: Option<Reloader>,
    server: &'a Option<wv_serve::Server>,
    notifier: &'a mut Option<crate::notify::Notifier>,
    board: &'a wv_serve::LiveCounters,
    output: &'a plan::OutputPlan,
}

impl Watch for Status<'_> {
    fn turn(&mut self) {
        if self.hup.swap(false, Ordering::Relaxed) {
            if let Some(r) = &mut self.reloader {
                r.reload();
            } else if let Some(s) = self.server {
                match s.reload() {
                    Ok(what) => info!("api: {what}"),
                    Err(e) => warn!("api: reload failed, the previous settings stay: {e}"),
                }
            }
        }
        if let Some(n) = self.notifier {
            n.tick();
        }
    }

    fn stats(&mut self, st: RecordingStats, running: bool) {
        if running && self.output.json && !self.output.quiet {
            out_line(&serde_json::to_string(&st).unwrap_or_default());
        } else if running && !self.output.quiet {
            let _ = writeln!(std::io::stderr().lock(), "{}", st.line());
        }
        self.board.publish(st);
    }

    fn note(&mut self, n: Note) {
        say_notes(vec![n]);
    }
}

/// One line on standard output; a closed output (`--json | head`) must not stop the
/// recorder, so errors are ignored.
fn out_line(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// The recorder's notes, each on its level.
fn say_notes(notes: Vec<Note>) {
    for n in notes {
        match n.level {
            Level::Error => error!("{}", n.text),
            Level::Warning => warn!("{}", n.text),
            Level::Note => note!("{}", n.text),
            Level::Info => info!("{}", n.text),
        }
    }
}

/// A recorder's error as the binary's, with its exit code.
pub fn failed(e: wv_record::Error) -> anyhow::Error {
    let code = match e.problem {
        Problem::Config => exit::USAGE,
        Problem::Failed => exit::ERROR,
        Problem::DiskFull => exit::DISK_FULL,
    };
    fail(code, e.message)
}

/// What `wirevault tune`'s start-up warnings look at for this recording.
fn tune_inputs(c: &wv_record::RecorderConfig) -> wv_tune::Inputs {
    wv_tune::Inputs {
        interface: match &c.source {
            SourcePlan::Live { interface, .. } => Some(interface.clone()),
            _ => None,
        },
        store: Some(c.store.clone()),
        cpus: c.cpus.clone(),
        buffer: c.stream.arena_per_worker * c.workers as u64,
        budget: c.budget.map(|b| b.max_bytes),
        min_budget: min_budget(c.stream.file_size, c.workers),
        other_free: wv_record::host::other_volumes_free(&c.store, &c.volumes),
    }
}
