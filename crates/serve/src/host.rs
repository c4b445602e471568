//! The `Host` check that keeps DNS rebinding out. A web page can make its
//! own name resolve to 127.0.0.1 after it loaded; the browser then sends
//! the page's requests to the server on loopback, as the same origin, with
//! the page's name in `Host`. A server without tokens or client
//! certificates therefore answers only requests addressed to a loopback
//! name or address (what a browser on this host, an SSH tunnel or curl
//! sends), or to a name the operator allowed (`--allowed-host`). With
//! tokens or client certificates the check is off: the page has neither
//! (a cookie belongs to the name it was set for, and a certificate is
//! offered to the server's name only).

use std::net::{IpAddr, SocketAddr};

/// A name (or address) requests may be addressed to, with the port they
/// must name if one was given: `recorder.lan`, `recorder.lan:8080`,
/// `10.0.0.5`, `[fd00::5]:8443`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedHost {
    /// Lower case, without a trailing dot; an IPv6 address in brackets.
    host: String,
    port: Option<u16>,
}

impl std::str::FromStr for AllowedHost {
    type Err = String;

    fn from_str(s: &str) -> Result<AllowedHost, String> {
        let (host, port) = split(s).ok_or_else(|| {
            format!("{s:?} is not a host name or address (give NAME, NAME:PORT, an address, or [IPv6]:PORT)")
        })?;
        Ok(AllowedHost { host, port })
    }
}

/// `host[:port]` or `[v6][:port]` as compared: the host in lower case
/// without a trailing dot (`LocalHost.` is `localhost`), an IPv6 address in
/// brackets; `None` for anything else (user info, a path, a port that is
/// not a number, characters no host name has).
fn split(s: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match s.strip_prefix('[') {
        Some(rest) => {
            let (v6, tail) = rest.split_once(']')?;
            v6.parse::<std::net::Ipv6Addr>().ok()?;
            let port = if tail.is_empty() { None } else { Some(tail.strip_prefix(':')?) };
            (&s[..v6.len() + 2], port)
        }
        None => match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        },
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Some(p.parse().ok()?),
        Some(_) => return None,
        None => None,
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let named = host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    (!host.is_empty() && (named || host.starts_with('['))).then_some((host, port))
}

impl std::fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// True for `localhost` and any loopback address (`127.0.0.0/8`, `[::1]`,
/// `[::ffff:127.0.0.1]`), whatever the port: a browser never asks DNS for
/// those, so no page can rebind them.
fn is_loopback(host: &str) -> bool {
    if host == "localhost" {
        return true;
    }
    let ip = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        Ok(v4) => v4.is_loopback(),
        Err(_) => false,
    }
}

/// Whether a request addressed to `authority` (its `Host`, or the
/// authority of an absolute request URI) is answered by a server on
/// `listen` that allows `allowed` besides loopback.
pub(crate) fn answered(authority: &str, listen: SocketAddr, allowed: &[AllowedHost]) -> bool {
    let Some((host, port)) = split(authority) else { return false };
    if is_loopback(&host) {
        return true;
    }
    let listen_host = match listen.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    };
    (host == listen_host && port.is_none_or(|p| p == listen.port()))
        || allowed.iter().any(|h| h.host == host && h.port.is_none_or(|p| port == Some(p)))
}

/// The sentence of a 421: what the request was addressed to, and what to do.
pub(crate) fn misdirected(authority: &str, listen: SocketAddr) -> String {
    let port = listen.port();
    format!(
        "this server asks for no token or client certificate, so it answers only requests addressed to localhost, 127.0.0.1 or [::1] \
         (a web page could otherwise read it through DNS rebinding), not to {authority:?}: open \
         http://localhost:{port}/ or http://127.0.0.1:{port}/, or start the server with --allowed-host NAME"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(authority: &str, allowed: &[&str]) -> bool {
        let allowed: Vec<AllowedHost> = allowed.iter().map(|s| s.parse().unwrap()).collect();
        answered(authority, "127.0.0.1:8080".parse().unwrap(), &allowed)
    }

    #[test]
    fn loopback_names_and_addresses_with_any_port_are_answered() {
        for a in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.:9000",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:8080",
        ] {
            assert!(ok(a, &[]), "{a}");
        }
        for a in [
            "attacker.example:8080",
            "attacker.example",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:8080",
            "[::2]:8080",
            "user@localhost:8080",
            "localhost:http",
            "",
            "a b",
        ] {
            assert!(!ok(a, &[]), "{a}");
        }
    }

    #[test]
    fn allowed_hosts_match_by_name_and_given_port() {
        assert!(ok("Recorder.Lan:8080", &["recorder.lan"]));
        assert!(ok("recorder.lan", &["recorder.lan"]));
        assert!(ok("recorder.lan:8080", &["recorder.lan:8080"]));
        assert!(!ok("recorder.lan:9090", &["recorder.lan:8080"]));
        assert!(!ok("recorder.lan", &["recorder.lan:8080"]));
        assert!(!ok("other.lan:8080", &["recorder.lan"]));
        assert!(ok("[fd00::5]:8443", &["[FD00::5]"]));
        assert!(ok("10.0.0.5:8080", &["10.0.0.5"]));
        let listen: SocketAddr = "[::1]:8080".parse().unwrap();
        assert!(answered("[::1]:8080", listen, &[]));
    }

    #[test]
    fn allowed_hosts_are_checked_when_given() {
        assert_eq!("Recorder.LAN.".parse::<AllowedHost>().unwrap().to_string(), "recorder.lan");
        assert_eq!("recorder.lan:8080".parse::<AllowedHost>().unwrap().to_string(), "recorder.lan:8080");
        assert_eq!("[fd00::5]:8443".parse::<AllowedHost>().unwrap().to_string(), "[fd00::5]:8443");
        for bad in [
            "",
            "a b",
            "x@recorder",
            "recorder:port",
            "recorder:",
            "http://recorder",
            "recorder/x",
            "re*corder",
            "[::1]x",
            "[nope]",
        ] {
            assert!(bad.parse::<AllowedHost>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_listen_address_is_answered_on_its_own_port_or_none() {
        let listen: SocketAddr = "10.0.0.5:8080".parse().unwrap();
        assert!(answered("10.0.0.5:8080", listen, &[]));
        assert!(answered("10.0.0.5", listen, &[]));
        assert!(!answered("10.0.0.5:9090", listen, &[]));
        assert!(!answered("10.0.0.6:8080", listen, &[]));
        let v6: SocketAddr = "[fd00::1]:8443".parse().unwrap();
        assert!(answered("[FD00::1]:8443", v6, &[]));
        assert!(!answered("[fd00::1]:8080", v6, &[]));
        // Browsers on Linux reach loopback through 0.0.0.0; it is no loopback name.
        assert!(!answered("0.0.0.0:8080", "127.0.0.1:8080".parse().unwrap(), &[]));
    }

    #[test]
    fn the_misdirected_sentence_names_the_request_and_the_port() {
        let s = misdirected("evil.example:80", "127.0.0.1:9000".parse().unwrap());
        assert!(s.contains("not to \"evil.example:80\""), "{s}");
        assert!(s.contains("http://localhost:9000/ or http://127.0.0.1:9000/"), "{s}");
        assert!(s.ends_with("--allowed-host NAME"), "{s}");
    }
}
