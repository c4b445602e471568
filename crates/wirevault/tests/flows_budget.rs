//! Flow files count against `--max-size` (docs/flows.md): a store recorded with `--flows`
//! into a budget smaller than its input stays inside it with its flow files summed in, and
//! retention deletes each file's flow records with its packets.

use crate::util::*;
use std::path::Path;

/// Bytes of the regular files beneath `dir` whose name ends with one of `ends`.
fn bytes_of(dir: &Path, ends: &[&str]) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let (p, t) = (e.path(), e.file_type().unwrap());
        if t.is_dir() {
            total += bytes_of(&p, ends);
        } else if t.is_file() && ends.iter().any(|x| p.to_string_lossy().ends_with(x)) {
            total += e.metadata().unwrap().len();
        }
    }
    total
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
    let (pcap, flows) = (bytes_of(&store, &[".pcap", ".idx"]), bytes_of(&store.join("flows"), &[".parquet"]));
    assert!(flows > 0, "{}: no flow files", t.name);
    // Retention runs before each file opens; a file's flow records are written once the next
    // file is open, and the last file's at the end: at most one flow file over.
    let last_flows = flows.min(file);
    assert!(pcap + flows <= budget + last_flows, "pcap+index {pcap} + flows {flows} bytes over the budget {budget}");
    // No flow file outlives its packets, and the files retention kept keep theirs.
    let files: Vec<String> = catalog(&store).iter().map(|e| e["file"].as_str().unwrap().to_string()).collect();
    let with_flows = files.iter().filter(|f| store.join(format!("flows/{f}.parquet")).is_file()).count();
    let parquets = count_files(&store.join("flows"), ".parquet");
    assert_eq!(parquets, with_flows, "flow files of deleted pcap files are left: {files:?}");
    assert_eq!(with_flows, files.len(), "every kept file has its flow records: {files:?}");
});

/// Files beneath `dir` whose name ends with `end`.
fn count_files(dir: &Path, end: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            n += count_files(&e.path(), end);
        } else if e.path().to_string_lossy().ends_with(end) {
            n += 1;
        }
    }
    n
}
