//! `--apply`: carries out the [`Action`] of every finding that is not ok, and says for each
//! what changed (read back from the kernel where it can be) or why nothing did. Nothing here
//! cuts a link or touches routing: queue counts, mounts and daemons are left to the
//! administrator ([`Action::Manual`]), and so are ring sizes of the interface that carries the
//! default route.

use crate::checks::ethtool_k_name;
use crate::facts::Facts;
use crate::{Action, Applied, Finding, State};
use std::fs;
use wv_sys::ethtool;

/// Applies the actions of `findings` (those not ok), filling in each one's `applied`.
pub fn apply(facts: &Facts, findings: &mut [Finding]) {
    let ifname = facts.iface.as_ref().map(|i| i.name.as_str());
    for f in findings.iter_mut().filter(|f| f.state != State::Ok) {
        let Some(a) = &f.action else { continue };
        f.applied = Some(match (a, ifname) {
            (Action::Manual(why), _) => Applied { ok: false, result: format!("not applied: {why}") },
            (Action::FeaturesOff(names), Some(ifn)) => features_off(ifn, names),
            (Action::RxRing(rx), Some(ifn)) => rx_ring(ifn, *rx),
            (Action::IrqAffinity { irqs, cpus }, _) => irq_affinity(irqs, cpus),
            (Action::Governor(cpus), _) => governor(cpus),
            (Action::Thp(word), _) => write(
                "/sys/kernel/mm/transparent_hugepage/enabled",
                word,
                &format!("transparent_hugepage/enabled: {word}"),
            ),
            (Action::Scheduler { device, to }, _) => {
                write(&format!("/sys/block/{device}/queue/scheduler"), to, &format!("{device}: scheduler {to}"))
            }
            (_, None) => Applied { ok: false, result: "not applied: no interface".into() },
        });
    }
}

/// Writes `value` to a sysfs/procfs file.
fn write(path: &str, value: &str, done: &str) -> Applied {
    match fs::write(path, value) {
        Ok(()) => Applied { ok: true, result: done.to_owned() },
        Err(e) => Applied { ok: false, result: format!("writing {value} to {path} failed: {e}") },
    }
}

fn features_off(ifname: &str, names: &[String]) -> Applied {
    let want: Vec<(&str, bool)> = names.iter().map(|n| (n.as_str(), false)).collect();
    if let Err(e) = ethtool::set_features(ifname, &want) {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied { " (needs root or CAP_NET_ADMIN)" } else { "" };
        return Applied { ok: false, result: format!("changing the features of {ifname} failed: {e}{hint}") };
    }
    // Read back: the kernel may keep a feature on that another one needs.
    let after = match ethtool::features(ifname) {
        Ok(v) => v,
        Err(e) => return Applied { ok: false, result: format!("reading the features back failed: {e}") },
    };
    let mut ok = true;
    let parts: Vec<String> = names
        .iter()
        .map(|n| {
            let on = after.iter().find(|f| &f.name == n).is_some_and(|f| f.active);
            ok &= !on;
            format!(
                "{}: on -> {}",
                ethtool_k_name(n),
                if on {
                    "on (the kernel kept it on though asked off: the driver or a device stacked on it holds it)"
                } else {
                    "off"
                }
            )
        })
        .collect();
    Applied { ok, result: parts.join(", ") }
}

fn rx_ring(ifname: &str, rx: u32) -> Applied {
    let before = match ethtool::rings(ifname) {
        Ok(r) => r,
        Err(e) => return Applied { ok: false, result: format!("reading the rings of {ifname} failed: {e}") },
    };
    let mut want = before;
    want.rx = rx;
    if let Err(e) = ethtool::set_rings(ifname, &want) {
        return Applied { ok: false, result: format!("setting the RX ring of {ifname} failed: {e}") };
    }
    match ethtool::rings(ifname) {
        Ok(a) => Applied { ok: a.rx == rx, result: format!("RX ring {} -> {}", before.rx, a.rx) },
        Err(e) => Applied { ok: false, result: format!("reading the rings back failed: {e}") },
    }
}

fn irq_affinity(irqs: &[u32], cpus: &str) -> Applied {
    if irqs.is_empty() {
        return Applied { ok: false, result: "not applied: no interrupt to move (stop irqbalance by hand)".into() };
    }
    let mut ok = true;
    let parts: Vec<String> = irqs
        .iter()
        .map(|n| {
            let r = write(&format!("/proc/irq/{n}/smp_affinity_list"), cpus, &format!("IRQ {n} -> CPUs {cpus}"));
            ok &= r.ok;
            r.result
        })
        .collect();
    Applied { ok, result: parts.join("; ") }
}

fn governor(cpus: &[usize]) -> Applied {
    let mut ok = true;
    let parts: Vec<String> = cpus
        .iter()
        .map(|c| {
            let r = write(
                &format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
                "performance",
                &format!("CPU {c}: performance"),
            );
            ok &= r.ok;
            r.result
        })
        .collect();
    Applied { ok, result: parts.join(", ") }
}
