//! Network namespaces joined by a veth pair, so that a test owns every frame
//! on its link.

use super::{run_ok, unique};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Two fresh network namespaces joined by a veth pair (`veth-a` in `ns_a`,
/// `veth-b` in `ns_b`), MTU 9000, with IPv6 and ARP off and no addresses so
/// that the kernel sends nothing on its own: every frame on the link is one
/// the test sent. Dropping it deletes both namespaces (and with them the
/// veth pair).
pub struct VethPair {
    pub ns_a: String,
    pub ns_b: String,
    pub if_a: &'static str,
    pub if_b: &'static str,
}

/// `ip ARGS...`, which must succeed.
pub fn ip(args: &[&str]) {
    run_ok(Command::new("ip").args(args));
}

/// Makes `dev` in namespace `ns` a host: its MAC `mac`, address `addr`/24, its one peer
/// `peer` known at `peer_mac` (no ARP on the wire), and loopback up.
pub fn host(ns: &str, dev: &str, (addr, mac): (&str, &str), (peer, peer_mac): (&str, &str)) {
    ip(&["-n", ns, "link", "set", "dev", dev, "address", mac]);
    ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
    ip(&["-n", ns, "neigh", "replace", peer, "lladdr", peer_mac, "dev", dev]);
    ip(&["-n", ns, "link", "set", "lo", "up"]);
}

impl VethPair {
    pub fn new() -> VethPair {
        VethPair::with_queues(1)
    }

    /// A pair whose ends have `queues` receive and transmit queues each.
    pub fn with_queues(queues: u32) -> VethPair {
        remove_stale_namespaces();
        let base = format!("wvt-{}-{}", std::process::id(), unique());
        let pair = VethPair { ns_a: format!("{base}-a"), ns_b: format!("{base}-b"), if_a: "veth-a", if_b: "veth-b" };
        for ns in [&pair.ns_a, &pair.ns_b] {
            ip(&["netns", "add", ns]);
            // Before the veth exists, so that it never gets an IPv6 address
            // (no ND, MLD or router solicitations on the link).
            run_ok(
                Command::new("ip")
                    .args(["netns", "exec", ns, "sysctl", "-qw"])
                    .args(["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]),
            );
        }
        let q = queues.to_string();
        let q: &[&str] = if queues > 1 { &["numtxqueues", &q, "numrxqueues", &q] } else { &[] };
        let (a, b) = (
            [&["link", "add", pair.if_a, "netns", &pair.ns_a], q].concat(),
            [&["name", pair.if_b, "netns", &pair.ns_b], q].concat(),
        );
        ip(&[&a[..], &["type", "veth", "peer"], &b[..]].concat());
        for (ns, dev) in [(&pair.ns_a, pair.if_a), (&pair.ns_b, pair.if_b)] {
            ip(&["-n", ns, "link", "set", "dev", dev, "mtu", "9000", "arp", "off", "multicast", "off", "up"]);
        }
        // veth reports carrier as soon as both ends are up; wait for it so
        // that tcpreplay never meets a link that is still down.
        for (ns, dev) in [(&pair.ns_a, pair.if_a), (&pair.ns_b, pair.if_b)] {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let out = run_ok(Command::new("ip").args(["-n", ns, "-o", "link", "show", "dev", dev]));
                if String::from_utf8_lossy(&out.stdout).contains("LOWER_UP") {
                    break;
                }
                assert!(Instant::now() < deadline, "{dev} in {ns} never came up");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        pair
    }

    /// `ip netns exec NS` followed by a program.
    pub fn exec(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }

    /// tcpdump on this pair's far end (`if_b` in `ns_b`), nanosecond stamps, writing `out`
    /// with a kernel buffer of `buffer_kib`; started 700 ms before it returns, so it sees
    /// what is sent next. Stop it with SIGINT (its stderr is piped for the summary).
    pub fn tcpdump_beside(&self, out: &Path, buffer_kib: u32) -> Child {
        let td = VethPair::exec(&self.ns_b, "tcpdump")
            .args(["-i", self.if_b, "-n", "-U", "-B", &buffer_kib.to_string(), "--time-stamp-precision=nano", "-w"])
            .arg(out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tcpdump");
        std::thread::sleep(std::time::Duration::from_millis(700));
        td
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
    }
}

/// Deletes namespaces left behind by test processes that no longer exist
/// (a test killed by a signal cannot run its Drop guard).
pub fn remove_stale_namespaces() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("wvt-") else {
            continue;
        };
        let pid: u32 = rest.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if pid != 0 && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}
