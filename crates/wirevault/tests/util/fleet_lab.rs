//! The fleet lab of `scripts/fleet-lab.sh` as a test drives it: a sender, a
//! splitter that hashes the traffic over N links, a `wirevault record` on each
//! link and a `wirevault serve` of each store on loopback, and tcpdump's capture
//! of the unsplit traffic (docs/fleet.md). The test runs the script itself,
//! so that what the tests check is the lab a user runs.

use super::{bin, remove_stale_namespaces, run_ok, unique, TempDir};
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tools the lab needs besides root (the script checks them again).
pub const FLEET_LAB_TOOLS: &[&str] = &["ip", "tc", "tcpdump", "tcpreplay", "curl", "python3"];

/// One recorder of the lab: its link's name, its store, and its server.
pub struct LabNode {
    pub name: String,
    pub store: PathBuf,
    pub url: String,
    /// The bearer token's file (the token alone, as the fleet file names it).
    pub token_file: PathBuf,
}

impl LabNode {
    /// The node's bearer token.
    pub fn token(&self) -> String {
        fs::read_to_string(&self.token_file).expect("read the token").trim().to_string()
    }
}

/// A running lab; dropping it takes it down (processes ended, namespaces deleted).
pub struct FleetLab {
    pub dir: TempDir,
    pub nodes: Vec<LabNode>,
    /// tcpdump's capture of everything the splitter received (complete after [`FleetLab::stop`]).
    pub unsplit: PathBuf,
    /// The fleet file `up` printed.
    pub fleet_file: PathBuf,
    name: String,
}

/// The script, from the repository beside this crate.
pub fn fleet_lab_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fleet-lab.sh")
}

/// A first port of `n` consecutive ones free on 127.0.0.1 (as far as one can tell
/// without holding them: another process may take one meanwhile, then `up` fails and says so).
fn free_ports(n: u16) -> u16 {
    for _ in 0..100 {
        let base = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0);
        if base == 0 || base > u16::MAX - n {
            continue;
        }
        if (0..n).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports on 127.0.0.1");
}

impl FleetLab {
    /// Builds and starts a lab of `nodes` recorders, its splitter hashing symmetrically
    /// (both directions of a conversation on one link) unless `asymmetric`.
    pub fn up(nodes: usize, asymmetric: bool) -> FleetLab {
        remove_stale_namespaces();
        let dir = TempDir::new("fleet-lab");
        let name = format!("wvt-{}-{}", std::process::id(), unique());
        let port_base = free_ports(nodes as u16);
        let mut lab = FleetLab {
            nodes: (0..nodes)
                .map(|i| LabNode {
                    name: format!("lnk{i}"),
                    store: dir.join(format!("store-lnk{i}")),
                    url: format!("http://127.0.0.1:{}", port_base + i as u16),
                    token_file: dir.join(format!("tokens/lnk{i}.token")),
                })
                .collect(),
            unsplit: dir.join("unsplit.pcap"),
            fleet_file: PathBuf::new(),
            name,
            dir,
        };
        let mut args = vec!["--nodes".to_string(), nodes.to_string(), "--port-base".into(), port_base.to_string()];
        args.extend(["--bin".into(), bin().into()]);
        if asymmetric {
            args.push("--asymmetric".into());
        }
        args.push("up".into());
        let out = lab.run(&args);
        lab.fleet_file = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim());
        assert!(lab.fleet_file.is_file(), "fleet-lab.sh up printed no fleet file: {:?}", lab.fleet_file);
        lab
    }

    /// `fleet-lab.sh --dir DIR --name NAME ARGS...`, which must succeed.
    fn run(&self, args: &[String]) -> std::process::Output {
        run_ok(
            Command::new("bash")
                .arg(fleet_lab_script())
                .arg("--dir")
                .arg(self.dir.path())
                .args(["--name", &self.name])
                .args(args),
        )
    }

    /// Replays `pcap` into the splitter (tcpreplay `extra` options, default 5000
    /// packets/s) and returns once every store can be queried for all of it.
    pub fn send(&self, pcap: &Path, extra: &[&str]) {
        let mut a = vec!["send".to_string(), pcap.to_str().expect("a UTF-8 path").to_string()];
        a.extend(extra.iter().map(|s| s.to_string()));
        self.run(&a);
    }

    /// Ends the captures (the recorders close their files, tcpdump its capture); the servers go on.
    pub fn stop(&self) {
        self.run(&["stop".into()]);
    }

    /// `fleet-lab.sh status`: what runs, and each classifier's packet count.
    pub fn status(&self) -> String {
        String::from_utf8_lossy(&self.run(&["status".into()]).stdout).into_owned()
    }
}

/// Writes the lab's test capture: `rounds` times 56 conversations (TCP, UDP, ICMP,
/// IPv6, 802.1Q, QinQ; and two ARP exchanges), both directions, every frame unique.
pub fn write_lab_pcap(out: &Path, seed: u32, rounds: u32) {
    run_ok(
        Command::new("bash").arg(fleet_lab_script()).arg("pcap").arg(out).arg(seed.to_string()).arg(rounds.to_string()),
    );
}

impl Drop for FleetLab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(fleet_lab_script())
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--name", &self.name, "down"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status();
    }
}
