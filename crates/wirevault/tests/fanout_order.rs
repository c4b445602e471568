//! Fanout spreads one link's packets over several streams (issue 17, item
//! 5): each stream's files cover the same time, interleaved. Index and query
//! must be exact regardless: time ranges whose edges fall inside the overlap
//! of two streams (at packet timestamps, so inclusive `--from` and exclusive
//! `--to` both matter), with and without index-narrowed filters, give exactly
//! what tcpdump selects from all stored files merged by mergecap, byte for
//! byte. How far out of order the streams are is measured by
//! bench/ordering.sh, not here (no timed assertions).

use crate::util::*;
use std::path::{Path, PathBuf};

/// (ts, origlen, bytes) of every record, sorted: the comparison ignores only
/// the order of packets (ties between streams may go either way).
fn sorted(recs: &[Rec]) -> Vec<(u64, u32, Vec<u8>)> {
    let mut v: Vec<_> = recs.iter().map(|r| (r.ts_ns, r.origlen, r.data.clone())).collect();
    v.sort();
    v
}

wvtest!(
    query_is_exact_across_the_overlap_of_fanout_streams,
    needs = [root, "tcpreplay", "tcpdump", "mergecap"],
    |test| {
        let _g = heavy_lock();
        let tmp = TempDir::new("fanout-order");
        let pair = VethPair::new();
        let n = 3000u32;
        let pcap = tmp.join("sent.pcap");
        write_pcap(&pcap, 1, 65535, false, &test_frames(n, 1_700_000_000_000_000_000));
        let store = tmp.join("store");
        let args = ["-i", pair.if_b, "-q", "--workers", "2", "--buffer", "64M", "--file-size", "128K"];
        let mut r = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &args);
        r.wait_ready();
        run_ok(VethPair::exec(&pair.ns_a, "tcpreplay").args(["-i", pair.if_a, "--pps", "20000"]).arg(&pcap));
        r.wait_received(u64::from(n));
        r.terminate().expect(0, "recorder stopped by SIGTERM");

        // Both streams hold packets, over overlapping times, in several files.
        let cat = catalog(&store);
        let span = |s: u64| {
            let e: Vec<_> = cat.iter().filter(|e| e["stream"].as_u64() == Some(s)).collect();
            let lo = e.iter().map(|e| e["first_ns"].as_u64().unwrap()).min().unwrap_or(u64::MAX);
            let hi = e.iter().map(|e| e["last_ns"].as_u64().unwrap()).max().unwrap_or(0);
            (e.len(), lo, hi)
        };
        let ((n0, lo0, hi0), (n1, lo1, hi1)) = (span(0), span(1));
        assert!(n0 >= 2 && n1 >= 2, "fanout gave stream 0 {n0} and stream 1 {n1} files: {cat:?}");
        let (lo, hi) = (lo0.max(lo1), hi0.min(hi1));
        assert!(lo < hi, "the streams do not overlap in time: {lo0}..{hi0} and {lo1}..{hi1}");

        // The oracle: every stored file merged by time (mergecap), read through tcpdump.
        let files: Vec<PathBuf> = cat.iter().map(|e| store.join(e["file"].as_str().unwrap())).collect();
        let merged = tmp.join("merged.pcap");
        run_ok(std::process::Command::new("mergecap").args(["-F", "nsecpcap", "-w"]).arg(&merged).args(&files));
        let all = tcpdump_frames(&merged, &[], tmp.path()).1;
        assert_eq!(all.len(), n as usize, "every sent frame is stored once");

        // Edges at packet times inside the overlap, alternating the stream they come from.
        let file_stream = |p: &Path| -> Vec<(u64, u64)> {
            let s =
                cat.iter().find(|e| store.join(e["file"].as_str().unwrap()) == p).unwrap()["stream"].as_u64().unwrap();
            read_capture(p).1.iter().map(|r| (r.ts_ns, s)).collect()
        };
        let mut stamps: Vec<(u64, u64)> = files.iter().flat_map(|f| file_stream(f)).collect();
        stamps.sort();
        let inside: Vec<(u64, u64)> = stamps.into_iter().filter(|(t, _)| (lo..=hi).contains(t)).collect();
        let pick = |frac: f64, stream: u64| {
            let start = (inside.len() as f64 * frac) as usize;
            inside[start..].iter().find(|(_, s)| *s == stream).map(|(t, _)| *t).expect("a packet of the stream")
        };
        // Each range between the two picks, whichever comes first (a stream's packet after the
        // 30% mark may come after the other's after the 80% mark when one stream is sparse).
        let between = |a: u64, b: u64| (a.min(b), a.max(b) + 1);
        let ranges = [
            between(pick(0.2, 0), pick(0.6, 1)),
            between(pick(0.3, 1), pick(0.8, 0)),
            between(pick(0.5, 0), pick(0.5, 1)),
        ];
        let filters: [&[&str]; 4] = [&[], &["udp"], &["udp", "port", "53"], &["vlan"]];
        // A range may be narrow (the third is where the streams meet): a filter may select
        // nothing in one, but must in some (the test.name would otherwise prove nothing).
        let mut selected = [0usize; 4];
        for (from, to) in ranges {
            assert!(from < to, "range {from}..{to}");
            for (i, filter) in filters.iter().enumerate() {
                let filter = *filter;
                let (f, t) = (time_arg(from), time_arg(to));
                let args: Vec<&str> = ["--from", &f, "--to", &t].into_iter().chain(filter.iter().copied()).collect();
                let out = tmp.join("query.pcap");
                let got = query_frames(&store, &out, &args);
                let want: Vec<Rec> = tcpdump_frames(&merged, filter, tmp.path())
                    .1
                    .into_iter()
                    .filter(|r| (from..to).contains(&r.ts_ns))
                    .collect();
                assert!(!want.is_empty() || !filter.is_empty(), "{from}..{to}: the range holds no packet");
                selected[i] += want.len();
                assert_eq!(got.len(), want.len(), "{filter:?} {from}..{to}: packet count");
                assert!(sorted(&got) == sorted(&want), "{filter:?} {from}..{to}: packets differ from tcpdump's");
                // Nothing outside the range.
                assert!(got.iter().all(|r| (from..to).contains(&r.ts_ns)), "{filter:?}: a packet outside the range");
                let _ = std::fs::remove_file(&out);
            }
        }
        for (filter, n) in filters.iter().zip(selected) {
            assert!(n > 0 || *filter == ["vlan"], "{filter:?}: the oracle selects nothing in any range");
        }
    }
);
