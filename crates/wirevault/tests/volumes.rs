//! Several volumes (`record --volume DIR`): capture files spread over two
//! loop-mounted ext4 file systems, one of which fills up (by itself, or
//! all at once mid-recording); `query`, `repair` and `index` see one store;
//! a catalog line naming a file outside the volumes is refused.
//!
//! Needs root (loop mounts, and the veth pair of the live test), losetup,
//! mkfs.ext4 and tcpdump; skips without them (fails in CI).

use crate::util::*;
use std::path::{Path, PathBuf};

const TOOLS: &[&str] = &["losetup", "mkfs.ext4", "mount", "umount", "fallocate", "tcpdump"];

/// The capture files of a store as its catalog names them, with their real
/// paths (`@k/...` through `volumes.json`).
fn files(store: &Path) -> Vec<(String, PathBuf)> {
    let reg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("volumes.json")).unwrap()).unwrap();
    let vol = |k: &str| {
        reg["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["id"].as_u64().is_some_and(|i| i.to_string() == k))
            .map(|v| v["path"].clone())
    };
    catalog(store)
        .iter()
        .map(|e| {
            let rel = e["file"].as_str().unwrap().to_string();
            let real = match rel.strip_prefix('@').and_then(|r| r.split_once('/')) {
                Some((k, rest)) => PathBuf::from(vol(k).unwrap().as_str().unwrap()).join(rest),
                None => store.join(&rel),
            };
            (rel, real)
        })
        .collect()
}

/// `wirevault query STORE FILTER -w OUT` against tcpdump FILTER over every
/// capture file of the store: the same frames (sorted by time and bytes:
/// query merges streams by time, the files are read one after another).
fn assert_query_equals_tcpdump(store: &Path, tmp: &Path, filter: &str) -> usize {
    let out = tmp.join(format!("query-{}.pcap", now_ns()));
    let o = run_wirevault(&["query", store.to_str().unwrap(), filter, "-w", out.to_str().unwrap()]);
    o.expect(0, "query over both volumes");
    assert!(!o.stderr.contains("warning"), "query warned: {}", o.stderr);
    let mut got = tcpdump_frames(&out, &[], tmp).1;
    let mut want: Vec<Rec> = files(store).iter().flat_map(|(_, p)| tcpdump_frames(p, &[filter], tmp).1).collect();
    let key = |r: &Rec| (r.ts_ns, r.data.clone());
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got.len(), want.len(), "query vs tcpdump over all files ({filter})");
    assert!(got == want, "query and tcpdump differ ({filter})");
    got.len()
}

/// A synthetic recording (one stream) onto the store and a small second
/// volume: files take turns over the two until the small one is full; it is
/// then taken out of rotation with a sentence and the rest goes to the
/// store; nothing is lost, query sees both, repair and index find nothing
/// to do but rebuild a removed index on the volume; hostile catalog lines
/// naming paths outside the volumes are refused.
wvtest!(synthetic_over_two_volumes_one_fills_nothing_lost, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("volumes-synthetic");
    let a = LoopFs::new("vol-a", 256).expect("loop-mounted ext4 (a)");
    let b = LoopFs::new("vol-b", 24).expect("loop-mounted ext4 (b)");
    let store = a.dir.join("store");
    let n = 200_000u64;
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        &format!("size=500,count={n}"),
        "-o",
        store.to_str().unwrap(),
        "--volume",
        b.dir.to_str().unwrap(),
        "--file-size",
        "2M",
        "--buffer",
        "64M",
        "-q",
    ]);
    // About 100 MB: the 24 MiB volume fills and is taken out.
    assert!(o.stderr.contains("is full") && o.stderr.contains("taken out of rotation"), "{}", o.stderr);
    assert_eq!(o.code, Some(1), "a volume taken out is an error at the end: {}", o.stderr);
    assert_no_panic(&o.stderr, "record");
    let c = final_counters(&store);
    assert_eq!((c.received, c.written, c.write_error), (n, n, 0), "nothing lost");
    let fs = files(&store);
    let on_b = fs.iter().filter(|(rel, _)| rel.starts_with("@1/stream-000/")).count();
    let on_a = fs.iter().filter(|(rel, _)| rel.starts_with("stream-000/")).count();
    assert!(on_b >= 2 && on_a > on_b, "files on the store {on_a}, on the volume {on_b}");
    for (rel, real) in &fs {
        assert!(real.is_file(), "{rel} at {}", real.display());
        if rel.starts_with('@') {
            assert!(real.starts_with(&b.dir), "{rel} is not on the volume");
        }
    }
    let stored: usize = fs.iter().map(|(_, p)| read_capture(p).1.len()).sum();
    assert_eq!(stored as u64, n, "packets in the files");
    assert!(assert_query_equals_tcpdump(&store, tmp.path(), "udp and dst port 5003") > 0);
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    o.expect(0, "count");
    assert!(o.stdout.contains(&n.to_string()), "count over both volumes: {}", o.stdout);

    // repair and index see the volume: an index removed there is rebuilt.
    let (rel, real) = fs.iter().find(|(rel, _)| rel.starts_with('@')).unwrap().clone();
    let idx = PathBuf::from(format!("{}.idx", real.display()));
    std::fs::remove_file(&idx).unwrap();
    let o = run_wirevault(&["repair", store.to_str().unwrap()]);
    o.expect(0, "repair");
    assert!(o.stderr.contains("rebuilt 1 index"), "{}", o.stderr);
    assert!(idx.is_file(), "index of {rel} not rebuilt on the volume");
    let o = run_wirevault(&["index", store.to_str().unwrap()]);
    o.expect(0, "index");
    assert!(o.stderr.contains(&format!("{} already indexed", fs.len())), "{}", o.stderr);

    // Hostile lines: a volume the store does not have, `..` out of a
    // volume, a volume number in another spelling. Each is refused, nothing
    // outside is read.
    let secret = tmp.join("secret.pcap");
    std::fs::copy(&real, &secret).unwrap();
    let line = |file: &str| {
        format!("{{\"stream\":0,\"file\":\"{file}\",\"index\":null,\"format\":\"pcap\",\"linktype\":1,\"snaplen\":262144,\"first_ns\":0,\"last_ns\":18446744073709551615,\"packets\":1,\"bytes\":100}}\n")
    };
    let up = "../".repeat(12) + secret.strip_prefix("/").unwrap().to_str().unwrap();
    let hostile =
        [line("@7/stream-000/x.pcap"), line(&format!("@1/stream-000/{up}")), line("@01/stream-000/x.pcap")].concat();
    let cat = store.join("catalog.jsonl");
    let mut text = std::fs::read_to_string(&cat).unwrap();
    text.push_str(&hostile);
    std::fs::write(&cat, text).unwrap();
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    assert!(o.stdout.contains(&n.to_string()), "count with hostile lines: {} {}", o.stdout, o.stderr);
    assert!(o.stderr.contains("rejected"), "{}", o.stderr);
    assert!(o.stderr.contains("@7") && o.stderr.contains("does not have"), "{}", o.stderr);
    assert_no_panic(&o.stderr, "query");
    // repair drops the three lines and keeps every other.
    // (Exit 1: it names the rejected lines as problems.)
    run_wirevault(&["repair", store.to_str().unwrap()]).expect(1, "repair of hostile lines");
    let after: Vec<String> = files(&store).into_iter().map(|(rel, _)| rel).collect();
    assert_eq!(after.len(), fs.len(), "{after:?}");
    assert!(after.iter().all(|r| !r.contains("..") && !r.starts_with("@7") && !r.starts_with("@01")));
});

/// Two capture workers on two volumes (stream i on volume i); mid-recording
/// the second volume is filled up by another program: the write that fails
/// takes it out of rotation with a sentence, stream 1 goes on on the
/// store's volume, stream 0 keeps to its own, the counters add up (only what
/// was in flight on the full volume is a write error), and query sees every
/// stored frame once, byte for byte.
wvtest!(live_two_workers_two_volumes_one_filled_mid_recording, needs = [root, TOOLS, "tcpreplay"], |t| {
    live_two_volumes(&[]);
});

/// The same on the zero-copy path (the kernel's ring blocks written as
/// pcapng): a failed block write takes the volume out, and the next block
/// opens a file on the store's volume.
wvtest!(zero_copy_two_workers_two_volumes_one_filled_mid_recording, needs = [root, TOOLS, "tcpreplay"], |t| {
    live_two_volumes(&["--zero-copy", "--format", "pcapng"]);
});

fn live_two_volumes(extra: &[&str]) {
    let _g = heavy_lock();
    let tmp = TempDir::new("volumes-live");
    let a = LoopFs::new("vol-la", 256).expect("loop-mounted ext4 (a)");
    let b = LoopFs::new("vol-lb", 128).expect("loop-mounted ext4 (b)");
    let store = a.dir.join("store");
    let pair = VethPair::new();
    let n = 2000u32;
    let sent = test_frames(n, 1_700_000_000_000_000_000);
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, false, &sent);
    let mut r = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &[
            "-i",
            pair.if_b,
            "--workers",
            "2",
            "--volume",
            b.dir.to_str().unwrap(),
            "--file-size",
            "1M",
            "--buffer",
            "64M",
            "-q",
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect::<Vec<_>>(),
    );
    r.wait_ready();
    let send = || {
        run_ok(VethPair::exec(&pair.ns_a, "tcpreplay").args(["-i", pair.if_a, "--pps", "4000"]).arg(&pcap));
    };
    send();
    r.wait_received(n as u64);
    // Fill the second volume: what is left of it, and then some.
    let st = run_ok(std::process::Command::new("stat").args(["-f", "-c", "%a %S"]).arg(&b.dir));
    let s = String::from_utf8_lossy(&st.stdout);
    let mut it = s.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    let free = it.next().unwrap() * it.next().unwrap();
    let _ = std::process::Command::new("fallocate").args(["-l", &free.to_string()]).arg(b.dir.join("hog")).status();
    let _ = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=64K", "status=none"])
        .arg(format!("of={}", b.dir.join("hog2").display()))
        .stderr(std::process::Stdio::null())
        .status();
    send();
    r.wait_received(2 * n as u64);
    send();
    r.wait_received(3 * n as u64);
    let o = r.terminate();
    assert!(o.stderr.contains("taken out of rotation"), "{}", o.stderr);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert_no_panic(&o.stderr, "record");
    let c = final_counters(&store);
    assert_eq!(c.received, 3 * n as u64);
    assert_eq!(c.written + c.write_error, c.received, "only write errors may be missing");
    assert!(c.written > 2 * n as u64, "most frames stored: {} of {}", c.written, c.received);
    if extra.contains(&"--zero-copy") {
        for e in catalog(&store) {
            assert_eq!(e["path"], "zero-copy", "written straight from the ring: {e}");
        }
    }
    let fs = files(&store);
    // Only the file in flight on the full volume was lost (or cut), and
    // stream 1 went on on the store's volume after it.
    assert!(c.write_error < n as u64, "more than in flight lost: {}", c.write_error);
    assert!(fs.iter().any(|(rel, _)| rel.starts_with("stream-001/")), "stream 1 did not move: {fs:?}");
    let parts: Vec<_> = std::fs::read_dir(b.dir.join("stream-001")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(!parts.iter().any(|n| n.to_string_lossy().ends_with(".part")), "left on the full volume: {parts:?}");
    assert!(!fs.iter().any(|(rel, _)| rel.starts_with("@1/stream-000/")), "stream 0 stays on its volume");
    // Every stored frame is a sent one, intact; stream 0 lost nothing.
    let mut count = vec![0u32; n as usize];
    let mut stream0 = 0u64;
    for (rel, p) in &fs {
        for g in read_capture(p).1 {
            let seq = sent.iter().position(|f| f.data == g.data).unwrap_or_else(|| panic!("{rel}: not a sent frame"));
            count[seq] += 1;
            stream0 += u64::from(rel.starts_with("stream-000/"));
        }
    }
    let stored: u64 = count.iter().map(|&c| u64::from(c)).sum();
    assert_eq!(stored, c.written, "frames in the files vs written");
    assert!(count.iter().all(|&k| k <= 3), "a frame stored more often than sent");
    // Stream 0's own account: everything it received is written, in its files.
    let st = stats(&store);
    let s0 = &st["streams"][0];
    assert!(stream0 > 0, "stream 0 stored nothing");
    assert_eq!(s0["written"], s0["received"], "stream 0 on the healthy volume: {st}");
    assert_eq!((s0["written"].as_u64(), s0["dropped"]["write_error"].as_u64()), (Some(stream0), Some(0)), "{st}");
    let per: (u64, u64) = st["streams"]
        .as_array()
        .unwrap()
        .iter()
        .fold((0, 0), |(r, w), s| (r + s["received"].as_u64().unwrap(), w + s["written"].as_u64().unwrap()));
    assert_eq!(per, (c.received, c.written), "the streams add up to the totals: {st}");
    assert!(assert_query_equals_tcpdump(&store, tmp.path(), "ip") > 0);
}

/// `--max-size PERCENT` with several volumes is a share of them all (each
/// file system once), not of the store directory's alone: with two disks
/// the budget was half of what was asked. The refusal of a budget too small
/// for the file size says the bytes it computed.
wvtest!(a_percentage_budget_covers_every_volume, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let a = LoopFs::new("pct-a", 64).expect("loop-mounted ext4 (a)");
    let b = LoopFs::new("pct-b", 32).expect("loop-mounted ext4 (b)");
    let total = |p: &Path| -> u64 {
        let o = std::process::Command::new("stat").args(["-f", "-c", "%b %S"]).arg(p).output().unwrap();
        let t = String::from_utf8_lossy(&o.stdout);
        let v: Vec<u64> = t.split_whitespace().map(|x| x.parse().unwrap()).collect();
        v[0] * v[1]
    };
    let store = a.dir.join("store");
    let budget_of = |extra: &[&str]| -> u64 {
        let mut args = vec!["record", "--synthetic", "count=10", "-o", store.to_str().unwrap(), "--max-size", "1%"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--file-size", "64M", "-q"]);
        let o = run_wirevault(&args);
        o.expect(2, "a budget too small");
        let m = o.stderr.split(" bytes)").next().and_then(|h| h.rsplit('(').next()).unwrap_or_default().to_string();
        m.parse().unwrap_or_else(|_| panic!("no byte count in: {}", o.stderr))
    };
    let one = budget_of(&[]);
    assert_eq!(one, total(&a.dir) / 100, "the store's volume alone");
    let b_dir = b.dir.join("vol");
    let two = budget_of(&["--volume", b_dir.to_str().unwrap()]);
    assert_eq!(two, (total(&a.dir) + total(&b.dir)) / 100, "both volumes");
    // The same file system given twice counts once.
    let same = a.dir.join("more");
    assert_eq!(budget_of(&["--volume", same.to_str().unwrap()]), one);
});

/// Retention with several volumes (`--max-size`, deleting the oldest): a
/// volume that has no room for the next file deletes its own oldest files,
/// whatever the store's budget says, instead of being taken out of
/// rotation; the recording goes on over both to the end. (Before, the
/// small volume was taken out as full below the budget, then the store's
/// filled up until a write failed: exit 3, packets lost.)
wvtest!(retention_deletes_on_each_volume_that_fills, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let a = LoopFs::new("ret-a", 64).expect("loop-mounted ext4 (a)");
    let b = LoopFs::new("ret-b", 24).expect("loop-mounted ext4 (b)");
    let store = a.dir.join("store");
    let n = 400_000u64;
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        &format!("size=500,count={n}"),
        "-o",
        store.to_str().unwrap(),
        "--volume",
        b.dir.to_str().unwrap(),
        "--file-size",
        "2M",
        "--buffer",
        "64M",
        "--max-size",
        "90%",
        "-q",
    ]);
    assert_no_panic(&o.stderr, "record");
    o.expect(0, "retention over two volumes");
    assert!(!o.stderr.contains("taken out of rotation"), "{}", o.stderr);
    // The start-up check counts the other volume's space in.
    assert!(!o.stderr.contains("more than the volume can hold"), "{}", o.stderr);
    let c = final_counters(&store);
    assert_eq!((c.received, c.written, c.write_error), (n, n, 0), "every packet written: {}", o.stderr);
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("stats.json")).unwrap()).unwrap();
    // Both volumes still hold files, every catalogued file is there, and
    // retention deleted some of those written.
    let fs = files(&store);
    assert!((fs.len() as u64) < stats["files"].as_u64().unwrap(), "retention deleted nothing: {stats}");
    assert!(fs.iter().any(|(rel, _)| rel.starts_with("@1/")), "none left on the volume");
    assert!(fs.iter().any(|(rel, _)| rel.starts_with("stream-000/")), "none left on the store");
    let kept: usize = fs.iter().map(|(_, p)| read_capture(p).1.len()).sum();
    assert!(kept > 0 && (kept as u64) < n, "{kept} of {n} kept");
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    o.expect(0, "count");
    assert!(o.stdout.contains(&kept.to_string()), "query counts what the files hold: {} {}", o.stdout, o.stderr);
});

/// The store directory's own file system fails mid-recording (with a
/// second volume still fine): the next catalog line cannot be written, and
/// the recording stops with one sentence that names the catalog and says
/// how to get the files back, exit non-zero. (Before, the store directory
/// was taken out of rotation like any volume and recording went on on the
/// other, writing files no query saw while the summary called every packet
/// written and every file valid.)
wvtest!(the_store_directory_failing_stops_the_recording, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("volumes-storefail");
    let a = LoopFs::new("sf-a", 128).expect("loop-mounted ext4 (a)");
    let b = LoopFs::new("sf-b", 128).expect("loop-mounted ext4 (b)");
    let store = a.dir.join("store");
    // Paced: about 16 files a second over both volumes, for much longer than the test waits.
    let mut r = Recorder::start(
        None,
        &store,
        tmp.path(),
        &[
            "--synthetic",
            "size=500,rate=40000,count=100M",
            "--volume",
            b.dir.to_str().unwrap(),
            "--file-size",
            "1M",
            "--buffer",
            "64M",
            "-q",
        ],
    );
    r.wait_ready();
    r.wait_counter("written", 40_000);
    if !a.fail() {
        eprintln!("skipped: this kernel cannot make ext4 fail on purpose");
        drop(r);
        return;
    }
    // It stops by itself (the count would take 40 minutes).
    let o = r.wait(std::time::Duration::from_secs(60));
    assert_no_panic(&o.stderr, "record");
    assert_ne!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stderr.contains("cannot write the catalog") && o.stderr.contains("wirevault repair"), "{}", o.stderr);
});

/// A volume whose marker is gone (its disk not mounted: the mount point is
/// an empty directory) is said once by `query`, with the advice to mount
/// it; its files are not also called missing or damaged, nor sent to
/// `wirevault repair`; the count is that of the other files (tcpdump's),
/// and `--strict` exits 1 for the files left out. Mounting it back (the
/// marker back) brings every packet back.
wvtest!(a_volume_not_mounted_is_said_once_with_the_advice_to_mount_it, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("vol-unmounted");
    let (store, vol) = (tmp.join("store"), tmp.join("vol1"));
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=200,count=20000",
        "--file-size",
        "1M",
        "--volume",
        vol.to_str().unwrap(),
        "-o",
        store.to_str().unwrap(),
        "-q",
    ])
    .expect(0, "record onto two volumes");
    let all = files(&store);
    let (on_vol, here): (Vec<_>, Vec<_>) = all.iter().partition(|(rel, _)| rel.starts_with("@1/"));
    assert!(!on_vol.is_empty() && !here.is_empty(), "files on both volumes: {all:?}");
    let count =
        |files: &[&(String, PathBuf)]| -> usize { files.iter().map(|(_, p)| tcpdump_count(p, "") as usize).sum() };
    let (want_here, want_all) = (count(&here), count(&all.iter().collect::<Vec<_>>()));
    let marker = vol.join(".wirevault-volume");
    let saved = std::fs::read(&marker).unwrap();
    std::fs::remove_file(&marker).unwrap();

    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    o.expect(0, "query with volume @1 not mounted");
    assert_eq!(o.stdout.trim(), want_here.to_string(), "the packets of the mounted files: {}", o.stderr);
    let lines: Vec<&str> = o.stderr.lines().filter(|l| l.starts_with("wirevault:")).collect();
    assert_eq!(lines.len(), 1, "one sentence for the volume:\n{}", o.stderr);
    let l = lines[0];
    assert!(l.contains(vol.to_str().unwrap()) && l.contains("mount it there"), "{l}");
    assert!(l.contains(&format!("its {} catalogued file(s)", on_vol.len())), "{l}");
    assert!(!o.stderr.contains("repair") && !o.stderr.contains("missing"), "{}", o.stderr);
    for (rel, _) in &on_vol {
        let name = rel.rsplit('/').next().unwrap();
        assert!(!o.stderr.contains(name), "{name} is named: {}", o.stderr);
    }
    let strict = run_wirevault(&["query", store.to_str().unwrap(), "--count", "--strict"]);
    strict.expect(1, "--strict with a volume not mounted");
    assert!(strict.stderr.contains(&format!("--strict: {} damaged or missing", on_vol.len())), "{}", strict.stderr);

    std::fs::write(&marker, saved).unwrap();
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count", "--strict"]);
    o.expect(0, "query with the volume back");
    assert_eq!(o.stdout.trim(), want_all.to_string());
    assert!(!o.stderr.contains("wirevault:"), "{}", o.stderr);
});
