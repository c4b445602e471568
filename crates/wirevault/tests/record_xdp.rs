//! `record --source xdp`: the live veth scenarios of `record_live` through AF_XDP (an XDP
//! program in the veth's driver, native mode, redirecting to an XSK socket in copy mode, as veth
//! has no zero-copy AF_XDP). Frames sent with tcpreplay from the other namespace must be stored
//! byte for byte, in order, with exact counters, in files tcpdump and capinfos read. Needs root,
//! tcpreplay, tcpdump and capinfos; skips without them (fails in CI).

use crate::record_live::{
    exact_run, filtered_run, sigterm_under_load, size_rotation_run, snaplen_run, time_rotation_run, two_workers_run,
    Live, N, TOOLS,
};
use crate::util::*;
use std::process::Command;

/// The interface's `ip link` line (it names an attached XDP program: "xdp" / "xdpgeneric").
fn link_line(ns: &str, dev: &str) -> String {
    let out = run_ok(Command::new("ip").args(["-n", ns, "-o", "link", "show", "dev", dev]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

wvtest!(xdp_frames_are_stored_byte_for_byte_with_exact_counters, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("xdp-exact", N);
    let r = l.start(&["--source", "xdp"]);
    // The program is attached in the driver (native XDP: "xdp", not "xdpgeneric").
    let line = link_line(&l.pair.ns_b, l.pair.if_b);
    assert!(line.contains(" xdp ") || line.contains("prog/xdp"), "no native XDP program on the veth: {line}");
    assert!(!line.contains("xdpgeneric"), "generic XDP where veth has native: {line}");
    // VLAN and QinQ frames and 9000-byte jumbo frames (six UMEM chunks each, gathered) included.
    let o = exact_run(&l, r, "AF_XDP capture");
    // Each frame has its own stamp, the XDP program's, although one poll reads many of the
    // frames tcpreplay sends back to back (stamped per poll, they shared the poll's stamp).
    let got = stream_records(&check_store(&l.store()), 0);
    let own = 1 + got.windows(2).filter(|w| w[1].ts_ns > w[0].ts_ns).count();
    assert!(own * 100 >= got.len() * 99, "only {own} of {} frames have a stamp of their own", got.len());
    // The catalog's `path` names the write path, not the source: AF_XDP frames are copied
    // into the arena and written by the copy writer, as AF_PACKET's (DESIGN.md).
    for f in check_store(&l.store()) {
        assert_eq!(f.entry["path"], "copy", "{}: catalog path", f.path.display());
    }
    assert!(o.stderr.contains("copy mode"), "no note that veth runs AF_XDP in copy mode: {}", o.stderr);
    assert!(!o.stderr.contains("generic mode"), "generic XDP on veth: {}", o.stderr);
    // The BPF link went with the process: the host has its interface back.
    let line = link_line(&l.pair.ns_b, l.pair.if_b);
    assert!(!line.contains("xdp"), "the XDP program outlived the recorder: {line}");
});

/// Rotation by size and by time, as on AF_PACKET: no frame lost or duplicated across files, no
/// file past `--file-size` or across a `--file-time` boundary (AF_XDP frames are stamped one by
/// one by the XDP program, so the window of each is its own).
wvtest!(xdp_rotates_by_size_and_time_losing_nothing, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    size_rotation_run("xdp-rot-size", &["--source", "xdp"]);
    time_rotation_run("xdp-rot-time", "200ms", 200_000_000, &["--source", "xdp"]);
});

wvtest!(xdp_filter_runs_in_user_space_and_counts_the_rest, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("xdp-filter", N);
    // libpcap (tcpdump -r) decides which frames match; VLAN-tagged frames are in the file as on
    // the wire, and the XDP path sees them so too.
    let expr = "udp port 53 or vlan";
    let (_, by_tcpdump) = tcpdump_frames(&l.pcap, &[expr], l.tmp.path());
    let want: Vec<Frame> =
        by_tcpdump.into_iter().map(|r| Frame { ts_ns: r.ts_ns, origlen: r.origlen, data: r.data }).collect();
    assert!(!want.is_empty() && want.len() < N as usize, "{} of {N} frames match", want.len());
    filtered_run(&l, &["--source", "xdp", expr], &want, N as u64, expr);
});

/// `-s 4000` cuts frames inside their third 2 KiB chunk (frames of up to four chunks are handed
/// over in parts, longer ones gathered first): the stored bytes and original lengths are exact.
wvtest!(xdp_snaplen_cuts_multi_chunk_frames_exactly, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("xdp-snaplen", 500);
    snaplen_run(&l, 4000, &["--source", "xdp"]);
});

/// A second recorder cannot attach its program where one is attached: one sentence, exit 1,
/// and the first recorder goes on undisturbed.
wvtest!(xdp_refuses_with_one_sentence_when_the_program_cannot_attach, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("xdp-busy", 10);
    let first = l.start(&["--source", "xdp"]);
    let o = Outcome::from_output(
        VethPair::exec(&l.pair.ns_b, bin())
            .args(["record", "-i", l.pair.if_b, "--buffer", "64M", "-q", "--no-tune-warnings", "--source", "xdp", "-o"])
            .arg(l.tmp.join("store2"))
            .output()
            .unwrap(),
    );
    o.expect(1, "second XDP recorder on one interface");
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one sentence expected: {}", o.stderr);
    assert!(
        lines[0].contains("cannot attach an XDP program to veth-b") && lines[0].contains("without --source xdp"),
        "{}",
        o.stderr
    );
    l.send_and_stop(first, &["--topspeed"], 10);
    let c = final_counters(&l.store());
    assert_eq!((c.received, c.written, c.drops()), (10, 10, 0));
});

/// A veth with two receive queues: two workers, one socket per queue in one XSKMAP; every frame
/// is stored exactly once, in order within its stream.
wvtest!(xdp_two_queues_two_workers_store_every_frame_exactly_once, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::with_queues("xdp-queues", N, 2);
    two_workers_run(&l, &["--workers", "2", "--source", "xdp"]);
});

wvtest!(xdp_needs_one_worker_per_receive_queue, needs = [root, TOOLS], |t| {
    let tmp = TempDir::new("xdp-queues");
    let pair = VethPair::new();
    let o = Outcome::from_output(
        VethPair::exec(&pair.ns_b, bin())
            .args(["record", "-i", pair.if_b, "--buffer", "64M", "--workers", "2", "--source", "xdp", "-o"])
            .arg(tmp.join("store"))
            .output()
            .unwrap(),
    );
    o.expect(2, "--workers 2 on a veth with one receive queue");
    assert!(o.stderr.contains("has 1 receive queue(s)") && o.stderr.contains("--workers 1"), "{}", o.stderr);
    assert!(!tmp.join("store").exists(), "a refused start-up left a store behind");
    let o = Outcome::from_output(
        wirevault()
            .args(["record", "--synthetic", "count=10", "--source", "xdp", "-o"])
            .arg(tmp.join("s"))
            .output()
            .unwrap(),
    );
    o.expect(2, "--source xdp without -i");
    assert!(o.stderr.contains("give -i IF"), "{}", o.stderr);
});

/// Under load with a small UMEM (--ring-size 8M: 2048 chunks), stopped by SIGTERM mid-stream:
/// the counters balance (every drop counted by cause: kernel, fill_ring, xsk_other), every stored frame is
/// a sent frame, intact and in order, and the files are valid.
wvtest!(xdp_sigterm_under_load_balances_and_leaves_valid_files, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    sigterm_under_load("xdp-sigterm", &["--source", "xdp", "--ring-size", "8M", "--file-size", "4M"]);
});
