//! One module per subcommand: clap arguments, validation, wiring.
pub mod analyze;
pub mod config;
pub mod disk_bench;
pub mod docs;
pub mod index;
pub mod plan;
pub mod query;
pub mod record;
pub mod repair;
pub mod replay;
pub mod serve;
pub mod timestamps;
pub mod tune;

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
    let time = |s: &Option<String>| -> anyhow::Result<Option<u64>> {
        s.as_deref().map(|t| wv_query::parse_time(t, now).map_err(|e| fail(exit::USAGE, e.to_string()))).transpose()
    };
    let (f, t) = (time(from)?, time(to)?);
    if let (Some(a), Some(b)) = (f, t) {
        if a >= b {
            return Err(fail(exit::USAGE, format!("{} must be earlier than {}", names.0, names.1)));
        }
    }
    Ok((f, t))
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
