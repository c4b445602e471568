//! A store a hostile local user prepared, and the modes of what wirevault
//! writes: symlinks and `..` paths in the catalog, symlinked stream
//! directories, part files and stats files, FIFOs under store names, a second
//! writer, damaged catalog lines, `--user`'s chown, `--stats-file` and
//! standard output pointed into the store, `--on-full stop`'s budget drops.
//! Nothing outside the store changes, nothing recorded is lost, and every
//! answer is exact or carries a warning.

use crate::util::*;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SMALL: [&str; 6] = ["--buffer", "8M", "--block-size", "256K", "--file-size", "256K"];

/// Records `count` synthetic packets into `store` (several files).
fn record(store: &Path, count: u32) {
    let spec = format!("size=200,count={count}");
    let mut args = vec!["record", "-o", store.to_str().unwrap(), "--synthetic", &spec, "-q"];
    args.extend(SMALL);
    run_wirevault(&args).expect(0, "record");
}

fn count(store: &Path) -> (u64, String) {
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    assert_eq!(o.code, Some(0), "query: {}", o.stderr);
    (o.stdout.trim().parse().unwrap(), o.stderr)
}

fn victim(dir: &Path, name: &str) -> std::path::PathBuf {
    let v = dir.join(name);
    write_pcap(&v, 1, 262_144, true, &test_frames(5, 1_000_000_000));
    v
}

fn lines(store: &Path) -> Vec<String> {
    fs::read_to_string(store.join("catalog.jsonl")).unwrap().lines().map(String::from).collect()
}

fn write_lines(store: &Path, l: &[String]) {
    fs::write(store.join("catalog.jsonl"), l.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

/// Finding 3: repair must not truncate the file a `.part` symlink points to.
#[test]
fn repair_does_not_follow_a_symlinked_part_file() {
    let t = TempDir::new("part-link");
    let store = t.join("store");
    record(&store, 2000);
    let v = victim(&t, "victim.pcap");
    // Trailing garbage: a repair following the link would cut it off.
    fs::OpenOptions::new().append(true).open(&v).unwrap().set_len(fs::metadata(&v).unwrap().len() + 7).unwrap();
    let before = fs::read(&v).unwrap();
    symlink(&v, store.join("stream-000/20300101T000000.000000000Z-000999.pcap.part")).unwrap();
    let o = run_wirevault(&["repair", store.to_str().unwrap()]);
    assert_eq!(fs::read(&v).unwrap(), before, "repair changed the file a .part symlink points to: {}", o.stderr);
    assert!(o.stderr.contains("symlink") || o.stderr.contains("not a regular file"), "no warning: {}", o.stderr);
    assert!(!lines(&store).iter().any(|l| l.contains("000999")), "the link was cataloged");
}

/// Finding 3: catalog lines naming `../x` or an absolute path are rejected
/// with a warning: query does not read them, retention does not delete them.
#[test]
fn catalog_paths_outside_the_store_are_rejected() {
    let t = TempDir::new("cat-escape");
    let store = t.join("store");
    record(&store, 3000);
    let (n, _) = count(&store);
    let outside = victim(&t, "victim.pcap");
    let abs = victim(&t, "abs.pcap");
    let mut l = lines(&store);
    let first: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
    for (path, first_ns) in [("stream-000/../../victim.pcap", 1u64), (abs.to_str().unwrap(), 2)] {
        let mut e = first.clone();
        e["file"] = path.into();
        e["index"] = serde_json::Value::Null;
        e["first_ns"] = first_ns.into();
        e["bytes"] = fs::metadata(&outside).unwrap().len().into();
        e["packets"] = 5.into();
        l.insert(0, e.to_string());
    }
    write_lines(&store, &l);
    let (m, err) = count(&store);
    assert_eq!(m, n, "query read files outside the store: {err}");
    assert!(err.contains("victim.pcap") && err.contains(abs.to_str().unwrap()), "no warning: {err}");
    // Retention: a budget that forces deleting the oldest entries (ours, by first_ns).
    let mut args = vec!["record", "-o", store.to_str().unwrap(), "--synthetic", "size=200,count=3000", "-q"];
    args.extend(SMALL);
    args.extend(["--max-size", "2M"]);
    let o = run_wirevault(&args);
    assert!(outside.exists() && abs.exists(), "retention deleted files outside the store: {}", o.stderr);
}

/// Finding 3: a symlinked stats.json is not followed (the recorder runs as root).
#[test]
fn a_symlinked_stats_file_is_not_overwritten() {
    let t = TempDir::new("stats-link");
    let store = t.join("store");
    record(&store, 100);
    let v = victim(&t, "victim.pcap");
    let before = fs::read(&v).unwrap();
    fs::remove_file(store.join("stats.json")).unwrap();
    symlink(&v, store.join("stats.json")).unwrap();
    let mut args = vec!["record", "-o", store.to_str().unwrap(), "--synthetic", "size=200,count=100", "-q"];
    args.extend(SMALL);
    let _ = run_wirevault(&args);
    assert_eq!(fs::read(&v).unwrap(), before, "stats.json symlink followed");
}

/// Finding 3: a stream directory replaced by a symlink to elsewhere is not
/// written into.
#[test]
fn a_symlinked_stream_dir_is_not_written_into() {
    let t = TempDir::new("stream-link");
    let store = t.join("store");
    fs::create_dir_all(&store).unwrap();
    fs::write(store.join("catalog.jsonl"), "").unwrap();
    let elsewhere = t.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, store.join("stream-000")).unwrap();
    let mut args = vec!["record", "-o", store.to_str().unwrap(), "--synthetic", "size=200,count=100", "-q"];
    args.extend(SMALL);
    let o = run_wirevault(&args);
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "wrote through the symlink: {}", o.stderr);
    assert_ne!(o.code, Some(0));
}

/// Finding 2: a second recorder and a repair are refused while a store is
/// recorded; the recording loses nothing; after kill -9 the lock is free.
#[test]
fn a_second_writer_is_refused_and_the_lock_goes_with_kill_9() {
    let t = TempDir::new("lock");
    let store = t.join("store");
    let s = store.to_str().unwrap();
    let mut r = Recorder::start(None, &store, &t, &["--synthetic", "size=200,rate=2k,count=6000", "-q"]);
    r.wait_ready();
    r.wait_received(500);
    let mut args = vec!["record", "-o", s, "--synthetic", "size=200,count=100", "-q"];
    args.extend(SMALL);
    let second = run_wirevault(&args);
    second.expect(1, "second record");
    assert!(second.stderr.contains("in use by another wirevault process"), "{}", second.stderr);
    let rep = run_wirevault(&["repair", s]);
    rep.expect(1, "repair while recording");
    assert!(rep.stderr.contains("in use by another wirevault process"), "{}", rep.stderr);
    r.wait(Duration::from_secs(30)).expect(0, "the first recorder");
    let c = final_counters(&store);
    assert_eq!(c.written, 6000, "the live recording lost packets");
    let files = check_store(&store);
    assert_eq!(files.iter().map(|f| f.records.len() as u64).sum::<u64>(), 6000);
    let (n, _) = count(&store);
    assert_eq!(n, 6000);

    // kill -9: the lock goes with the process; repair then runs.
    let mut r = Recorder::start(None, &store, &t, &["--synthetic", "size=200,rate=2k,duration=60s", "-q"]);
    r.wait_ready();
    r.wait_received(500);
    drop(r); // SIGKILL
    run_wirevault(&["repair", s]).expect(0, "repair after kill -9");
}

/// Finding 9: damaged, duplicated, missing and uncataloged entries are
/// reported by query and fixed (and reported) by repair.
#[test]
fn catalog_damage_is_reported_and_repaired() {
    let t = TempDir::new("cat-damage");
    let store = t.join("store");
    let s = store.to_str().unwrap();
    record(&store, 6000);
    let (n, _) = count(&store);
    let l = lines(&store);
    assert!(l.len() >= 4, "want several files");
    let per = |i: usize| serde_json::from_str::<serde_json::Value>(&l[i]).unwrap()["packets"].as_u64().unwrap();

    // A duplicated line.
    let mut d = l.clone();
    d.push(l[1].clone());
    write_lines(&store, &d);
    let (m, err) = count(&store);
    assert_eq!(m, n, "a duplicated catalog line changed the count");
    assert!(err.contains("twice") || err.contains("duplicate"), "{err}");
    let o = run_wirevault(&["repair", s]);
    o.expect(0, "repair");
    assert!(o.stderr.contains("duplicate"), "{}", o.stderr);
    assert_eq!(lines(&store).len(), l.len());

    // A truncated line (the file is still there): warned; repair re-catalogs the file.
    let mut d = l.clone();
    let half = d[2].len() / 2;
    d[2].truncate(half);
    write_lines(&store, &d);
    let (m, err) = count(&store);
    assert_eq!(m, n - per(2));
    assert!(err.contains("damaged") && err.contains("not in the catalog"), "{err}");
    let o = run_wirevault(&["repair", s]);
    o.expect(0, "repair");
    assert!(o.stderr.contains("damaged catalog line") && o.stderr.contains("cataloged 1"), "{}", o.stderr);
    assert_eq!(count(&store).0, n);

    // A file gone: warned; repair drops its entry.
    let e3: serde_json::Value = serde_json::from_str(&lines(&store)[3]).unwrap();
    fs::remove_file(store.join(e3["file"].as_str().unwrap())).unwrap();
    let o = run_wirevault(&["query", s, "--count"]);
    assert!(o.stderr.contains(e3["file"].as_str().unwrap()), "missing file not named: {}", o.stderr);
    let o = run_wirevault(&["repair", s]);
    o.expect(0, "repair");
    assert!(o.stderr.contains("removed 1 stale"), "{}", o.stderr);
    // Named, with the packets lost: after the repair nothing else says so.
    let gone = format!("{}: catalogued with {} packets", e3["file"].as_str().unwrap(), e3["packets"]);
    assert!(o.stderr.contains(&gone), "{gone} not in: {}", o.stderr);
    run_wirevault(&["repair", s]).expect(0, "repair").stderr.contains("nothing to repair");
}

fn with_umask(mask: &str, args: &[&str]) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {mask}; exec \"$0\" \"$@\""))
        .arg(crate::util::bin())
        .args(args)
        .output()
        .unwrap()
}

fn modes(store: &Path) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for e in walk(store) {
        let m = fs::symlink_metadata(&e).unwrap();
        out.push((e.strip_prefix(store).unwrap().display().to_string(), m.permissions().mode() & 0o777));
    }
    out
}

fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in fs::read_dir(p).unwrap().flatten() {
        v.push(e.path());
        if e.file_type().unwrap().is_dir() {
            v.extend(walk(&e.path()));
        }
    }
    v
}

/// Finding 14: 0640 files and 0750 directories whatever the umask, for
/// record and repair (catalog rewrite, recovered files, stats, lock).
#[test]
fn modes_whatever_the_umask() {
    for mask in ["000", "077"] {
        let t = TempDir::new("umask");
        let store = t.join("store");
        let s = store.to_str().unwrap();
        let mut args = vec!["record", "-o", s, "--synthetic", "size=200,count=2000", "-q"];
        args.extend(SMALL);
        let o = with_umask(mask, &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Damage for repair to rewrite: a duplicated catalog line, a partial file.
        let mut l = lines(&store);
        l.push(l[0].clone());
        write_lines(&store, &l);
        fs::set_permissions(store.join("catalog.jsonl"), fs::Permissions::from_mode(0o640)).unwrap();
        let e: serde_json::Value = serde_json::from_str(&l[1]).unwrap();
        let f = e["file"].as_str().unwrap();
        fs::rename(store.join(f), store.join(format!("{f}.part"))).unwrap();
        let o = with_umask(mask, &["repair", s]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // (Index files are written by wv_index's builder: index_integrity checks theirs.)
        for (name, mode) in modes(&store).into_iter().filter(|(n, _)| !n.ends_with(".idx")) {
            let want = if store.join(&name).is_dir() { 0o750 } else { 0o640 };
            assert_eq!(mode, want, "umask {mask}: {name} is {mode:o}");
        }
    }
}

/// Finding 1: `--user` changes the owner of what wirevault owns in the
/// store only, follows no symlink, and a non-empty directory that is not a
/// store is refused.
wvtest!(user_chowns_only_the_store_and_follows_no_link, needs = [root], |t| {
    let Some(nobody) = Command::new("id")
        .args(["-u", "nobody"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().ok())
    else {
        return;
    };
    let t = TempDir::new("user");
    fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let store = t.join("store");
    let s = store.to_str().unwrap();
    record(&store, 500);
    let v = victim(&t, "victim.pcap");
    let other = store.join("notes.txt");
    fs::write(&other, "mine").unwrap();
    symlink(&v, store.join("evil")).unwrap();
    symlink(&v, store.join("stream-000/evil")).unwrap();
    let mut args = vec!["record", "-o", s, "--synthetic", "size=200,count=500", "-q", "--user", "nobody"];
    args.extend(SMALL);
    let o = run_wirevault(&args);
    o.expect(0, "record --user");
    assert_eq!(fs::metadata(&v).unwrap().uid(), 0, "a symlink's target was given away");
    assert_eq!(fs::metadata(&other).unwrap().uid(), 0, "an unrelated file was given away");
    assert!(o.stderr.contains("evil"), "no warning about what was left alone: {}", o.stderr);
    assert_eq!(fs::metadata(&store).unwrap().uid(), nobody);
    for f in catalog(&store) {
        assert_eq!(fs::metadata(store.join(f["file"].as_str().unwrap())).unwrap().uid(), nobody);
    }
    // A non-empty directory that is not a store.
    let home = t.join("home");
    fs::create_dir_all(&home).unwrap();
    fs::write(home.join(".bashrc"), "x").unwrap();
    let mut args = vec!["record", "-o", home.to_str().unwrap(), "--synthetic", "size=200,count=5", "-q"];
    args.extend(SMALL);
    let o = run_wirevault(&args);
    o.expect(1, "record into a non-store directory");
    assert!(o.stderr.contains("not a wirevault store"), "{}", o.stderr);
    assert_eq!(fs::read_dir(&home).unwrap().count(), 1, "something was written into it");
});

/// Finding 18: -o naming a regular file, and permission denied.
#[test]
fn prepare_store_says_what_is_wrong() {
    let t = TempDir::new("prepare");
    let file = t.join("file");
    fs::write(&file, "x").unwrap();
    let mut args = vec!["record", "-o", file.to_str().unwrap(), "--synthetic", "size=200,count=5", "-q"];
    args.extend(SMALL);
    let o = run_wirevault(&args);
    o.expect(1, "-o regular file"); // a file where a directory belongs, caught in the plan (exit 1)
    assert!(o.stderr.contains("is not a directory"), "{}", o.stderr);
    if crate::util::is_root() && crate::util::have("setpriv") {
        let locked = t.join("locked");
        fs::create_dir_all(&locked).unwrap();
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let st = locked.join("store");
        let o = Command::new("setpriv")
            .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups", crate::util::bin()])
            .args(["record", "-o", st.to_str().unwrap(), "--synthetic", "size=200,count=5", "-q"])
            .args(SMALL)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("permission denied"), "{err}");
    }
}

/// Finding 18: --on-full stop counts the packets dropped at the budget as
/// `budget`, not as write errors, and advises a larger --max-size.
#[test]
fn on_full_stop_counts_budget_drops() {
    let t = TempDir::new("budget");
    let store = t.join("store");
    let mut args = vec!["record", "-o", store.to_str().unwrap(), "--synthetic", "size=1000,count=20000", "-q"];
    args.extend(SMALL);
    args.extend(["--max-size", "2M", "--on-full", "stop"]);
    let o = run_wirevault(&args);
    o.expect(3, "on-full stop");
    let st: serde_json::Value = serde_json::from_str(&fs::read_to_string(store.join("stats.json")).unwrap()).unwrap();
    assert_eq!(st["balanced"], true, "{st}");
    assert_eq!(st["dropped"]["write_error"], 0, "{st}");
    assert!(st["dropped"]["budget"].as_u64().unwrap_or(0) > 0, "{st}");
    assert!(o.stderr.contains("budget") && o.stderr.contains("larger --max-size"), "{}", o.stderr);
    assert!(!o.stderr.contains("write error 1") && !o.stderr.contains("write error 2"), "{}", o.stderr);
}

/// Runs wirevault with `args`, killed after `secs` seconds: `None` if it hung.
fn run_timeout(args: &[&str], secs: u64) -> Option<Outcome> {
    let mut child = wirevault()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run wirevault");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return Some(Outcome::from_output(child.wait_with_output().expect("output")));
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn fifos_under_store_names_are_refused_not_waited_on() {
    let tmp = TempDir::new("hs2-fifo");
    let input = tmp.join("in.pcap");
    write_pcap(&input, 1, 65535, false, &test_frames(5, 1_700_000_000_000_000_000));
    for name in [".lock", "catalog.jsonl"] {
        let store = synthetic_store(&tmp, &format!("s{}", name.trim_start_matches('.')));
        fs::remove_file(store.join(name)).ok();
        mkfifo(&store.join(name));
        // A .part file makes query probe the lock.
        fs::write(store.join("stream-000/20260101T000000.000000000Z-000099.pcap.part"), b"").unwrap();
        let runs: Vec<Vec<&str>> = vec![
            vec!["query", s(&store), "--count"],
            vec!["repair", s(&store)],
            vec!["index", s(&store)],
            vec!["record", "-r", s(&input), "-o", s(&store), "-q", "--buffer", "64M"],
        ];
        for args in runs {
            let what = format!("{args:?} with a FIFO {name}");
            let o = run_timeout(&args, 20).unwrap_or_else(|| panic!("{what}: hung"));
            if name == ".lock" && args[0] == "query" {
                // A query does not need the lock file: it may answer.
                assert_no_panic(&o.stderr, &what);
                continue;
            }
            assert_ne!(o.code, Some(0), "{what}: exit 0\n{}", o.stderr);
            assert_no_panic(&o.stderr, &what);
            assert!(o.stderr.contains(name) && o.stderr.contains("not a regular file"), "{what}: {}", o.stderr);
            assert!(!o.stderr.contains("neither a store"), "{what}: {}", o.stderr);
        }
    }
    // stats.json and catalog.jsonl.part as FIFOs: record neither hangs nor
    // loses what it recorded.
    for name in ["stats.json", "catalog.jsonl.part"] {
        let store = synthetic_store(&tmp, &format!("t{}", name.replace('.', "-")));
        fs::remove_file(store.join(name)).ok();
        mkfifo(&store.join(name));
        let args = ["record", "-r", s(&input), "-o", s(&store), "-q", "--buffer", "64M"];
        let o = run_timeout(&args, 20).unwrap_or_else(|| panic!("record with a FIFO {name}: hung"));
        assert_no_panic(&o.stderr, name);
        if o.code != Some(0) {
            assert!(o.stderr.contains(name), "{name}: {}", o.stderr);
        }
        let o = run_timeout(&["query", s(&store), "--count"], 20).expect("query hung");
        o.expect(0, "query after record");
    }
}

/// The finding's repro: `stream-000` is a symlink to a root-only directory
/// holding a capture and an index; the store's owner wrote a catalog naming
/// them. Neither `index` nor `repair` may create, change or delete anything
/// there, nor copy the secret capture's metadata into the catalog.
wvtest!(index_and_repair_never_follow_a_symlinked_stream_directory, needs = [corpus], |t| {
    let secret_src = t.corpus_file("ikev2four.pcap");
    let tmp = TempDir::new("hs2-beneath");
    let secret = tmp.join("secret");
    fs::create_dir_all(&secret).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut fs::metadata(&secret).unwrap().permissions(), 0o700);
    fs::copy(&secret_src, secret.join("secret.pcap")).unwrap();
    fs::write(secret.join("other.pcap.idx"), "keep").unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<(String, Vec<u8>)> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), fs::read(e.path()).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = listing(&secret);
    let tail = r#""format":"pcap","linktype":1,"snaplen":65535,"first_ns":0,"last_ns":0,"packets":0,"bytes":0}"#;
    let cat = format!(
        "{{\"stream\":0,\"file\":\"stream-000/secret.pcap\",\"index\":null,{tail}\n{{\"stream\":0,\"file\":\"stream-000/other.pcap\",\"index\":\"stream-000/other.pcap.idx\",{tail}\n"
    );
    for cmd in ["index", "repair"] {
        let store = tmp.join(format!("store-{cmd}"));
        fs::create_dir_all(&store).unwrap();
        std::os::unix::fs::symlink(&secret, store.join("stream-000")).unwrap();
        fs::write(store.join("catalog.jsonl"), &cat).unwrap();
        let o = run_timeout(&[cmd, s(&store)], 60).expect("hung");
        assert_no_panic(&o.stderr, cmd);
        assert_eq!(listing(&secret), before, "{cmd} changed the directory behind the symlink\n{}", o.stderr);
        let after = fs::read_to_string(store.join("catalog.jsonl")).unwrap_or_default();
        assert!(!after.contains("\"packets\":4") && !after.contains("secret.pcap.idx"), "{cmd}: {after}");
        assert!(fs::symlink_metadata(store.join("stream-000")).unwrap().file_type().is_symlink());
    }
});

/// A plain directory indexed by `index DIR`: a symlinked subdirectory is
/// not walked into, and nothing is written behind it.
#[test]
fn index_of_a_plain_directory_does_not_walk_symlinks() {
    let tmp = TempDir::new("hs2-plain");
    let outside = tmp.join("outside");
    fs::create_dir_all(&outside).unwrap();
    write_pcap(&outside.join("x.pcap"), 1, 65535, false, &test_frames(3, 1_700_000_000_000_000_000));
    let d = tmp.join("d");
    fs::create_dir_all(&d).unwrap();
    write_pcap(&d.join("a.pcap"), 1, 65535, false, &test_frames(4, 1_700_000_000_000_000_000));
    std::os::unix::fs::symlink(&outside, d.join("sub")).unwrap();
    let o = run_timeout(&["index", s(&d)], 60).expect("hung");
    o.expect(0, "index DIR");
    assert!(!outside.join("x.pcap.idx").exists(), "index wrote behind a symlinked directory");
    assert!(d.join("a.pcap.idx").exists());
    let cat = fs::read_to_string(d.join("catalog.jsonl")).unwrap();
    assert!(!cat.contains("sub/x.pcap"), "{cat}");
}

#[test]
fn stats_file_refuses_symlinks_devices_and_files_in_the_store() {
    let tmp = TempDir::new("hr-stats");
    let store = synthetic_store(&tmp, "s");
    let victim = tmp.join("victim");
    fs::write(&victim, "keep").unwrap();
    let link = tmp.join("link.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let catalog = store.join("catalog.jsonl");
    let before = fs::read(&catalog).unwrap();
    for (sf, what) in [
        (link.clone(), "a symlink"),
        (PathBuf::from("/dev/null"), "a device"),
        (catalog.clone(), "the store's catalog"),
        (store.join("stream-000").join("x.json"), "a new file inside the store"),
    ] {
        let fresh = tmp.join(format!("new-{}", what.len()));
        for out in [&store, &fresh] {
            if out == &fresh && sf.starts_with(&store) {
                continue; // another store's files are not this recording's business
            }
            let o = run_wirevault(&[
                "record",
                "--synthetic",
                "size=100,count=5",
                "-o",
                out.to_str().unwrap(),
                "-q",
                "--buffer",
                "64M",
                "--stats-file",
                sf.to_str().unwrap(),
            ]);
            o.expect(2, &format!("--stats-file {what}"));
            assert!(o.stderr.contains("--stats-file"), "{what}: {}", o.stderr);
            assert_eq!(o.stderr.trim().lines().count(), 1, "{what}: one sentence: {}", o.stderr);
            if out == &fresh {
                assert!(!fresh.exists(), "{what}: a store was created");
            }
        }
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(fs::read(&catalog).unwrap(), before, "the catalog was replaced");
    assert!(fs::metadata("/dev/null").unwrap().file_type().is_char_device_like());
}

trait CharDev {
    fn is_char_device_like(&self) -> bool;
}

impl CharDev for fs::FileType {
    fn is_char_device_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_char_device()
    }
}

#[test]
fn stats_file_temp_is_never_followed_and_never_left() {
    let tmp = TempDir::new("hr-stats-tmp");
    let victim = tmp.join("victim");
    fs::write(&victim, "keep").unwrap();
    let sf = tmp.join("out.json");
    // Every name the old code used as its temporary file.
    std::os::unix::fs::symlink(&victim, tmp.join("out.json.part")).unwrap();
    let s = tmp.join("s");
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "size=100,count=20",
        "-o",
        s.to_str().unwrap(),
        "-q",
        "--buffer",
        "64M",
        "--stats-file",
        sf.to_str().unwrap(),
    ]);
    o.expect(0, "record with --stats-file");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep", "the temp file followed a symlink");
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&sf).unwrap()).unwrap();
    assert_eq!(v["state"], "done");
    let left: Vec<String> = fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("out.json") && n != "out.json" && n != "out.json.part")
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn query_refuses_standard_output_inside_the_store() {
    let tmp = TempDir::new("hr-stdout");
    let store = synthetic_store(&tmp, "s");
    let cap = fs::read_dir(store.join("stream-000"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pcap"))
        .unwrap();
    let before = fs::read(&cap).unwrap();
    for append in [true, false] {
        let target = if append { cap.clone() } else { store.join("stream-000").join("new.pcap") };
        let out = fs::OpenOptions::new().create(true).append(true).open(&target).unwrap();
        let o = Outcome::from_output(
            wirevault().args(["query", store.to_str().unwrap()]).stdout(out).stderr(Stdio::piped()).output().unwrap(),
        );
        o.expect(2, "query > file in the store");
        assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
        let _ = fs::remove_file(store.join("stream-000").join("new.pcap"));
    }
    assert_eq!(fs::read(&cap).unwrap(), before, "a stored capture was appended to");
    // A file outside the store is still fine.
    let out = fs::File::create(tmp.join("out.pcap")).unwrap();
    let o = Outcome::from_output(wirevault().args(["query", store.to_str().unwrap()]).stdout(out).output().unwrap());
    o.expect(0, "query > file outside the store");
}
