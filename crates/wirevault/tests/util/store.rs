//! Stores: stats.json, the catalog and the live files read back, and the
//! checks every finished store and its counters must pass.

use super::{read_capture, run_wirevault, tcpdump_count, Rec, TempDir};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// One closed file of a store, as its catalog line describes it and as its
/// bytes read.
pub struct StoredFile {
    pub entry: Value,
    pub path: PathBuf,
    pub format: wv_wire::reader::Format,
    pub records: Vec<Rec>,
}

pub fn stats(store: &Path) -> Value {
    let p = store.join("stats.json");
    let s = fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{} is not JSON ({e}): {s}", p.display()))
}

pub fn catalog(store: &Path) -> Vec<Value> {
    let p = store.join("catalog.jsonl");
    let s = fs::read_to_string(&p).unwrap_or_default();
    s.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad catalog line ({e}): {l}"))).collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("catalog/stats field {k} missing or not a number in {v}"))
}

/// Checks a finished store and returns its files in catalog order:
/// no `.part` file is left; the catalog lists every capture file of every
/// stream and nothing else; each line agrees with its file (size, packets,
/// first/last timestamp, link type, snaplen, format) and names an index
/// that exists; files of one stream follow each other in sequence order.
pub fn check_store(store: &Path) -> Vec<StoredFile> {
    let mut on_disk = Vec::new();
    let mut parts = Vec::new();
    for d in fs::read_dir(store).expect("read store").flatten() {
        let dp = d.path();
        if d.file_name().to_string_lossy().ends_with(".part") {
            parts.push(dp.clone());
        }
        if !dp.is_dir() {
            continue;
        }
        for f in fs::read_dir(&dp).expect("read stream dir").flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".part") {
                parts.push(f.path());
            } else if name.ends_with(".pcap") || name.ends_with(".pcapng") {
                on_disk.push(f.path().strip_prefix(store).unwrap().to_path_buf());
            }
        }
    }
    assert!(parts.is_empty(), "left-over .part files in {}: {parts:?}", store.display());
    let cat = catalog(store);
    let mut listed: Vec<PathBuf> = cat.iter().map(|e| PathBuf::from(e["file"].as_str().expect("file"))).collect();
    let mut a = on_disk.clone();
    a.sort();
    listed.sort();
    assert_eq!(a, listed, "capture files on disk and catalog lines differ");

    let mut files = Vec::new();
    let mut last_seq: std::collections::HashMap<u64, (String, u64)> = Default::default();
    for e in cat {
        let rel = e["file"].as_str().unwrap().to_string();
        let path = store.join(&rel);
        let stream = u(&e, "stream");
        assert!(rel.starts_with(&format!("stream-{stream:03}/")), "catalog line of stream {stream} names {rel}");
        // NAME = <time>-<sequence>.<ext>: sequence numbers increase per stream.
        let stem = Path::new(&rel).file_stem().unwrap().to_string_lossy().into_owned();
        let seq: u64 = stem
            .rsplit('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("file name {rel} has no sequence number"));
        if let Some((prev, s)) = last_seq.get(&stream) {
            assert!(seq > *s, "catalog order: {rel} after {prev}");
        }
        last_seq.insert(stream, (rel.clone(), seq));

        let size = fs::metadata(&path).unwrap_or_else(|err| panic!("{rel}: {err}")).len();
        assert_eq!(u(&e, "bytes"), size, "{rel}: catalog bytes vs file size");
        let (format, records) = read_capture(&path);
        let fmt = e["format"].as_str().unwrap_or("");
        assert_eq!(fmt, format.to_string(), "{rel}: catalog format");
        assert!(rel.ends_with(&format!(".{fmt}")), "{rel}: extension vs format {fmt}");
        assert_eq!(u(&e, "packets"), records.len() as u64, "{rel}: catalog packets");
        assert!(!records.is_empty(), "{rel}: a closed file without packets");
        // The catalog holds the min and max time of the file (times may go back).
        let min = records.iter().map(|r| r.ts_ns).min().unwrap();
        let max = records.iter().map(|r| r.ts_ns).max().unwrap();
        assert_eq!(u(&e, "first_ns"), min, "{rel}: catalog first_ns");
        assert_eq!(u(&e, "last_ns"), max, "{rel}: catalog last_ns");
        for r in &records {
            assert_eq!(r.linktype as u64, u(&e, "linktype"), "{rel}: linktype");
            assert_eq!(r.snaplen as u64, u(&e, "snaplen"), "{rel}: snaplen");
        }
        match &e["index"] {
            Value::Null => {}
            Value::String(i) => assert!(store.join(i).is_file(), "{rel}: index {i} missing"),
            other => panic!("{rel}: index is {other}"),
        }
        files.push(StoredFile { entry: e, path, format, records });
    }
    files
}

/// The live entries of `store`'s stream 0 (its `live-000.json`: the files a
/// running recorder has stored and not catalogued yet); none without the file.
pub fn live_entries(store: &Path) -> Vec<Value> {
    let p = store.join("live-000.json");
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("{}: {e}", p.display()),
    };
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} ({e}): {text}", p.display()));
    doc["files"].as_array().unwrap_or_else(|| panic!("no files in {text}")).clone()
}

/// Copies the published prefix of each live entry's file (its first `bytes`
/// bytes, under its `.part` name or, renamed since, its final one) into `tmp`.
pub fn published_prefixes(store: &Path, tmp: &Path, tag: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, e) in live_entries(store).iter().enumerate() {
        let rel = e["file"].as_str().unwrap();
        let bytes = e["bytes"].as_u64().unwrap() as usize;
        if e["packets"] == 0 {
            continue;
        }
        let part = store.join(rel);
        let data = std::fs::read(&part)
            .or_else(|_| std::fs::read(store.join(rel.strip_suffix(".part").unwrap())))
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(data.len() >= bytes, "{rel}: {} bytes on disk, {bytes} published", data.len());
        let p = tmp.join(format!("prefix-{tag}-{i}.{}", e["format"].as_str().unwrap()));
        std::fs::write(&p, &data[..bytes]).unwrap();
        out.push(p);
    }
    out
}

/// How many packets libpcap reads from all the catalogued files of `store`
/// (the sum of their [`tcpdump_count`]s).
pub fn tcpdump_store_count(store: &Path) -> u64 {
    catalog(store).iter().map(|e| tcpdump_count(&store.join(e["file"].as_str().expect("file")), "")).sum()
}

/// A store `tmp/name` of 50 synthetic 100-byte packets, made by `record --synthetic`.
pub fn synthetic_store(tmp: &TempDir, name: &str) -> PathBuf {
    let s = tmp.join(name);
    run_wirevault(&["record", "--synthetic", "size=100,count=50", "-o", s.to_str().unwrap(), "-q", "--buffer", "64M"])
        .expect(0, "synthetic store");
    s
}

/// All records of stream `stream`, concatenated in file order.
pub fn stream_records(files: &[StoredFile], stream: u64) -> Vec<Rec> {
    files
        .iter()
        .filter(|f| f.entry["stream"].as_u64() == Some(stream))
        .flat_map(|f| f.records.iter().cloned())
        .collect()
}

/// The final counters of a recording, checked for consistency:
/// state "done", balanced, and received = written + filtered +
/// deduplicated + cut + every drop.
pub struct Counters {
    pub received: u64,
    pub written: u64,
    pub filtered: u64,
    pub deduplicated: u64,
    pub cut: u64,
    pub kernel: u64,
    pub arena_full: u64,
    pub write_error: u64,
    pub shutdown: u64,
    pub timestamp_range: u64,
    /// `--source xdp`: the AF_XDP fill ring had no chunk (0 when the key is missing).
    pub fill_ring: u64,
    /// `--source xdp`: the socket dropped it for another reason (0 when the key is missing).
    pub xsk_other: u64,
}

impl Counters {
    pub fn drops(&self) -> u64 {
        self.kernel
            + self.arena_full
            + self.write_error
            + self.shutdown
            + self.timestamp_range
            + self.fill_ring
            + self.xsk_other
    }
}

pub fn final_counters(store: &Path) -> Counters {
    let s = stats(store);
    assert_eq!(s["state"], "done", "stats.json: {s}");
    let d = &s["dropped"];
    let c = Counters {
        received: u(&s, "received"),
        written: u(&s, "written"),
        filtered: u(&s, "filtered"),
        deduplicated: u(&s, "deduplicated"),
        cut: u(&s, "cut"),
        kernel: u(d, "kernel"),
        arena_full: u(d, "arena_full"),
        write_error: u(d, "write_error"),
        shutdown: u(d, "shutdown"),
        timestamp_range: u(d, "timestamp_range"),
        fill_ring: d["fill_ring"].as_u64().unwrap_or(0),
        xsk_other: d["xsk_other"].as_u64().unwrap_or(0),
    };
    assert_eq!(
        c.received,
        c.written + c.filtered + c.deduplicated + c.cut + c.drops(),
        "received != written + filtered + deduplicated + cut + drops: {s}"
    );
    assert_eq!(s["balanced"], true, "stats.json: {s}");
    c
}
