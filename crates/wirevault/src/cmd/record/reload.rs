//! SIGHUP with `--config FILE`: re-read the file without restarting capture.
//!
//! The file is read and the whole command line parsed and planned again,
//! exactly as at start (so a value that would be refused at start is refused
//! now, and the running settings stay). Then what can change live changes:
//! the retention budget (`max-size`, `on-full`: the writers read it before
//! each new file, so retention deletes down to a smaller budget at the next
//! file), the log level and format, and whatever the hooks added with
//! [`Reloader::hook`] handle (the HTTP server's tokens). A key that cannot
//! change live (interface, workers, output, ...) changed in the file is
//! named in a warning and capture goes on untouched; a key the command line
//! gives is not taken from the file, now as at start. Every reload logs
//! what changed.

use super::args::Args;
use crate::cmd::config::{self, Loaded};
use crate::log;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use wv_store::catalog::LiveBudget;

/// Keys this module applies live; hooks add theirs.
const LIVE: &[&str] = &["max-size", "on-full", "log-level", "log-format"];

/// A reload hook: gets the new arguments (already validated); returns a
/// description of what it changed (`None`: nothing), or why it refused
/// them (one sentence; the running settings stay).
pub type Hook = Box<dyn FnMut(&Args) -> Result<Option<String>, String> + Send>;

/// Re-reads `--config` on demand.
pub struct Reloader {
    file: PathBuf,
    loaded: Loaded,
    budget: Arc<LiveBudget>,
    live: BTreeSet<&'static str>,
    hooks: Vec<Hook>,
}

impl Reloader {
    /// For a recording started with `--config` (`None` without it).
    pub fn new(a: &Args, budget: Arc<LiveBudget>) -> Option<Reloader> {
        Some(Reloader {
            file: a.config.clone()?,
            loaded: a.loaded.clone().unwrap_or_default(),
            budget,
            live: LIVE.iter().copied().collect(),
            hooks: Vec::new(),
        })
    }

    /// Adds a hook run on every reload, and the config keys it applies live.
    pub fn hook(&mut self, keys: &[&'static str], hook: Hook) {
        self.live.extend(keys);
        self.hooks.push(hook);
    }

    /// Re-reads the file and applies it; logs the outcome.
    pub fn reload(&mut self) {
        let shown = self.file.display().to_string();
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let parsed = config::apply::<crate::Cli>(&argv, "record", &self.file).and_then(|(cli, loaded)| {
            let crate::Command::Record(a) = cli.command else { unreachable!("the command line was `record`") };
            let budget = super::plan::plan(&a)?.config.budget;
            Ok((*a, budget, cli.log, loaded))
        });
        let (a, new_budget, log_args, loaded) = match parsed {
            Ok(x) => x,
            Err(e) => {
                // A value the recorder refuses is its sentence alone, as at start.
                let said = e.downcast_ref::<clap::Error>().and_then(crate::cmd::habits::value_sentence);
                let e = said.unwrap_or_else(|| e.to_string());
                let first = e.lines().next().unwrap_or_default().trim_start_matches("error: ");
                error!(["file" => shown], "{shown} not reloaded, the running settings stay: {first}");
                return;
            }
        };
        let changed = config::changed(&self.loaded.table, &loaded.table);
        let mut done = Vec::new();
        let (mut fixed, mut overridden) = (Vec::new(), Vec::new());
        for k in &changed {
            if loaded.cmdline.contains(k) {
                overridden.push(k.as_str());
            } else if !self.live.contains(k.as_str()) {
                fixed.push(k.as_str());
            }
        }
        // The budget as planned now (a share of the volume is measured again).
        if new_budget != self.budget.get() {
            done.push(format!(
                "budget {} -> {}",
                wv_record::checks::budget_text(self.budget.get()),
                wv_record::checks::budget_text(new_budget)
            ));
            self.budget.set(new_budget);
        }
        if log_args.log_level != log::level() || log_args.log_format != log::format() {
            done.push(format!(
                "log {}/{} -> {}/{}",
                log::format_name(log::format()),
                log::level().name(),
                log::format_name(log_args.log_format),
                log_args.log_level.name()
            ));
            log::set(&log_args);
        }
        for h in &mut self.hooks {
            match h(&a) {
                Ok(Some(what)) => done.push(what),
                Ok(None) => {}
                Err(why) => error!(["file" => shown], "{shown}: {why}"),
            }
        }
        if !fixed.is_empty() {
            warn!(
                ["file" => shown, "keys" => fixed],
                "{shown}: {} changed, which takes effect at the next start only; capture goes on unchanged",
                fixed.join(", ")
            );
        }
        if !overridden.is_empty() {
            warn!(
                ["file" => shown, "keys" => overridden],
                "{shown}: {} changed, but the command line gives them, and it wins",
                overridden.join(", ")
            );
        }
        let what = if done.is_empty() { "nothing changed".to_string() } else { done.join("; ") };
        info!(["file" => shown, "changed" => done], "reloaded {shown}: {what}");
        self.loaded = loaded;
    }
}
