//! `wirevault serve STORE`: the HTTP API, Prometheus metrics and web
//! console over a store at rest (or one another process records), and the
//! same flags on `record --listen`, which serves the store it records.

use crate::{exit, fail};
use std::path::PathBuf;

/// The server's flags, shared by `serve` and `record`.
// Its doc comments are --help text, where `[v6]` and `[::1]` are addresses, not links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(clap::Args, Clone, Default)]
pub struct Listen {
    /// Serve the HTTP API, /metrics and the web console on ADDR (host:port, [v6]:port or a port
    /// for 127.0.0.1). Any address but loopback needs --tls-cert/--tls-key and --token-file or --client-ca.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// TLS: the server's certificate chain (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the server's private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Bearer tokens, one per line (NAME:TOKEN), mode 600; re-read on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM); needs TLS.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Refuse the client certificates this CRL revokes (PEM); re-read on SIGHUP.
    #[arg(long, value_name = "PEM", requires = "client_ca")]
    pub client_crl: Option<PathBuf>,
    /// API queries that run at once (more wait up to a minute, then get 503).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub max_queries: usize,
    #[arg(long, default_value = "16G", value_name = "SIZE", help = format!(
        "The most bytes one API answer may carry; a longer export is cut and says so; {}",
        wv_units::SIZE_FORMS
    ))]
    pub max_bytes: String,
    // A duration in the one grammar, so `--send-timeout 2` (seconds, as before) and `2m` both work.
    #[arg(long, default_value = "60", value_name = "DURATION", help = format!(
        "Reset a connection whose client takes no byte of its answer for this long, at least 1s (it stopped \
         reading): its transfer fails and its query slot comes free. A client that reads, however slowly, is \
         never cut; {}",
        wv_units::DURATION_FORMS
    ))]
    pub send_timeout: String,
    /// Without --token-file or --client-ca only requests addressed to localhost, 127.0.0.1 or
    /// [::1] are answered (no DNS rebinding); also answer those addressed to NAME (or NAME:PORT).
    /// Repeatable.
    #[arg(long = "allowed-host", value_name = "NAME", value_parser = parse_allowed_host)]
    pub allowed_hosts: Vec<wv_serve::AllowedHost>,
    /// CPU priority (nice, 0-19) of the threads that run API queries; above capture's (0) so
    /// that capture comes first.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(i32).range(0..=19))]
    pub query_nice: i32,
}

impl Listen {
    /// The server's configuration for `store`, or `None` without --listen.
    pub fn config(&self, store: &std::path::Path, default: Option<&str>) -> anyhow::Result<Option<wv_serve::Config>> {
        let Some(addr) = self.listen.as_deref().or(default) else {
            if self.tls_cert.is_some() || self.token_file.is_some() {
                return Err(fail(
                    exit::USAGE,
                    "--tls-cert and --token-file configure the HTTP server: give --listen ADDR too",
                ));
            }
            return Ok(None);
        };
        let listen = parse_addr(addr)?;
        let max_bytes = super::size_arg("--max-bytes", &self.max_bytes, true)?;
        let mut cfg = wv_serve::Config::new(store.to_path_buf(), listen, std::sync::Arc::new(server_log));
        cfg.tls = self.tls_cert.clone().zip(self.tls_key.clone()).map(|(cert, key)| wv_serve::TlsFiles {
            cert,
            key,
            client_ca: self.client_ca.clone(),
            client_crl: self.client_crl.clone(),
        });
        cfg.token_file = self.token_file.clone();
        cfg.max_queries = self.max_queries;
        cfg.max_bytes = max_bytes;
        cfg.send_timeout = super::duration_arg("--send-timeout", &self.send_timeout)?;
        if cfg.send_timeout < std::time::Duration::from_secs(1) {
            return Err(fail(exit::USAGE, format!("--send-timeout must be at least 1s, not {}", self.send_timeout)));
        }
        cfg.allowed_hosts = self.allowed_hosts.clone();
        cfg.query_nice = self.query_nice;
        cfg.check().map_err(|e| fail(exit::USAGE, e.to_string()))?;
        Ok(Some(cfg))
    }
}

/// The server's log lines, `wirevault: api: ...`, each at its level and
/// with its word (`wirevault: warning: api: ...`, as `record`'s reload
/// failure).
fn server_log(level: wv_serve::LogLevel, line: &str) {
    match level {
        wv_serve::LogLevel::Info => info!("{line}"),
        wv_serve::LogLevel::Warning => warn!("{line}"),
        wv_serve::LogLevel::Error => error!("{line}"),
    }
}

/// `--allowed-host`: a host name or address, with a port or not.
fn parse_allowed_host(s: &str) -> Result<wv_serve::AllowedHost, String> {
    s.parse()
}

/// `host:port`, `[v6]:port`, `localhost:port` or a bare port (loopback).
fn parse_addr(s: &str) -> anyhow::Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let bad = |why: &str| fail(exit::USAGE, format!("--listen {s}: {why}; give host:port such as 127.0.0.1:8080"));
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let mut addrs = s.to_socket_addrs().map_err(|e| bad(&e.to_string()))?;
    addrs.next().ok_or_else(|| bad("the name has no address"))
}

/// Starts the server (a sentence and exit code 2 or 1 when it cannot).
pub fn start(
    cfg: wv_serve::Config,
    board: Option<std::sync::Arc<wv_serve::LiveCounters>>,
) -> anyhow::Result<wv_serve::Server> {
    wv_serve::Server::start(cfg, board).map_err(|e| {
        let code = match e {
            wv_serve::ServeError::Config(_) | wv_serve::ServeError::Tokens(_) | wv_serve::ServeError::Tls(_) => {
                exit::USAGE
            }
            _ => exit::ERROR,
        };
        fail(code, e.to_string())
    })
}

/// What `serve --help` says after the options: the endpoints, and where it listens.
const ENDPOINTS: &str = "\
Listens on 127.0.0.1:8080 unless --listen says otherwise: the web console is then at
http://localhost:8080/ (or http://127.0.0.1:8080/).

Endpoints (GET; JSON unless they return packets; with --token-file the API and /metrics need a token):
  /api/v1/status     version, the recording's counters, disk and retention, the time horizon
  /api/v1/files      the catalog: the files overlapping from..to
  /api/v1/query      nanosecond pcap (from, to, filter, limit): the bytes `wirevault query -w` writes
  /api/v1/count      how many packets match (from, to, filter, limit), and why none if so
  /api/v1/histogram  packets and bytes per time bucket (from, to, step, filter)
  /api/v1/packets    the first matching packets, decoded (from, to, filter, limit): the console's table
  /metrics           Prometheus text (OpenMetrics when the scraper asks for it)
  /                  the web console
With --fleet FILE: /api/v1/query and count answer over every node (merged, each node's state in the
X-Wirevault-Nodes header and trailer), /api/v1/fleet gives each node's status (docs/fleet.md).
from and to take the CLI's forms (RFC 3339, epoch seconds, '10m ago'); filter is a tcpdump expression:
  curl -s -G localhost:8080/api/v1/query --data-urlencode 'filter=tcp port 443' | tcpdump -nn -r -";

/// Arguments of `wirevault serve`.
#[derive(clap::Args)]
// A later value wins: `--config`'s arguments come first, the command line's after them.
#[command(args_override_self = true, after_help = ENDPOINTS)]
pub struct Args {
    /// The store to serve (or `store = "DIR"` in the --config file).
    pub store: Option<PathBuf>,
    /// The store as a config file names it (key `store`); STORE on the command line wins.
    #[arg(long = "store", value_name = "DIR", hide = true)]
    pub store_key: Option<PathBuf>,
    /// Read the options from this TOML file (keys: the long option names, and store); the command line overrides it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve a fleet instead of a store: /api/v1/query and count answer over every node of
    /// this fleet file (TOML, see docs/fleet.md), merged, and /api/v1/fleet gives each node's status.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["store", "store_key"])]
    pub fleet: Option<PathBuf>,
    /// Only these nodes of the fleet file (repeated or comma-separated).
    #[arg(long = "node", value_name = "NAME", requires = "fleet", value_delimiter = ',')]
    pub nodes: Vec<String>,
    #[command(flatten)]
    pub listen: Listen,
}

pub fn run(mut args: Args) -> anyhow::Result<u8> {
    if let Some(file) = &args.fleet {
        let fleet = wv_fleet::FleetFile::load(file, &wv_fleet::Overrides::default())
            .and_then(|f| f.select(&args.nodes))
            .map_err(super::fleet::config_error)?;
        let mut cfg = args.listen.config(file, Some("127.0.0.1:8080"))?.expect("a default address is given");
        cfg.fleet = Some(std::sync::Arc::new(wv_serve::Fleet::new(fleet.nodes)));
        return serve(cfg);
    }
    let Some(store) = args.store.take().or(args.store_key.take()) else {
        return Err(fail(
            exit::USAGE,
            "give the store to serve: wirevault serve STORE (or store = \"DIR\" in --config), or --fleet FILE",
        ));
    };
    args.store = Some(store);
    let store = args.store.as_ref().expect("set above");
    if !store.join(wv_store::layout::CATALOG).is_file() {
        return Err(fail(
            exit::ERROR,
            format!(
                "{} is not a store (no {}); give the directory `wirevault record -o` writes",
                store.display(),
                wv_store::layout::CATALOG
            ),
        ));
    }
    let cfg = args.listen.config(store, Some("127.0.0.1:8080"))?.expect("a default address is given");
    serve(cfg)
}

/// Serves until a stop signal; SIGHUP reloads.
fn serve(cfg: wv_serve::Config) -> anyhow::Result<u8> {
    // SIGHUP reloads tokens and certificates; the stop signals end the server.
    let hup = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    crate::cmd::catch_signals(crate::cmd::stop_signals(), |sig| {
        if sig == libc::SIGHUP {
            hup.clone()
        } else {
            stop.clone()
        }
    })?;
    let server = start(cfg, None)?;
    use std::sync::atomic::Ordering;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if hup.swap(false, Ordering::Relaxed) {
            match server.reload() {
                Ok(what) => info!("api: {what}"),
                Err(e) => warn!("api: reload failed, the previous settings stay: {e}"),
            }
        }
    }
    server.stop();
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Level;

    #[test]
    fn server_lines_keep_their_level_and_say_it() {
        let got = crate::log::tests::lines_of(|| {
            server_log(wv_serve::LogLevel::Info, "api: serving s");
            server_log(wv_serve::LogLevel::Warning, "api: accept failed: x");
            server_log(wv_serve::LogLevel::Error, "api: cannot listen: x");
        });
        let got: Vec<(Level, &str)> = got.iter().map(|l| (l.0, l.1.as_str())).collect();
        assert_eq!(
            got,
            [
                (Level::Info, "wirevault: api: serving s"),
                (Level::Warn, "wirevault: warning: api: accept failed: x"),
                (Level::Error, "wirevault: error: api: cannot listen: x"),
            ]
        );
    }
}
