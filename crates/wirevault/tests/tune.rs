//! `wirevault tune`: findings on a veth inside a namespace and on the host's real interface
//! (read only), checked against `ethtool`'s own view (`-k` for GRO, `-g` for the rings);
//! `--apply` only on a namespace's veth; `record`'s start-up warnings.

use crate::util::*;
use serde_json::Value;
use std::process::{Command, Stdio};

const STATES: [&str; 4] = ["ok", "warn", "bad", "unknown"];
/// Every check `tune` has (a finding of each is expected on a NIC with a store).
const CHECKS: &[&str] = wv_tune::CHECKS;

/// Runs a command and returns (exit code, stdout, stderr).
fn run(cmd: &mut Command) -> (i32, String, String) {
    let o = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_no_panic(&err, &format!("{cmd:?}"));
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), err)
}

/// Parses `tune --json`'s output and checks every finding is well formed: a known check and
/// state, a reason, a fix whenever the state is not ok; the exit code is 1 exactly when a
/// finding is bad (without --apply).
fn findings(code: i32, stdout: &str, stderr: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    let list = v.as_array().expect("a JSON array").clone();
    assert!(!list.is_empty());
    for f in &list {
        let check = f["check"].as_str().unwrap();
        let state = f["state"].as_str().unwrap();
        assert!(CHECKS.contains(&check), "unknown check {check}");
        assert!(STATES.contains(&state), "{check}: state {state}");
        assert!(f["reason"].as_str().is_some_and(|r| r.len() > 20 && r.ends_with('.')), "{check}: reason {f}");
        assert!(f["found"].as_str().is_some_and(|x| !x.is_empty()), "{check}: found {f}");
        if state == "ok" {
            assert!(f["fix"].is_null(), "{check}: ok with a fix: {f}");
        } else {
            assert!(f["fix"].as_str().is_some_and(|x| !x.is_empty()), "{check}: {state} without a fix: {f}");
        }
    }
    let bad = list.iter().any(|f| f["state"] == "bad");
    assert_eq!(code, if bad { 1 } else { 0 }, "exit code against the findings: {stdout}\n{stderr}");
    list
}

fn finding<'a>(list: &'a [Value], check: &str) -> &'a Value {
    list.iter().find(|f| f["check"] == check).unwrap_or_else(|| panic!("no {check} finding in {list:?}"))
}

/// The value of `NAME: on|off` in `ethtool -k` output (or in a finding's `found`).
fn feature_state(text: &str, name: &str) -> Option<String> {
    text.split(['\n', ',']).find_map(|l| {
        l.trim().strip_prefix(&format!("{name}: ")).map(|v| v.split_whitespace().next().unwrap_or("").to_owned())
    })
}

/// The interface that carries the default route, if any.
fn default_route_interface() -> Option<String> {
    let o = Command::new("ip").args(["-o", "route", "show", "default"]).output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut w = text.split_whitespace();
    w.find(|x| *x == "dev")?;
    w.next().map(str::to_owned)
}

/// The host's real interface, read only: well-formed findings in JSON, the GRO state and ring
/// sizes equal to what ethtool reports, the human output names every check.
wvtest!(tune_host_interface_matches_ethtool, needs = ["ethtool", "ip"], |t| {
    let Some(ifname) = default_route_interface() else {
        eprintln!("SKIP {t}: no default route");
        return;
    };
    let tmp = TempDir::new("tune-host");
    let store = tmp.join("store");
    let (code, out, err) = run(wirevault().args(["tune", &ifname, "--json", "--store"]).arg(&store));
    let list = findings(code, &out, &err);
    assert!(!store.exists(), "tune created the store");
    for c in CHECKS.iter().filter(|c| **c != "store") {
        finding(&list, c);
    }

    let k = run(Command::new("ethtool").args(["-k", &ifname]));
    assert_eq!(k.0, 0, "ethtool -k: {}", k.2);
    let gro = finding(&list, "gro");
    assert_eq!(
        feature_state(gro["found"].as_str().unwrap(), "generic-receive-offload"),
        feature_state(&k.1, "generic-receive-offload"),
        "GRO: {gro} against ethtool -k:\n{}",
        k.1
    );
    let want = if feature_state(&k.1, "generic-receive-offload").as_deref() == Some("on") { "bad" } else { "ok" };
    if want == "bad" {
        assert_eq!(gro["state"], "bad", "{gro}");
    }

    let rings = finding(&list, "rings");
    let g = run(Command::new("ethtool").args(["-g", &ifname]));
    if g.0 == 0 {
        // "Pre-set maximums: RX: N ... Current hardware settings: RX: M"
        let rx: Vec<u32> =
            g.1.lines().filter_map(|l| l.trim().strip_prefix("RX:").and_then(|v| v.trim().parse().ok())).collect();
        assert_eq!(rx.len(), 2, "ethtool -g: {}", g.1);
        let found = rings["found"].as_str().unwrap();
        assert!(found.starts_with(&format!("RX ring {} of at most {} ", rx[1], rx[0])), "{found} against:\n{}", g.1);
    } else {
        assert_ne!(rings["state"], "warn", "ethtool -g failed but tune judged rings: {rings}");
    }

    let (code2, human, _) = run(wirevault().args(["tune", &ifname, "--store"]).arg(&store));
    assert_eq!(code, code2);
    for c in CHECKS.iter().filter(|c| **c != "store") {
        assert!(human.lines().any(|l| l.split_whitespace().nth(1) == Some(c)), "{c} missing:\n{human}");
    }
    assert!(human.contains("fix: ") == list.iter().any(|f| f["state"] != "ok"), "{human}");
});

/// A veth inside a namespace: the NIC-only checks say "not applicable (virtual interface)", GRO
/// is judged as `ethtool -k` shows it, and without --store one finding says how to add it.
wvtest!(tune_veth_in_a_namespace, needs = [root, "ip", "ethtool"], |t| {
    let pair = VethPair::new();
    run_ok(VethPair::exec(&pair.ns_a, "ethtool").args(["-K", pair.if_a, "gro", "on"]));
    let (code, out, err) = run(VethPair::exec(&pair.ns_a, bin()).args(["tune", pair.if_a, "--json"]));
    let list = findings(code, &out, &err);
    for c in ["numa", "irq-affinity", "rx-queues", "rings", "coalesce"] {
        let f = finding(&list, c);
        assert_eq!(f["state"], "ok", "{f}");
        assert_eq!(f["found"], format!("not applicable (virtual interface {})", pair.if_a), "{f}");
    }
    let k = run(VethPair::exec(&pair.ns_a, "ethtool").args(["-k", pair.if_a])).1;
    assert_eq!(feature_state(&k, "generic-receive-offload").as_deref(), Some("on"), "{k}");
    let gro = finding(&list, "gro");
    assert_eq!(gro["state"], "bad", "{gro}");
    assert_eq!(gro["fix"], format!("ethtool -K {} gro off", pair.if_a));
    assert_eq!(finding(&list, "store")["state"], "unknown");
    assert_eq!(code, 1, "a bad finding exits 1");
});

/// `--apply` on a namespace's veth turns GRO (and VLAN stripping, TSO/GSO) off, says so, and
/// `ethtool -k` in the namespace agrees; the host-wide checks are left out with --only.
wvtest!(tune_apply_turns_offloads_off_on_a_veth, needs = [root, "ip", "ethtool"], |t| {
    let pair = VethPair::new();
    run_ok(VethPair::exec(&pair.ns_a, "ethtool").args(["-K", pair.if_a, "gro", "on", "rxvlan", "on"]));
    let (code, out, err) = run(VethPair::exec(&pair.ns_a, bin()).args([
        "tune",
        pair.if_a,
        "--apply",
        "--json",
        "--only",
        "gro,lro,vlan-strip,tso-gso",
    ]));
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let list = v.as_array().unwrap();
    assert_eq!(list.len(), 4, "{out}");
    assert_eq!(code, 0, "{out}\n{err}");
    let gro = finding(list, "gro");
    assert_eq!(gro["state"], "ok", "after --apply: {gro}");
    assert_eq!(gro["applied"]["ok"], true, "{gro}");
    assert!(gro["applied"]["result"].as_str().unwrap().contains("generic-receive-offload: on -> off"), "{gro}");
    assert_eq!(finding(list, "vlan-strip")["state"], "ok", "{out}");
    let k = run(VethPair::exec(&pair.ns_a, "ethtool").args(["-k", pair.if_a])).1;
    assert_eq!(feature_state(&k, "generic-receive-offload").as_deref(), Some("off"), "{k}");
    assert_eq!(feature_state(&k, "rx-vlan-offload").as_deref(), Some("off"), "{k}");
    assert_eq!(
        feature_state(&gro["found"].as_str().unwrap().replace(", ", "\n"), "generic-receive-offload").as_deref(),
        Some("off")
    );

    // The human output names the change once more; nothing is left to change.
    let (code, human, _) = run(VethPair::exec(&pair.ns_a, bin()).args(["tune", pair.if_a, "--apply", "--only", "gro"]));
    assert_eq!(code, 0, "{human}");
    assert!(human.lines().any(|l| l.starts_with("ok") && l.contains("gro")), "{human}");
});

/// `--apply` with `--only tso-gso` on a namespace's veth: every segmentation feature the running
/// kernel names (as `ethtool -k` prints them: `tx-tcp-accecn-segmentation` on 6.18, the tunnel,
/// SCTP and fraglist ones, whatever a later kernel adds) is off afterwards, or the finding names
/// it and says why it stayed on (before: a fixed list of six left ten on, and said "ok").
wvtest!(tune_apply_turns_off_every_segmentation_feature_the_kernel_names, needs = [root, "ip", "ethtool"], |t| {
    let pair = VethPair::new();
    let ethtool_k = || run(VethPair::exec(&pair.ns_a, "ethtool").args(["-k", pair.if_a])).1;
    // Segmentation features by their kernel names (ethtool shows a few under older ones).
    let segmentation = |k: &str| -> Vec<(String, String)> {
        k.lines()
            .filter_map(|l| l.trim().split_once(": "))
            .filter(|(name, _)| {
                (name.starts_with("tx-") && name.ends_with("-segmentation"))
                    || name.starts_with("tx-gso-")
                    || *name == "generic-segmentation-offload"
            })
            .map(|(name, state)| (name.to_owned(), state.to_owned()))
            .collect()
    };
    let before = segmentation(&ethtool_k());
    assert!(before.iter().filter(|(_, s)| s == "on").count() >= 2, "a veth segments: {before:?}");
    let (code, out, err) =
        run(VethPair::exec(&pair.ns_a, bin()).args(["tune", pair.if_a, "--apply", "--json", "--only", "tso-gso"]));
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let f = finding(v.as_array().unwrap(), "tso-gso");
    let said = format!("{} {} {}", f["found"], f["applied"]["result"], f["fix"]);
    let after = segmentation(&ethtool_k());
    assert_eq!(before.len(), after.len());
    for (name, state) in &after {
        if state.starts_with("on") {
            assert!(said.contains(name.as_str()), "{name} is still {state} and the finding does not say so: {f}");
            assert!(state.contains("[fixed]") || said.contains("kept"), "{name} {state}: no reason given: {f}");
        } else {
            assert!(state.starts_with("off"), "{name}: {state}");
        }
    }
    let left_on = after.iter().any(|(_, s)| s.starts_with("on"));
    assert_eq!(f["state"] == "ok", !left_on, "{f}");
    assert_eq!(code, 0, "{out}\n{err}");
});

/// Bad arguments: one sentence, exit 2; a missing interface, as in record and replay: exit 1.
#[test]
fn tune_bad_arguments() {
    for (want, args, needle) in [
        (1, vec!["tune", "wvnosuch0"], "no network interface named wvnosuch0"),
        (2, vec!["tune", "lo", "--only", "gro,nope"], "no check named \"nope\""),
        (2, vec!["tune", "lo", "--max-size", "80%"], "--max-size needs --store"),
        (2, vec!["tune", "lo", "--cpus", "x"], "--cpus"),
        (2, vec!["tune", "lo", "--buffer", "lots"], "--buffer"),
    ] {
        let (code, _, err) = run(wirevault().args(&args));
        assert_eq!(code, want, "{args:?}: {err}");
        assert!(err.contains(needle) && err.lines().count() == 1, "{args:?}: {err}");
    }
}

/// `record` prints the warn and bad findings once at start-up, one line each (for a synthetic
/// source only the store's), and not with --no-tune-warnings: a budget larger than the volume is
/// one of them.
#[test]
fn record_prints_tune_warnings_once() {
    let tmp = TempDir::new("tune-record");
    let record = |store: &str, extra: &[&str]| {
        let mut c = wirevault();
        c.args(["record", "--synthetic", "size=64,count=100", "-q", "--buffer", "64M", "--max-size", "1000T", "-o"])
            .arg(tmp.join(store))
            .args(extra);
        run(&mut c)
    };
    let (code, _, err) = record("a", &[]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("wirevault: tune: ")).collect();
    assert!(lines.iter().all(|l| l.contains(" store")), "only store checks for a synthetic source: {err}");
    assert_eq!(lines.iter().filter(|l| l.contains("bad store-space")).count(), 1, "{err}");
    assert!(lines.iter().all(|l| l.contains("; fix: ")), "{err}");
    let (code, _, err) = record("b", &["--no-tune-warnings"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("tune:"), "{err}");
}

/// A live recording on a veth with GRO on warns about it once, before the summary.
wvtest!(record_live_warns_about_gro, needs = [root, "ip", "ethtool"], |t| {
    let _heavy = heavy_lock();
    let pair = VethPair::new();
    run_ok(VethPair::exec(&pair.ns_a, "ethtool").args(["-K", pair.if_a, "gro", "on"]));
    let tmp = TempDir::new("tune-record-live");
    let (code, _, err) = run(VethPair::exec(&pair.ns_a, bin())
        .args(["record", "-i", pair.if_a, "--duration", "1s", "-q", "--buffer", "64M", "-o"])
        .arg(tmp.join("s")));
    assert_eq!(code, 0, "{err}");
    let gro: Vec<&str> = err.lines().filter(|l| l.starts_with("wirevault: tune: bad gro: ")).collect();
    assert_eq!(gro.len(), 1, "{err}");
    assert!(gro[0].ends_with(&format!("fix: ethtool -K {} gro off", pair.if_a)), "{err}");
    let summary = err.lines().position(|l| l.contains("packets received")).expect("summary");
    let warn = err.lines().position(|l| l.starts_with("wirevault: tune: bad gro")).unwrap();
    assert!(warn < summary, "{err}");
});

/// Stores and values `record` would refuse are not passed as fine: a
/// read-only mount and a path that is a file are bad findings (exit 1), CPUs
/// this process may not use, more memory than the machine has and a zero
/// budget are refused as record refuses them (exit 2).
wvtest!(tune_judges_stores_and_values_as_record_would, needs = [root], |t| {
    let tmp = TempDir::new("tune-store");
    let ro = tmp.join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "ro,size=1m", "wv-tune-ro"]).arg(&ro).status();
    if mounted.is_ok_and(|s| s.success()) {
        let (code, out, err) =
            run(wirevault().args(["tune", "lo", "--json", "--only", "store-mount", "--store"]).arg(ro.join("s")));
        let _ = Command::new("umount").arg(&ro).status();
        let list = findings(code, &out, &err);
        let m = finding(&list, "store-mount");
        assert_eq!(m["state"], "bad", "{m}");
        assert!(m["found"].as_str().unwrap().contains("read-only"), "{m}");
    }
    let file = tmp.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let (code, out, err) = run(wirevault().args(["tune", "lo", "--json", "--store"]).arg(&file));
    let list = findings(code, &out, &err);
    assert_eq!(finding(&list, "store")["state"], "bad");
    let dir = tmp.to_str().unwrap();
    for (args, want) in [
        (vec!["--cpus", "1000"], "not available"),
        (vec!["--buffer", "100T"], "more than this machine's memory"),
        (vec!["--store", dir, "--max-size", "0"], "above 0"),
    ] {
        let (code, _, err) = run(wirevault().args(["tune", "lo"]).args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want) && err.trim().lines().count() == 1, "{args:?}: {err}");
    }
});
