//! No DNS rebinding: a server without tokens or client certificates
//! answers only requests addressed to a loopback name or address, or to a
//! name `--allowed-host` (or the config key `allowed-host`) gives; others
//! get 421 with one sentence, logged and counted. With tokens the check is
//! off. And every answer the server gives, those hyper gives itself before
//! any route (414, 431, 400) included, is logged and counted.

use crate::util::*;
use std::io::{Read, Write};
use std::path::PathBuf;

fn small_store(tmp: &TempDir) -> PathBuf {
    let store = tmp.join("store");
    record_synthetic(&store, "size=imix,count=2000,flows=20");
    store
}

/// What the server answers to one raw request (its status line and body).
fn raw(addr: &str, request: &[u8]) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    c.write_all(request).unwrap();
    let mut buf = Vec::new();
    let _ = c.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

wvtest!(a_foreign_host_gets_421_and_loopback_names_are_answered, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-hosts");
    let store = small_store(&tmp);
    // The allowed names from the config file (`--allowed-host` on the command line is the same list).
    let config = tmp.join("serve.toml");
    std::fs::write(&config, format!("store = {store:?}\nallowed-host = [\"recorder.lan\", \"ops.example:8443\"]\n"))
        .unwrap();
    let served = Served::with_args(&["--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"], tmp.path());
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    let http = Http::new(&format!("http://{}", served.addr));
    let with_host = |h: &str| http.with(&["-H", &format!("Host: {h}")]);

    // The attack: a page that rebound its name to 127.0.0.1.
    let r = with_host("attacker.example:8080").get("/api/v1/query", &[("filter", "tcp")]);
    assert_eq!(r.status, 421, "{}", r.text());
    let e = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        e.contains("DNS rebinding") && e.contains("--allowed-host") && e.contains(&format!("localhost:{port}")),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "one sentence: {e}");
    // As a browser does it: the name resolved to loopback, the page and the API refused.
    let resolve = format!("attacker.example:{port}:127.0.0.1");
    let rebound = Http::new(&format!("http://attacker.example:{port}")).with(&["--resolve", &resolve]);
    for path in ["/", "/console.js", "/api/v1/status", "/api/v1/count", "/metrics"] {
        assert_eq!(rebound.get(path, &[]).status, 421, "{path}");
    }
    for h in ["recorder.lan.attacker.example", "localhost.attacker.example", "10.0.0.1", "ops.example:9000", "[::2]"] {
        assert_eq!(with_host(h).get("/api/v1/status", &[]).status, 421, "Host: {h}");
    }
    // An absolute request URI names its host too.
    let a = raw(
        &served.addr,
        b"GET http://attacker.example/api/v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(a.starts_with("HTTP/1.1 421"), "{a}");

    // Loopback names and addresses, with any port or none, and the allowed names.
    let ok = [
        format!("localhost:{port}"),
        "LOCALHOST".to_string(),
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_string(),
        format!("[::1]:{port}"),
        "recorder.lan".to_string(),
        format!("Recorder.LAN:{port}"),
        "ops.example:8443".to_string(),
    ];
    for h in &ok {
        assert_eq!(with_host(h).get("/api/v1/status", &[]).status, 200, "Host: {h}\n{}", served.log());
    }
    let local = Http::new(&format!("http://localhost:{port}"));
    assert_eq!(local.get("/", &[]).status, 200, "the console from http://localhost:{port}/");
    assert_eq!(local.get("/api/v1/count", &[]).json()["matched"], 2000);

    // Logged (with the name asked for) and counted.
    let log = served.log();
    assert!(
        log.lines().any(|l| l.contains("\"GET /api/v1/query?filter=tcp\" host=\"attacker.example:8080\" 421")),
        "{log}"
    );
    let m = http.get("/metrics", &[]).text();
    assert!(m.contains("wirevault_http_requests_total{code=\"421\"} 12"), "{m}");

    // A name that is not one: refused at start-up with one sentence.
    let o = run_wirevault(&["serve", store.to_str().unwrap(), "--allowed-host", "not a host"]);
    o.expect(2, "a bad --allowed-host");
    assert!(o.stderr.contains("is not a host name or address"), "{}", o.stderr);
    assert_no_panic(&served.log(), "serve");
});

/// With tokens (or client certificates) the page of a rebound name has no
/// token to send: the check is off, and the token is what is checked.
wvtest!(with_tokens_any_host_is_answered_to_the_right_token, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-hosts-tokens");
    let store = small_store(&tmp);
    let tokens = tmp.join("tokens");
    std::fs::write(&tokens, "ops:0123456789abcdef0123456789abcdef\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let served = Served::start(&store, tmp.path(), &["--token-file", tokens.to_str().unwrap()]);
    let http = Http::new(&format!("http://{}", served.addr)).with(&["-H", "Host: recorder.example.org"]);
    assert_eq!(http.get("/api/v1/status", &[]).status, 401);
    let bearer = http.with(&["-H", "Authorization: Bearer 0123456789abcdef0123456789abcdef"]);
    assert_eq!(bearer.get("/api/v1/count", &[]).json()["matched"], 2000);
});

wvtest!(answers_hyper_gives_itself_are_logged_and_counted, needs = ["curl", "promtool"], |t| {
    let tmp = TempDir::new("serve-automatic");
    let store = small_store(&tmp);
    let served = Served::start(&store, tmp.path(), &[]);
    // A URI past 64 KiB: 414.
    let long = format!("GET /api/v1/count?filter={} HTTP/1.1\r\nHost: localhost\r\n\r\n", "a".repeat(70_000));
    let a = raw(&served.addr, long.as_bytes());
    assert!(a.starts_with("HTTP/1.1 414"), "{a}");
    // More than 100 header fields: 431.
    let mut many = String::from("GET /api/v1/status HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..120 {
        many.push_str(&format!("X-Field-{i}: {i}\r\n"));
    }
    many.push_str("\r\n");
    let a = raw(&served.addr, many.as_bytes());
    assert!(a.starts_with("HTTP/1.1 431"), "{a}");
    // Not HTTP: 400.
    let a = raw(&served.addr, b"GET / HTTP/1.1\r\nHost localhost\r\n\r\n");
    assert!(a.starts_with("HTTP/1.1 400"), "{a}");
    // curl sees the same, and is counted too.
    let code = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://{}/api/v1/status?x={}", served.addr, "b".repeat(70_000)))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&code.stdout), "414");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let want = [
        ("\"-\" 414 the request's URI is longer than 65,534 bytes", 2),
        ("\"-\" 431 the request's head is too large", 1),
        ("\"-\" 400 the request does not parse as HTTP/1.1", 1),
    ];
    for (line, n) in want {
        while served.log().lines().filter(|l| l.contains(line)).count() < n {
            assert!(std::time::Instant::now() < deadline, "{n} log line(s) {line:?}:\n{}", served.log());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let m = Http::new(&format!("http://{}", served.addr)).get("/metrics", &[]);
    promtool_ok(&m.body, "after refused heads");
    for (code, n) in [(414, 2), (431, 1), (400, 1)] {
        assert!(
            m.text().contains(&format!("wirevault_http_requests_total{{code=\"{code}\"}} {n}")),
            "{code}: {}",
            m.text()
        );
    }
    assert_no_panic(&served.log(), "serve");
});
