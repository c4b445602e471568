//! A store the server cannot read (deleted, moved away, unreadable) is not
//! shown as an empty one: every endpoint of the API says why with a 503,
//! and `/metrics` goes on answering with `wirevault_store_up 0`.

use crate::util::*;
use std::path::Path;
use std::time::Duration;

fn record(store: &Path) {
    record_synthetic(store, "size=imix,count=2000,flows=20");
}

wvtest!(a_store_that_cannot_be_read_is_an_error_not_an_empty_store, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-store-gone");
    let store = tmp.join("store");
    record(&store);
    let served = Served::start(&store, tmp.path(), &[]);
    let http = Http::new(&format!("http://{}", served.addr));
    assert_eq!(http.get("/api/v1/status", &[]).json()["disk"]["files"].as_u64().map(|n| n > 0), Some(true));
    assert!(http.get("/metrics", &[]).text().contains("wirevault_store_up 1"));
    let away = tmp.join("moved");
    std::fs::rename(&store, &away).unwrap();
    every_endpoint_says_the_store_cannot_be_read(&http, &store);
    // Back in place: served again.
    std::fs::rename(&away, &store).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(http.get("/api/v1/status", &[]).status, 200);
    assert!(http.get("/metrics", &[]).text().contains("wirevault_store_up 1"));
    // Deleted while served: the same.
    std::fs::remove_dir_all(&store).unwrap();
    every_endpoint_says_the_store_cannot_be_read(&http, &store);
    assert_no_panic(&served.log(), "serve");
});

/// Every JSON endpoint and the pcap export answer 503 with the sentence
/// that names the store; `/metrics` answers with `wirevault_store_up 0`.
fn every_endpoint_says_the_store_cannot_be_read(http: &Http, store: &Path) {
    let selection = [("filter", "udp"), ("limit", "5")];
    let endpoints: [(&str, &[(&str, &str)]); 6] = [
        ("/api/v1/status", &[]),
        ("/api/v1/files", &[("from", "2020-01-01T00:00:00Z")]),
        ("/api/v1/count", &selection),
        ("/api/v1/query", &selection),
        ("/api/v1/histogram", &[("filter", "udp"), ("step", "1s")]),
        ("/api/v1/packets", &selection),
    ];
    for (path, given) in endpoints {
        for params in [&[][..], given] {
            let r = http.get(path, params);
            assert_eq!(r.status, 503, "{path} {params:?}: {}", r.text());
            let e = r.json()["error"].as_str().unwrap().to_string();
            assert!(e.contains("cannot read the store") && e.contains(store.to_str().unwrap()), "{path}: {e}");
            assert_eq!(e.lines().count(), 1, "{path}: one sentence: {e}");
        }
    }
    let m = http.get("/metrics", &[]);
    assert_eq!(m.status, 200);
    assert!(m.text().contains("wirevault_store_up 0"), "{}", m.text());
    assert!(!m.text().contains("wirevault_store_size_bytes 0"), "no size of a store that cannot be read");
}

/// A stream directory the server may not read: `packets` carries the
/// query's warnings as `count` does, and they name the real cause
/// (permission denied), not a missing file. The server runs as nobody
/// (root reads any mode).
wvtest!(packets_carries_the_warnings_and_they_name_the_cause, needs = [root, "curl", "setpriv"], |t| {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new("serve-packets-warn");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = tmp.join("store");
    record(&store);
    // Readable by nobody, but for one stream directory.
    run_ok(std::process::Command::new("chmod").args(["-R", "a+rX"]).arg(&store));
    let stream = store.join("stream-000");
    std::fs::set_permissions(&stream, std::fs::Permissions::from_mode(0o000)).unwrap();
    let err = tmp.join("serve.err");
    let child = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin(), "serve"])
        .arg(&store)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let _bg = Background(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let addr = loop {
        if let Some(a) = served_addr(&std::fs::read_to_string(&err).unwrap_or_default()) {
            break a;
        }
        assert!(std::time::Instant::now() < deadline, "{}", std::fs::read_to_string(&err).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(20));
    };
    let http = Http::new(&format!("http://{addr}"));
    let count = http.get("/api/v1/count", &[]).json();
    let warned = count["warnings"].as_array().cloned().unwrap_or_default();
    assert!(!warned.is_empty(), "{count}");
    let r = http.get("/api/v1/packets", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let p = r.json();
    assert_eq!(p["warnings"], count["warnings"], "{p}");
    let w = warned[0].as_str().unwrap();
    assert!(w.contains("ermission denied") && !w.contains("missing"), "{w}");
});
