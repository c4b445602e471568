//! `wirevault tune`: is this host set up to record without loss? The research behind wirevault
//! (Moreno et al., "Testing the capacity of off-the-shelf systems to store 10GbE traffic",
//! IEEE Communications Magazine 2015) found that affinity alone (capture on the NIC's NUMA
//! node, a few RX queues with their interrupts there) doubled what tcpdump stored; offloads
//! that merge frames make the stored frames differ from the wire's; the disk path needs large
//! O_DIRECT writes on a volume that keeps up.
//!
//! Three steps, each its own module: [`facts::gather`] reads what the kernel says (sysfs,
//! procfs, the NIC's ethtool ioctls); [`checks::run`] judges the facts, each check a pure
//! function returning one [`Finding`] (a state, what was found, why it matters, the command
//! that fixes it); [`apply::apply`] carries out the fixes that are safe to make on a running
//! host. Policy (which findings to show, exit codes) stays in the binary.
#![deny(unsafe_code)]

pub mod apply;
pub mod checks;
pub mod facts;
pub mod parse;

pub use facts::{gather, Facts, Inputs};

/// How a finding judges the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Set up as the recorder wants it (or not applicable).
    Ok,
    /// Could not be read: the fix says where to look.
    Unknown,
    /// Costs performance or fidelity; recording works.
    Warn,
    /// Loses or changes packets, or will stop the recording.
    Bad,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Unknown => "unknown",
            State::Warn => "warn",
            State::Bad => "bad",
        }
    }
}

/// What `--apply` does for a finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Turn these offload features (kernel names) off.
    FeaturesOff(Vec<String>),
    /// Set the RX ring to this many descriptors (TX unchanged).
    RxRing(u32),
    /// Set these IRQs' affinity to this CPU list.
    IrqAffinity { irqs: Vec<u32>, cpus: String },
    /// Set these CPUs' frequency governor to `performance`.
    Governor(Vec<usize>),
    /// Set `transparent_hugepage/enabled` to this word.
    Thp(&'static str),
    /// Set the block device's I/O scheduler.
    Scheduler { device: String, to: String },
    /// Not done by `--apply`, and why.
    Manual(&'static str),
}

/// What `--apply` did for a finding.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Applied {
    /// The change was made (and read back where it can be).
    pub ok: bool,
    /// What changed (`generic-receive-offload: on -> off`), or why nothing did.
    pub result: String,
}

/// One judgement about the host.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Finding {
    /// Which check (`gro`, `numa`, `store-space`, ...).
    pub check: &'static str,
    pub state: State,
    /// What was found, in the vocabulary of the tool that shows it (`ethtool -k`'s names).
    pub found: String,
    /// Why it matters, in one sentence.
    pub reason: &'static str,
    /// The exact command that fixes it (`None` when the state is ok).
    pub fix: Option<String>,
    /// What `--apply` did (only with `--apply`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied: Option<Applied>,
    /// What `--apply` would do.
    #[serde(skip)]
    pub action: Option<Action>,
}

impl Finding {
    /// A finding that needs nothing.
    pub fn ok(check: &'static str, found: impl Into<String>, reason: &'static str) -> Finding {
        Finding { check, state: State::Ok, found: found.into(), reason, fix: None, applied: None, action: None }
    }

    /// A finding with a fix.
    pub fn with(
        check: &'static str,
        state: State,
        found: impl Into<String>,
        reason: &'static str,
        fix: impl Into<String>,
    ) -> Finding {
        Finding { check, state, found: found.into(), reason, fix: Some(fix.into()), applied: None, action: None }
    }

    /// Adds what `--apply` would do.
    pub fn action(mut self, a: Action) -> Finding {
        self.action = Some(a);
        self
    }
}

/// Every check's name, in the order findings are reported.
pub const CHECKS: &[&str] = &[
    "numa",
    "irq-affinity",
    "rx-queues",
    "rings",
    "gro",
    "lro",
    "vlan-strip",
    "tso-gso",
    "coalesce",
    "cpu-governor",
    "transparent-hugepages",
    "hugepages",
    "memlock",
    "store",
    "store-fs",
    "store-mount",
    "store-discard",
    "store-scheduler",
    "store-space",
];
