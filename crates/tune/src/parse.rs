//! Parsers of the kernel's text files that `tune` reads (`/proc/self/mountinfo`,
//! `/proc/interrupts`, `/proc/meminfo`, `/proc/self/limits`, `/proc/net/route`, sysfs choice
//! files such as `[madvise]`), each a pure function of the text so that it is tested on
//! real samples.

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// `major:minor` of the mounted device.
    pub dev: (u32, u32),
    /// Where it is mounted (octal escapes such as `\040` decoded).
    pub point: String,
    /// Per-mount options (`rw,noatime`).
    pub options: Vec<String>,
    /// File system type (`ext4`, `xfs`, `tmpfs`, `fuse.sshfs`).
    pub fstype: String,
    /// Mount source (`/dev/nvme0n1p2`).
    pub source: String,
    /// Per-superblock options (`data=ordered`, `discard`).
    pub super_options: Vec<String>,
}

/// Parses `/proc/self/mountinfo` (proc(5)); lines that do not parse are skipped.
pub fn mountinfo(text: &str) -> Vec<Mount> {
    text.lines().filter_map(mount_line).collect()
}

fn mount_line(line: &str) -> Option<Mount> {
    let (head, tail) = line.split_once(" - ")?;
    let h: Vec<&str> = head.split(' ').collect();
    let t: Vec<&str> = tail.split(' ').collect();
    if h.len() < 6 || t.len() < 3 {
        return None;
    }
    let (maj, min) = h[2].split_once(':')?;
    let list = |s: &str| s.split(',').filter(|o| !o.is_empty()).map(str::to_owned).collect();
    Some(Mount {
        dev: (maj.parse().ok()?, min.parse().ok()?),
        point: unescape(h[4]),
        options: list(h[5]),
        fstype: t[0].to_owned(),
        source: unescape(t[1]),
        super_options: list(t[2]),
    })
}

/// Decodes mountinfo's `\ooo` escapes (space, tab, newline, backslash).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount that holds `path` (canonical) on device `dev`: the longest mount point that is a
/// prefix of `path` among the mounts of that device (the last one mounted wins a tie, as the
/// kernel's view does).
pub fn mount_of<'m>(mounts: &'m [Mount], dev: (u32, u32), path: &str) -> Option<&'m Mount> {
    let under = |point: &str| {
        point == "/" || path == point || path.strip_prefix(point).is_some_and(|rest| rest.starts_with('/'))
    };
    let mut best: Option<&Mount> = None;
    for m in mounts.iter().filter(|m| m.dev == dev && under(&m.point)) {
        if best.is_none_or(|b| m.point.len() >= b.point.len()) {
            best = Some(m);
        }
    }
    best
}

/// One interrupt of `/proc/interrupts`: its number and the names of its actions (the last
/// column, e.g. `eth0-TxRx-0` or `virtio2-input.0`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrqLine {
    pub irq: u32,
    pub name: String,
}

/// Parses the numbered lines of `/proc/interrupts` (the per-CPU counts and the chip columns are
/// skipped: the name is what follows the chip, hwirq and trigger columns).
pub fn interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let ncpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    lines
        .filter_map(|l| {
            let (num, rest) = l.trim_start().split_once(':')?;
            let irq = num.parse().ok()?;
            // counts, then chip, hwirq-trigger (`5-edge`) or `hwirq` + `trigger`, then the name.
            let words: Vec<&str> = rest.split_whitespace().skip(ncpus).collect();
            let name = match words.len() {
                0..=2 => words.last().copied().unwrap_or(""),
                _ if words[1].contains('-') => &words[2..].join(" "),
                _ => &words[3.min(words.len() - 1)..].join(" "),
            };
            Some(IrqLine { irq, name: name.to_owned() })
        })
        .collect()
}

/// A `key: value kB` field of `/proc/meminfo`, in bytes (`kB` values) or as the bare number.
pub fn meminfo(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let mut w = rest.split_whitespace();
        let n: u64 = w.next()?.parse().ok()?;
        Some(if w.next() == Some("kB") { n * 1024 } else { n })
    })
}

/// The soft and hard `Max locked memory` of `/proc/self/limits` in bytes; `None` = unlimited.
pub fn memlock(limits: &str) -> Option<(Option<u64>, Option<u64>)> {
    let line = limits.lines().find(|l| l.starts_with("Max locked memory"))?;
    let mut w = line["Max locked memory".len()..].split_whitespace();
    let val = |s: Option<&str>| -> Option<Option<u64>> {
        match s? {
            "unlimited" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    Some((val(w.next())?, val(w.next())?))
}

/// The selected word of a sysfs choice file: `always [madvise] never` -> `madvise`.
pub fn selected(text: &str) -> Option<String> {
    let (_, rest) = text.split_once('[')?;
    let (word, _) = rest.split_once(']')?;
    Some(word.to_owned())
}

/// Interfaces that carry an IPv4 default route (`/proc/net/route`: destination and mask 0).
pub fn default_route_ifaces(route: &str) -> Vec<String> {
    route
        .lines()
        .skip(1)
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 8 && w[1] == "00000000" && w[7] == "00000000").then(|| w[0].to_owned())
        })
        .collect()
}

/// Interfaces that carry an IPv6 default route (`/proc/net/ipv6_route`: `::/0`, not the
/// unreachable `lo` entries).
pub fn default_route6_ifaces(route: &str) -> Vec<String> {
    route
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 10 && w[0].bytes().all(|c| c == b'0') && w[1] == "00" && w[9] != "lo").then(|| w[9].to_owned())
        })
        .collect()
}

/// The effective capabilities of `/proc/self/status` (`CapEff:` in hex).
pub fn cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict
40 27 259:2 / /data rw,noatime shared:1 - xfs /dev/nvme0n1p2 rw,attr2,inode64
41 40 259:2 /sub /data/my\\040store rw,noatime - xfs /dev/nvme0n1p2 rw
";

    #[test]
    fn mountinfo_lines() {
        let m = mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].point, "/");
        assert_eq!(m[1].fstype, "ext4");
        assert_eq!(m[1].source, "/dev/vda");
        assert_eq!(m[1].options, ["rw", "relatime"]);
        assert_eq!(m[1].super_options, ["rw", "discard", "resv_strict"]);
        // optional fields (shared:1) before the separator
        assert_eq!(m[2].fstype, "xfs");
        assert_eq!(m[2].dev, (259, 2));
        assert_eq!(m[3].point, "/data/my store");
        assert!(mountinfo("garbage\n1 2 3\n").is_empty());
    }

    #[test]
    fn mount_holding_a_path() {
        let m = mountinfo(MOUNTINFO);
        assert_eq!(mount_of(&m, (254, 0), "/tmp/x").unwrap().point, "/");
        assert_eq!(mount_of(&m, (259, 2), "/data/store").unwrap().point, "/data");
        assert_eq!(mount_of(&m, (259, 2), "/data/my store/a").unwrap().point, "/data/my store");
        // /database is not under /data
        assert!(mount_of(&m, (259, 2), "/database").is_none());
        assert!(mount_of(&m, (1, 1), "/").is_none());
    }

    #[test]
    fn interrupt_names() {
        let t = "           CPU0       CPU1       \n\
 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
 38:          0       2663 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
 72:   12   0  IR-PCI-MSI 524288-edge      eth0-TxRx-0\n\
 90:   0   0  PCI-MSI 3 edge  mlx5_comp0@pci:0000:03:00.0\n\
NMI:          0          0   Non-maskable interrupts\n";
        let v = interrupts(t);
        assert_eq!(
            v,
            [
                IrqLine { irq: 24, name: "ACPI:Ged".into() },
                IrqLine { irq: 38, name: "virtio2-input.0".into() },
                IrqLine { irq: 72, name: "eth0-TxRx-0".into() },
                IrqLine { irq: 90, name: "mlx5_comp0@pci:0000:03:00.0".into() },
            ]
        );
    }

    #[test]
    fn small_files() {
        let mi = "MemTotal:       24683656 kB\nHugePages_Total:       4\nHugepagesize:       2048 kB\n";
        assert_eq!(meminfo(mi, "HugePages_Total"), Some(4));
        assert_eq!(meminfo(mi, "Hugepagesize"), Some(2 << 20));
        assert_eq!(meminfo(mi, "HugePages_Free"), None);
        let lim = "Limit                     Soft Limit           Hard Limit           Units\n\
Max locked memory         8388608              unlimited            bytes\n";
        assert_eq!(memlock(lim), Some((Some(8 << 20), None)));
        assert_eq!(selected("always [madvise] never\n").as_deref(), Some("madvise"));
        assert_eq!(selected("none [mq-deadline] kyber bfq").as_deref(), Some("mq-deadline"));
        assert_eq!(selected("performance"), None);
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(default_route_ifaces(route), ["eth0"]);
        let r6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth1\n\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n";
        assert_eq!(default_route6_ifaces(r6), ["eth1"]);
        assert_eq!(cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n"), Some(0x1ff_ffff_ffff));
    }
}
