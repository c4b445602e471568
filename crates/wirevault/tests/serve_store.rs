//! A store the server cannot read (deleted, moved away, unreadable) is not
//! shown as an empty one: the API says why with a 5xx, and `/metrics` goes
//! on answering with `wirevault_store_up 0`.

use crate::util::*;
use std::path::Path;
use std::time::Duration;

fn record(store: &Path) {
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=imix,count=2000,flows=20",
        "-o",
        store.to_str().unwrap(),
        "-q",
        "--no-tune-warnings",
    ])
    .expect(0, "record");
}

#[test]
fn a_store_that_cannot_be_read_is_an_error_not_an_empty_store() {
    if !need_tools("a_store_that_cannot_be_read_is_an_error_not_an_empty_store", &["curl"]) {
        return;
    }
    let tmp = TempDir::new("serve-store-gone");
    let store = tmp.join("store");
    record(&store);
    let served = Served::start(&store, tmp.path(), &[]);
    let http = Http::new(&format!("http://{}", served.addr));
    assert_eq!(http.get("/api/v1/status", &[]).json()["disk"]["files"].as_u64().map(|n| n > 0), Some(true));
    assert!(http.get("/metrics", &[]).text().contains("wirevault_store_up 1"));
    let away = tmp.join("moved");
    std::fs::rename(&store, &away).unwrap();
    for path in ["/api/v1/status", "/api/v1/files"] {
        let r = http.get(path, &[]);
        assert_eq!(r.status, 503, "{path}: {}", r.text());
        let e = r.json()["error"].as_str().unwrap().to_string();
        assert!(e.contains("cannot read the store") && e.contains(store.to_str().unwrap()), "{path}: {e}");
    }
    let m = http.get("/metrics", &[]);
    assert_eq!(m.status, 200);
    assert!(m.text().contains("wirevault_store_up 0"), "{}", m.text());
    assert!(!m.text().contains("wirevault_store_size_bytes 0"), "no size of a store that cannot be read");
    // Back in place: served again.
    std::fs::rename(&away, &store).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(http.get("/api/v1/status", &[]).status, 200);
    assert!(http.get("/metrics", &[]).text().contains("wirevault_store_up 1"));
}
