//! Flow files count against `--max-size` (docs/flows.md): a store recorded with `--flows`
//! into a budget smaller than its input stays inside it with its flow files summed in, and
//! retention deletes each file's flow records with its packets.

use crate::util::*;
use std::path::Path;

/// How many regular files beneath `dir` have a name ending with one of `ends`, and their bytes.
fn files_of(dir: &Path, ends: &[&str]) -> (usize, u64) {
    let (mut n, mut bytes) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let (p, t) = (e.path(), e.file_type().unwrap());
        if t.is_dir() {
            let (m, b) = files_of(&p, ends);
            (n, bytes) = (n + m, bytes + b);
        } else if t.is_file() && ends.iter().any(|x| p.to_string_lossy().ends_with(x)) {
            (n, bytes) = (n + 1, bytes + e.metadata().unwrap().len());
        }
    }
    (n, bytes)
}

/// 100,000 one-packet UDP flows (each port its own flow), 200 µs apart, ending at the 1 s idle
/// timeout as the recording goes: their flow files are about half the pcap's bytes, so a
/// budget that left them out would be overshot by far more than a file.
wvtest!(flow_files_count_against_the_budget, |t| {
    let tmp = TempDir::new("flows-budget");
    let input = tmp.join("in.pcap");
    let frames: Vec<Frame> = (0..100_000u32)
        .map(|i| {
            let data = udp_packet(1024 + (i % 60_000) as u16, i);
            Frame { ts_ns: 1_700_000_000_000_000_000 + i as u64 * 200_000, origlen: data.len() as u32, data }
        })
        .collect();
    write_pcap(&input, 101, 65535, true, &frames);
    let store = tmp.join("s");
    let (file, budget) = (1u64 << 20, 4u64 << 20);
    let o = run_wirevault(&[
        "record",
        "-r",
        input.to_str().unwrap(),
        "-o",
        store.to_str().unwrap(),
        "--flows",
        "--flow-idle-timeout",
        "1s",
        "--file-size",
        "1M",
        "--max-size",
        "4M",
        "-q",
    ]);
    o.expect(0, "recording into the budget");
    let (pcap, flows) = (files_of(&store, &[".pcap", ".idx"]).1, files_of(&store.join("flows"), &[".parquet"]).1);
    assert!(flows > 0, "{}: no flow files", t.name);
    // Retention runs before each file opens; a file's flow records are written once the next
    // file is open, and the last file's at the end: at most one flow file over.
    let last_flows = flows.min(file);
    assert!(pcap + flows <= budget + last_flows, "pcap+index {pcap} + flows {flows} bytes over the budget {budget}");
    // No flow file outlives its packets, and the files retention kept keep theirs.
    let files: Vec<String> = catalog(&store).iter().map(|e| e["file"].as_str().unwrap().to_string()).collect();
    let with_flows = files.iter().filter(|f| store.join(format!("flows/{f}.parquet")).is_file()).count();
    let parquets = files_of(&store.join("flows"), &[".parquet"]).0;
    assert_eq!(parquets, with_flows, "flow files of deleted pcap files are left: {files:?}");
    assert_eq!(with_flows, files.len(), "every kept file has its flow records: {files:?}");
});
