//! The web console in a real browser: headless Chromium driven by Selenium
//! (`console_driver.py` beside this file) against the real binary.
//!
//! Live: `wirevault record -i --listen` records in a network namespace
//! while tcpreplay sends frames over a veth pair at a steady rate; the page
//! loads without console errors, its packets/s figure shows the rate sent
//! and its rate chart fills with one point a second.
//!
//! The query panel, while the recorder still runs (every packet is in its
//! open file) and at rest under `wirevault serve` over the same store: a
//! time range and filter typed into it give the count `wirevault query
//! --count` gives, the panel's download is byte for byte the pcap
//! `wirevault query -w` writes, the packet table's rows are tshark's fields
//! of the first packets of that pcap, and a filter that does not parse shows
//! the CLI's sentence. Screenshots go to `target/test-artifacts/`
//! (`console-live.png`, `console-recording.png`, `console.png`).
//!
//! Tokens: over `wirevault serve --token-file`, the page asks for a token
//! in words for a person, refuses a wrong one, and with the right one
//! counts and downloads (the link is authorised by the `wv_token` cookie
//! the page sets).
//!
//! Names: without tokens the page loads from `http://localhost:PORT/` and
//! `http://127.0.0.1:PORT/`, and not from a name that resolves to
//! 127.0.0.1 as a DNS rebinding page's does (421, with the sentence).
//!
//! Needs chromium, chromedriver and Debian's python3-selenium, and for the
//! live test also root, tcpreplay and tshark; skips without them (fails in CI).

use crate::util::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOOLS: &[&str] = &["ip", "tcpreplay", "tshark", "chromium", "chromedriver"];
/// Debian's Python, which has python3-selenium (not a virtualenv's `python3` on PATH).
const PYTHON: &str = "/usr/bin/python3";
/// Inside the test's own network namespace, so no other process holds it.
const LISTEN: &str = "127.0.0.1:8080";
/// The rate tcpreplay sends at.
const PPS: u64 = 1000;

/// Where the screenshots are kept: `target/test-artifacts/`.
pub(crate) fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("target dir").join("test-artifacts");
    std::fs::create_dir_all(&dir).expect("create target/test-artifacts");
    dir
}

/// Runs the driver (in `ns` if given) with `spec`; returns what it saw,
/// failing the test with the driver's error (the screenshot shows the page then).
pub(crate) fn drive(ns: Option<&str>, tmp: &Path, spec: Value) -> Value {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console_driver.py");
    let spec_path = tmp.join(format!("spec-{}.json", spec["mode"].as_str().unwrap_or("x")));
    std::fs::write(&spec_path, spec.to_string()).expect("write the driver's spec");
    let mut cmd = match ns {
        Some(ns) => VethPair::exec(ns, PYTHON),
        None => Command::new(PYTHON),
    };
    let out = run_ok(cmd.arg(&driver).arg(&spec_path));
    let seen: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("driver output is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert!(seen["error"].is_null(), "the browser driver failed: {}\nsee {}", seen["error"], spec["screenshot"]);
    seen
}

/// Console entries of level WARNING or SEVERE (the page's own errors, a
/// failed request, a CSP violation).
pub(crate) fn problems(log: &Value) -> Vec<String> {
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|e| matches!(e["level"].as_str(), Some("SEVERE" | "WARNING")))
        .map(|e| e["message"].to_string())
        .collect()
}

/// `wirevault serve STORE ARGS...` (in `ns` if given), once it listens;
/// returns it and the console's URL, read from its log line
/// "api: serving STORE on http://ADDR/ (...)" (so port 0 works).
fn serve(ns: Option<&str>, store: &Path, tmp: &Path, args: &[&str]) -> (Background, String) {
    let log = tmp.join("serve.err");
    let mut cmd = match ns {
        Some(ns) => VethPair::exec(ns, bin()),
        None => wirevault(),
    };
    let child = cmd
        .arg("serve")
        .arg(store)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("create serve.err"))
        .spawn()
        .expect("start wirevault serve");
    let mut bg = Background(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let url = text.lines().find(|l| l.contains("api: serving")).and_then(|l| l.split(" on ").nth(1));
        if let Some(url) = url.and_then(|r| r.split_whitespace().next()) {
            return (bg, url.to_string());
        }
        if let Ok(Some(st)) = bg.0.try_wait() {
            panic!("wirevault serve exited ({st}):\n{text}");
        }
        assert!(Instant::now() < deadline, "wirevault serve did not start:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// tshark's view of the first `n` packets of `pcap`, as the console's
/// table cells: time (UTC), source, destination, sport, dport, protocol, length.
fn tshark_rows(pcap: &Path, n: usize) -> Vec<Vec<String>> {
    let out = run_ok(Command::new("tshark").arg("-r").arg(pcap).args(["-c", &n.to_string(), "-T", "fields"]).args([
        "-e",
        "frame.time_epoch",
        "-e",
        "ip.src",
        "-e",
        "ip.dst",
        "-e",
        "tcp.srcport",
        "-e",
        "udp.srcport",
        "-e",
        "tcp.dstport",
        "-e",
        "udp.dstport",
        "-e",
        "ip.proto",
        "-e",
        "frame.len",
    ]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let (secs, frac) = f[0].split_once('.').unwrap_or((f[0], "0"));
            let ns = secs.parse::<u64>().expect("epoch seconds") * 1_000_000_000
                + format!("{frac:0<9}")[..9].parse::<u64>().expect("fraction");
            let time = wv_store::layout::utc_rfc3339(ns).replace('T', " ").replace('Z', "");
            let either = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.to_string() };
            let proto = match f[7] {
                "6" => "TCP".to_string(),
                "17" => "UDP".to_string(),
                "1" => "ICMP".to_string(),
                other => other.to_string(),
            };
            vec![time, f[1].into(), f[2].into(), either(f[3], f[4]), either(f[5], f[6]), proto, f[8].into()]
        })
        .collect()
}

wvtest!(console_shows_the_live_rate_and_its_query_panel_matches_the_cli_and_tshark, needs = [root, TOOLS], |t| {
    if !browser_ready(t.name) {
        return;
    }
    let _g = heavy_lock();
    let tmp = TempDir::new("console");
    let pair = VethPair::new();
    // Loopback in the recorder's namespace: the browser reaches the server there.
    run_ok(Command::new("ip").args(["-n", &pair.ns_b, "link", "set", "lo", "up"]));
    let frames = test_frames(2000, 1_700_000_000_000_000_000);
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, false, &frames);
    let store = tmp.join("store");
    let art = artifacts();

    // Live: the rate the page shows while tcpreplay sends PPS frames a second.
    let mut rec = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &["-i", pair.if_b, "--buffer", "64M", "-q", "--listen", LISTEN],
    );
    rec.wait_ready();
    let traffic = Background(
        VethPair::exec(&pair.ns_a, "tcpreplay")
            .args(["-i", pair.if_a, "--pps", &PPS.to_string(), "--loop", "1000"])
            .arg(&pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tcpreplay"),
    );
    rec.wait_received(PPS);
    let seen = drive(
        Some(&pair.ns_b),
        tmp.path(),
        json!({
            "url": format!("http://{LISTEN}/"), "mode": "live", "min_points": 8, "samples": 5, "timeout": 60,
            "screenshot": art.join("console-live.png"),
        }),
    );
    let stats_pps = stats(&store)["pps"].as_f64().unwrap_or(0.0);
    drop(traffic);
    assert_eq!(problems(&seen["log"]), Vec::<String>::new(), "the live page logged errors");
    assert!(seen["points"].as_u64().unwrap_or(0) >= 8, "the rate chart has too few points: {seen}");
    assert_eq!(seen["badge"], "RECORDING", "the state badge");
    let mut pps: Vec<f64> =
        seen["pps"].as_array().unwrap().iter().map(|s| s["value"].as_f64().unwrap_or(0.0)).collect();
    pps.sort_by(f64::total_cmp);
    let median = pps[pps.len() / 2];
    // tcpreplay paces to PPS; the recorder's one-second figure may be a
    // second late or a frame off, so a wide band, and stats.json (the same
    // counters) must agree with the page as closely.
    assert!(
        (0.7 * PPS as f64..=1.3 * PPS as f64).contains(&median),
        "the page shows {median} pps (samples {pps:?}), tcpreplay sends {PPS}"
    );
    assert!((0.7 * stats_pps..=1.3 * stats_pps).contains(&median), "page {median} pps, stats.json {stats_pps} pps");
    for s in seen["pps"].as_array().unwrap() {
        assert!(s["shown"].as_str().unwrap_or("").ends_with("pps"), "the pps figure has its unit: {s}");
    }
    // While recording: every frame sent is in the open file (1 GiB files), queryable 2 s on.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(catalog(&store).is_empty(), "a file was closed; the panel is to read the open one");
    let spans: Vec<(u64, u64)> = live_entries(&store)
        .iter()
        .map(|e| (e["first_ns"].as_u64().unwrap(), e["last_ns"].as_u64().unwrap()))
        .collect();
    let recording = query_panel(&store, tmp.path(), &pair.ns_b, &format!("http://{LISTEN}/"), &spans, "recording");
    let o = rec.terminate();
    o.expect(0, "recorder stopped by SIGTERM");

    // At rest: the same under `wirevault serve`, the same answer.
    let spans: Vec<(u64, u64)> =
        catalog(&store).iter().map(|e| (e["first_ns"].as_u64().unwrap(), e["last_ns"].as_u64().unwrap())).collect();
    let (_server, url) = serve(Some(&pair.ns_b), &store, tmp.path(), &["--listen", LISTEN]);
    let at_rest = query_panel(&store, tmp.path(), &pair.ns_b, &url, &spans, "");
    assert_eq!(recording, at_rest, "the panel's count while recording and at rest");
});

/// The query panel of the console at `url` (served in `ns`) against the CLI and tshark over
/// the middle half of the time `spans` (the stored files' first and last packets) for DNS:
/// its count, its download, its table and a bad filter's sentence. Returns the count.
fn query_panel(store: &Path, tmp: &Path, ns: &str, url: &str, spans: &[(u64, u64)], tag: &str) -> u64 {
    let first = spans.iter().map(|s| s.0).min().expect("stored packets");
    let last = spans.iter().map(|s| s.1).max().expect("stored packets");
    let (from, to) = (time_arg(first + (last - first) / 4), time_arg(first + (last - first) * 3 / 4));
    let filter = "port 53";
    let cli = |extra: &[&str]| {
        let mut c = wirevault();
        c.arg("query").arg(store).args(["--from", &from, "--to", &to]).args(extra).arg(filter);
        run_ok(&mut c)
    };
    let want_count: u64 = String::from_utf8_lossy(&cli(&["--count"]).stdout).trim().parse().expect("a count");
    assert!(want_count > 100, "the range holds {want_count} DNS frames; the test needs more than a table");
    let want_pcap = tmp.join(format!("cli{tag}.pcap"));
    cli(&["-w", want_pcap.to_str().unwrap()]);
    let bad = "udp and prt 5";
    let cli_bad = run_wirevault(&["query", store.to_str().unwrap(), "--count", bad]);
    cli_bad.expect(2, "a filter that does not parse");

    let downloads = tmp.join(format!("downloads{tag}"));
    std::fs::create_dir_all(&downloads).unwrap();
    let shot = if tag.is_empty() { "console.png".to_string() } else { format!("console-{tag}.png") };
    let seen = drive(
        Some(ns),
        tmp,
        json!({
            "url": url, "mode": "query", "timeout": 60,
            "from": from, "to": to, "filter": filter, "bad_filter": bad,
            "downloads": downloads, "screenshot": artifacts().join(shot),
        }),
    );
    let what = if tag.is_empty() { "at rest".to_string() } else { format!("while {tag}") };
    assert_eq!(problems(&seen["log"]), Vec::<String>::new(), "{what}: the page logged errors before the bad filter");
    assert_eq!(seen["count"].as_u64(), Some(want_count), "{what}: count in the panel vs wirevault query --count");
    let got = std::fs::read(seen["download"].as_str().unwrap()).expect("the downloaded pcap");
    let want = std::fs::read(&want_pcap).unwrap();
    assert!(
        got == want,
        "{what}: the download ({} bytes) differs from wirevault query -w ({} bytes)",
        got.len(),
        want.len()
    );

    let rows = seen["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 100, "{what}: the table shows the first 100 packets");
    let want_rows = tshark_rows(&want_pcap, 100);
    for (i, (r, w)) in rows.iter().zip(&want_rows).enumerate() {
        let cells: Vec<String> =
            r["cells"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
        // # | time | src | dst | sport | dport | protocol | length | vlan
        assert_eq!(cells[0], (i + 1).to_string());
        assert_eq!(&cells[1..8], &w[..], "{what}: row {} against tshark", i + 1);
    }

    // A filter that does not parse: the CLI's sentence, in red, nothing else broken.
    let sentence = seen["bad_filter_error"].as_str().unwrap();
    assert!(!sentence.is_empty() && cli_bad.stderr.contains(sentence), "page: {sentence:?}\nCLI: {}", cli_bad.stderr);
    assert_eq!(seen["bad_filter_marked"], true, "{what}: the filter field is marked");
    let after = problems(&seen["log_after"]);
    assert!(
        after.iter().all(|m| m.contains("status of 400")),
        "{what}: after the bad filter, only its 400 may be logged: {after:?}"
    );
    want_count
}

/// Chromium, chromedriver and Selenium for Debian's Python.
pub(crate) fn browser_ready(test: &str) -> bool {
    if !need_tools(test, &["chromium", "chromedriver"]) {
        return false;
    }
    let ok =
        Command::new(PYTHON).args(["-c", "import selenium"]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !ok {
        assert!(!in_ci(), "{test}: CI needs python3-selenium (scripts/install-deps.sh installs it)");
        eprintln!("SKIP {test}: python3-selenium not installed (run scripts/install-deps.sh)");
    }
    ok
}

/// No root, the host's loopback: a store recorded from a pcap file, and
/// `wirevault serve --token-file` on a port the kernel chooses.
wvtest!(console_asks_for_a_token_and_its_download_carries_it, |t| {
    if !browser_ready(t.name) {
        return;
    }
    let tmp = TempDir::new("console-token");
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, true, &test_frames(500, 1_700_000_000_000_000_000));
    let store = tmp.join("store");
    run_ok(wirevault().arg("record").arg("-r").arg(&pcap).arg("-o").arg(&store).arg("-q"));
    let token = "console-t.name-token-0123456789abcdef";
    let tokens = tmp.join("tokens");
    std::fs::write(&tokens, format!("browser:{token}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    let (_server, url) =
        serve(None, &store, tmp.path(), &["--listen", "127.0.0.1:0", "--token-file", tokens.to_str().unwrap()]);
    let filter = "udp";
    let want_pcap = tmp.join("cli.pcap");
    run_ok(wirevault().arg("query").arg(&store).arg("-w").arg(&want_pcap).arg(filter));
    let want_count: u64 =
        String::from_utf8_lossy(&run_ok(wirevault().arg("query").arg(&store).args(["--count", filter])).stdout)
            .trim()
            .parse()
            .expect("a count");
    let downloads = tmp.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let seen = drive(
        None,
        tmp.path(),
        json!({
            "url": url, "mode": "token", "timeout": 60, "token": token, "wrong_token": "not-the-token-0123456789",
            "filter": filter, "downloads": downloads, "screenshot": artifacts().join("console-token.png"),
        }),
    );
    // Words for a person: what a token is and where it comes from; no HTTP header names.
    let asked = seen["asked_for_token"].as_str().unwrap_or("");
    assert!(asked.contains("access token") && asked.contains("operator") && !asked.contains("Bearer"), "{seen}");
    let refused = seen["refused"].as_str().unwrap_or("");
    assert!(refused.contains("not accepted") && refused.contains("operator"), "{seen}");
    assert_eq!(seen["form_hidden"], true, "the token field goes away once the token works");
    assert_eq!(seen["cookie"]["value"], token, "the download link's cookie");
    assert_eq!(seen["cookie"]["sameSite"], "Strict");
    assert_eq!(seen["count"].as_u64(), Some(want_count), "count with the token vs wirevault query --count");
    let got = std::fs::read(seen["download"].as_str().unwrap()).expect("the downloaded pcap");
    assert!(got == std::fs::read(&want_pcap).unwrap(), "the download with the cookie differs from wirevault query -w");
    // The browser logs the 401s it was given; nothing else.
    let logged = problems(&seen["log"]);
    assert!(logged.iter().all(|m| m.contains("status of 401")), "unexpected console entries: {logged:?}");
    let served = std::fs::read_to_string(tmp.join("serve.err")).unwrap();
    assert!(served.contains("token=\"browser\""), "the server's log names the token:\n{served}");
});

/// No root, the host's loopback: the console of `wirevault serve` (no
/// tokens) from localhost and 127.0.0.1, and a rebound name refused.
wvtest!(console_loads_from_localhost_and_127_0_0_1_but_not_from_a_rebound_name, |t| {
    if !browser_ready(t.name) {
        return;
    }
    let tmp = TempDir::new("console-hosts");
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, true, &test_frames(200, 1_700_000_000_000_000_000));
    let store = tmp.join("store");
    run_ok(wirevault().arg("record").arg("-r").arg(&pcap).arg("-o").arg(&store).arg("-q"));
    let (_server, url) = serve(None, &store, tmp.path(), &["--listen", "127.0.0.1:0"]);
    let port = url.trim_end_matches('/').rsplit(':').next().expect("a port").to_string();
    let urls = [
        format!("http://localhost:{port}/"),
        format!("http://127.0.0.1:{port}/"),
        format!("http://rebound.test:{port}/"),
    ];
    let seen = drive(
        None,
        tmp.path(),
        json!({
            "mode": "hosts", "urls": urls, "timeout": 30, "resolver_rules": "MAP rebound.test 127.0.0.1",
            "screenshot": artifacts().join("console-hosts.png"),
        }),
    );
    let pages = seen["pages"].as_array().expect("pages");
    for p in &pages[..2] {
        assert_eq!(p["state"], "AT REST", "{p}");
        assert!(p["body"].as_str().unwrap_or("").contains(store.to_str().unwrap()), "the store's status: {p}");
    }
    assert_eq!(pages[2]["state"], Value::Null, "the console must not load from a rebound name: {}", pages[2]);
    let body = pages[2]["body"].as_str().unwrap_or("");
    assert!(body.contains("DNS rebinding") && body.contains(&format!("http://localhost:{port}/")), "{body}");
    let logged = problems(&seen["log"]);
    assert!(logged.iter().all(|m| m.contains("status of 421")), "unexpected console entries: {logged:?}");
    let served = std::fs::read_to_string(tmp.join("serve.err")).unwrap();
    assert!(served.contains(&format!("host=\"rebound.test:{port}\" 421")), "{served}");
});
