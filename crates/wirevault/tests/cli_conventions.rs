//! Command-line conventions (issue 12, findings 5, 6, 15, 16, 17, 18 and the
//! man pages / completions): signals, tcpdump's option habits, argument
//! ranges and checks that come before anything is created.

use crate::util::{
    bin, catalog, check_store, final_counters, have, run_wirevault, test_frames, wirevault, write_pcap, Outcome,
    Recorder, TempDir,
};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Options of a light, endless synthetic recording that closes small files often.
const LIGHT: &[&str] =
    &["--synthetic", "size=200,rate=20k,duration=10m", "--buffer", "8M", "--block-size", "256K", "--file-size", "1M"];

/// After a stop, every packet counted as written is in the store's valid files.
fn assert_all_written_stored(store: &Path, what: &str) {
    let files = check_store(store);
    let c = final_counters(store);
    let in_files: u64 = files.iter().map(|f| f.records.len() as u64).sum();
    assert_eq!(c.written, in_files, "{what}: written counter vs packets in the files");
    assert!(c.written > 0, "{what}: nothing was written");
}

fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: pid is a child of this test that has not been reaped yet.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Finding 5: every catchable signal whose default action ends the process
/// stops the recording as SIGTERM does; SIGPIPE is ignored.
#[test]
fn every_terminating_signal_stops_cleanly() {
    let sigs: Vec<(libc::c_int, String)> = [
        (libc::SIGHUP, "HUP"),
        (libc::SIGINT, "INT"),
        (libc::SIGTERM, "TERM"),
        (libc::SIGQUIT, "QUIT"),
        (libc::SIGUSR1, "USR1"),
        (libc::SIGUSR2, "USR2"),
        (libc::SIGALRM, "ALRM"),
        (libc::SIGXCPU, "XCPU"),
        (libc::SIGXFSZ, "XFSZ"),
        (libc::SIGVTALRM, "VTALRM"),
        (libc::SIGPROF, "PROF"),
        (libc::SIGIO, "IO"),
        (libc::SIGPWR, "PWR"),
        (libc::SIGSTKFLT, "STKFLT"),
    ]
    .into_iter()
    .map(|(s, n)| (s, n.to_string()))
    .chain([(libc::SIGRTMIN(), "RTMIN".to_string()), (libc::SIGRTMAX(), "RTMAX".to_string())])
    .collect();
    let tmp = TempDir::new("signals");
    let handles: Vec<_> = sigs
        .into_iter()
        .map(|(sig, name)| {
            let store = tmp.join(format!("store-{name}"));
            let logs = tmp.path().to_path_buf();
            std::thread::spawn(move || {
                let mut r = Recorder::start(None, &store, &logs, &[LIGHT, &["-q"]].concat());
                r.wait_ready();
                r.wait_counter("written", 1);
                let pid = r.pid();
                kill(pid, sig);
                let o = r.wait(Duration::from_secs(60));
                o.expect(0, &format!("SIG{name}"));
                assert_all_written_stored(&store, &format!("SIG{name}"));
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn sigpipe_is_ignored() {
    let tmp = TempDir::new("sigpipe");
    let store = tmp.join("store");
    let mut r = Recorder::start(None, &store, tmp.path(), &[LIGHT, &["-q"]].concat());
    r.wait_ready();
    kill(r.pid(), libc::SIGPIPE);
    std::thread::sleep(Duration::from_millis(500));
    r.wait_counter("written", 1);
    r.terminate().expect(0, "SIGPIPE then SIGTERM");
    assert_all_written_stored(&store, "SIGPIPE");
}

/// Which standard stream of the recorder the test closes.
#[derive(Clone, Copy)]
enum Closed {
    Stdout,
    Stderr,
}

/// Starts a light recording whose `which` stream is a pipe with no reader
/// (the reader went away), lets it run, stops it with SIGTERM: it must have
/// kept running, exit 0 and have stored every packet it counted.
fn record_with_closed(which: Closed, tag: &str) {
    let tmp = TempDir::new(tag);
    let store = tmp.join("store");
    let mut cmd = wirevault();
    cmd.arg("record").arg("-o").arg(&store).args(LIGHT).stdin(Stdio::null());
    match which {
        Closed::Stdout => cmd.arg("--json").stdout(Stdio::piped()).stderr(Stdio::null()),
        Closed::Stderr => cmd.stdout(Stdio::null()).stderr(Stdio::piped()),
    };
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    std::thread::sleep(Duration::from_millis(2500));
    assert!(child.try_wait().unwrap().is_none(), "{tag}: the recorder died when its stream closed");
    kill(child.id(), libc::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{tag}: {status}");
    assert_all_written_stored(&store, tag);
}

/// A closed standard output (`--json | head -1`) does not kill the recorder.
#[test]
fn closed_stdout_does_not_lose_the_recording() {
    record_with_closed(Closed::Stdout, "closed-stdout");
}

/// A broken standard error (the reader of the status lines went away) does
/// not turn a clean stop into a panic: the status lines and the summary are
/// dropped, the recording ends as after SIGTERM. (It panicked with exit 101
/// in the summary's `eprintln!` before.)
#[test]
fn closed_stderr_does_not_lose_the_recording() {
    record_with_closed(Closed::Stderr, "closed-stderr");
}

/// Finding 6: the synthetic source needs an end; an empty spec is refused.
#[test]
fn synthetic_needs_an_end() {
    let tmp = TempDir::new("synth-end");
    for spec in ["size=64", "", ",", "size=64,rate=1k"] {
        let store = tmp.join("s");
        let o = run_wirevault(&["record", "-o", store.to_str().unwrap(), "--synthetic", spec]);
        o.expect(2, &format!("--synthetic {spec:?}"));
        assert_eq!(o.stderr.lines().count(), 1, "one sentence: {}", o.stderr);
        assert!(!store.exists(), "--synthetic {spec:?}: the store was created");
    }
    // An end given by record's options is enough.
    for extra in [&["-c", "10"][..], &["--duration", "300ms"]] {
        let store = tmp.join(format!("ok{}", extra[0]));
        let mut args = vec!["record", "-o", store.to_str().unwrap(), "--synthetic", "size=64,rate=1k", "-q"];
        args.extend_from_slice(extra);
        run_wirevault(&args).expect(0, &format!("{extra:?}"));
    }
}

/// Finding 15: a bad --user (and other bad options) leave nothing behind.
#[test]
fn bad_user_creates_nothing() {
    let tmp = TempDir::new("bad-user");
    let store = tmp.join("new-store");
    for user_opt in ["--user", "-Z"] {
        let o = run_wirevault(&[
            "record",
            "-o",
            store.to_str().unwrap(),
            "--synthetic",
            "count=1",
            user_opt,
            "no-such-user-wv",
        ]);
        o.expect(2, user_opt);
        assert!(o.stderr.contains("no user named no-such-user-wv"), "{}", o.stderr);
        assert!(!store.exists(), "{user_opt}: the store directory was created");
    }
    // --max-size as a share of the volume does not create the store either.
    let o = run_wirevault(&[
        "record",
        "-o",
        store.to_str().unwrap(),
        "--synthetic",
        "count=1",
        "--max-size",
        "50%",
        "--user",
        "no-such-user-wv",
    ]);
    o.expect(2, "--max-size 50% --user");
    assert!(!store.exists(), "--max-size 50%: the store directory was created");
}

/// A small store of 200 test frames.
fn small_store(tmp: &TempDir) -> std::path::PathBuf {
    let src = tmp.join("in.pcap");
    write_pcap(&src, 1, 65535, true, &test_frames(200, 1_700_000_000_000_000_000));
    let store = tmp.join("store");
    run_wirevault(&["record", "-r", src.to_str().unwrap(), "-o", store.to_str().unwrap(), "-q"]).expect(0, "record -r");
    store
}

fn count(args: &[&str]) -> u64 {
    let o = run_wirevault(args);
    o.expect(0, &format!("{args:?}"));
    o.stdout.trim().parse().unwrap_or_else(|_| panic!("{args:?}: {}", o.stdout))
}

/// Finding 16: options anywhere, `--` ends them, unknown options are errors.
#[test]
fn options_anywhere_and_unknown_options() {
    let tmp = TempDir::new("opts-anywhere");
    let store = small_store(&tmp);
    let s = store.to_str().unwrap();
    let want = count(&["query", s, "--count", "udp"]);
    assert!(want > 0);
    assert_eq!(count(&["query", s, "udp", "--count"]), want);
    assert_eq!(count(&["query", s, "--count", "--", "udp"]), want);
    let out = tmp.join("out.pcap");
    run_wirevault(&["query", s, "tcp port 53 or udp", "-w", out.to_str().unwrap()]).expect(0, "-w after the filter");
    assert!(std::fs::metadata(&out).unwrap().len() > 24);

    let bad = |args: &[&str], opt: &str, tip: Option<&str>| {
        let o = run_wirevault(args);
        o.expect(2, &format!("{args:?}"));
        assert!(o.stderr.contains(&format!("'{opt}'")), "{args:?}: {}", o.stderr);
        if let Some(t) = tip {
            assert!(o.stderr.contains(&format!("'{t}'")), "{args:?}: no hint {t}: {}", o.stderr);
        }
        assert!(!o.stderr.contains("filter expression"), "{args:?}: {}", o.stderr);
    };
    bad(&["query", s, "udp", "--cuont"], "--cuont", Some("--count"));
    bad(&["query", s, "--cuont", "udp"], "--cuont", Some("--count"));
    let new = tmp.join("new");
    let n = new.to_str().unwrap();
    bad(&["record", "-o", n, "--synthetic", "count=5", "udp", "--quite"], "--quite", Some("--quiet"));
    bad(&["record", "-o", n, "--synthetic", "count=5", "--quite", "udp"], "--quite", Some("--quiet"));
    assert!(!new.exists());
    bad(&["index", s, "--bogus"], "--bogus", None);
    bad(&["repair", s, "--bogus"], "--bogus", None);

    // record: options after the filter, and `--` before a filter.
    let st = tmp.join("rec");
    run_wirevault(&["record", "--synthetic", "count=100", "-o", st.to_str().unwrap(), "udp", "-q", "-c", "7"])
        .expect(0, "record options after the filter");
    assert_eq!(final_counters(&st).written, 7);
    let st2 = tmp.join("rec2");
    run_wirevault(&["record", "--synthetic", "count=50", "-o", st2.to_str().unwrap(), "-q", "--", "udp"])
        .expect(0, "record --");
    assert_eq!(final_counters(&st2).written, 50);
}

/// tcpdump's habits in `query`, `analyze` and `replay` are met with one sentence, as `record`'s
/// `-w` is: `-r FILE` (the store or file is the first argument), `-c N` (`--limit N`), `--from -5`
/// (the accepted time forms). clap's tip "use '-- -r'", which would make the word filter text,
/// is never shown, for any unknown option of any subcommand (issue 44).
#[test]
fn tcpdump_habits_in_query_analyze_and_replay_get_a_sentence() {
    let tmp = TempDir::new("habits");
    let file = tmp.join("f.pcap");
    write_pcap(&file, 1, 65535, true, &test_frames(20, 1_700_000_000_000_000_000));
    let f = file.to_str().unwrap();
    let one_sentence = |o: &Outcome, what: &str, needles: &[&str]| {
        o.expect(2, what);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{what}: {}", o.stderr);
        for n in needles {
            assert!(o.stderr.contains(n), "{what}: no {n:?} in {}", o.stderr);
        }
        assert!(!o.stderr.contains("'--"), "{what}: clap's tip: {}", o.stderr);
    };
    for sub in ["query", "analyze", "replay"] {
        let head: Vec<&str> = if sub == "replay" { vec![sub, "-i", "lo"] } else { vec![sub] };
        let with = |rest: &[&str]| run_wirevault(&[head.as_slice(), rest].concat());
        one_sentence(&with(&["-r", f, "--count"]), &format!("{sub} -r"), &["has no -r", "first argument"]);
        one_sentence(&with(&[f, "-c", "5"]), &format!("{sub} -c"), &["has no -c", "--limit 5"]);
        for from in [["--from", "-5"], ["--to", "-5m"]] {
            let o = with(&[f, from[0], from[1]]);
            one_sentence(&o, &format!("{sub} {from:?}"), &[from[0], "RFC 3339", "epoch seconds", "ago"]);
        }
    }
    // `--limit` where the sentence sends the user: analyze takes it too.
    let o = run_wirevault(&["analyze", f, "--limit", "5", "--json"]);
    o.expect(0, "analyze --limit");
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(r["frames"], 5, "{}", o.stdout);
    // Any other unknown option: clap's error, without the tip.
    for args in [vec!["query", f, "-x"], vec!["record", "-o", "/nonexistent/s", "--synthetic", "count=1", "-z"]] {
        let o = run_wirevault(&args);
        o.expect(2, &format!("{args:?}"));
        assert!(o.stderr.contains("unexpected argument"), "{args:?}: {}", o.stderr);
        assert!(!o.stderr.contains("to pass") && !o.stderr.contains("'-- -"), "{args:?}: {}", o.stderr);
    }
}

/// The same mistake gets the same exit code in every subcommand (the `exit` module's rule,
/// issue 44): an interface, store or file the command line names that is missing or is not a
/// capture is 1 (the host is not as the command says; it was 2 but in `record`'s `-i`), a
/// filter or time that does not parse is 2 (the command line must change). Each one sentence.
#[test]
fn the_same_mistake_gets_the_same_exit_code_in_every_subcommand() {
    let tmp = TempDir::new("exit-codes");
    let good = tmp.join("good.pcap");
    write_pcap(&good, 1, 65535, true, &test_frames(20, 1_700_000_000_000_000_000));
    let junk = tmp.join("junk.pcap");
    std::fs::write(&junk, vec![0x5a; 200]).unwrap();
    let (g, j) = (good.to_str().unwrap(), junk.to_str().unwrap());
    let missing = tmp.join("missing");
    let m = missing.to_str().unwrap();
    let new_store = tmp.join("new-store");
    let n = new_store.to_str().unwrap();
    let check = |code: i32, args: &[&str], needle: &str| {
        let o = run_wirevault(args);
        o.expect(code, &format!("{args:?}"));
        assert_eq!(o.stderr.trim().lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(needle), "{args:?}: no {needle:?} in {}", o.stderr);
    };
    let no_if = "no network interface named wvnosuch0";
    check(1, &["record", "-i", "wvnosuch0", "-o", n, "-q", "--duration", "1s"], no_if);
    check(1, &["replay", "-i", "wvnosuch0", g], no_if);
    check(1, &["tune", "wvnosuch0"], no_if);
    check(1, &["timestamps", "-i", "wvnosuch0"], no_if);
    for args in [
        vec!["query", m, "--count"],
        vec!["analyze", m],
        vec!["analyze", g, "--against", m],
        vec!["replay", "-i", "lo", m],
        vec!["timestamps", m],
        vec!["index", m],
        vec!["repair", m],
        vec!["serve", m, "--listen", "127.0.0.1:0"],
        vec!["plan", "--from", m],
        vec!["plan", "--bench", m],
        vec!["disk-bench", m],
        vec!["record", "-r", m, "-o", n, "-q"],
        vec!["record", "--config", m, "-o", n, "--synthetic", "count=1"],
    ] {
        check(1, &args, m);
    }
    for args in [
        vec!["query", j, "--count"],
        vec!["analyze", j],
        vec!["replay", "-i", "lo", j],
        vec!["timestamps", j],
        vec!["index", j],
        vec!["plan", "--from", j],
        vec!["record", "-r", j, "-o", n, "-q"],
        vec!["record", "-r", tmp.to_str().unwrap(), "-o", n, "-q"],
        vec!["record", "--synthetic", "count=1", "-o", g, "-q"],
    ] {
        check(1, &args, "");
    }
    assert!(!new_store.exists(), "a refused recording created its store");
    for args in [
        vec!["query", g, "--count", "tcp port"],
        vec!["analyze", g, "tcp port"],
        vec!["record", "-r", g, "-o", n, "-q", "tcp port"],
        vec!["query", g, "--count", "--from", "yesterday"],
        vec!["replay", "-i", "lo", g, "--from", "yesterday"],
    ] {
        check(2, &args, "");
    }
}

/// Finding 17: record's short options do not clash with tcpdump's.
#[test]
fn record_short_options_follow_tcpdump() {
    let tmp = TempDir::new("short-opts");
    let store = tmp.join("s");
    let o = run_wirevault(&["record", "-o", store.to_str().unwrap(), "--synthetic", "count=5", "-w", "2"]);
    o.expect(2, "-w");
    assert!(o.stderr.contains("--workers") && o.stderr.contains("-o"), "{}", o.stderr);
    assert!(!store.exists());
    // The tcpdump habit, -w FILE without -o: the same sentence (clap said -o was missing).
    let o = run_wirevault(&["record", "--synthetic", "count=5", "-w", store.to_str().unwrap()]);
    o.expect(2, "-w without -o");
    assert!(o.stderr.contains("record has no -w"), "{}", o.stderr);
    assert!(!store.exists());
    let help = run_wirevault(&["record", "--help"]);
    help.expect(0, "--help");
    assert!(help.stdout.contains("-r, --read"), "{}", help.stdout);
    assert!(help.stdout.contains("-Z, --user"), "{}", help.stdout);
}

/// Finding 17: `--read -`, /dev/stdin and process substitution read pipes.
#[test]
fn read_from_stdin_and_pipes() {
    let tmp = TempDir::new("read-pipes");
    let src = tmp.join("in.pcap");
    let frames = test_frames(300, 1_700_000_000_000_000_000);
    write_pcap(&src, 1, 65535, true, &frames);
    for (i, path) in ["-", "/dev/stdin"].iter().enumerate() {
        let store = tmp.join(format!("s{i}"));
        let mut child = wirevault()
            .args(["record", "-q", "--read", path, "-o", store.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let bytes = std::fs::read(&src).unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let w = std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
        let o = Outcome::from_output(child.wait_with_output().unwrap());
        w.join().unwrap();
        o.expect(0, &format!("--read {path}"));
        assert_eq!(final_counters(&store).written, 300, "--read {path}");
        let recs: usize = check_store(&store).iter().map(|f| f.records.len()).sum();
        assert_eq!(recs, 300);
    }
    if have("bash") {
        let store = tmp.join("procsub");
        let script = format!("{} record -q -r <(cat {}) -o {}", bin(), src.display(), store.display());
        let o = Outcome::from_output(Command::new("bash").arg("-c").arg(&script).output().unwrap());
        o.expect(0, "process substitution");
        assert_eq!(final_counters(&store).written, 300);
        assert_eq!(catalog(&store).len(), 1);
    }
    // A directory is still refused, in one sentence (a path that is not a capture: exit 1).
    let o = run_wirevault(&["record", "-r", tmp.to_str().unwrap(), "-o", tmp.join("d").to_str().unwrap()]);
    o.expect(1, "--read DIR");
}

/// Finding 17: `-i any` is refused with what to do instead (before any
/// privilege is needed).
#[test]
fn interface_any_is_refused() {
    let tmp = TempDir::new("any");
    let store = tmp.join("s");
    let o = run_wirevault(&["record", "-i", "any", "-o", store.to_str().unwrap()]);
    o.expect(2, "-i any");
    assert!(o.stderr.contains("-i any"), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(!store.exists());
}

/// Finding 18: range errors, exit 2, no wrapped numbers, nothing created.
#[test]
fn absurd_values_are_range_errors() {
    let tmp = TempDir::new("ranges");
    let store = tmp.join("s");
    let s = store.to_str().unwrap();
    let cases: Vec<(&str, &str)> = [
        ("--buffer", ["99999999999T", "0", "-1", "1e30", "99999999999999999999"]),
        ("--block-size", ["99999999999T", "0", "-1", "1e30", "99999999999999999999"]),
        ("--file-size", ["99999999999T", "0", "-1", "1e30", "99999999999999999999"]),
        ("--duration", ["99999999999T", "0", "-1", "1e30", "99999999999999999999d"]),
        ("--file-time", ["99999999999T", "0", "-1", "1e30", "99999999999999d"]),
        ("--max-size", ["99999999999T", "0", "-1", "1e30", "0%"]),
    ]
    .iter()
    .flat_map(|(opt, vals)| vals.iter().map(move |v| (*opt, *v)))
    .chain([("-c", "0"), ("-c", "-1"), ("--snaplen", "-1"), ("--snaplen", "99999999999"), ("--flow-cutoff", "0")])
    .collect();
    for (opt, val) in cases {
        let arg = format!("{opt}={val}");
        let arg = if opt.starts_with("--") { arg } else { format!("{opt}{val}") };
        let o = run_wirevault(&["record", "-o", s, "--synthetic", "size=64,count=1", &arg]);
        o.expect(2, &arg);
        assert!(o.stderr.contains(opt), "{arg}: the message does not name {opt}: {}", o.stderr);
        assert!(!o.stderr.contains("18446744") && !o.stderr.contains("e+"), "{arg}: a wrapped number: {}", o.stderr);
        assert!(!store.exists(), "{arg}: the store was created");
    }
    // The range a message names is the one the option takes.
    let o = run_wirevault(&["record", "-o", s, "--synthetic", "size=64,count=1", "--snaplen=99999999999"]);
    assert!(o.stderr.contains("0..=262144"), "{}", o.stderr);
    // -s 0 is the most, as for tcpdump.
    let o = run_wirevault(&[
        "record",
        "-q",
        "-o",
        s,
        "--buffer",
        "8M",
        "--block-size",
        "64K",
        "--synthetic",
        "size=1514,count=3",
        "-s",
        "0",
    ]);
    o.expect(0, "-s 0");
    let files = crate::util::check_store(&store);
    assert!(crate::util::stream_records(&files, 0).iter().all(|r| r.data.len() == 1514), "-s 0 cut packets");
    std::fs::remove_dir_all(&store).unwrap();
    // The synthetic spec: nothing to generate, a count past 64 bits, a key twice.
    for spec in ["count=0", "duration=0s", "count=99999999999999999999", "count=10,count=20"] {
        let o = run_wirevault(&["record", "-o", s, "--synthetic", spec]);
        o.expect(2, spec);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{spec}: {}", o.stderr);
        assert!(o.stderr.contains("synthetic"), "{spec}: {}", o.stderr);
        assert!(!store.exists(), "{spec}: the store was created");
    }
}

/// Finding 18: an unwritable --stats-file and an -o that is a file are
/// refused before recording starts.
#[test]
fn stats_file_and_output_checked_first() {
    let tmp = TempDir::new("stats-file");
    let store = tmp.join("s");
    for bad in [tmp.join("no-such-dir/stats.json"), tmp.to_path_buf()] {
        let o = run_wirevault(&[
            "record",
            "-o",
            store.to_str().unwrap(),
            "--synthetic",
            "count=10",
            "--stats-file",
            bad.to_str().unwrap(),
        ]);
        assert!(o.code == Some(2) || o.code == Some(1), "--stats-file {}: {:?} {}", bad.display(), o.code, o.stderr);
        assert!(o.stderr.contains("--stats-file"), "{}", o.stderr);
        assert!(!store.exists());
    }
    let file = tmp.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let o = run_wirevault(&["record", "-o", file.to_str().unwrap(), "--synthetic", "count=10"]);
    o.expect(1, "-o FILE");
    assert!(o.stderr.contains("is not a directory"), "{}", o.stderr);
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// Man pages and shell completions are generated from the clap definitions;
/// the man pages render and the bash completion loads.
#[test]
fn man_pages_and_completions() {
    let tmp = TempDir::new("gen-docs");
    let out = tmp.join("out");
    run_wirevault(&["generate-docs", out.to_str().unwrap()]).expect(0, "generate-docs");
    for sub in ["", "-record", "-query", "-index", "-repair"] {
        let p = out.join(format!("man/wirevault{sub}.1"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(text.contains(".TH"), "{}", p.display());
        if have("groff") {
            let o = Command::new("groff").args(["-man", "-Tutf8", "-ww", "-z"]).arg(&p).output().unwrap();
            assert!(
                o.status.success() && o.stderr.is_empty(),
                "groff {}: {}",
                p.display(),
                String::from_utf8_lossy(&o.stderr)
            );
        } else if have("man") {
            let o = Command::new("man").arg("-l").arg(&p).env("MANPAGER", "cat").output().unwrap();
            assert!(o.status.success(), "man -l {}", p.display());
        }
    }
    let rec = std::fs::read_to_string(out.join("man/wirevault-record.1")).unwrap();
    assert!(rec.contains("workers") && rec.contains("stats\\-file"), "record's man page lacks options");
    let bash = out.join("completions/wirevault.bash");
    assert!(out.join("completions/_wirevault").is_file());
    assert!(out.join("completions/wirevault.fish").is_file());
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!("set -e; source {}; complete -p wirevault", bash.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "bash cannot source the completion: {}", String::from_utf8_lossy(&o.stderr));
    if have("zsh") {
        let o = Command::new("zsh").arg("-n").arg(out.join("completions/_wirevault")).output().unwrap();
        assert!(o.status.success(), "zsh -n: {}", String::from_utf8_lossy(&o.stderr));
    }
    if have("fish") {
        let o = Command::new("fish").arg("-n").arg(out.join("completions/wirevault.fish")).output().unwrap();
        assert!(o.status.success(), "fish -n: {}", String::from_utf8_lossy(&o.stderr));
    }
}

/// `record --listen` on a port already taken: one sentence, exit 1, and the
/// store directory this run would have created is not left behind (an
/// existing store stays, untouched).
#[test]
fn record_on_a_taken_port_leaves_no_new_store() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let tmp = TempDir::new("taken-port");
    let store = tmp.join("s");
    let o =
        run_wirevault(&["record", "--synthetic", "count=10", "-o", store.to_str().unwrap(), "--listen", &addr, "-q"]);
    o.expect(1, "taken port");
    assert!(o.stderr.contains("cannot listen on") && o.stderr.trim().lines().count() == 1, "{}", o.stderr);
    assert!(!store.exists(), "a new store was left behind");
    // An existing store keeps what it holds.
    run_wirevault(&["record", "--synthetic", "count=10", "-o", store.to_str().unwrap(), "-q"]).expect(0, "record");
    let o =
        run_wirevault(&["record", "--synthetic", "count=10", "-o", store.to_str().unwrap(), "--listen", &addr, "-q"]);
    o.expect(1, "taken port, existing store");
    let c = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    assert_eq!(c.stdout.trim(), "10");
    drop(taken);
}

/// A config file that is a device or a directory is refused at once:
/// /dev/zero was read until the machine ran out of memory. (A pipe stays
/// accepted: `--config <(...)`; more than 1 MiB of one is refused.)
#[test]
fn a_config_that_is_not_a_regular_file_is_refused() {
    let tmp = TempDir::new("config-kinds");
    let dir = tmp.to_str().unwrap();
    for (sub, file) in [("record", "/dev/zero"), ("record", dir), ("serve", "/dev/zero")] {
        let out = std::process::Command::new("timeout")
            .args(["20"])
            .arg(crate::util::bin())
            .args([sub, "--config", file])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // Not a file the config can come from: the host's matter, exit 1 (issue 44).
        assert_eq!(out.status.code(), Some(1), "{sub} --config {file}: {err}");
        assert!(err.contains("not a regular file") && err.trim().lines().count() == 1, "{sub} --config {file}: {err}");
    }
    // Endless text through a pipe: refused past 1 MiB.
    let out = std::process::Command::new("timeout")
        .args(["20", "bash", "-c"])
        .arg(format!("{} record --config <(yes '# a comment')", crate::util::bin()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("larger than 1024 KiB"), "{err}");
}
