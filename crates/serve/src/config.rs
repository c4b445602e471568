//! What the server is told, and the rules checked before it listens: any
//! address other than loopback needs TLS and a way to know who asks
//! (bearer tokens or client certificates).

use std::net::SocketAddr;
use std::path::PathBuf;

/// The server's settings (the binary fills them from flags or a config file).
#[derive(Clone)]
pub struct Config {
    /// The store served (the one being recorded, with `record --listen`).
    pub store: PathBuf,
    pub listen: SocketAddr,
    pub tls: Option<TlsFiles>,
    /// Bearer tokens, one per line (`NAME:TOKEN` or `TOKEN`), re-read on reload.
    pub token_file: Option<PathBuf>,
    /// Queries (pcap, count, histogram) that run at once; more wait their turn.
    pub max_queries: usize,
    /// How long a query waits for its turn before the answer is 503.
    pub queue_wait: std::time::Duration,
    /// The most bytes one answer may carry (pcap export).
    pub max_bytes: u64,
    /// How long a connection with an answer to send may go without its
    /// client taking a byte (its TCP acknowledging one) before the server
    /// gives the client up and resets the connection, freeing its query
    /// slot. A client that reads, however slowly, is never cut.
    pub send_timeout: std::time::Duration,
    /// Names requests may be addressed to besides loopback ones, when
    /// neither tokens nor client certificates are asked for (see [`crate::host`]).
    pub allowed_hosts: Vec<crate::host::AllowedHost>,
    /// Nice value (0..=19) of the query threads; their I/O is best effort, lowest level.
    pub query_nice: i32,
    /// Where request and server log lines go.
    pub log: crate::LogFn,
    /// `serve --fleet`: the nodes the query endpoints answer over (`store` is then unused).
    pub fleet: Option<std::sync::Arc<crate::fleet::Fleet>>,
}

/// TLS files: the server's certificate chain and key, and for client
/// certificates the CA that signs them and, optionally, its CRL.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
    pub client_crl: Option<PathBuf>,
}

/// A setting the server refuses, as one sentence.
#[derive(thiserror::Error, Debug)]
pub enum ConfigError {
    #[error("refusing to listen on {0} without TLS: any address other than loopback needs --tls-cert and --tls-key (and --token-file or --client-ca)")]
    PlainNonLoopback(SocketAddr),
    #[error("refusing to listen on {0} without a way to tell who asks: give --token-file (bearer tokens) or --client-ca (client certificates)")]
    NoAuth(SocketAddr),
    #[error("--client-crl needs --client-ca (the CRL revokes certificates that CA signed)")]
    CrlWithoutCa,
    #[error("--max-queries must be at least 1")]
    NoQueries,
    #[error("--max-bytes must be at least 24 (a pcap file header)")]
    TinyMaxBytes,
    #[error("--send-timeout must be at least 1 second")]
    NoSendTimeout,
}

impl Config {
    /// Defaults for `store` on `listen`: 4 queries at once, each waiting
    /// up to a minute, 16 GiB per answer, a client given up after 60 s
    /// without taking data, loopback names only, queries at nice 10.
    pub fn new(store: PathBuf, listen: SocketAddr, log: crate::LogFn) -> Config {
        Config {
            store,
            listen,
            tls: None,
            token_file: None,
            max_queries: 4,
            queue_wait: std::time::Duration::from_secs(60),
            max_bytes: 16 << 30,
            send_timeout: std::time::Duration::from_secs(60),
            allowed_hosts: Vec::new(),
            query_nice: 10,
            log,
            fleet: None,
        }
    }

    /// The rules a setting must follow before anything listens.
    pub fn check(&self) -> Result<(), ConfigError> {
        let loopback = self.listen.ip().is_loopback();
        if !loopback && self.tls.is_none() {
            return Err(ConfigError::PlainNonLoopback(self.listen));
        }
        let client_certs = self.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
        if !loopback && self.token_file.is_none() && !client_certs {
            return Err(ConfigError::NoAuth(self.listen));
        }
        if self.tls.as_ref().is_some_and(|t| t.client_crl.is_some() && t.client_ca.is_none()) {
            return Err(ConfigError::CrlWithoutCa);
        }
        if self.max_queries == 0 {
            return Err(ConfigError::NoQueries);
        }
        if self.max_bytes < 24 {
            return Err(ConfigError::TinyMaxBytes);
        }
        if self.send_timeout.is_zero() {
            return Err(ConfigError::NoSendTimeout);
        }
        Ok(())
    }

    pub(crate) fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(addr: &str) -> Config {
        Config::new("/tmp/s".into(), addr.parse().unwrap(), std::sync::Arc::new(|_, _: &str| {}))
    }

    #[test]
    fn loopback_plain_is_fine_and_anything_else_needs_tls_and_auth() {
        assert!(cfg("127.0.0.1:1").check().is_ok());
        assert!(cfg("[::1]:1").check().is_ok());
        assert!(matches!(cfg("0.0.0.0:1").check(), Err(ConfigError::PlainNonLoopback(_))));
        let mut c = cfg("10.1.2.3:443");
        c.tls = Some(TlsFiles { cert: "c".into(), key: "k".into(), client_ca: None, client_crl: None });
        assert!(matches!(c.check(), Err(ConfigError::NoAuth(_))));
        c.token_file = Some("t".into());
        assert!(c.check().is_ok());
        c.token_file = None;
        c.tls.as_mut().unwrap().client_ca = Some("ca".into());
        assert!(c.check().is_ok());
        c.tls.as_mut().unwrap().client_ca = None;
        c.tls.as_mut().unwrap().client_crl = Some("crl".into());
        c.token_file = Some("t".into());
        assert!(matches!(c.check(), Err(ConfigError::CrlWithoutCa)));
    }

    #[test]
    fn limits_below_their_least_are_refused() {
        let mut c = cfg("127.0.0.1:1");
        c.max_queries = 0;
        assert!(matches!(c.check(), Err(ConfigError::NoQueries)));
        let mut c = cfg("127.0.0.1:1");
        c.max_bytes = 23;
        assert!(matches!(c.check(), Err(ConfigError::TinyMaxBytes)));
        c.max_bytes = 24;
        assert!(c.check().is_ok());
        c.send_timeout = std::time::Duration::ZERO;
        assert!(matches!(c.check(), Err(ConfigError::NoSendTimeout)));
    }

    #[test]
    fn the_defaults_are_documented_ones_and_the_scheme_follows_tls() {
        let mut c = cfg("127.0.0.1:1");
        assert_eq!((c.max_queries, c.max_bytes, c.send_timeout.as_secs(), c.query_nice), (4, 16 << 30, 60, 10));
        assert_eq!(c.scheme(), "http");
        c.tls = Some(TlsFiles { cert: "c".into(), key: "k".into(), client_ca: None, client_crl: None });
        assert_eq!(c.scheme(), "https");
        let e = cfg("192.0.2.1:443").check().unwrap_err().to_string();
        assert!(e.starts_with("refusing to listen on 192.0.2.1:443 without TLS"), "{e}");
    }
}
