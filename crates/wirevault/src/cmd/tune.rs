//! `wirevault tune IF`: judges the host for recording from IF (NUMA, interrupts, queues, rings,
//! offloads, coalescing, CPU governor, huge pages, locked memory, the store's volume) and prints
//! each finding with the command that fixes it; `--apply` makes the safe changes. The checks are
//! `wv_tune`'s; this module parses flags, prints, and maps findings to the exit code. `record`
//! prints the same warnings at start-up through [`startup_warnings`].

use crate::log::Level;
use crate::{exit, fail};
use std::path::{Path, PathBuf};
use wv_tune::{Finding, Inputs, State};
use wv_units::parse_percent;

/// Arguments of `wirevault tune`.
#[derive(clap::Args)]
pub struct Args {
    /// The network interface record will capture from.
    #[arg(value_name = "IF")]
    pub interface: String,
    /// The store directory record will write to (its volume is checked; nothing is created).
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// The CPUs record will be given (--cpus of record), checked against the NIC's NUMA node.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// The arena record will use (--buffer of record; default as record's: 1G or 1/8 of RAM).
    #[arg(long, value_name = "SIZE")]
    pub buffer: Option<String>,
    /// The store budget record will be given (--max-size of record: bytes or a share like 80%).
    #[arg(long, value_name = "SIZE|PERCENT")]
    pub max_size: Option<String>,
    /// Run only these checks (comma-separated names, as the output shows them).
    #[arg(long, value_name = "CHECKS", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Change what can be changed safely (offloads off, RX ring to its maximum, interrupts to
    /// the NIC's node, governor performance, THP madvise, scheduler none on SSDs), then check again.
    #[arg(long)]
    pub apply: bool,
    /// Print the findings as a JSON array.
    #[arg(long)]
    pub json: bool,
}

fn usage(msg: String) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

/// The budget in bytes: a size, or a share of the volume of `store` (or of its nearest
/// existing parent).
pub fn budget_bytes(m: &str, store: &Path) -> anyhow::Result<u64> {
    if m.trim().ends_with('%') {
        let share =
            parse_percent(m).ok_or_else(|| usage(format!("--max-size \"{m}\" is not a percentage in (0, 100]")))?;
        Ok((wv_record::host::volumes_size(&[store]).map_err(super::record::failed)? as f64 * share) as u64)
    } else {
        super::size_arg("--max-size", m, false)
    }
}

fn inputs(a: &Args) -> anyhow::Result<Inputs> {
    for c in &a.only {
        if !wv_tune::CHECKS.contains(&c.as_str()) {
            return Err(usage(format!("--only: no check named {c:?}; the checks are {}", wv_tune::CHECKS.join(", "))));
        }
    }
    // As record takes them: CPUs this process may use, memory this machine has.
    let cpus = a.cpus.as_deref().map(wv_record::host::cpus_available).transpose().map_err(super::record::failed)?;
    let buffer = match &a.buffer {
        Some(b) => {
            wv_record::host::buffer_fits(b, super::size_arg("--buffer", b, false)?).map_err(super::record::failed)?
        }
        None => wv_record::defaults::buffer(false),
    };
    let budget = match (&a.max_size, &a.store) {
        (Some(m), Some(s)) => Some(budget_bytes(m, s)?),
        (Some(_), None) => {
            return Err(usage("--max-size needs --store DIR (the budget is checked against its volume)".into()))
        }
        _ => None,
    };
    // record's defaults: one stream of 1 GiB files.
    let file_size = wv_units::parse_size(super::record::defaults::FILE_SIZE).unwrap_or(1 << 30);
    let min_budget = super::record::min_budget(file_size, 1);
    Ok(Inputs {
        interface: Some(a.interface.clone()),
        store: a.store.clone(),
        cpus,
        buffer,
        budget,
        other_free: 0,
        min_budget,
    })
}

fn judge(inputs: &Inputs, only: &[String]) -> anyhow::Result<(wv_tune::Facts, Vec<Finding>)> {
    // The interface is missing or cannot be read: the host, not the command line (exit 1).
    let facts = wv_tune::gather(inputs).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let mut findings = wv_tune::checks::run(&facts);
    if !only.is_empty() {
        findings.retain(|f| only.iter().any(|o| o == f.check));
    }
    Ok((facts, findings))
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let inputs = inputs(&a)?;
    let (facts, mut findings) = judge(&inputs, &a.only)?;
    let mut apply_failed = false;
    if a.apply {
        wv_tune::apply::apply(&facts, &mut findings);
        apply_failed = findings.iter().any(|f| {
            f.applied.as_ref().is_some_and(|x| !x.ok) && !matches!(f.action, Some(wv_tune::Action::Manual(_)))
        });
        // Judge again: the states now say what the host is like after the changes.
        let (_, after) = judge(&inputs, &a.only)?;
        findings = after
            .into_iter()
            .map(|mut f| {
                f.applied = findings.iter().find(|b| b.check == f.check).and_then(|b| b.applied.clone());
                f
            })
            .collect();
    }
    if a.json {
        let text = serde_json::to_string_pretty(&findings)?;
        println!("{text}");
    } else {
        print_human(&facts, &findings);
    }
    let bad = findings.iter().any(|f| f.state == State::Bad);
    Ok(if bad || apply_failed { exit::ERROR } else { exit::OK })
}

fn print_human(facts: &wv_tune::Facts, findings: &[Finding]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Some(i) = &facts.iface {
        let driver = i.driver.as_ref().map_or("unknown driver".to_owned(), |d| {
            if d.bus_info.is_empty() {
                d.driver.clone()
            } else {
                format!("{} at {}", d.driver, d.bus_info)
            }
        });
        let kind = if i.physical { "device" } else { "virtual interface" };
        let route = if i.default_route { ", carries the default route" } else { "" };
        let _ = writeln!(out, "wirevault tune {}: {kind}, {driver}{route}", i.name);
    }
    for f in findings {
        let _ = writeln!(out, "{:<7} {:<21} {}", f.state.as_str(), f.check, f.found);
        if f.state != State::Ok {
            let _ = writeln!(out, "{:29} why: {}", "", f.reason);
            if let Some(fix) = &f.fix {
                let _ = writeln!(out, "{:29} fix: {fix}", "");
            }
        }
        if let Some(x) = &f.applied {
            let _ = writeln!(out, "{:29} applied: {}", "", x.result);
        }
    }
    let count = |s: State| findings.iter().filter(|f| f.state == s).count();
    let _ = writeln!(
        out,
        "{} ok, {} warn, {} bad, {} unknown",
        count(State::Ok),
        count(State::Warn),
        count(State::Bad),
        count(State::Unknown)
    );
}

/// `record`'s start-up warnings: the warn and bad findings for its interface (none for file and
/// synthetic sources) and its store, one line each with its level, to print (`message!`) on
/// standard error. `hugepages` is left out: record says what its arena got once it is
/// allocated.
pub fn startup_warnings(inputs: &Inputs) -> Vec<(Level, String)> {
    let live = inputs.interface.is_some();
    let Ok(facts) = wv_tune::gather(inputs) else { return Vec::new() };
    let mut lines = Vec::new();
    for f in wv_tune::checks::run(&facts) {
        let wanted = matches!(f.state, State::Warn | State::Bad)
            && f.check != "hugepages"
            && f.check != "store-discard"
            && (live || f.check.starts_with("store"));
        if wanted {
            let fix = f.fix.as_deref().map(|x| format!("; fix: {x}")).unwrap_or_default();
            lines.push((level(f.state), format!("tune: {} {}: {}{fix}", f.state.as_str(), f.check, f.found)));
        }
    }
    lines
}

/// The log level of a finding said at start-up: its state (`warn`, `bad`)
/// is the line's word, and both are warnings, as recording goes on.
fn level(state: State) -> Level {
    match state {
        State::Warn | State::Bad => Level::Warn,
        State::Ok | State::Unknown => Level::Info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warn_and_bad_findings_are_warnings() {
        let got: Vec<Level> = [State::Ok, State::Unknown, State::Warn, State::Bad].into_iter().map(level).collect();
        assert_eq!(got, [Level::Info, Level::Info, Level::Warn, Level::Warn]);
    }
}
