//! wirevault as a service (issue 16, item 4): `record --config FILE`, SIGHUP
//! re-reading it while capture goes on, log lines for journald and shippers,
//! sd_notify readiness, and the systemd unit in `packaging/`.
//!
//! A config is checked against the same flags on the command line (same
//! files byte for byte, same counters, and tcpdump/capinfos read them);
//! readiness against a notification socket the test binds, with frames sent
//! after READY=1 that must all be stored. The unit is checked with
//! `systemd-analyze verify`, and started under systemd where systemd is
//! PID 1 (else the test says why it skipped).

use crate::util::*;
use serde_json::Value;
use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; pid is our own live child.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// The repository's root (the unit and the example config live in packaging/).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every capture file of a store, by path relative to it, with its bytes.
fn store_files(store: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = check_store(store)
        .into_iter()
        .map(|f| (f.path.strip_prefix(store).unwrap().display().to_string(), fs::read(&f.path).unwrap()))
        .collect();
    v.sort();
    v
}

/// Waits up to 60 s for `done`, failing with `what` and the recorder's stderr.
fn wait_until(child: &mut Child, err: &Path, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        if let Ok(Some(st)) = child.try_wait() {
            panic!(
                "wirevault exited ({st}) while waiting for {what}:\n{}",
                fs::read_to_string(err).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            fs::read_to_string(err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(mut child: Child, err: &Path) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return (st.code(), fs::read_to_string(err).unwrap_or_default());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("wirevault did not stop:\n{}", fs::read_to_string(err).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The same recording from flags and from a config with those keys gives
/// the same files, byte for byte, and the same counters.
wvtest!(config_keys_equal_flags, needs = ["capinfos", "tcpdump"], |t| {
    let tmp = TempDir::new("svc-config-equal");
    let (a, b) = (tmp.join("a.pcap"), tmp.join("b.pcap"));
    write_pcap(&a, 1, 65535, true, &test_frames(300, 1_700_000_000_000_000_000));
    write_pcap(&b, 1, 65535, true, &test_frames(300, 1_700_000_010_000_000_000));
    let flags_store = tmp.join("flags");
    let o = run_wirevault(&[
        "record",
        "-o",
        flags_store.to_str().unwrap(),
        "--read",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--snaplen",
        "200",
        "--file-size",
        "64K",
        "--block-size",
        "64K",
        "--buffer",
        "16M",
        "--no-tune-warnings",
        "-q",
        "--",
        "udp or vlan",
    ]);
    o.expect(0, "record with flags");
    let cfg_store = tmp.join("config");
    let cfg = tmp.join("record.toml");
    fs::write(
        &cfg,
        format!(
            "output = {:?}\nread = [{:?}, {:?}]\nsnaplen = 200\nfile-size = \"64K\"\nblock-size = \"64K\"\n\
             buffer = \"16M\"\nno-tune-warnings = true\nquiet = true\nfilter = \"udp or vlan\"\n",
            cfg_store, a, b
        ),
    )
    .unwrap();
    let o = run_wirevault(&["record", "--config", cfg.to_str().unwrap()]);
    o.expect(0, "record --config");
    let (f1, f2) = (store_files(&flags_store), store_files(&cfg_store));
    assert!(f1.len() >= 2, "expected rotation at 64K, got {} file(s)", f1.len());
    assert_eq!(f1.len(), f2.len(), "same number of files");
    for ((n1, b1), (n2, b2)) in f1.iter().zip(&f2) {
        assert_eq!(n1, n2, "file names");
        assert!(b1 == b2, "{n1}: the flags' and the config's files differ");
    }
    let (c1, c2) = (final_counters(&flags_store), final_counters(&cfg_store));
    assert_eq!((c1.received, c1.written, c1.filtered), (c2.received, c2.written, c2.filtered));
    assert_eq!(c1.received, 600);
    assert!(c1.filtered > 0 && c1.written > 0, "the filter selected part: {}", c1.filtered);
    let paths: Vec<PathBuf> = check_store(&cfg_store).into_iter().map(|f| f.path).collect();
    assert_peers_read(&paths, 3);
    // tcpdump, the peer, selects as many frames from the inputs with the same expression.
    let n = tcpdump_frames(&a, &["udp or vlan"], tmp.path()).1.len()
        + tcpdump_frames(&b, &["udp or vlan"], tmp.path()).1.len();
    assert_eq!(n as u64, c2.written, "written = what tcpdump selects");
});

/// A key the command line also gives: the command line wins (scalars, the
/// filter, and a list, which is taken whole from the command line).
#[test]
fn command_line_overrides_config() {
    let tmp = TempDir::new("svc-config-override");
    let (a, b) = (tmp.join("a.pcap"), tmp.join("b.pcap"));
    write_pcap(&a, 1, 65535, true, &test_frames(100, 1_700_000_000_000_000_000));
    write_pcap(&b, 1, 65535, true, &test_frames(40, 1_700_000_010_000_000_000));
    let cfg = tmp.join("r.toml");
    let store = tmp.join("store");
    fs::write(
        &cfg,
        format!(
            "output = {:?}\nread = [{:?}]\nsnaplen = 100\nbuffer = \"16M\"\nquiet = true\nfilter = \"udp\"\nno-tune-warnings = true\n",
            tmp.join("not-this-store"),
            a
        ),
    )
    .unwrap();
    let o = run_wirevault(&[
        "record",
        "--config",
        cfg.to_str().unwrap(),
        "-o",
        store.to_str().unwrap(),
        "--read",
        b.to_str().unwrap(),
        "--snaplen",
        "300",
        "--",
        "not udp",
    ]);
    o.expect(0, "record --config with overrides");
    assert!(!tmp.join("not-this-store").exists(), "the config's output was used");
    let c = final_counters(&store);
    assert_eq!(c.received, 40, "only the command line's --read file");
    let recs = stream_records(&check_store(&store), 0);
    assert!(!recs.is_empty() && recs.len() as u64 == c.written);
    assert!(recs.iter().all(|r| r.caplen <= 300) && recs.iter().any(|r| r.caplen > 100), "--snaplen 300 applies");
    let n = tcpdump_frames(&b, &["not udp"], tmp.path()).1.len();
    assert_eq!(n as u64, c.written, "the command line's filter applies");

    // Without a filter on the command line, the config's applies.
    let store2 = tmp.join("store2");
    run_wirevault(&["record", "--config", cfg.to_str().unwrap(), "-o", store2.to_str().unwrap()])
        .expect(0, "config filter");
    let n = tcpdump_frames(&a, &["udp"], tmp.path()).1.len();
    assert_eq!(final_counters(&store2).written, n as u64);
}

/// Unknown key, wrong type, refused value, bad TOML, unreadable file: one
/// sentence naming the file (and the key), exit 2, no store created.
#[test]
fn config_errors_name_the_file_and_key() {
    let tmp = TempDir::new("svc-config-errors");
    let store = tmp.join("store");
    let cases: &[(&str, &str, &str)] = &[
        ("intrface = \"eth0\"\n", "intrface", "unknown key"),
        ("workers = \"many\"\n", "workers", "invalid value"),
        ("quiet = \"yes\"\n", "quiet", "true or false"),
        ("snaplen = [1, 2]\n", "snaplen", "not a list"),
        ("format = \"pcapx\"\n", "format", "possible values"),
        ("filter = 5\n", "filter", "string"),
        ("[section]\nx = 1\n", "section", "unknown key"),
        ("workers = \n", "line 1", "not valid TOML"),
    ];
    for (i, (text, key, what)) in cases.iter().enumerate() {
        let cfg = tmp.join(format!("bad-{i}.toml"));
        fs::write(&cfg, text).unwrap();
        let o = run_wirevault(&[
            "record",
            "--config",
            cfg.to_str().unwrap(),
            "-o",
            store.to_str().unwrap(),
            "--synthetic",
            "count=10",
        ]);
        o.expect(2, text);
        let line = o.stderr.trim();
        assert_eq!(line.lines().count(), 1, "{text:?}: one sentence: {line}");
        assert!(line.contains(cfg.to_str().unwrap()) && line.contains(key) && line.contains(what), "{text:?}: {line}");
        assert!(!store.exists(), "{text:?}: a store was created");
    }
    let missing = tmp.join("missing.toml");
    let o = run_wirevault(&["record", "--config", missing.to_str().unwrap(), "-o", "x", "--synthetic", "count=1"]);
    o.expect(1, "missing config"); // a file that is not there: exit 1; what a file says: 2
    assert!(o.stderr.contains(missing.to_str().unwrap()) && o.stderr.contains("cannot read"), "{}", o.stderr);
}

/// packaging/wirevault.toml, with every commented key switched on, is a
/// valid config (its keys are flags, its values accepted).
#[test]
fn packaged_config_is_valid() {
    let tmp = TempDir::new("svc-packaged-config");
    let text = fs::read_to_string(repo().join("packaging/wirevault.toml")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let is_key =
            |l: &&str| l.split_once(" = ").is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '-'));
        let l = line.strip_prefix("# ").filter(is_key).unwrap_or(line);
        // A store in the temp dir and a source that needs no interface.
        if l.starts_with("output") || l.starts_with("interface") || l.starts_with("buffer") || l.starts_with("listen") {
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    let store = tmp.join("store");
    out.push_str(&format!(
        "output = {store:?}\nsynthetic = \"size=64,count=1000\"\nbuffer = \"64M\"\nlisten = \"127.0.0.1:0\"\n"
    ));
    let cfg = tmp.join("wirevault.toml");
    fs::write(&cfg, out).unwrap();
    let o = run_wirevault(&["record", "--config", cfg.to_str().unwrap()]);
    o.expect(0, "the packaged config");
    assert_eq!(final_counters(&store).received, 1000);
}

/// Starts `record` with `cfg` on generated traffic, stderr to `err`.
fn start_with_config(cfg: &Path, err: &Path, extra: &[&str]) -> Child {
    wirevault()
        .args(["record", "--config", cfg.to_str().unwrap()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(err).unwrap())
        .spawn()
        .expect("start wirevault")
}

fn catalog_bytes(store: &Path) -> u64 {
    if !store.join("catalog.jsonl").exists() {
        return 0;
    }
    catalog(store).iter().map(|e| e["bytes"].as_u64().unwrap_or(0)).sum()
}

fn received_now(store: &Path) -> u64 {
    fs::read_to_string(store.join("stats.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["received"].as_u64())
        .unwrap_or(0)
}

/// SIGHUP with --config: a smaller --max-size applies while capture goes
/// on (retention deletes down to it), a key that cannot change live is
/// named in a warning, and the recording ends balanced.
#[test]
fn sighup_changes_max_size_live() {
    let _g = heavy_lock();
    let tmp = TempDir::new("svc-sighup");
    let store = tmp.join("store");
    let cfg = tmp.join("r.toml");
    let base = format!(
        "output = {store:?}\nsynthetic = \"size=1514,rate=2k\"\nbuffer = \"16M\"\nblock-size = \"64K\"\n\
         file-size = \"128K\"\nquiet = true\nno-tune-warnings = true\n"
    );
    fs::write(&cfg, format!("{base}max-size = \"4M\"\n")).unwrap();
    let err = tmp.join("err");
    let mut child = start_with_config(&cfg, &err, &[]);
    let pid = child.id();
    wait_until(&mut child, &err, "the store to fill to 3 MB", || catalog_bytes(&store) >= 3 << 20);
    fs::write(&cfg, format!("{base}max-size = \"1M\"\nsnaplen = 100\n")).unwrap();
    kill(pid, libc::SIGHUP);
    wait_until(&mut child, &err, "the reload to be logged", || {
        fs::read_to_string(&err).unwrap_or_default().contains("reloaded")
    });
    let after_hup = received_now(&store);
    wait_until(&mut child, &err, "retention down to 1M", || {
        let b = catalog_bytes(&store);
        b > 0 && b <= 1 << 20
    });
    wait_until(&mut child, &err, "capture to go on", || received_now(&store) > after_hup + 2000);
    // Still within the new budget files later (about 6 MB more at 3 MB/s).
    let seen = received_now(&store);
    wait_until(&mut child, &err, "more files", || received_now(&store) > seen + 4000);
    assert!(catalog_bytes(&store) <= 1 << 20, "over the new budget: {}", catalog_bytes(&store));
    kill(pid, libc::SIGTERM);
    let (code, stderr) = wait_exit(child, &err);
    assert_no_panic(&stderr, "sighup");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("budget 4194304 bytes (delete the oldest) -> 1048576 bytes"), "{stderr}");
    assert!(stderr.contains("snaplen changed") && stderr.contains("next start"), "{stderr}");
    let c = final_counters(&store);
    assert!(c.written > 0 && c.drops() == 0, "written {} drops {}", c.written, c.drops());
    assert!(catalog_bytes(&store) <= 1 << 20);
}

/// A reload the plan refuses (here --workers 2 without an interface) keeps
/// the running settings and says why; SIGHUP without --config stops as it
/// always did.
#[test]
fn bad_reload_keeps_settings_and_sighup_without_config_stops() {
    let tmp = TempDir::new("svc-sighup-bad");
    let store = tmp.join("store");
    let cfg = tmp.join("r.toml");
    let base = format!(
        "output = {store:?}\nsynthetic = \"size=64,rate=1k,duration=10m\"\nbuffer = \"16M\"\nquiet = true\nno-tune-warnings = true\n"
    );
    fs::write(&cfg, &base).unwrap();
    let err = tmp.join("err");
    let mut child = start_with_config(&cfg, &err, &[]);
    let pid = child.id();
    wait_until(&mut child, &err, "packets", || received_now(&store) > 100);
    fs::write(&cfg, format!("{base}workers = 2\nbogus = 1\n")).unwrap();
    kill(pid, libc::SIGHUP);
    wait_until(&mut child, &err, "the refusal", || {
        fs::read_to_string(&err).unwrap_or_default().contains("not reloaded")
    });
    let seen = received_now(&store);
    wait_until(&mut child, &err, "capture to go on", || received_now(&store) > seen + 100);
    kill(pid, libc::SIGTERM);
    let (code, stderr) = wait_exit(child, &err);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("key bogus: unknown key"), "{stderr}");
    final_counters(&store);

    // Without --config: SIGHUP stops cleanly (exit 0, balanced).
    let store2 = tmp.join("store2");
    let err2 = tmp.join("err2");
    let mut child = wirevault()
        .args(["record", "-q", "--buffer", "16M", "--synthetic", "size=64,rate=1k,duration=10m", "-o"])
        .arg(&store2)
        .stdin(Stdio::null())
        .stderr(fs::File::create(&err2).unwrap())
        .spawn()
        .unwrap();
    wait_until(&mut child, &err2, "packets", || received_now(&store2) > 100);
    kill(child.id(), libc::SIGHUP);
    let (code, stderr) = wait_exit(child, &err2);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(final_counters(&store2).written > 100);
}

/// What `cmd` writes on standard error, through the file `err`, which it
/// is told is the journal (`JOURNAL_STREAM`) if `journal`. It must exit 0.
fn stderr_of(mut cmd: Command, err: &Path, journal: bool) -> String {
    cmd.stderr(fs::File::create(err).unwrap());
    if journal {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(err).unwrap();
        cmd.env("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino()));
    } else {
        cmd.env_remove("JOURNAL_STREAM");
    }
    let st = cmd.status().unwrap();
    let text = fs::read_to_string(err).unwrap();
    assert_eq!(st.code(), Some(0), "{}: {text}", err.display());
    text
}

/// --log-format json: every line of standard error is a JSON object with
/// ts, level, msg and fields; --log-level warn hides info lines; with
/// JOURNAL_STREAM naming standard error, text lines carry `<N>` prefixes.
#[test]
fn log_lines_for_journald_and_shippers() {
    let tmp = TempDir::new("svc-logs");
    let run = |name: &str, args: &[&str], journal: bool| -> String {
        let mut cmd = wirevault();
        cmd.args(["record", "-o"]).arg(tmp.join(name)).args(["--buffer", "16M", "--synthetic", "count=100", "-q"]);
        cmd.args(args).stdin(Stdio::null());
        stderr_of(cmd, &tmp.join(format!("{name}.err")), journal)
    };
    let json = run("json", &["--log-format", "json"], false);
    let mut infos = 0;
    for line in json.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["ts"].as_str().is_some_and(|t| t.ends_with('Z') && t.len() >= 20), "ts: {line}");
        assert!(["error", "warn", "info", "debug"].contains(&v["level"].as_str().unwrap()), "{line}");
        assert!(v["msg"].as_str().is_some() && v["fields"].is_object(), "{line}");
        infos += usize::from(v["level"] == "info");
    }
    assert!(json.contains("100 packets received") && infos > 0, "{json}");
    let quiet = run("warn", &["--log-level", "warn"], false);
    assert!(!quiet.contains("packets received"), "info shown at --log-level warn: {quiet}");
    let journal = run("journal", &[], true);
    assert!(
        !journal.is_empty()
            && journal.lines().all(|l| l.starts_with("<6>") || l.starts_with("<4>") || l.starts_with("<3>")),
        "{journal}"
    );
    assert!(journal.contains("<6>wirevault: 100 packets received"), "{journal}");
    // The variable alone (stderr elsewhere, as a child's redirected stderr) is no journal.
    let err = tmp.join("other.err");
    let st = wirevault()
        .args(["record", "-o"])
        .arg(tmp.join("other"))
        .args(["--buffer", "16M", "--synthetic", "count=100", "-q"])
        .env("JOURNAL_STREAM", "1:1")
        .stderr(fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    assert!(fs::read_to_string(&err).unwrap().starts_with("wirevault: "));
}

/// The macro that writes a line sets its level, whatever the words say: a
/// reader's warning keeps its form (`wirevault: FILE: why`) and is a
/// warning, a note (`wirevault: note: ...`) is info; in JSON `msg` is the
/// sentence alone, and the journal gets `<4>` and `<6>`. The file is cut in
/// its last record, as tcpdump says too.
wvtest!(a_warning_and_a_note_carry_their_levels, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("svc-levels");
    let cut = tmp.join("cut.pcap");
    write_pcap(&cut, 1, 65535, true, &test_frames(20, 1_700_000_000_000_000_000));
    let len = fs::metadata(&cut).unwrap().len();
    fs::OpenOptions::new().write(true).open(&cut).unwrap().set_len(len - 10).unwrap();
    let peer = Command::new("tcpdump").arg("-nr").arg(&cut).output().unwrap();
    assert!(String::from_utf8_lossy(&peer.stderr).contains("truncated dump file"), "{peer:?}");
    let file = cut.to_str().unwrap();
    let run = |name: &str, log: &[&str], journal: bool| -> Vec<String> {
        let mut cmd = wirevault();
        cmd.args(log).args(["analyze", file, "--step", "1ns", "--max-intervals", "10"]).stdout(Stdio::null());
        stderr_of(cmd, &tmp.join(format!("{name}.err")), journal).lines().map(String::from).collect()
    };
    let warning = format!("{file}: truncated record at offset ");
    let note = "throughput is given per ";
    let text = run("text", &[], false);
    assert!(text.iter().any(|l| l.starts_with(&format!("wirevault: {warning}"))), "{text:?}");
    assert!(text.iter().any(|l| l.starts_with(&format!("wirevault: note: {note}"))), "{text:?}");
    let journal = run("journal", &[], true);
    assert!(journal.iter().any(|l| l.starts_with(&format!("<4>wirevault: {warning}"))), "{journal:?}");
    assert!(journal.iter().any(|l| l.starts_with(&format!("<6>wirevault: note: {note}"))), "{journal:?}");
    let json: Vec<Value> = run("json", &["--log-format", "json"], false)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let level_of = |start: &str| -> Vec<&str> {
        json.iter()
            .filter(|v| v["msg"].as_str().unwrap().starts_with(start))
            .map(|v| v["level"].as_str().unwrap())
            .collect()
    };
    assert_eq!(level_of(&warning), ["warn"], "{json:?}");
    assert_eq!(level_of(note), ["info"], "{json:?}");
    assert_eq!(json.len(), 2, "{json:?}");
    // At --log-level warn the note goes, the warning stays.
    let quiet = run("quiet", &["--log-level", "warn"], false);
    assert!(quiet.len() == 1 && quiet[0].starts_with(&format!("wirevault: {warning}")), "{quiet:?}");
});

/// The messages a notify socket received, read by a thread as they come
/// (as systemd does: the recorder drops what a full queue would not take).
struct Listener(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Listener {
    fn new(sock: UnixDatagram) -> Listener {
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let g = got.clone();
        sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends when the test is done with it (the Arc is the only other owner).
            while std::sync::Arc::strong_count(&g) > 1 {
                if let Ok(n) = sock.recv(&mut buf) {
                    g.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
            }
        });
        Listener(got)
    }

    /// Waits (up to 60 s) for a message with the line `want`; returns it.
    fn wait(&self, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(m) = self.0.lock().unwrap().iter().find(|m| m.lines().any(|l| l == want)) {
                return m.clone();
            }
            assert!(Instant::now() < deadline, "no {want} on the notify socket; got {:?}", self.0.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// READY=1 arrives on NOTIFY_SOCKET (a path, and an abstract `@name`) once
/// capture runs: every frame sent after it is stored. The watchdog is pinged
/// when WATCHDOG_USEC asks for it; STOPPING=1 comes at the end.
wvtest!(ready_is_sent_once_capture_runs, needs = [root, "ip", "tcpreplay", "tcpdump"], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("svc-ready");
    let pair = VethPair::new();
    let sent = test_frames(200, 1_700_000_000_000_000_000);
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, false, &sent);
    // A path socket reaches across network namespaces (an abstract one does not: see below).
    for round in 0..2 {
        let p = tmp.join(format!("notify-{round}.sock"));
        let (sock, addr) = (UnixDatagram::bind(&p).unwrap(), p.display().to_string());
        let store = tmp.join(format!("store-{round}"));
        let err = tmp.join(format!("err-{round}"));
        let mut child = VethPair::exec(&pair.ns_b, bin())
            .args(["record", "-i", pair.if_b, "--buffer", "64M", "-q", "--no-tune-warnings", "-o"])
            .arg(&store)
            .env("NOTIFY_SOCKET", &addr)
            .env("WATCHDOG_USEC", "200000")
            .stdin(Stdio::null())
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let listener = Listener::new(sock);
        let ready = listener.wait("READY=1");
        assert!(ready.contains(&format!("STATUS=recording interface {}", pair.if_b)), "{ready}");
        // Everything sent from now on must be stored: the rings are open.
        let out = run_ok(VethPair::exec(&pair.ns_a, "tcpreplay").args(["-i", pair.if_a, "--pps", "2000"]).arg(&pcap));
        assert!(String::from_utf8_lossy(&out.stdout).contains("200 packets"), "tcpreplay sent all");
        listener.wait("WATCHDOG=1");
        wait_until(&mut child, &err, "200 packets", || received_now(&store) >= 200);
        kill(child.id(), libc::SIGTERM);
        let (code, stderr) = wait_exit(child, &err);
        assert_eq!(code, Some(0), "{stderr}");
        listener.wait("STOPPING=1");
        let c = final_counters(&store);
        assert_eq!((c.received, c.written), (200, 200), "every frame sent after READY=1 is stored");
        let recs = stream_records(&check_store(&store), 0);
        assert_same_frames(&sent, &recs, false, "after READY=1");
    }
});

/// An abstract `@name` NOTIFY_SOCKET (as systemd sets it) gets READY=1 too
/// (abstract names live in the network namespace: here the test's own).
#[test]
fn ready_on_an_abstract_socket() {
    use std::os::linux::net::SocketAddrExt;
    let tmp = TempDir::new("svc-ready-abstract");
    let name = format!("wirevault-test-notify-{}", std::process::id());
    let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = Listener::new(UnixDatagram::bind_addr(&a).unwrap());
    let store = tmp.join("store");
    let o = Outcome::from_output(
        wirevault()
            .args(["record", "-q", "--buffer", "16M", "--synthetic", "size=64,count=20k", "-o"])
            .arg(&store)
            .env("NOTIFY_SOCKET", format!("@{name}"))
            .output()
            .unwrap(),
    );
    o.expect(0, "record with an abstract NOTIFY_SOCKET");
    let ready = listener.wait("READY=1");
    assert!(ready.contains("STATUS=recording synthetic traffic into "), "{ready}");
    listener.wait("STOPPING=1");
    assert_eq!(final_counters(&store).written, 20_000);
}

/// The unit passes `systemd-analyze verify` (with ExecStart pointing at the
/// binary under test).
wvtest!(systemd_unit_verifies, needs = ["systemd-analyze"], |t| {
    let tmp = TempDir::new("svc-unit");
    let unit = fs::read_to_string(repo().join("packaging/wirevault.service")).unwrap();
    assert!(unit.contains("Type=notify") && unit.contains("ExecReload=/bin/kill -HUP $MAINPID"));
    let path = tmp.join("wirevault.service");
    fs::write(&path, unit.replace("/usr/local/bin/wirevault", bin())).unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.trim().is_empty(), "systemd-analyze verify: {text}");
});

/// Under systemd (PID 1): the recorder as a transient Type=notify service
/// becomes active (readiness), reloads on SIGHUP and stops balanced.
wvtest!(runs_under_systemd, |t| {
    let pid1 = fs::read_to_string("/proc/1/comm").unwrap_or_default();
    if pid1.trim() != "systemd" || !Path::new("/run/systemd/system").is_dir() {
        eprintln!(
            "SKIP {t}: systemd is not PID 1 here (PID 1 is {:?}); the unit is checked by systemd_unit_verifies",
            pid1.trim()
        );
        return;
    }
    if !need_root(t.name) || !need_tools(t.name, &["systemd-run", "systemctl"]) {
        return;
    }
    let tmp = TempDir::new("svc-systemd");
    let store = tmp.join("store");
    let cfg = tmp.join("r.toml");
    fs::write(
        &cfg,
        format!(
            "output = {store:?}\nsynthetic = \"size=64,rate=1k,duration=10m\"\nbuffer = \"16M\"\nquiet = true\nmax-size = \"64M\"\n"
        ),
    )
    .unwrap();
    let unit = format!("wirevault-test-{}", std::process::id());
    // systemd-run waits for the start job: it returns once READY=1 arrived.
    let out = Command::new("systemd-run")
        .args(["--unit", &unit, "-p", "Type=notify", "-p", "NotifyAccess=main", "-p", "WatchdogSec=10s", "--"])
        .arg(bin())
        .args(["record", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "systemd-run: {}", String::from_utf8_lossy(&out.stderr));
    let state = |prop: &str| {
        let o = Command::new("systemctl").args(["show", "-p", prop, "--value", &unit]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(state("ActiveState"), "active");
    assert!(state("StatusText").starts_with("recording synthetic traffic"), "{}", state("StatusText"));
    run_ok(Command::new("systemctl").args(["kill", "-s", "HUP", &unit]));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(state("ActiveState"), "active", "SIGHUP reloads, it does not stop");
    run_ok(Command::new("systemctl").args(["stop", &unit]));
    let _ = Command::new("systemctl").args(["reset-failed", &unit]).status();
    assert!(final_counters(&store).written > 0);
});
