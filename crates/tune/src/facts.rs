//! Gathering: every fact the checks judge, read once from sysfs, procfs and the NIC's ethtool
//! ioctls. Nothing here judges; a fact that cannot be read is kept as the reason why.

use crate::parse::{self, Mount};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use wv_sys::ethtool::{self, Channels, Coalesce, DrvInfo, Feature, Rings};

/// What a recording would use: the interface, the store, the CPUs and the buffer (as given to
/// `record`).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// `-i IF` (none for file and synthetic sources: only the host and store checks run).
    pub interface: Option<String>,
    /// `-o STORE` (none: the store checks are left out).
    pub store: Option<PathBuf>,
    /// `--cpus LIST` (none: record does not pin).
    pub cpus: Option<Vec<usize>>,
    /// `--buffer` in bytes (the arena of all workers together).
    pub buffer: u64,
    /// `--max-size` in bytes, already resolved from a percentage.
    pub budget: Option<u64>,
    /// Free bytes of the store's other volumes (`record --volume`), each
    /// file system once and none the store's own: the budget may use them.
    pub other_free: u64,
    /// The smallest `--max-size` record takes with its file size and
    /// streams (0: not known).
    pub min_budget: u64,
}

/// A NIC setting read through ethtool: `Ok(None)` when the driver does not report it.
pub type Probe<T> = Result<Option<T>, String>;

/// One interrupt of the interface's device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Irq {
    pub irq: u32,
    /// Its name in `/proc/interrupts`.
    pub name: String,
    /// `/proc/irq/N/smp_affinity_list`, when readable.
    pub affinity: Option<Vec<usize>>,
}

/// Facts about the interface.
#[derive(Clone, Debug)]
pub struct Iface {
    pub name: String,
    pub driver: Option<DrvInfo>,
    /// It has a device (`/sys/class/net/IF/device`): a NIC, not veth, lo, a bridge or a tunnel.
    pub physical: bool,
    /// `device/numa_node` (`None`: virtual, or -1 on a machine without NUMA information).
    pub numa_node: Option<i32>,
    pub irqs: Vec<Irq>,
    pub channels: Probe<Channels>,
    pub rings: Probe<Rings>,
    pub coalesce: Probe<Coalesce>,
    pub features: Probe<Vec<Feature>>,
    /// It carries a default route: `--apply` leaves alone what restarts its device.
    pub default_route: bool,
}

/// Facts about the host.
#[derive(Clone, Debug, Default)]
pub struct Host {
    /// NUMA nodes and their CPUs (empty when sysfs shows no node directory).
    pub nodes: Vec<(i32, Vec<usize>)>,
    /// The CPUs judged (`--cpus`, or every CPU this process may use) with their governor
    /// (`None`: no cpufreq driver for it).
    pub governors: Vec<(usize, Option<String>)>,
    /// `/sys/kernel/mm/transparent_hugepage/enabled`'s selected word.
    pub thp: Option<String>,
    pub hugepage_size: Option<u64>,
    pub hugepages_total: Option<u64>,
    pub hugepages_free: Option<u64>,
    /// Soft and hard RLIMIT_MEMLOCK in bytes (`None` inside: unlimited).
    pub memlock: Option<(Option<u64>, Option<u64>)>,
    /// CAP_IPC_LOCK is effective (locking ignores RLIMIT_MEMLOCK).
    pub cap_ipc_lock: bool,
    /// An irqbalance daemon runs (it rewrites IRQ affinities).
    pub irqbalance: bool,
}

/// The block device under the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// `sda`, `nvme0n1`, `dm-0`, `md0` (the whole disk for a partition).
    pub name: String,
    /// Active scheduler and the choices (`None` when the queue has no scheduler file).
    pub scheduler: Option<(String, Vec<String>)>,
    pub rotational: Option<bool>,
}

/// Facts about the store's volume.
#[derive(Clone, Debug)]
pub struct Store {
    pub path: PathBuf,
    /// The existing directory judged: the store, or its nearest existing parent.
    pub probe: PathBuf,
    pub mount: Option<Mount>,
    pub block: Option<Block>,
    /// Free (for unprivileged users) and total bytes of the volume.
    pub space: Result<(u64, u64), String>,
    /// Bytes the store's catalog already holds (retention counts them in the budget).
    pub used: u64,
    /// The path exists and is not a directory (a file, a device).
    pub not_a_directory: bool,
}

/// Everything the checks judge.
#[derive(Clone, Debug)]
pub struct Facts {
    pub inputs: Inputs,
    pub iface: Option<Iface>,
    pub host: Host,
    pub store: Option<Store>,
}

/// Gathers every fact for `inputs`. Fails only when the interface does not exist.
pub fn gather(inputs: &Inputs) -> Result<Facts, wv_sys::error::Error> {
    let iface = inputs.interface.as_deref().map(iface).transpose()?;
    let host = host(inputs);
    let store = inputs.store.as_deref().map(store);
    Ok(Facts { inputs: inputs.clone(), iface, host, store })
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok()
}

/// A probe result: unsupported requests are `Ok(None)`.
fn probe<T>(r: std::io::Result<T>) -> Probe<T> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if ethtool::is_unsupported(&e) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

fn iface(name: &str) -> Result<Iface, wv_sys::error::Error> {
    wv_sys::netif::ifindex(name)?;
    let dev = Path::new("/sys/class/net").join(name).join("device");
    let physical = dev.exists();
    let driver = ethtool::drvinfo(name).ok();
    let irqs = if physical { irqs(name, &dev, driver.as_ref()) } else { Vec::new() };
    let routes = [
        read("/proc/net/route").map(|r| parse::default_route_ifaces(&r)).unwrap_or_default(),
        read("/proc/net/ipv6_route").map(|r| parse::default_route6_ifaces(&r)).unwrap_or_default(),
    ];
    Ok(Iface {
        name: name.to_owned(),
        physical,
        numa_node: wv_sys::netif::numa_node(name),
        irqs,
        channels: probe(ethtool::channels(name)),
        rings: probe(ethtool::rings(name)),
        coalesce: probe(ethtool::coalesce(name)),
        features: probe(ethtool::features(name)),
        default_route: routes.iter().flatten().any(|i| i == name),
        driver,
    })
}

/// The device's interrupts: its MSI vectors (`device/msi_irqs`, or the parent's for a virtio
/// device, whose PCI function owns them), else the `/proc/interrupts` lines naming the interface
/// or the device's bus address.
fn irqs(name: &str, dev: &Path, driver: Option<&DrvInfo>) -> Vec<Irq> {
    let lines = read("/proc/interrupts").map(|t| parse::interrupts(&t)).unwrap_or_default();
    let msi = |d: &Path| -> Vec<u32> {
        fs::read_dir(d.join("msi_irqs"))
            .map(|r| r.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
            .unwrap_or_default()
    };
    let mut numbers = msi(dev);
    if numbers.is_empty() {
        numbers = msi(&dev.join(".."));
    }
    if numbers.is_empty() {
        let bus = driver.map(|d| d.bus_info.as_str()).filter(|b| !b.is_empty());
        numbers = lines
            .iter()
            .filter(|l| {
                l.name.split([' ', ',']).any(|n| n.starts_with(name)) || bus.is_some_and(|b| l.name.contains(b))
            })
            .map(|l| l.irq)
            .collect();
    }
    numbers.sort_unstable();
    numbers
        .into_iter()
        .map(|irq| Irq {
            irq,
            name: lines.iter().find(|l| l.irq == irq).map(|l| l.name.clone()).unwrap_or_default(),
            affinity: read(format!("/proc/irq/{irq}/smp_affinity_list"))
                .and_then(|s| wv_units::parse_cpu_list(s.trim())),
        })
        .collect()
}

fn host(inputs: &Inputs) -> Host {
    let mut nodes: Vec<(i32, Vec<usize>)> = fs::read_dir("/sys/devices/system/node")
        .map(|r| {
            r.flatten()
                .filter_map(|e| {
                    let n: i32 = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
                    let cpus = read(e.path().join("cpulist"))?;
                    Some((n, wv_units::parse_cpu_list(cpus.trim()).unwrap_or_default()))
                })
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    let cpus = inputs.cpus.clone().unwrap_or_else(wv_sys::cpu::allowed_cpus);
    let governors = cpus
        .iter()
        .map(|&c| {
            let g = read(format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"));
            (c, g.map(|g| g.trim().to_owned()))
        })
        .collect();
    let meminfo = read("/proc/meminfo").unwrap_or_default();
    const CAP_IPC_LOCK: u32 = 14;
    Host {
        nodes,
        governors,
        thp: read("/sys/kernel/mm/transparent_hugepage/enabled").and_then(|t| parse::selected(&t)),
        hugepage_size: parse::meminfo(&meminfo, "Hugepagesize"),
        hugepages_total: parse::meminfo(&meminfo, "HugePages_Total"),
        hugepages_free: parse::meminfo(&meminfo, "HugePages_Free"),
        memlock: read("/proc/self/limits").and_then(|l| parse::memlock(&l)),
        cap_ipc_lock: read("/proc/self/status")
            .and_then(|s| parse::cap_eff(&s))
            .is_some_and(|c| c & (1 << CAP_IPC_LOCK) != 0),
        irqbalance: irqbalance_runs(),
    }
}

/// Whether a process named irqbalance runs (in this PID namespace).
fn irqbalance_runs() -> bool {
    fs::read_dir("/proc")
        .map(|r| {
            r.flatten().any(|e| {
                e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    && read(e.path().join("comm")).is_some_and(|c| c.trim() == "irqbalance")
            })
        })
        .unwrap_or(false)
}

/// Splits a Linux `dev_t` into major and minor (glibc's `gnu_dev_major`/`minor`).
fn major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

fn store(path: &Path) -> Store {
    // Nothing is created: a store that does not exist yet is judged by its nearest parent.
    let probe = path.ancestors().find(|p| p.is_dir()).filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let canonical = fs::canonicalize(probe).unwrap_or_else(|_| probe.to_owned());
    let dev = fs::metadata(&canonical).ok().map(|m| major_minor(m.dev()));
    let mount = dev.and_then(|d| {
        let mounts = parse::mountinfo(&read("/proc/self/mountinfo")?);
        parse::mount_of(&mounts, d, canonical.to_str()?).cloned()
    });
    let block = dev.filter(|d| d.0 != 0).and_then(block);
    let used = wv_store::catalog::read(path)
        .map(|(entries, _)| entries.iter().map(|e| e.bytes.min(1 << 50)).sum())
        .unwrap_or(0);
    Store {
        path: path.to_owned(),
        probe: probe.to_owned(),
        mount,
        block,
        space: wv_sys::fs::fs_space(probe).map_err(|e| e.to_string()),
        used,
        not_a_directory: fs::metadata(path).is_ok_and(|m| !m.is_dir()),
    }
}

/// The block device `major:minor` (the whole disk of a partition) and its queue settings.
fn block((major, minor): (u32, u32)) -> Option<Block> {
    let mut dir = fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    if dir.join("partition").exists() {
        dir = dir.parent()?.to_owned();
    }
    let q = dir.join("queue");
    let scheduler = read(q.join("scheduler")).map(|t| {
        let choices = t.split_whitespace().map(|w| w.trim_matches(['[', ']']).to_owned()).collect();
        (parse::selected(&t).unwrap_or_else(|| t.trim().to_owned()), choices)
    });
    Some(Block {
        name: dir.file_name()?.to_str()?.to_owned(),
        scheduler,
        rotational: read(q.join("rotational")).map(|r| r.trim() == "1"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_t_split() {
        assert_eq!(major_minor(0xfe00), (254, 0));
        assert_eq!(major_minor((259 << 8) | 2), (259, 2));
        // glibc's makedev for major 8, minor 300: the minor's high bits sit above bit 20.
        let dev = (300 & 0xff) | (8 << 8) | ((300 & !0xff) << 12);
        assert_eq!(major_minor(dev), (8, 300));
    }

    #[test]
    fn loopback_and_root() {
        let f = gather(&Inputs {
            interface: Some("lo".into()),
            store: Some("/".into()),
            buffer: 1 << 30,
            ..Inputs::default()
        })
        .unwrap();
        let i = f.iface.unwrap();
        assert!(!i.physical && i.irqs.is_empty() && i.numa_node.is_none());
        assert!(matches!(&i.features, Ok(Some(v)) if v.iter().any(|f| f.name == "rx-gro")));
        let s = f.store.unwrap();
        assert_eq!(s.mount.unwrap().point, "/");
        assert!(s.space.unwrap().1 > 0);
        assert!(!f.host.governors.is_empty());
    }

    #[test]
    fn missing_interface_is_an_error() {
        let e = gather(&Inputs { interface: Some("wv-no-such-if0".into()), ..Inputs::default() }).unwrap_err();
        assert!(e.to_string().contains("no network interface named wv-no-such-if0"), "{e}");
    }
}
