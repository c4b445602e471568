//! The zero-copy block path (`record --format pcapng --zero-copy`) end to
//! end: the live scenarios of `record_live` on the path that writes the
//! kernel's ring blocks in place. Frames (sizes 60 to 9018, IPv4, VLAN,
//! QinQ, IPv6 up to 9000-byte jumbo frames, tagged or not) must come back
//! byte for byte as they were sent, as libpcap reads them (`tcpdump -r`),
//! and as `wirevault query` returns them; tshark, capinfos and tcpdump read
//! every file without a word; a kill -9 and `wirevault repair` keep every packet written. Needs
//! root, tcpreplay, tcpdump, capinfos and tshark; skips without them
//! (fails in CI).

use crate::record_live::{assert_ts_in_window, paths, replay, Live, N, TOOLS};
use crate::util::*;
use std::process::{Command, Stdio};

const ZC: &[&str] = &["--format", "pcapng", "--zero-copy"];

fn zc(extra: &[&str]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ZC.to_vec();
    for e in extra {
        v.push(Box::leak(e.to_string().into_boxed_str()));
    }
    v
}

/// tshark reads each file to the end without a message (it prints
/// "Running as user root" when run as root: not a file problem).
fn assert_tshark_reads(files: &[StoredFile]) {
    for f in files {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&f.path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("run tshark");
        let err = String::from_utf8_lossy(&out.stderr);
        let extra: Vec<&str> = err.lines().filter(|l| !l.starts_with("Running as user") && !l.is_empty()).collect();
        assert!(out.status.success() && extra.is_empty(), "tshark -r {}: {err}", f.path.display());
    }
}

/// Every file: libpcap reads the same frames as wirevault's reader, and
/// the catalog says it came from the zero-copy path.
fn assert_libpcap_agrees(files: &[StoredFile], tmp: &std::path::Path) {
    for f in files {
        let (linktype, by_libpcap) = tcpdump_frames(&f.path, &[], tmp);
        assert_eq!(linktype, 1);
        assert_eq!(by_libpcap.len(), f.records.len(), "{}: tcpdump -r count", f.path.display());
        for (i, (a, b)) in by_libpcap.iter().zip(&f.records).enumerate() {
            assert!(
                a.data == b.data && a.origlen == b.origlen && a.ts_ns == b.ts_ns,
                "{}: frame {i} differs between libpcap and wirevault",
                f.path.display()
            );
        }
        assert_eq!(f.entry["path"], "zero-copy", "{}: catalog path", f.path.display());
        assert_eq!(f.entry["format"], "pcapng");
    }
}

/// The index the recorder wrote for each file (built while the ring blocks were rewritten,
/// or after, when a block straddles a file's end) is the one `wirevault index` builds from the
/// file afterwards, byte for byte: a copy with the same modification time, indexed anew.
fn assert_index_rebuilds_the_same(files: &[StoredFile], tmp: &std::path::Path) {
    let dir = tmp.join("reindexed");
    std::fs::create_dir_all(&dir).unwrap();
    for f in files {
        let copy = dir.join(f.path.file_name().unwrap());
        let cp = Command::new("cp").arg("-p").arg(&f.path).arg(&copy).status().expect("cp");
        assert!(cp.success(), "cp -p {}", f.path.display());
        run_wirevault(&["index", copy.to_str().unwrap()]).expect(0, "index a copy");
        let idx = |p: &std::path::Path| std::fs::read(format!("{}.idx", p.display())).expect("an index");
        assert!(
            idx(&f.path) == idx(&copy),
            "{}: the recorder's index differs from one built afterwards",
            f.path.display()
        );
    }
}

wvtest!(zero_copy_stores_live_frames_byte_for_byte, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let l = Live::new("zc-exact", N);
    // tcpdump beside it, on the same interface.
    let beside = l.tmp.join("beside.pcap");
    let mut td = l.pair.tcpdump_beside(&beside, 131072);
    let r = l.start(&zc(&[]));
    let (o, t0, t1) = l.send_and_stop(r, &["--topspeed"], N as u64);
    assert!(o.stderr.contains(&format!("{N} packets received")), "summary: {}", o.stderr);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(td.id() as libc::pid_t, libc::SIGTERM) };
    td.wait().expect("tcpdump ends");

    let c = final_counters(&l.store());
    assert_eq!((c.received, c.written, c.filtered, c.drops()), (N as u64, N as u64, 0, 0));
    let files = check_store(&l.store());
    let got = stream_records(&files, 0);
    assert_same_frames(&l.sent, &got, false, "zero-copy live capture");
    assert_ts_in_window(&got, t0, t1);
    let (_, tcpdump_saw) = tcpdump_frames(&beside, &[], l.tmp.path());
    assert_eq!(tcpdump_saw.len(), got.len(), "frames tcpdump captured beside it");
    for (i, (a, b)) in tcpdump_saw.iter().zip(&got).enumerate() {
        assert!(a.data == b.data && a.origlen == b.origlen, "frame {i} differs from tcpdump's beside it");
    }
    assert_libpcap_agrees(&files, l.tmp.path());
    assert_peers_read(&paths(&files), usize::MAX);
    assert_tshark_reads(&files);
    assert_index_rebuilds_the_same(&files, l.tmp.path());

    // The query layer reads the files (skip blocks skipped): the same frames as libpcap.
    let queried = query_frames(&l.store(), &l.tmp.join("query.pcap"), &[]);
    assert_same_frames(&l.sent, &queried, false, "query over the zero-copy store");
    let by_query = query_frames(&l.store(), &l.tmp.join("query-udp.pcap"), &["udp port 53"]);
    let mut by_tcpdump = Vec::new();
    for f in &files {
        by_tcpdump.extend(tcpdump_frames(&f.path, &["udp port 53"], l.tmp.path()).1);
    }
    assert!(!by_tcpdump.is_empty());
    assert_eq!(by_query.len(), by_tcpdump.len(), "query udp port 53 vs tcpdump over the files");
    for (a, b) in by_query.iter().zip(&by_tcpdump) {
        assert!(a.data == b.data && a.ts_ns == b.ts_ns);
    }
});

wvtest!(zero_copy_snaplen_and_filter, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let l = Live::new("zc-snaplen", 500);
    let r = l.start(&zc(&["-s", "100"]));
    l.send_and_stop(r, &["--topspeed"], 500);
    let c = final_counters(&l.store());
    assert_eq!((c.received, c.written, c.drops()), (500, 500, 0));
    let files = check_store(&l.store());
    let want: Vec<Frame> = l
        .sent
        .iter()
        .map(|f| Frame { ts_ns: f.ts_ns, origlen: f.origlen, data: f.data[..f.data.len().min(100)].to_vec() })
        .collect();
    assert_same_frames(&want, &stream_records(&files, 0), false, "-s 100 zero-copy");
    assert_libpcap_agrees(&files, l.tmp.path());
    assert_peers_read(&paths(&files), usize::MAX);
    assert_tshark_reads(&files);

    let l = Live::new("zc-filter", N);
    let want: Vec<Frame> =
        l.sent.iter().enumerate().filter(|(i, _)| kind_of(*i as u32) == Kind::Dns).map(|(_, f)| f.clone()).collect();
    let r = l.start(&zc(&["udp", "port", "53"]));
    l.send_and_stop(r, &["--topspeed"], want.len() as u64);
    let c = final_counters(&l.store());
    assert_eq!(
        (c.received, c.written, c.filtered, c.drops()),
        (N as u64, want.len() as u64, (N as usize - want.len()) as u64, 0)
    );
    let files = check_store(&l.store());
    assert_same_frames(&want, &stream_records(&files, 0), false, "filtered zero-copy capture");
});

wvtest!(zero_copy_rotates_by_size_and_time_losing_nothing, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let l = Live::new("zc-rot-size", N);
    let r = l.start(&zc(&["--file-size", "1M"]));
    l.send_and_stop(r, &["--topspeed"], N as u64);
    let c = final_counters(&l.store());
    assert_eq!((c.written, c.drops()), (N as u64, 0));
    let files = check_store(&l.store());
    assert!(files.len() >= 2, "{} files with --file-size 1M", files.len());
    for f in &files {
        let b = f.entry["bytes"].as_u64().unwrap();
        // A file ends at a ring block boundary: at most one ring block (4 MiB) past the limit.
        assert!(b <= (1 << 20) + (4 << 20), "{}: {b} bytes", f.path.display());
    }
    assert_same_frames(&l.sent, &stream_records(&files, 0), false, "zero-copy size rotation");
    assert_peers_read(&paths(&files), usize::MAX);
    assert_tshark_reads(&files);
    // Files smaller than a ring block: indexed by the walk after the rewrite.
    assert_index_rebuilds_the_same(&files, l.tmp.path());

    // Time: 1000 frames at 800/s over 100 ms windows; a boundary inside a
    // ring block splits it between two files, exactly.
    let window = 100_000_000u64;
    let l = Live::new("zc-rot-time", 1000);
    let r = l.start(&zc(&["--file-time", "100ms"]));
    let (_, t0, t1) = l.send_and_stop(r, &["--pps", "800"], 1000);
    let c = final_counters(&l.store());
    assert_eq!((c.written, c.drops()), (1000, 0));
    let files = check_store(&l.store());
    assert!(files.len() >= 10, "only {} files for 1.25 s with --file-time 100ms", files.len());
    for f in &files {
        let (a, b) = (f.entry["first_ns"].as_u64().unwrap(), f.entry["last_ns"].as_u64().unwrap());
        assert_eq!(a / window, b / window, "{}: packets from {a} to {b} span a boundary", f.path.display());
    }
    let got = stream_records(&files, 0);
    assert_same_frames(&l.sent, &got, false, "zero-copy time rotation");
    assert_ts_in_window(&got, t0, t1);
    assert_libpcap_agrees(&files, l.tmp.path());
    assert_peers_read(&paths(&files), usize::MAX);
    assert_index_rebuilds_the_same(&files, l.tmp.path());
});

wvtest!(zero_copy_two_workers_store_every_frame_exactly_once, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let l = crate::record_live::Live::new("zc-workers", crate::record_live::N);
    let args: Vec<&str> = ["--workers", "2"].iter().chain(ZC).copied().collect();
    let files = crate::record_live::two_workers_run(&l, &args);
    let streams: std::collections::BTreeSet<u64> = files.iter().map(|f| f.entry["stream"].as_u64().unwrap()).collect();
    assert_eq!(streams.len(), 2, "both workers stored frames");
    for f in &files {
        assert_eq!(f.entry["path"], "zero-copy", "{}", f.path.display());
    }
    assert_tshark_reads(&files);
});

/// `--dedup` on the zero-copy path: the second copy's EPB becomes a skip block.
wvtest!(zero_copy_dedup_stores_each_frame_once, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let (_tmp, files) = crate::record_reduce::live_dedup_run("zc-dedup", ZC);
    for f in &files {
        assert_eq!(f.entry["path"], "zero-copy", "{}", f.path.display());
    }
    assert_peers_read(&paths(&files), usize::MAX);
    assert_tshark_reads(&files);
});

/// `--flow-cutoff` on the zero-copy path: a connection's frames past the cutoff become
/// skip blocks; what is kept, the counters and `query` are those of the copy path's test.
wvtest!(
    zero_copy_flow_cutoff_keeps_the_first_bytes_of_each_connection,
    needs = [root, TOOLS, "tshark", "python3"],
    |t| {
        let _g = heavy_lock();
        let (_tmp, files) = crate::record_reduce::live_cutoff_run("zc-cutoff", ZC);
        for f in &files {
            assert_eq!(f.entry["path"], "zero-copy", "{}", f.path.display());
        }
        assert_peers_read(&paths(&files), usize::MAX);
        assert_tshark_reads(&files);
    }
);

/// Retention on the zero-copy path: the store stays under --max-size (its
/// reserve counts the ring block a zero-copy file may run past --file-size),
/// the oldest files go first, and what is left is the newest frames, whole.
wvtest!(zero_copy_retention_keeps_the_store_under_budget, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let n = 8000;
    let l = Live::new("zc-retention", n);
    let r = l.start(&zc(&["--file-size", "1M", "--max-size", "16M"]));
    let (o, _, _) = l.send_and_stop(r, &["--topspeed"], n as u64);
    assert!(o.stderr.contains("retention deleted"), "{}", o.stderr);
    let c = final_counters(&l.store());
    assert_eq!((c.received, c.written, c.drops()), (n as u64, n as u64, 0));
    let files = check_store(&l.store());
    let total: u64 = files.iter().map(|f| f.entry["bytes"].as_u64().unwrap()).sum();
    assert!(total <= 16 << 20, "{total} bytes kept with --max-size 16M");
    let got = stream_records(&files, 0);
    assert!(!got.is_empty() && got.len() < n as usize, "{} frames kept", got.len());
    assert_same_frames(&l.sent[n as usize - got.len()..], &got, false, "the newest frames after retention");
});

wvtest!(zero_copy_kill_9_then_repair_keeps_every_written_packet, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let l = Live::new("zc-kill9", N);
    let mut r = l.start(&zc(&[]));
    replay(&l.pair.ns_a, l.pair.if_a, &l.pcap, &["--topspeed"], N);
    r.wait_received(N as u64);
    // Every block was written before it was counted: the retire timer (40 ms) has handed over the last.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(r.pid() as libc::pid_t, libc::SIGKILL) };
    let _ = r.wait(std::time::Duration::from_secs(30));
    let store = l.store();
    let parts: Vec<_> = std::fs::read_dir(store.join("stream-000"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .collect();
    assert_eq!(parts.len(), 1, "one .part file left by kill -9");
    run_wirevault(&["repair", store.to_str().unwrap()]).expect(0, "repair");
    let files = check_store(&store);
    assert_same_frames(&l.sent, &stream_records(&files, 0), false, "after kill -9 and repair");
    assert_peers_read(&paths(&files), usize::MAX);
    assert_tshark_reads(&files);
});

/// The catalog's `path` comes back from the files themselves: with the catalog lost,
/// `repair` catalogues zero-copy files as `zero-copy` (the mark in their first page), and
/// pcapng files of the copy path (the same frames read back with `record --read`) as `copy`.
wvtest!(repair_restores_the_catalog_path_from_the_files, needs = [root, TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    let n = 3000;
    let l = Live::new("zc-repair-path", n);
    let r = l.start(&zc(&["--file-size", "1M"]));
    let (o, _, _) = l.send_and_stop(r, &["--topspeed"], n as u64);
    o.expect(0, "zero-copy recording");
    let copy = l.tmp.join("copy");
    let zc_files = paths(&check_store(&l.store()));
    let mut args =
        vec!["record".to_string(), "-o".into(), copy.display().to_string(), "--format".into(), "pcapng".into()];
    for f in &zc_files {
        args.extend(["-r".to_string(), f.display().to_string()]);
    }
    run_wirevault(&args.iter().map(String::as_str).collect::<Vec<_>>()).expect(0, "record --read");
    for (store, want) in [(l.store(), "zero-copy"), (copy, "copy")] {
        let before = check_store(&store);
        assert!(!before.is_empty());
        assert!(before.iter().all(|f| f.entry["path"] == want), "{want}: written so");
        std::fs::remove_file(store.join("catalog.jsonl")).unwrap();
        run_wirevault(&["repair", store.to_str().unwrap()]).expect(0, "repair");
        let after = check_store(&store);
        assert_eq!(after.len(), before.len(), "{want}: every file catalogued again");
        for f in &after {
            assert_eq!(f.entry["path"], want, "{}: catalog path after repair", f.path.display());
        }
        assert_same_frames(&l.sent, &stream_records(&after, 0), false, want);
    }
});

#[test]
fn zero_copy_refuses_what_it_cannot_do() {
    let tmp = TempDir::new("zc-refuse");
    let s = tmp.join("s");
    let st = s.to_str().unwrap();
    let o = run_wirevault(&["record", "-o", st, "--synthetic", "count=10", "--format", "pcapng", "--zero-copy"]);
    o.expect(2, "--zero-copy without -i");
    assert!(o.stderr.contains("--zero-copy") && o.stderr.contains("-i IF"), "{}", o.stderr);
    let o = run_wirevault(&["record", "-o", st, "-i", "lo", "--zero-copy"]);
    o.expect(2, "--zero-copy with pcap");
    assert!(o.stderr.contains("--format pcapng"), "{}", o.stderr);
}
