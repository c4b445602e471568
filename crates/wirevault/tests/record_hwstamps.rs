//! `record --timestamps hw|sw|auto` through the real binary on a veth pair in
//! a namespace. veth has no hardware clock (`ethtool -T` says so, checked
//! here too), so: `hw` is refused with one sentence and exit 2 before any
//! store exists; `auto` falls back to the kernel's stamps with a note;
//! every frame is counted as software-stamped in stats.json (per stream, and
//! the counts equal what tcpdump reads from the stored files); the catalog
//! names the source of every file and `wirevault timestamps STORE` shows
//! it; a catalog from before the key existed still reads (as unknown).
//! What a real NIC's hardware stamps would add is untested (DESIGN.md).

use crate::util::*;
use serde_json::Value;
use std::path::Path;

fn stamps_json(store: &Path) -> Value {
    let o = run_wirevault(&["timestamps", "--json", store.to_str().unwrap()]);
    o.expect(0, "timestamps STORE");
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.stdout))
}

wvtest!(timestamps_hw_on_a_veth_is_refused_with_exit_2, needs = [root, "ethtool"], |t| {
    let tmp = TempDir::new("hwstamps-refuse");
    let pair = VethPair::new();
    // The oracle: ethtool -T shows no hardware receive stamping on a veth.
    let e = run_ok(VethPair::exec(&pair.ns_b, "ethtool").args(["-T", pair.if_b]));
    let text = String::from_utf8_lossy(&e.stdout);
    assert!(!text.lines().any(|l| l.trim_start().starts_with("hardware-receive")), "{text}");
    let store = tmp.join("store");
    let o = Outcome::from_output(
        VethPair::exec(&pair.ns_b, bin())
            .args(["record", "-o", store.to_str().unwrap(), "-i", pair.if_b, "--timestamps", "hw", "-c", "1"])
            .output()
            .unwrap(),
    );
    o.expect(2, "--timestamps hw on a veth");
    assert_eq!(o.stderr.trim().lines().count(), 1, "one sentence: {}", o.stderr);
    assert!(o.stderr.contains(pair.if_b) && o.stderr.contains("--timestamps sw or auto"), "{}", o.stderr);
    assert!(!store.exists(), "a refused recording creates no store");
    // hw is for live interfaces only.
    let pcap = tmp.join("in.pcap");
    write_pcap(&pcap, 1, 65535, false, &test_frames(3, 1_700_000_000_000_000_000));
    let o =
        run_wirevault(&["record", "-o", store.to_str().unwrap(), "-r", pcap.to_str().unwrap(), "--timestamps", "hw"]);
    o.expect(2, "--timestamps hw with --read");
    assert_eq!(o.stderr.trim().lines().count(), 1, "one sentence: {}", o.stderr);
    assert!(!store.exists());
});

wvtest!(timestamps_auto_falls_back_to_software_and_the_catalog_says_so, needs = [root, "tcpreplay", "tcpdump"], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("hwstamps-auto");
    let pair = VethPair::new();
    let n = 600u64;
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, false, &test_frames(n as u32, 1_700_000_000_000_000_000));
    for (choice, note) in [("auto", true), ("sw", false)] {
        let store = tmp.join(format!("store-{choice}"));
        let args =
            ["-i", pair.if_b, "--timestamps", choice, "--workers", "2", "--buffer", "64M", "--file-size", "256K"];
        let mut r = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &args);
        r.wait_ready();
        run_ok(VethPair::exec(&pair.ns_a, "tcpreplay").args(["-i", pair.if_a, "--pps", "5000"]).arg(&pcap));
        r.wait_received(n);
        let o = r.terminate();
        o.expect(0, choice);
        let said = o.stderr.contains(&format!("note: {} has no hardware receive timestamps", pair.if_b));
        assert_eq!(said, note, "{choice}: {}", o.stderr);

        // stats.json: every frame software-stamped, per stream, summing to what tcpdump reads.
        let st = stats(&store);
        let ts = &st["timestamps"];
        assert_eq!(ts["source"], "software", "{st}");
        assert_eq!(ts["hardware"], 0, "{st}");
        let stored = tcpdump_store_count(&store);
        assert_eq!(stored, n, "{choice}: tcpdump reads every sent frame");
        assert_eq!(ts["software"].as_u64(), Some(stored), "{st}");
        let streams = ts["streams"].as_array().unwrap();
        assert_eq!(streams.len(), 2);
        let per: u64 = streams.iter().map(|s| s["software"].as_u64().unwrap()).sum();
        assert_eq!(per, stored);
        assert!(streams.iter().all(|s| s["hardware"] == 0));

        // The catalog names the source of every file; `timestamps` shows it per stream.
        let cat = catalog(&store);
        assert!(cat.len() >= 2, "{cat:?}");
        assert!(cat.iter().all(|e| e["timestamps"] == "software"), "{cat:?}");
        let out = stamps_json(&store);
        for s in out["inputs"][0]["streams"].as_array().unwrap() {
            let id = s["stream"].as_u64().unwrap();
            let files = cat.iter().filter(|e| e["stream"].as_u64() == Some(id)).count() as u64;
            assert_eq!(s["sources"], serde_json::json!({ "software": files }), "stream {id}: {s}");
        }
    }

    // --read keeps the files' own times: the catalog says "file".
    let store = tmp.join("store-read");
    run_wirevault(&["record", "-q", "-o", store.to_str().unwrap(), "-r", pcap.to_str().unwrap()]).expect(0, "--read");
    let cat = catalog(&store);
    assert!(cat.iter().all(|e| e["timestamps"] == "file"), "{cat:?}");
    assert_eq!(stats(&store)["timestamps"]["source"], "file");

    // A catalog written before the key existed: every reader still takes it, its source is unknown.
    let old = tmp.join("store-auto");
    let text = std::fs::read_to_string(old.join("catalog.jsonl")).unwrap();
    let stripped = text.replace(r#","timestamps":"software""#, "");
    assert_ne!(stripped, text);
    std::fs::write(old.join("catalog.jsonl"), stripped).unwrap();
    let out = stamps_json(&old);
    let streams = out["inputs"][0]["streams"].as_array().unwrap();
    let total: u64 = streams.iter().map(|s| s["packets"].as_u64().unwrap()).sum();
    assert_eq!(total, n);
    assert!(streams.iter().all(|s| s["sources"].as_object().unwrap().keys().eq(["unknown"])), "{out}");
    let o = run_wirevault(&["timestamps", old.to_str().unwrap()]);
    o.expect(0, "timestamps (text) of an old catalog");
    assert!(o.stdout.contains("stamped by: unknown"), "{}", o.stdout);
});
