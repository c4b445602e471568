//! `wirevault serve --fleet FILE` (issue 46): the API over the fleet of `fleet.rs`' lab (one
//! local store, two served, one of them with a token). curl's answers from `/api/v1/query`
//! (pcap and pcapng) are byte for byte the files `wirevault query --fleet` writes, its counts
//! the CLI's; `X-Wirevault-Nodes` (header and trailer) names each node's state, packets and
//! bytes; `/api/v1/fleet` holds each node's own status; `/metrics` passes promtool with each
//! node up or not. A node stopped is named in the header and the trailer, the answer is the
//! CLI's `--allow-partial` one, `/api/v1/fleet` says it is down and `/metrics` counts it.

use crate::console::{artifacts, drive, problems};
use crate::fleet::{count, fleet_file, fleet_query, lab, s, token_file, Lab, TOKEN};
use crate::util::*;
use std::path::Path;
use std::process::Command;

/// `curl -sS URL` with `args`; fails the test unless curl exits 0. Returns (headers and
/// trailers as curl dumps them, body).
fn curl(url: &str, args: &[&str], dir: &Path) -> (String, Vec<u8>) {
    let head = dir.join(format!("curl-{}.head", unique()));
    let body = dir.join(format!("curl-{}.body", unique()));
    let o = run_ok(
        Command::new("curl")
            .args(["-sS", "-G", "-H", "TE: trailers", "-D"])
            .arg(&head)
            .arg("-o")
            .arg(&body)
            .args(args)
            .arg(url),
    );
    assert!(o.status.success(), "curl {url}: {}", String::from_utf8_lossy(&o.stderr));
    (std::fs::read_to_string(&head).unwrap_or_default(), std::fs::read(&body).unwrap_or_default())
}

/// Every value of `name` in curl's dump (the header first, then the trailer).
fn values(dump: &str, name: &str) -> Vec<serde_json::Value> {
    dump.lines()
        .filter_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
        .map(|v| serde_json::from_str(v).unwrap_or_else(|e| panic!("{name} is not JSON ({e}): {v}")))
        .collect()
}

/// The nodes' states in one `X-Wirevault-Nodes` value.
fn states(v: &serde_json::Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|n| n["state"].as_str().unwrap().to_string()).collect()
}

/// The range, expression and format as query parameters for curl.
fn params(lab: &Lab, expr: &str, extra: &[&str]) -> Vec<String> {
    let mut p = vec![
        "--data-urlencode".to_string(),
        format!("from={}", time_arg(lab.first)),
        "--data-urlencode".into(),
        format!("to={}", time_arg(lab.last + 1)),
        "--data-urlencode".into(),
        format!("filter={expr}"),
    ];
    for e in extra {
        p.push("--data-urlencode".into());
        p.push(e.to_string());
    }
    p
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The fleet server's /metrics, checked by promtool; the value of `sample` in it.
fn metric(base: &str, dir: &Path, sample: &str) -> Option<f64> {
    let (_, body) = curl(&format!("{base}/metrics"), &[], dir);
    promtool_ok(&body, "the fleet server's /metrics");
    let text = String::from_utf8_lossy(&body).into_owned();
    text.lines().find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
}

/// The fleet file of a (the lab's first store, read locally), b and c (served; b with
/// `b_token`), and `serve --fleet` over it.
fn fleet_server(lab: &Lab, b: &Served, c: &Served, b_token: Option<&Path>) -> (std::path::PathBuf, Served) {
    let dir = lab.tmp.path();
    let fleet = fleet_file(
        dir,
        "fleet.toml",
        "node_timeout = \"10s\"\nretries = 0",
        &[
            ("a", lab.stores[0].display().to_string(), None),
            ("b", format!("http://{}", b.addr), b_token),
            ("c", format!("http://{}", c.addr), None),
        ],
    );
    let server = Served::with_args(&["--fleet", s(&fleet), "--listen", "127.0.0.1:0"], dir);
    (fleet, server)
}

wvtest!(fleet_server_answers_as_the_cli_and_names_what_it_leaves_out, needs = ["tcpdump", "curl", "promtool"], |t| {
    let lab = lab("serve-fleet", 6_000);
    let dir = lab.tmp.path();
    let tokens = token_file(dir, TOKEN);
    let b = Served::start(&lab.stores[1], dir, &["--token-file", s(&tokens)]);
    let mut c = Served::start(&lab.stores[2], dir, &[]);
    let (fleet, server) = fleet_server(&lab, &b, &c, Some(tokens.as_path()));
    let base = format!("http://{}", server.addr);
    let whole = (lab.first, lab.last + 1);
    let cli_file = dir.join("cli.pcap");
    for expr in ["", "tcp[tcpflags] & tcp-syn != 0", "vlan and udp", "not net 10.0.1.0/24"] {
        for (format, extra) in [("pcap", vec![]), ("pcapng", vec!["--format", "pcapng"])] {
            let what = format!("{format} {expr:?}");
            let mut args = vec!["--fleet", s(&fleet)];
            args.extend(&extra);
            let (o, want) = fleet_query(&args, expr, whole, &cli_file);
            o.expect(0, &what);
            let p = params(&lab, expr, &[&format!("format={format}")]);
            let (dump, body) = curl(&format!("{base}/api/v1/query"), &strs(&p), dir);
            assert!(dump.starts_with("HTTP/1.1 200"), "{what}: {dump}");
            assert!(body == std::fs::read(&cli_file).unwrap(), "{what}: the API's bytes are not the CLI's");
            let nodes = values(&dump, "x-wirevault-nodes");
            assert_eq!(nodes.len(), 2, "{what}: a header and a trailer: {dump}");
            assert_eq!(states(&nodes[0]), ["answering"; 3], "{what}: {dump}");
            assert_eq!(states(&nodes[1]), ["complete"; 3], "{what}: {dump}");
            let sum: u64 = nodes[1].as_array().unwrap().iter().map(|n| n["packets"].as_u64().unwrap()).sum();
            assert_eq!(sum, want.len() as u64, "{what}: the trailer's packets");
        }
        let (dump, body) = curl(&format!("{base}/api/v1/count"), &strs(&params(&lab, expr, &[])), dir);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let o = count(&["--fleet", s(&fleet)], expr, whole);
        o.expect(0, "count");
        assert_eq!(v["matched"].to_string(), o.stdout.trim(), "count {expr:?}");
        assert_eq!(states(&values(&dump, "x-wirevault-nodes")[0]), ["complete"; 3]);
    }
    // The fleet's status: each node's own, typed and versioned.
    let (_, body) = curl(&format!("{base}/api/v1/fleet"), &[], dir);
    let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(st["version"], 1, "{st}");
    for n in st["nodes"].as_array().unwrap() {
        assert_eq!(n["up"], true, "{n}");
        assert!(n["status"]["horizon"]["oldest_ns"].as_u64().is_some(), "{n}");
        assert!(n["status"]["disk"]["packets"].as_u64().unwrap() > 0, "{n}");
    }
    assert_eq!(metric(&base, dir, "wirevault_fleet_node_up{node=\"c\"}"), Some(1.0));

    // Node c paused: its status is waited for a few seconds, not for its query timeout (10 s
    // here), so that a scrape of /metrics or the console's poll does not hang on it.
    c.signal(libc::SIGSTOP);
    let asked = std::time::Instant::now();
    let (_, body) = curl(&format!("{base}/api/v1/fleet"), &[], dir);
    let took = asked.elapsed();
    c.signal(libc::SIGCONT);
    let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(st["nodes"][2]["up"], false, "a paused node is not up: {st}");
    assert!(took < std::time::Duration::from_secs(8), "{t}: /api/v1/fleet took {took:?} with c paused");

    // Node c stopped: named in the header and the trailer, the rest as the CLI's partial answer.
    c.child.kill().unwrap();
    c.child.wait().unwrap();
    let expr = "tcp or udp";
    let (o, want) = fleet_query(&["--fleet", s(&fleet), "--allow-partial"], expr, whole, &cli_file);
    o.expect(0, "partial");
    assert!(!want.is_empty());
    let (dump, body) = curl(&format!("{base}/api/v1/query"), &strs(&params(&lab, expr, &[])), dir);
    assert!(dump.starts_with("HTTP/1.1 200"), "{dump}");
    assert!(body == std::fs::read(&cli_file).unwrap(), "partial: the API's bytes are not the CLI's --allow-partial");
    let nodes = values(&dump, "x-wirevault-nodes");
    assert_eq!(states(&nodes[0]), ["answering", "answering", "left_out"], "{dump}");
    assert_eq!(states(&nodes[1]), ["complete", "complete", "left_out"], "{dump}");
    let why = nodes[1][2]["error"].as_str().unwrap();
    assert!(why.contains("node c") && why.contains(&c.addr), "the trailer says what happened to c: {why}");
    let (dump, _) = curl(&format!("{base}/api/v1/count"), &strs(&params(&lab, expr, &[])), dir);
    assert_eq!(states(&values(&dump, "x-wirevault-nodes")[0]), ["complete", "complete", "left_out"]);
    let (_, body) = curl(&format!("{base}/api/v1/fleet"), &[], dir);
    let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let down = &st["nodes"][2];
    assert_eq!((down["up"].as_bool(), down["status"].is_null()), (Some(false), true), "{down}");
    assert!(down["error"].as_str().unwrap().contains("node c"), "{down}");
    assert_eq!(metric(&base, dir, "wirevault_fleet_node_up{node=\"c\"}"), Some(0.0));
    assert!(metric(&base, dir, "wirevault_fleet_node_answers_total{node=\"c\",outcome=\"left_out\"}") >= Some(2.0));

    // A wrong expression is one sentence and 400; an endpoint a fleet does not answer says which do.
    let o = run_ok(Command::new("curl").args([
        "-s",
        "-w",
        "%{http_code}",
        "-G",
        "--data-urlencode",
        "filter=tcp[",
        &format!("{base}/api/v1/count"),
    ]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.ends_with("400") && text.contains("error"), "{text}");
    let o = run_ok(Command::new("curl").args(["-s", "-w", "%{http_code}", &format!("{base}/api/v1/files")]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.ends_with("404") && text.contains("/api/v1/fleet"), "{text}");

    // --max-bytes holds over a fleet too: a longer answer is cut, never ended as a whole one.
    let whole_len = std::fs::metadata(&cli_file).unwrap().len();
    assert!(whole_len > 200_000, "the answer ({whole_len} bytes) is longer than the cap");
    let capped = Served::with_args(&["--fleet", s(&fleet), "--listen", "127.0.0.1:0", "--max-bytes", "100000"], dir);
    let got = dir.join("capped.pcap");
    let url = format!("http://{}/api/v1/query", capped.addr);
    let o = Command::new("curl").args(["-sS", "-o", s(&got), &url]).output().expect("run curl");
    let len = std::fs::metadata(&got).map_or(0, |m| m.len());
    // The transfer is cut: after the head (curl's 18, "transfer closed with outstanding read
    // data"), or, when hyper drops the connection before it wrote the head, with no reply (52).
    assert!(
        matches!(o.status.code(), Some(18 | 52)),
        "curl ended a capped answer ({len} bytes) otherwise than cut short: {:?}",
        o.status.code()
    );
    assert!(len <= 100_000, "{len} bytes sent past --max-bytes");
    drop(b);
});

/// The fleet console in headless Chromium, node c stopped: the node table shows a and b up
/// with their horizons and c down with why; a range and filter typed count what `query
/// --fleet --count` counts of the nodes that answer, the note names c, and the download is
/// byte for byte the CLI's `--allow-partial` answer. Screenshot: `console-fleet.png`.
wvtest!(fleet_console_shows_the_nodes_a_node_down_and_counts_as_the_cli, needs = ["chromium", "chromedriver"], |t| {
    let lab = lab("console-fleet", 3_000);
    let dir = lab.tmp.path();
    let b = Served::start(&lab.stores[1], dir, &[]);
    let mut c = Served::start(&lab.stores[2], dir, &[]);
    let (fleet, server) = fleet_server(&lab, &b, &c, None);
    c.child.kill().unwrap();
    c.child.wait().unwrap();
    let downloads = lab.tmp.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let (from, to) = (time_arg(lab.first), time_arg(lab.last + 1));
    let filter = "tcp or vlan";
    let shot = artifacts().join("console-fleet.png");
    let seen = drive(
        None,
        dir,
        serde_json::json!({
            "mode": "fleet", "url": format!("http://localhost:{}/", server.addr.rsplit(':').next().unwrap()),
            "from": from, "to": to, "filter": filter, "downloads": downloads,
            "screenshot": shot, "timeout": 60,
        }),
    );
    assert!(problems(&seen["log"]).is_empty(), "console errors: {:?}", problems(&seen["log"]));
    let rows = seen["rows"].as_array().unwrap();
    let states: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["node"].as_str().unwrap(), r["state"].as_str().unwrap())).collect();
    assert_eq!(states, [("a", "up"), ("b", "up"), ("c", "down")], "{rows:?}");
    for r in &rows[..2] {
        let cells: Vec<&str> = r["cells"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert!(cells[5].starts_with("2023-11-14") && cells[6].starts_with("2023-11-14"), "a horizon: {cells:?}");
    }
    let down = rows[2]["cells"].to_string();
    assert!(down.contains("down") && down.contains(&c.addr), "c shown down, with why: {down}");
    assert!(seen["badge"].as_str().unwrap().eq_ignore_ascii_case("1 down"), "{}", seen["badge"]);
    assert_eq!(seen["hidden"].as_array().unwrap().len(), 4, "the one-store panels are hidden: {}", seen["hidden"]);
    let args = ["--fleet", s(&fleet), "--allow-partial"];
    let o = count(&args, filter, (lab.first, lab.last + 1));
    o.expect(0, "count");
    assert_eq!(seen["count"].to_string(), o.stdout.trim(), "the page's count is the CLI's");
    assert!(seen["note"].as_str().unwrap().contains("node c"), "the note names c: {}", seen["note"]);
    let cli = dir.join("cli.pcap");
    let (o, _) = fleet_query(&args, filter, (lab.first, lab.last + 1), &cli);
    o.expect(0, "query");
    let got = std::fs::read(seen["download"].as_str().unwrap()).unwrap();
    assert!(got == std::fs::read(&cli).unwrap(), "the page's download is the CLI's --allow-partial answer");
    drop(b);
});
