//! One module per subcommand: clap arguments, validation, wiring.
pub mod analyze;
pub mod config;
pub mod disk_bench;
pub mod docs;
pub mod examples;
pub mod fleet;
pub mod flows;
pub mod habits;
pub mod index;
pub mod plan;
pub mod query;
pub mod record;
pub mod repair;
pub mod replay;
pub mod serve;
pub mod timestamps;
pub mod tune;

/// clap's parser of a packet count of 1 or more (`--limit`) in the one
/// grammar of counts ([`wv_units::COUNT_FORMS`]: `--limit 1M`).
pub fn packet_limit(s: &str) -> Result<u64, String> {
    wv_units::parse_count(s).filter(|&n| n > 0).ok_or_else(|| wv_units::count_error("--limit", s))
}

/// clap's parser of record's `-c N`: a count as [`packet_limit`] takes it; 0
/// gets record's own sentence later ("-c 0 would store nothing").
pub fn record_count(s: &str) -> Result<u64, String> {
    wv_units::parse_count(s).ok_or_else(|| wv_units::count_error("--count", s))
}

/// Option `name`'s duration `s` in the one grammar of durations
/// ([`wv_units::DURATION_FORMS`]); a refused form is a usage error, the
/// same sentence for every option.
pub fn duration_arg(name: &str, s: &str) -> anyhow::Result<std::time::Duration> {
    wv_units::parse_duration(s).map_err(|e| crate::fail(crate::exit::USAGE, wv_units::duration_error(name, s, &e)))
}

/// Option `name`'s size `s` in the one grammar of sizes ([`wv_units::SIZE_FORMS`]),
/// refused in one sentence as [`duration_arg`] refuses a duration; `0` is refused
/// as "must be above 0" unless `zero` allows it.
pub fn size_arg(name: &str, s: &str, zero: bool) -> anyhow::Result<u64> {
    let usage = |m: String| crate::fail(crate::exit::USAGE, m);
    match wv_units::parse_size(s) {
        None => Err(usage(wv_units::size_error(name, s))),
        Some(0) if !zero => Err(usage(format!("{name} must be above 0, not {s}"))),
        Some(v) => Ok(v),
    }
}

/// Parses a time range given as two options (`names`, e.g. `("--from", "--to")`):
/// each an RFC 3339 time, epoch seconds or `10m ago`; the first earlier than the
/// second. A bad value is a usage error (one sentence).
pub fn time_range(
    from: &Option<String>,
    to: &Option<String>,
    names: (&str, &str),
) -> anyhow::Result<(Option<u64>, Option<u64>)> {
    use crate::{exit, fail};
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let time = |s: &Option<String>, name: &str| -> anyhow::Result<Option<u64>> {
        s.as_deref()
            .map(|t| {
                wv_query::parse_time(t, now).map_err(|e| {
                    // `--from -5`: a habit of tools that count back from now.
                    if t.trim_start().starts_with('-') {
                        fail(
                            exit::USAGE,
                            format!(
                                "{name} {t}: a time is RFC 3339 (2026-11-22T10:15:00Z), epoch seconds \
                                 (1763806500.25) or a time before now such as '5m ago' or '2h ago', not a negative number"
                            ),
                        )
                    } else {
                        fail(exit::USAGE, e.to_string())
                    }
                })
            })
            .transpose()
    };
    let (f, t) = (time(from, names.0)?, time(to, names.1)?);
    if let (Some(a), Some(b)) = (f, t) {
        if a >= b {
            return Err(fail(exit::USAGE, format!("{} must be earlier than {}", names.0, names.1)));
        }
    }
    Ok((f, t))
}

thread_local! {
    /// The stop signals held back on the main thread since `main` began.
    static HELD: std::cell::RefCell<Option<wv_sys::signal::Held>> = const { std::cell::RefCell::new(None) };
}

/// Holds the stop signals back on the calling (main) thread, first thing in
/// `main`: parsing arguments and checking inputs come before a command
/// installs its handlers, and a SIGINT or SIGTERM in between would otherwise
/// kill it by the default action. A signal sent meanwhile waits, and is
/// delivered by [`release_signals`]: to the command's handler, or, for a
/// command without one, to the default action as before.
pub fn hold_signals() {
    // If the mask cannot be set, the window stays as it was: nothing to report.
    if let Ok(held) = wv_sys::signal::Held::block(&stop_signals()) {
        HELD.with(|h| *h.borrow_mut() = Some(held));
    }
}

/// Ends [`hold_signals`]' hold; a signal that arrived meanwhile is delivered
/// now. A command that catches signals calls it right after installing its
/// handlers; `main` calls it for the others. Calling it again does nothing.
pub fn release_signals() {
    HELD.with(|h| drop(h.borrow_mut().take()));
}

/// Installs, for each of `signals`, a handler that sets the flag `flag_of`
/// gives for it, then ends the hold of [`hold_signals`]: a signal that came
/// since `main` began sets its flag now.
pub fn catch_signals(
    signals: impl IntoIterator<Item = libc::c_int>,
    mut flag_of: impl FnMut(libc::c_int) -> std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<()> {
    for sig in signals {
        signal_hook::flag::register(sig, flag_of(sig))
            .map_err(|e| crate::fail(crate::exit::ERROR, format!("cannot install signal handlers: {e}")))?;
    }
    release_signals();
    Ok(())
}

/// Signals whose default action ends the process and that can be caught:
/// each stops `record` and `index` as SIGTERM does (tcpdump treats SIGHUP so too),
/// so that no signal loses what was written. Hardware faults (SIGSEGV,
/// SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS) are not among them: returning
/// from their handler would repeat the fault. SIGPIPE is ignored (the Rust
/// runtime sets it so): a closed standard output is a write error, not death.
pub fn stop_signals() -> Vec<libc::c_int> {
    let mut v = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
    ];
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn packet_limits() {
        for (s, n) in [("1", 1), ("1M", 1_000_000), ("250k", 250_000), ("2G", 2_000_000_000), ("3K", 3000)] {
            assert_eq!(super::packet_limit(s), Ok(n), "{s}");
        }
        for bad in ["0", "0M", "", "M", "1.5M", "-1", "1m", "99999999999G", "1 M"] {
            assert!(super::packet_limit(bad).is_err(), "{bad}");
        }
    }
}
