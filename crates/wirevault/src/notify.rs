//! systemd's readiness protocol (sd_notify), without libsystemd: datagrams
//! such as `READY=1\nSTATUS=...` to the socket named in `NOTIFY_SOCKET`
//! (a path, or an abstract name written with a leading `@`), and the
//! watchdog's `WATCHDOG=1` every half `WATCHDOG_USEC` when the unit sets
//! `WatchdogSec=`. Outside systemd (no `NOTIFY_SOCKET`) every call does
//! nothing. A message that cannot be sent is dropped: the service manager
//! is told of failures by the exit code, not by this channel.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// The service manager's notification socket, if the process has one.
pub struct Notifier {
    sock: UnixDatagram,
    addr: std::os::unix::net::SocketAddr,
    /// Half the watchdog interval, if the unit has one for this process.
    watchdog: Option<Duration>,
    last_ping: Instant,
}

impl Notifier {
    /// From `NOTIFY_SOCKET` and `WATCHDOG_USEC`/`WATCHDOG_PID` (the watchdog
    /// only if meant for this process). `None` outside systemd.
    pub fn from_env() -> Option<Notifier> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        let addr = socket_addr(path.to_str()?)?;
        let sock = UnixDatagram::unbound().ok()?;
        // Never block the status loop: a receiver that does not read (a full
        // queue) loses the message instead.
        sock.set_nonblocking(true).ok()?;
        let for_us = std::env::var("WATCHDOG_PID").map_or(true, |p| p.parse() == Ok(std::process::id()));
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|&u| u > 0 && for_us)
            .map(|u| Duration::from_micros(u / 2));
        Some(Notifier { sock, addr, watchdog, last_ping: Instant::now() })
    }

    /// Sends `state` (newline-separated `KEY=VALUE` assignments).
    pub fn send(&self, state: &str) {
        let _ = self.sock.send_to_addr(state.as_bytes(), &self.addr);
    }

    /// Capture runs: `READY=1` with a status text for `systemctl status`.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}\nMAINPID={}", std::process::id()));
    }

    /// Called often (the status loop, every 100 ms): pings the watchdog
    /// when half its interval has passed.
    pub fn tick(&mut self) {
        if let Some(half) = self.watchdog {
            if self.last_ping.elapsed() >= half {
                self.send("WATCHDOG=1");
                self.last_ping = Instant::now();
            }
        }
    }
}

/// `NOTIFY_SOCKET`'s value as an address: `@name` is in the abstract namespace.
fn socket_addr(s: &str) -> Option<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    match s.strip_prefix('@') {
        Some(name) => std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).ok(),
        None if s.starts_with('/') => std::os::unix::net::SocketAddr::from_pathname(s).ok(),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_and_path_sockets() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("wirevault-notify-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&socket_addr(&format!("@{name}")).unwrap()).unwrap();
        let addr = socket_addr(&format!("@{name}")).unwrap();
        assert_eq!(addr.as_abstract_name(), Some(name.as_bytes()));
        let n = Notifier { sock: UnixDatagram::unbound().unwrap(), addr, watchdog: None, last_ping: Instant::now() };
        n.send("READY=1");
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
        assert!(socket_addr("relative").is_none());
    }
}
