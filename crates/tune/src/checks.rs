//! The checks: each a pure function of the [`Facts`] returning one [`Finding`], so each is
//! unit-tested on facts made by hand. The reasons are the research's, one sentence each.

use crate::facts::{Facts, Iface, Probe, Store};
use crate::parse::Mount;
use crate::{Action, Finding, State};
use wv_sys::ethtool::Feature;
use wv_units::{format_bytes as size, format_cpu_list as cpu_list};

/// Runs every check, in [`crate::CHECKS`] order. Interface checks run when the facts have an
/// interface, store checks when they have a store (without one, a single `store` finding says
/// how to add it).
pub fn run(f: &Facts) -> Vec<Finding> {
    let mut v = Vec::new();
    if let Some(i) = &f.iface {
        v.push(numa(f, i));
        v.push(irq_affinity(f, i));
        v.push(rx_queues(f, i));
        v.push(rings(i));
        for g in FEATURE_GROUPS {
            v.push(features(i, g));
        }
        v.push(coalesce(i));
    }
    v.push(governor(f));
    v.push(thp(f));
    v.push(hugepages(f));
    v.push(memlock(f));
    match &f.store {
        None => v.push(Finding::with(
            "store",
            State::Unknown,
            "no --store given: the store's volume was not checked",
            R_STORE_FS,
            "add --store DIR (the directory record -o writes to)",
        )),
        Some(s) => {
            if s.not_a_directory {
                v.push(Finding::with(
                    "store",
                    State::Bad,
                    format!(
                        "{} is not a directory (a file or a device): record cannot make a store of it",
                        s.path.display()
                    ),
                    R_STORE_FS,
                    "give --store (and record -o) a directory, or a path to create one at",
                ));
            }
            v.push(store_fs(s));
            v.push(store_mount(s));
            v.push(store_discard(s));
            v.push(store_scheduler(s));
            v.push(store_space(f, s));
        }
    }
    v
}

const R_NUMA: &str = "Capture threads on the NIC's NUMA node avoid crossing the interconnect for every frame: affinity alone (NIC node, a few RX queues with their interrupts there) doubled what tcpdump stored (Moreno et al. 2015).";
const R_IRQ: &str = "The CPU that takes a queue's interrupt runs the kernel's receive path for its frames: on another node every frame crosses the interconnect before capture sees it.";
const R_QUEUES: &str = "One RX queue puts the whole receive path on one CPU; a few queues (RSS) spread it, as the paper's 4 queues on the NIC's node did.";
const R_RINGS: &str = "The NIC ring absorbs bursts while the kernel is busy; frames that find it full are dropped by the NIC, before any wirevault counter sees them.";
const R_GRO: &str = "GRO merges consecutive TCP segments into one large packet before capture, so the stored frames are not the frames that crossed the wire.";
const R_LRO: &str = "LRO merges consecutive TCP segments in the NIC before capture, so the stored frames are not the frames that crossed the wire.";
const R_VLAN: &str = "The NIC removes VLAN tags before capture; wirevault puts them back from the packet's metadata as libpcap does, so the stored frame is rebuilt rather than kept as received.";
const R_TSO: &str = "Packets this host sends are captured before segmentation, as super-frames of up to 64 KB that never crossed the wire.";
const R_COALESCE: &str = "Coalescing batches frames per interrupt: without it a frame can cost an interrupt at high rates, with a long delay frames wait and their receive timestamps bunch together.";
const R_GOVERNOR: &str = "A CPU that slows down when idle needs time to speed up again while a burst fills the ring; the papers' recorders pin capture to cores at full speed.";
const R_THP: &str = "Without reserved hugepages the arena asks for transparent huge pages; with THP off it lives in 4 KiB pages and TLB misses cost time per packet.";
const R_HUGEPAGES: &str = "The recorders that reached line rate keep their buffer in huge pages; reserved ones are guaranteed, transparent ones only while the kernel finds free 2 MiB blocks.";
const R_MEMLOCK: &str = "The limit caps the memory a process may lock (io_uring before Linux 5.12 and AF_XDP count against it); record does not lock its arena today.";
const R_STORE_FS: &str = "The writer stores in large aligned O_DIRECT writes: ext4 and XFS take them at the disk's speed; copy-on-write, network and memory file systems do not, or lose the data at reboot.";
const R_MOUNT_RO: &str = "A read-only file system takes no capture file: record cannot create its store there.";
const R_MOUNT: &str = "Options that write metadata on every access (strictatime), journal the data (data=journal) or sync every write take disk throughput the buffer must then absorb.";
const R_SCHED: &str = "Large sequential O_DIRECT writes gain nothing from an I/O scheduler on SSD and NVMe, and bfq costs CPU per request.";
const R_SPACE: &str = "If the volume fills before the budget deletes old files, recording stops with exit code 3: the budget must fit in what the volume can hold.";

fn not_virtual(check: &'static str, i: &Iface, reason: &'static str) -> Option<Finding> {
    (!i.physical).then(|| Finding::ok(check, format!("not applicable (virtual interface {})", i.name), reason))
}

/// The NIC's node and its CPUs, on a machine with more than one node.
fn nic_node(f: &Facts, i: &Iface) -> Option<(i32, Vec<usize>)> {
    let n = i.numa_node?;
    f.host.nodes.iter().find(|(id, _)| *id == n).cloned()
}

fn numa(f: &Facts, i: &Iface) -> Finding {
    const C: &str = "numa";
    if let Some(x) = not_virtual(C, i, R_NUMA) {
        return x;
    }
    if f.host.nodes.len() <= 1 {
        return Finding::ok(C, "one NUMA node: every CPU is local to the NIC", R_NUMA);
    }
    let Some((node, local)) = nic_node(f, i) else {
        return Finding::with(
            C,
            State::Unknown,
            format!("the firmware does not say which of {} NUMA nodes {} is on", f.host.nodes.len(), i.name),
            R_NUMA,
            format!(
                "find the node of PCI device {} (lspci -vv, the slot's manual) and give record --cpus from it",
                bus(i)
            ),
        );
    };
    let list = cpu_list(&local);
    match &f.inputs.cpus {
        None => Finding::with(
            C,
            State::Warn,
            format!("{} is on NUMA node {node} (CPUs {list}); record will not pin its threads (no --cpus)", i.name),
            R_NUMA,
            format!("wirevault record -i {} --cpus {list} ...", i.name),
        ),
        Some(cpus) => {
            let off: Vec<usize> = cpus.iter().copied().filter(|c| !local.contains(c)).collect();
            if off.is_empty() {
                Finding::ok(C, format!("{} and --cpus {} are on NUMA node {node}", i.name, cpu_list(cpus)), R_NUMA)
            } else {
                Finding::with(
                    C,
                    State::Bad,
                    format!(
                        "{} is on NUMA node {node} (CPUs {list}) but --cpus has {} elsewhere",
                        i.name,
                        cpu_list(&off)
                    ),
                    R_NUMA,
                    format!("wirevault record -i {} --cpus {list} ...", i.name),
                )
            }
        }
    }
}

fn bus(i: &Iface) -> &str {
    i.driver.as_ref().map_or("?", |d| d.bus_info.as_str())
}

fn irq_affinity(f: &Facts, i: &Iface) -> Finding {
    const C: &str = "irq-affinity";
    if let Some(x) = not_virtual(C, i, R_IRQ) {
        return x;
    }
    if i.irqs.is_empty() {
        return Finding::with(
            C,
            State::Unknown,
            format!("no interrupts found for {} (device/msi_irqs, /proc/interrupts)", i.name),
            R_IRQ,
            format!("look for {}'s queues in /proc/interrupts and set /proc/irq/N/smp_affinity_list", i.name),
        );
    }
    let shown: Vec<String> = i
        .irqs
        .iter()
        .map(|q| {
            let cpus = q.affinity.as_deref().map_or("?".into(), cpu_list);
            format!("IRQ {} {} on CPUs {cpus}", q.irq, if q.name.is_empty() { "-" } else { &q.name })
        })
        .collect();
    let found = shown.join("; ");
    let balance = "irqbalance runs and moves interrupts at will";
    let Some((node, local)) = nic_node(f, i).filter(|_| f.host.nodes.len() > 1) else {
        if f.host.irqbalance && f.inputs.cpus.is_some() {
            return Finding::with(
                C,
                State::Warn,
                format!("{found}; {balance}"),
                R_IRQ,
                "systemctl disable --now irqbalance (or list the IRQs in IRQBALANCE_BANNED_CPULIST)",
            )
            .action(Action::Manual("stopping a system daemon is left to the administrator"));
        }
        return Finding::ok(C, format!("{found} (one NUMA node)"), R_IRQ);
    };
    let list = cpu_list(&local);
    let off: Vec<u32> = i
        .irqs
        .iter()
        .filter(|q| q.affinity.as_ref().is_some_and(|a| a.iter().any(|c| !local.contains(c))))
        .map(|q| q.irq)
        .collect();
    if off.is_empty() && !f.host.irqbalance {
        return Finding::ok(C, format!("{found}: all on NUMA node {node}"), R_IRQ);
    }
    let mut fix: Vec<String> = off.iter().map(|n| format!("echo {list} > /proc/irq/{n}/smp_affinity_list")).collect();
    if f.host.irqbalance {
        fix.insert(0, "systemctl disable --now irqbalance".into());
    }
    let state = if off.is_empty() { State::Warn } else { State::Bad };
    let found = if f.host.irqbalance { format!("{found}; {balance}") } else { found };
    Finding::with(C, state, format!("{found}; NIC on node {node} (CPUs {list})"), R_IRQ, fix.join("; "))
        .action(Action::IrqAffinity { irqs: off, cpus: list })
}

/// `Ok(Some)` facts of a physical NIC, or the finding that stands in for them.
fn nic_probe<'a, T>(
    check: &'static str,
    i: &Iface,
    p: &'a Probe<T>,
    what: &str,
    reason: &'static str,
    cmd: &str,
) -> Result<&'a T, Box<Finding>> {
    if let Some(x) = not_virtual(check, i, reason) {
        return Err(Box::new(x));
    }
    match p {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(Box::new(Finding::with(
            check,
            State::Unknown,
            format!("the {} driver does not report its {what}", i.driver.as_ref().map_or("?", |d| d.driver.as_str())),
            reason,
            format!("see the driver's documentation (`{cmd} {}` shows the same)", i.name),
        ))),
        Err(e) => Err(Box::new(Finding::with(
            check,
            State::Unknown,
            format!("cannot read the {what}: {e}"),
            reason,
            format!("{cmd} {}", i.name),
        ))),
    }
}

fn rx_queues(f: &Facts, i: &Iface) -> Finding {
    const C: &str = "rx-queues";
    let ch = match nic_probe(C, i, &i.channels, "queues", R_QUEUES, "ethtool -l") {
        Ok(c) => c,
        Err(x) => return *x,
    };
    let (now, max, kind) = if ch.max_combined > 0 {
        (ch.rx_queues(), ch.max_combined, "combined")
    } else {
        (ch.rx_queues(), ch.max_rx, "rx")
    };
    let found = format!("{now} RX queue(s) of at most {max}");
    if now > 1 || max <= 1 {
        return Finding::ok(C, found, R_QUEUES);
    }
    let cpus = nic_node(f, i).map_or_else(|| wv_sys::cpu::allowed_cpus().len(), |(_, c)| c.len()) as u32;
    // The paper's 4 queues, fewer when the NIC or its node has fewer.
    let want = max.min(cpus.max(2)).min(4);
    Finding::with(C, State::Warn, found, R_QUEUES, format!("ethtool -L {} {kind} {want}", i.name)).action(
        Action::Manual(
            "changing the number of queues restarts the device on most drivers and resets its RSS and interrupts",
        ),
    )
}

fn rings(i: &Iface) -> Finding {
    const C: &str = "rings";
    let r = match nic_probe(C, i, &i.rings, "ring sizes", R_RINGS, "ethtool -g") {
        Ok(r) => r,
        Err(x) => return *x,
    };
    let found = format!("RX ring {} of at most {} descriptors (TX {} of {})", r.rx, r.rx_max, r.tx, r.tx_max);
    if r.rx >= r.rx_max {
        return Finding::ok(C, found, R_RINGS);
    }
    let action = if i.default_route {
        Action::Manual("it carries the default route, and a ring change restarts the device on many drivers")
    } else {
        Action::RxRing(r.rx_max)
    };
    Finding::with(C, State::Warn, found, R_RINGS, format!("ethtool -G {} rx {}", i.name, r.rx_max)).action(action)
}

/// Offload features judged together: the check, its kernel feature names (a list, or a test of
/// the names the running kernel reports), the state when one is on, the reason.
struct FeatureGroup {
    check: &'static str,
    names: Names,
    state: State,
    reason: &'static str,
}

/// Which of an interface's features a group judges.
enum Names {
    /// These, by their kernel names.
    Listed(&'static [&'static str]),
    /// Every feature whose kernel name passes the test: kernels add features (6.18 added
    /// `tx-tcp-accecn-segmentation`), and the ones this build does not know must be judged too.
    Matching(fn(&str) -> bool, &'static str),
}

impl Names {
    fn contains(&self, name: &str) -> bool {
        match self {
            Names::Listed(l) => l.contains(&name),
            Names::Matching(test, _) => test(name),
        }
    }

    fn describe(&self) -> String {
        match self {
            Names::Listed(l) => l.join(", "),
            Names::Matching(_, what) => (*what).to_owned(),
        }
    }
}

/// A segmentation offload, by its kernel name (`netdev_features_strings`): every GSO type
/// (`tx-tcp-segmentation`, `tx-tcp-accecn-segmentation`, `tx-gre-segmentation`,
/// `tx-udp_tnl-csum-segmentation`, `tx-sctp-segmentation`, `tx-gso-list`, `tx-gso-partial`, ...)
/// and the stack's own, `tx-generic-segmentation`. With any of them on, what this host sends
/// is captured as a super-frame before it is cut into the frames the wire carries.
pub fn is_segmentation(name: &str) -> bool {
    name.starts_with("tx-") && (name.ends_with("-segmentation") || name.starts_with("tx-gso-"))
}

const FEATURE_GROUPS: &[FeatureGroup] = &[
    FeatureGroup {
        check: "gro",
        names: Names::Listed(&["rx-gro", "rx-gro-hw", "rx-gro-list"]),
        state: State::Bad,
        reason: R_GRO,
    },
    FeatureGroup { check: "lro", names: Names::Listed(&["rx-lro"]), state: State::Bad, reason: R_LRO },
    FeatureGroup {
        check: "vlan-strip",
        names: Names::Listed(&["rx-vlan-hw-parse", "rx-vlan-stag-hw-parse"]),
        state: State::Warn,
        reason: R_VLAN,
    },
    FeatureGroup {
        check: "tso-gso",
        names: Names::Matching(is_segmentation, "segmentation offloads (tx-*-segmentation, tx-gso-*)"),
        state: State::Warn,
        reason: R_TSO,
    },
];

/// A group's features listed one by one up to this many; beyond, those off are counted.
const LISTED_FEATURES: usize = 6;

/// `ethtool -k`'s name for a kernel feature name (the ones it shows under an older name).
pub fn ethtool_k_name(kernel: &str) -> &str {
    match kernel {
        "rx-gro" => "generic-receive-offload",
        "rx-lro" => "large-receive-offload",
        "rx-vlan-hw-parse" => "rx-vlan-offload",
        "tx-generic-segmentation" => "generic-segmentation-offload",
        n => n,
    }
}

/// `ethtool -K`'s short word for a kernel feature name, where it has one.
fn ethtool_set_name(kernel: &str) -> &str {
    match kernel {
        "rx-gro" => "gro",
        "rx-lro" => "lro",
        "rx-vlan-hw-parse" => "rxvlan",
        "tx-generic-segmentation" => "gso",
        "tx-tcp-segmentation" => "tso",
        n => n,
    }
}

/// `generic-receive-offload: on`, `rx-gro-hw: off [fixed]`, as `ethtool -k` prints them.
fn show_feature(ft: &Feature) -> String {
    let mut s = format!("{}: {}", ethtool_k_name(&ft.name), if ft.active { "on" } else { "off" });
    if !ft.changeable {
        s.push_str(" [fixed]");
    } else if ft.requested != ft.active {
        s.push_str(if ft.requested { " [requested on]" } else { " [requested off]" });
    }
    s
}

fn features(i: &Iface, g: &FeatureGroup) -> Finding {
    let all = match &i.features {
        Ok(Some(v)) => v,
        Ok(None) => {
            return Finding::with(
                g.check,
                State::Unknown,
                format!("{} does not report its offload features", i.name),
                g.reason,
                format!("ethtool -k {}", i.name),
            )
        }
        Err(e) => {
            return Finding::with(
                g.check,
                State::Unknown,
                format!("cannot read the offload features: {e}"),
                g.reason,
                format!("ethtool -k {}", i.name),
            )
        }
    };
    let present: Vec<&Feature> = all.iter().filter(|f| g.names.contains(&f.name)).collect();
    if present.is_empty() {
        return Finding::ok(g.check, format!("{} has none of {}", i.name, g.names.describe()), g.reason);
    }
    let on: Vec<&&Feature> = present.iter().filter(|f| f.active).collect();
    let found = if present.len() <= LISTED_FEATURES {
        present.iter().map(|f| show_feature(f)).collect::<Vec<_>>().join(", ")
    } else if on.is_empty() {
        format!("all {} off: {}", present.len(), present.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "))
    } else {
        let mut parts: Vec<String> = on.iter().map(|f| show_feature(f)).collect();
        parts.push(format!("{} more off", present.len() - on.len()));
        parts.join(", ")
    };
    if on.is_empty() {
        return Finding::ok(g.check, found, g.reason);
    }
    let changeable: Vec<String> = on.iter().filter(|f| f.changeable).map(|f| f.name.clone()).collect();
    if changeable.is_empty() {
        return Finding::with(
            g.check,
            g.state,
            found,
            g.reason,
            format!("none on {}: the driver keeps it on ([fixed]); capture on another NIC or port", i.name),
        )
        .action(Action::Manual("the driver does not let it be changed"));
    }
    let words: Vec<String> = changeable.iter().map(|n| format!("{} off", ethtool_set_name(n))).collect();
    Finding::with(g.check, g.state, found, g.reason, format!("ethtool -K {} {}", i.name, words.join(" ")))
        .action(Action::FeaturesOff(changeable))
}

fn coalesce(i: &Iface) -> Finding {
    const C: &str = "coalesce";
    let c = match nic_probe(C, i, &i.coalesce, "interrupt coalescing", R_COALESCE, "ethtool -c") {
        Ok(c) => c,
        Err(x) => return *x,
    };
    let found = format!(
        "adaptive-rx {}, rx-usecs {}, rx-frames {}",
        if c.adaptive_rx != 0 { "on" } else { "off" },
        c.rx_usecs,
        c.rx_frames
    );
    let manual = Action::Manual("a trade-off between interrupt load and timestamp spread: choose the value");
    if c.adaptive_rx != 0 || (1..=250).contains(&c.rx_usecs) || (c.rx_usecs == 0 && c.rx_frames > 1) {
        Finding::ok(C, found, R_COALESCE)
    } else if c.rx_usecs > 250 {
        Finding::with(
            C,
            State::Warn,
            format!("{found}: frames wait up to {} µs", c.rx_usecs),
            R_COALESCE,
            format!("ethtool -C {} rx-usecs 50", i.name),
        )
        .action(manual)
    } else {
        Finding::with(
            C,
            State::Warn,
            format!("{found}: an interrupt per frame"),
            R_COALESCE,
            format!("ethtool -C {} adaptive-rx on (or rx-usecs 50)", i.name),
        )
        .action(manual)
    }
}

fn governor(f: &Facts) -> Finding {
    const C: &str = "cpu-governor";
    let g = &f.host.governors;
    if g.iter().all(|(_, g)| g.is_none()) {
        return Finding::ok(C, "no cpufreq driver: the kernel does not scale these CPUs' frequency", R_GOVERNOR);
    }
    let slow: Vec<usize> =
        g.iter().filter(|(_, g)| g.as_deref().is_some_and(|g| g != "performance")).map(|(c, _)| *c).collect();
    let shown: Vec<String> =
        g.iter().map(|(c, g)| format!("CPU {c}: {}", g.as_deref().unwrap_or("no cpufreq"))).collect();
    if slow.is_empty() {
        return Finding::ok(C, shown.join(", "), R_GOVERNOR);
    }
    let paths = if slow.len() == 1 {
        slow[0].to_string()
    } else {
        format!("{{{}}}", slow.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
    };
    Finding::with(
        C,
        State::Warn,
        shown.join(", "),
        R_GOVERNOR,
        format!("cpupower frequency-set -g performance (or: echo performance | tee /sys/devices/system/cpu/cpu{paths}/cpufreq/scaling_governor)"),
    )
    .action(Action::Governor(slow))
}

fn thp(f: &Facts) -> Finding {
    const C: &str = "transparent-hugepages";
    match f.host.thp.as_deref() {
        None => Finding::with(
            C,
            State::Unknown,
            "this kernel has no transparent huge pages",
            R_THP,
            "reserve hugepages instead (see the hugepages finding)",
        ),
        Some("never") => Finding::with(
            C,
            State::Warn,
            "transparent_hugepage/enabled: never",
            R_THP,
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
        )
        .action(Action::Thp("madvise")),
        Some(w) => Finding::ok(C, format!("transparent_hugepage/enabled: {w}"), R_THP),
    }
}

fn hugepages(f: &Facts) -> Finding {
    const C: &str = "hugepages";
    let h = &f.host;
    let (Some(hp), Some(total), Some(free)) = (h.hugepage_size, h.hugepages_total, h.hugepages_free) else {
        return Finding::with(
            C,
            State::Unknown,
            "no hugepage counts in /proc/meminfo",
            R_HUGEPAGES,
            "grep -i huge /proc/meminfo",
        );
    };
    let buffer = f.inputs.buffer;
    let need = buffer.div_ceil(hp.max(1));
    let found =
        format!("{free} of {total} reserved {} hugepages free; the {} buffer needs {need}", size(hp), size(buffer));
    if free >= need {
        return Finding::ok(C, found, R_HUGEPAGES);
    }
    Finding::with(
        C,
        State::Warn,
        found,
        R_HUGEPAGES,
        format!("sysctl -w vm.nr_hugepages={} (and in /etc/sysctl.d/ to keep it)", total + need - free),
    )
    .action(Action::Manual(
        "reserving takes the memory from everything else until released: run it once the buffer size is settled",
    ))
}

fn memlock(f: &Facts) -> Finding {
    const C: &str = "memlock";
    let h = &f.host;
    if h.cap_ipc_lock {
        return Finding::ok(C, "CAP_IPC_LOCK is effective: no locked-memory limit applies", R_MEMLOCK);
    }
    let Some((soft, _)) = h.memlock else {
        return Finding::with(C, State::Unknown, "cannot read RLIMIT_MEMLOCK", R_MEMLOCK, "ulimit -l");
    };
    match soft {
        None => Finding::ok(C, "RLIMIT_MEMLOCK unlimited", R_MEMLOCK),
        Some(s) if s >= f.inputs.buffer => {
            Finding::ok(C, format!("RLIMIT_MEMLOCK {} covers the {} buffer", size(s), size(f.inputs.buffer)), R_MEMLOCK)
        }
        Some(s) => Finding::with(
            C,
            State::Warn,
            format!("RLIMIT_MEMLOCK {} is less than the {} buffer", size(s), size(f.inputs.buffer)),
            R_MEMLOCK,
            "ulimit -l unlimited in the starting shell, or LimitMEMLOCK=infinity in the systemd unit",
        )
        .action(Action::Manual("a limit of the process that starts the recorder: set it there")),
    }
}

/// The store's mount, or the finding that stands in for it.
fn mount_of<'a>(check: &'static str, s: &'a Store, reason: &'static str) -> Result<&'a Mount, Box<Finding>> {
    s.mount.as_ref().ok_or_else(|| {
        Box::new(Finding::with(
            check,
            State::Unknown,
            format!("cannot find the mount of {}", s.probe.display()),
            reason,
            format!("findmnt -T {}", s.probe.display()),
        ))
    })
}

fn store_fs(s: &Store) -> Finding {
    const C: &str = "store-fs";
    let m = match mount_of(C, s, R_STORE_FS) {
        Ok(m) => m,
        Err(x) => return *x,
    };
    let found = format!("{} on {} ({}, mounted at {})", s.path.display(), m.source, m.fstype, m.point);
    let fix = "a volume formatted ext4 or XFS (mkfs.xfs /dev/DEVICE), mounted for the store";
    let t = m.fstype.as_str();
    match t {
        "ext4" | "xfs" => Finding::ok(C, found, R_STORE_FS),
        "tmpfs" | "ramfs" => Finding::with(C, State::Bad, format!("{found}: memory, lost at reboot"), R_STORE_FS, fix),
        "nfs" | "nfs4" | "cifs" | "smb3" | "9p" | "virtiofs" | "ceph" | "glusterfs" => {
            Finding::with(C, State::Bad, format!("{found}: a network file system"), R_STORE_FS, fix)
        }
        _ if t.starts_with("fuse") => {
            Finding::with(C, State::Bad, format!("{found}: a FUSE file system"), R_STORE_FS, fix)
        }
        "btrfs" | "zfs" | "bcachefs" => {
            Finding::with(C, State::Warn, format!("{found}: copy-on-write"), R_STORE_FS, fix)
        }
        _ => {
            Finding::with(C, State::Warn, format!("{found}: not a file system wirevault is tested on"), R_STORE_FS, fix)
        }
    }
}

const R_DISCARD: &str = "Online discard trims every deleted extent as it goes: retention deletes a whole capture file before each new one, and on a virtio disk a gigabyte's unlink took 1.3-1.5 s with it (2026-11-27). A periodic fstrim does the same work off the write path.";

/// The `discard` mount option (`record` does not repeat this one at
/// start-up: it slows retention's deletes, not what is recorded).
fn store_discard(s: &Store) -> Finding {
    const C: &str = "store-discard";
    let m = match mount_of(C, s, R_DISCARD) {
        Ok(m) => m,
        Err(x) => return *x,
    };
    if !m.options.iter().chain(&m.super_options).any(|x| x == "discard") {
        return Finding::ok(C, format!("{}: no online discard", m.point), R_DISCARD);
    }
    Finding::with(
        C,
        State::Warn,
        format!("{} mounted with discard: every file retention deletes is trimmed at once", m.point),
        R_DISCARD,
        format!("mount -o remount,nodiscard {} (and in /etc/fstab), with fstrim.timer enabled instead", m.point),
    )
    .action(Action::Manual("remounting a file system in use is left to the administrator"))
}

fn store_mount(s: &Store) -> Finding {
    const C: &str = "store-mount";
    let m = match mount_of(C, s, R_MOUNT) {
        Ok(m) => m,
        Err(x) => return *x,
    };
    let has = |o: &str| m.options.iter().chain(&m.super_options).any(|x| x == o);
    let found = format!("{} mounted {} ({})", m.point, m.options.join(","), m.super_options.join(","));
    let remount = |opt: &str| format!("mount -o remount,{opt} {} (and in /etc/fstab)", m.point);
    if m.options.first().is_some_and(|o| o == "ro") || has("ro") {
        Finding::with(
            C,
            State::Bad,
            format!("{found}: read-only: nothing can be recorded there"),
            R_MOUNT_RO,
            remount("rw"),
        )
    } else if has("sync") {
        Finding::with(C, State::Bad, format!("{found}: every write is synchronous"), R_MOUNT, remount("async"))
    } else if has("data=journal") {
        Finding::with(
            C,
            State::Warn,
            format!("{found}: data is written twice"),
            R_MOUNT,
            format!(
                "data=ordered in /etc/fstab for {}, then unmount and mount (data= cannot change on a remount)",
                m.point
            ),
        )
    } else if has("strictatime") {
        Finding::with(C, State::Warn, format!("{found}: every read writes an access time"), R_MOUNT, remount("noatime"))
    } else if has("dirsync") {
        Finding::with(
            C,
            State::Warn,
            format!("{found}: directory changes are synchronous"),
            R_MOUNT,
            remount("nodirsync"),
        )
    } else {
        Finding::ok(C, found, R_MOUNT)
    }
    .action(Action::Manual("remounting a file system in use is left to the administrator"))
}

fn store_scheduler(s: &Store) -> Finding {
    const C: &str = "store-scheduler";
    let Some(b) = &s.block else {
        return Finding::ok(C, "no block device under the store (memory or network file system)", R_SCHED);
    };
    let Some((active, choices)) = &b.scheduler else {
        return Finding::ok(C, format!("{}: no I/O scheduler", b.name), R_SCHED);
    };
    let kind = match b.rotational {
        Some(true) => "rotational",
        Some(false) => "solid-state",
        None => "of unknown kind",
    };
    let found = format!("{} ({kind}): scheduler {active}", b.name);
    let to = if b.rotational == Some(false) && active != "none" && choices.iter().any(|c| c == "none") {
        "none"
    } else if active == "bfq" && choices.iter().any(|c| c == "mq-deadline") {
        "mq-deadline"
    } else {
        return Finding::ok(C, found, R_SCHED);
    };
    Finding::with(C, State::Warn, found, R_SCHED, format!("echo {to} > /sys/block/{}/queue/scheduler", b.name))
        .action(Action::Scheduler { device: b.name.clone(), to: to.into() })
}

fn store_space(f: &Facts, s: &Store) -> Finding {
    const C: &str = "store-space";
    let (free, total) = match &s.space {
        Ok(v) => *v,
        Err(e) => {
            return Finding::with(
                C,
                State::Unknown,
                format!("cannot read the free space of {}: {e}", s.probe.display()),
                R_SPACE,
                "df -h DIR",
            )
        }
    };
    let found = format!("{} free of {}; the store holds {}", size(free), size(total), size(s.used));
    match f.inputs.budget {
        None => Finding::ok(
            C,
            format!("{found}; no --max-size: record stops (exit code 3) when the volume is full"),
            R_SPACE,
        ),
        Some(b) if b <= free.saturating_add(s.used).saturating_add(f.inputs.other_free) => {
            Finding::ok(C, format!("{found}; --max-size {} fits", size(b)), R_SPACE)
        }
        Some(b) => {
            let fits = (free.saturating_add(s.used).saturating_add(f.inputs.other_free)) / 100 * 95;
            let other = match f.inputs.other_free {
                0 => String::new(),
                o => format!(" with the {} free on its other volumes", size(o)),
            };
            // A budget record would refuse is no fix.
            let fix = if fits < f.inputs.min_budget {
                format!(
                    "free space on the volume: what fits ({}) is less than the {} record needs with its --file-size and workers (or record with a smaller --file-size)",
                    size(fits),
                    size(f.inputs.min_budget)
                )
            } else {
                format!("--max-size {}M (95% of what fits), or free space on the volume", fits >> 20)
            };
            Finding::with(
                C,
                State::Bad,
                format!("{found}; --max-size {} is more than the volume can hold{other}", size(b)),
                R_SPACE,
                fix,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Host, Inputs, Irq};
    use wv_sys::ethtool::{Channels, Coalesce, DrvInfo, Rings};

    fn feature(name: &str, active: bool, changeable: bool) -> Feature {
        Feature { name: name.into(), active, requested: active, changeable }
    }

    /// A two-node machine with a NIC on node 1, GRO on, one queue of 8, a short ring.
    fn nic() -> Facts {
        Facts {
            inputs: Inputs { interface: Some("eth1".into()), buffer: 1 << 30, ..Inputs::default() },
            iface: Some(Iface {
                name: "eth1".into(),
                driver: Some(DrvInfo { driver: "ixgbe".into(), bus_info: "0000:03:00.0".into() }),
                physical: true,
                numa_node: Some(1),
                irqs: vec![
                    Irq { irq: 90, name: "eth1-TxRx-0".into(), affinity: Some(vec![0]) },
                    Irq { irq: 91, name: "eth1-TxRx-1".into(), affinity: Some(vec![4, 5]) },
                ],
                channels: Ok(Some(Channels { max_combined: 8, combined: 1, ..Channels::default() })),
                rings: Ok(Some(Rings { rx_max: 4096, rx: 512, tx_max: 4096, tx: 512, ..Rings::default() })),
                coalesce: Ok(Some(Coalesce { rx_usecs: 0, rx_frames: 1, ..Coalesce::default() })),
                features: Ok(Some(vec![
                    feature("rx-gro", true, true),
                    feature("rx-gro-hw", false, false),
                    feature("rx-lro", false, false),
                    feature("rx-vlan-hw-parse", true, false),
                    feature("tx-tcp-segmentation", false, true),
                ])),
                default_route: false,
            }),
            host: Host {
                nodes: vec![(0, vec![0, 1, 2, 3]), (1, vec![4, 5, 6, 7])],
                governors: vec![(0, Some("powersave".into())), (4, Some("performance".into()))],
                thp: Some("never".into()),
                hugepage_size: Some(2 << 20),
                hugepages_total: Some(100),
                hugepages_free: Some(100),
                memlock: Some((Some(8 << 20), None)),
                cap_ipc_lock: false,
                irqbalance: false,
            },
            store: None,
        }
    }

    fn get<'a>(v: &'a [Finding], c: &str) -> &'a Finding {
        v.iter().find(|f| f.check == c).unwrap()
    }

    #[test]
    fn a_badly_set_nic_on_two_nodes() {
        let mut f = nic();
        f.inputs.cpus = Some(vec![0, 4]);
        let v = run(&f);
        let numa = get(&v, "numa");
        assert_eq!(numa.state, State::Bad);
        assert_eq!(numa.found, "eth1 is on NUMA node 1 (CPUs 4-7) but --cpus has 0 elsewhere");
        assert_eq!(numa.fix.as_deref(), Some("wirevault record -i eth1 --cpus 4-7 ..."));
        let irq = get(&v, "irq-affinity");
        assert_eq!(irq.state, State::Bad);
        assert_eq!(irq.fix.as_deref(), Some("echo 4-7 > /proc/irq/90/smp_affinity_list"));
        assert_eq!(irq.action, Some(Action::IrqAffinity { irqs: vec![90], cpus: "4-7".into() }));
        let q = get(&v, "rx-queues");
        assert_eq!((q.state, q.fix.as_deref()), (State::Warn, Some("ethtool -L eth1 combined 4")));
        let r = get(&v, "rings");
        assert_eq!((r.state, r.fix.as_deref()), (State::Warn, Some("ethtool -G eth1 rx 4096")));
        assert_eq!(r.action, Some(Action::RxRing(4096)));
        let gro = get(&v, "gro");
        assert_eq!(gro.state, State::Bad);
        assert_eq!(gro.found, "generic-receive-offload: on, rx-gro-hw: off [fixed]");
        assert_eq!(gro.fix.as_deref(), Some("ethtool -K eth1 gro off"));
        assert_eq!(get(&v, "lro").state, State::Ok);
        // on but fixed: a warning whose fix says it cannot be changed here
        let vlan = get(&v, "vlan-strip");
        assert_eq!(vlan.state, State::Warn);
        assert!(vlan.fix.as_deref().unwrap().contains("[fixed]"));
        assert_eq!(get(&v, "tso-gso").state, State::Ok);
        assert_eq!(get(&v, "coalesce").state, State::Warn);
        let g = get(&v, "cpu-governor");
        assert_eq!((g.state, g.action.clone()), (State::Warn, Some(Action::Governor(vec![0]))));
        assert_eq!(get(&v, "transparent-hugepages").action, Some(Action::Thp("madvise")));
        assert_eq!(get(&v, "hugepages").state, State::Warn, "100 free pages do not hold 1 GiB");
        assert_eq!(get(&v, "memlock").state, State::Warn);
        assert_eq!(get(&v, "store").state, State::Unknown);
        for x in &v {
            assert_eq!(x.state == State::Ok, x.fix.is_none(), "{x:?}");
        }
    }

    #[test]
    fn a_well_set_nic_is_ok() {
        let mut f = nic();
        f.inputs.cpus = Some(vec![4, 5]);
        let i = f.iface.as_mut().unwrap();
        i.irqs.iter_mut().for_each(|q| q.affinity = Some(vec![4, 5, 6, 7]));
        i.channels = Ok(Some(Channels { max_combined: 8, combined: 4, ..Channels::default() }));
        i.rings = Ok(Some(Rings { rx_max: 4096, rx: 4096, ..Rings::default() }));
        i.coalesce = Ok(Some(Coalesce { adaptive_rx: 1, ..Coalesce::default() }));
        i.features = Ok(Some(vec![feature("rx-gro", false, true), feature("rx-vlan-hw-parse", false, true)]));
        f.host.governors = vec![(4, Some("performance".into()))];
        f.host.thp = Some("madvise".into());
        f.host.hugepages_free = Some(512);
        f.host.cap_ipc_lock = true;
        let v = run(&f);
        for c in ["numa", "irq-affinity", "rx-queues", "rings", "gro", "lro", "vlan-strip", "tso-gso", "coalesce"] {
            assert_eq!(get(&v, c).state, State::Ok, "{:?}", get(&v, c));
        }
        for c in ["cpu-governor", "transparent-hugepages", "hugepages", "memlock"] {
            assert_eq!(get(&v, c).state, State::Ok, "{:?}", get(&v, c));
        }
        // irqbalance would move them again
        f.host.irqbalance = true;
        assert_eq!(get(&run(&f), "irq-affinity").state, State::Warn);
    }

    #[test]
    fn virtual_interfaces_are_not_applicable() {
        let mut f = nic();
        let i = f.iface.as_mut().unwrap();
        i.physical = false;
        i.numa_node = None;
        i.irqs.clear();
        i.rings = Ok(None);
        i.name = "veth0".into();
        let v = run(&f);
        for c in ["numa", "irq-affinity", "rx-queues", "rings", "coalesce"] {
            assert_eq!(get(&v, c).state, State::Ok);
            assert_eq!(get(&v, c).found, "not applicable (virtual interface veth0)");
        }
        assert_eq!(get(&v, "gro").state, State::Bad, "GRO on a veth still merges");
    }

    #[test]
    fn unreported_nic_settings_are_unknown_with_a_pointer() {
        let mut f = nic();
        let i = f.iface.as_mut().unwrap();
        i.rings = Ok(None);
        i.channels = Err("Operation not permitted".into());
        i.features = Ok(None);
        let v = run(&f);
        assert_eq!(get(&v, "rings").state, State::Unknown);
        assert_eq!(get(&v, "rings").found, "the ixgbe driver does not report its ring sizes");
        assert_eq!(get(&v, "rx-queues").fix.as_deref(), Some("ethtool -l eth1"));
        assert_eq!(get(&v, "gro").state, State::Unknown);
    }

    fn with_store(fstype: &str, opts: &[&str], budget: Option<u64>) -> Facts {
        let mut f = nic();
        f.iface = None;
        f.inputs.budget = budget;
        f.store = Some(Store {
            path: "/data/store".into(),
            probe: "/data".into(),
            mount: Some(Mount {
                dev: (259, 2),
                point: "/data".into(),
                options: opts.iter().map(|s| s.to_string()).collect(),
                fstype: fstype.into(),
                source: "/dev/nvme0n1p2".into(),
                super_options: vec!["rw".into()],
            }),
            block: Some(crate::facts::Block {
                name: "nvme0n1".into(),
                scheduler: Some(("mq-deadline".into(), vec!["none".into(), "mq-deadline".into()])),
                rotational: Some(false),
            }),
            space: Ok((100 << 30, 1000 << 30)),
            used: 50 << 30,
            not_a_directory: false,
        });
        f
    }

    #[test]
    fn store_checks() {
        let v = run(&with_store("xfs", &["rw", "noatime"], Some(150 << 30)));
        assert!(v.iter().all(|f| !f.check.starts_with("numa")), "no interface checks without an interface");
        assert_eq!(get(&v, "store-fs").state, State::Ok);
        assert_eq!(get(&v, "store-mount").state, State::Ok);
        let s = get(&v, "store-scheduler");
        assert_eq!(s.fix.as_deref(), Some("echo none > /sys/block/nvme0n1/queue/scheduler"));
        assert_eq!(get(&v, "store-space").state, State::Ok, "150 GiB fit in 100 free + 50 used");
        let v = run(&with_store("tmpfs", &["rw", "strictatime"], Some((150 << 30) + 1)));
        assert_eq!(get(&v, "store-fs").state, State::Bad);
        assert_eq!(get(&v, "store-mount").fix.as_deref(), Some("mount -o remount,noatime /data (and in /etc/fstab)"));
        let sp = get(&v, "store-space");
        assert_eq!(sp.state, State::Bad);
        assert_eq!(sp.fix.as_deref(), Some("--max-size 145920M (95% of what fits), or free space on the volume"));
        // What fits is less than record's smallest budget: no --max-size to give.
        let mut small = with_store("ext4", &["rw"], Some((150 << 30) + 1));
        small.inputs.min_budget = 200 << 30;
        let sp = get(&run(&small), "store-space").clone();
        assert!(sp.fix.as_deref().is_some_and(|f| f.starts_with("free space on the volume: what fits")), "{sp:?}");
        assert_eq!(get(&run(&with_store("ext4", &["rw", "sync"], None)), "store-mount").state, State::Bad);
        assert_eq!(get(&run(&with_store("ext4", &["rw"], None)), "store-discard").state, State::Ok);
        let d = get(&run(&with_store("ext4", &["rw", "relatime", "discard"], None)), "store-discard").clone();
        assert_eq!(d.state, State::Warn);
        assert_eq!(
            d.fix.as_deref(),
            Some("mount -o remount,nodiscard /data (and in /etc/fstab), with fstrim.timer enabled instead")
        );
        let ro = get(&run(&with_store("ext4", &["ro", "noatime"], None)), "store-mount").clone();
        assert_eq!((ro.state, ro.fix.as_deref()), (State::Bad, Some("mount -o remount,rw /data (and in /etc/fstab)")));
        let mut file = with_store("ext4", &["rw"], None);
        file.store.as_mut().unwrap().not_a_directory = true;
        assert_eq!(get(&run(&file), "store").state, State::Bad);
        assert!(run(&with_store("ext4", &["rw"], None)).iter().all(|f| f.check != "store"));
        assert_eq!(get(&run(&with_store("btrfs", &["rw"], None)), "store-fs").state, State::Warn);
        assert_eq!(get(&run(&with_store("fuse.sshfs", &["rw"], None)), "store-fs").state, State::Bad);
    }

    /// Every segmentation feature the kernel names is judged, a name this build has never
    /// seen too; one the driver fixes on is named with its reason.
    #[test]
    fn segmentation_features_come_from_the_kernels_names() {
        assert!(is_segmentation("tx-tcp-accecn-segmentation") && is_segmentation("tx-gso-list"));
        assert!(
            !is_segmentation("rx-gro") && !is_segmentation("tx-checksum-ipv4") && !is_segmentation("tx-nocache-copy")
        );
        let mut f = nic();
        let i = f.iface.as_mut().unwrap();
        i.features = Ok(Some(vec![
            feature("tx-generic-segmentation", true, true),
            feature("tx-tcp-accecn-segmentation", true, true),
            feature("tx-future-segmentation", true, true),
            feature("tx-checksum-ipv4", true, true),
        ]));
        let t = get(&run(&f), "tso-gso").clone();
        assert_eq!(t.state, State::Warn);
        assert_eq!(
            t.fix.as_deref(),
            Some("ethtool -K eth1 gso off tx-tcp-accecn-segmentation off tx-future-segmentation off")
        );
        let i = f.iface.as_mut().unwrap();
        i.features = Ok(Some(vec![
            feature("tx-generic-segmentation", false, true),
            feature("tx-esp-segmentation", true, false),
        ]));
        let t = get(&run(&f), "tso-gso").clone();
        assert_eq!(t.state, State::Warn);
        assert_eq!(t.found, "generic-segmentation-offload: off, tx-esp-segmentation: on [fixed]");
        assert!(t.fix.as_deref().unwrap().contains("the driver keeps it on ([fixed])"), "{t:?}");
    }

    #[test]
    fn helpers() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[]), "");
        assert_eq!(size(1 << 30), "1.00 GiB");
        assert_eq!(size(100), "100 B");
        assert_eq!(ethtool_k_name("rx-gro"), "generic-receive-offload");
        assert_eq!(ethtool_k_name("rx-gro-hw"), "rx-gro-hw");
    }
}
