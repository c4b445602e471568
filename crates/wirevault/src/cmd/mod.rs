//! One module per subcommand: clap arguments, validation, wiring.
pub mod docs;
pub mod index;
pub mod plan;
pub mod query;
pub mod record;
pub mod repair;
pub mod timestamps;

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
