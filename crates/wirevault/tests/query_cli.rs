//! `wirevault index` and `wirevault query` as a user runs them: a directory
//! of captures is indexed into a store, then queried by time and filter,
//! with tcpdump reading the output.

use crate::util::{bin, have, time_arg, wvtest, TempDir, Test};
use std::path::Path;
use std::process::{Command, Stdio};
use wv_wire::reader::Reader;

/// (ts_ns, caplen, origlen, data) of every packet of a capture.
fn frames(bytes: &[u8]) -> Vec<(u64, u32, u32, Vec<u8>)> {
    let mut r = Reader::new(bytes).unwrap();
    let mut out = Vec::new();
    while let Ok(Some(p)) = r.next_packet() {
        out.push((p.ts_ns, p.caplen, p.origlen, p.data.to_vec()));
    }
    out
}

fn wirevault(args: &[&str]) -> std::process::Output {
    Command::new(bin()).args(args).output().unwrap()
}

/// A frame as compared: timestamp (ns), caplen, origlen, bytes.
type Frame = (u64, u32, u32, Vec<u8>);

/// A store made of `afs.pcap` split into three files of two streams (needs the corpus and
/// editcap).
fn split_store(t: &Test) -> (TempDir, Vec<Frame>) {
    let src = t.corpus_file("afs.pcap");
    let all = frames(&std::fs::read(&src).unwrap());
    let tmp_dir = TempDir::new(t.name);
    let dir = tmp_dir.path();
    for s in ["stream-000", "stream-001"] {
        std::fs::create_dir_all(dir.join(s)).unwrap();
    }
    let tmp = dir.join("split.pcap");
    let st = Command::new("editcap").args(["-c", "200"]).arg(&src).arg(&tmp).status().unwrap();
    assert!(st.success());
    let mut parts: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("split"))
        .collect();
    parts.sort();
    for (i, p) in parts.iter().enumerate() {
        let stream = format!("stream-00{}", i % 2);
        std::fs::rename(p, dir.join(stream).join(format!("part-{i:03}.pcap"))).unwrap();
    }
    (tmp_dir, all)
}

fn sorted_by_time(mut v: Vec<(u64, u32, u32, Vec<u8>)>) -> Vec<(u64, u32, u32, Vec<u8>)> {
    v.sort_by_key(|f| f.0);
    v
}

wvtest!(query_time_ranges_across_file_boundaries, needs = ["editcap", corpus], |t| {
    let (store, all) = split_store(&t);
    let out = wirevault(&["index", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(store.join("catalog.jsonl").is_file());
    let all = sorted_by_time(all);
    // Ranges that start and end inside different files.
    let n = all.len();
    for (a, b) in [(0, n), (10, 150), (150, 250), (199, 601), (390, n - 1), (n / 2, n / 2 + 1)] {
        let from = all[a].0;
        let to = all[b.min(n - 1)].0 + u64::from(b == n);
        let want: Vec<_> = all.iter().filter(|f| f.0 >= from && f.0 < to).cloned().collect();
        let (from_s, to_s) = (time_arg(from), time_arg(to));
        let out = wirevault(&["query", store.to_str().unwrap(), "--from", &from_s, "--to", &to_s]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got = frames(&out.stdout);
        assert_eq!(got.len(), want.len(), "range {a}..{b}");
        assert!(got == want, "range {a}..{b}: frames differ");
    }
    // RFC 3339 gives the same as epoch seconds.
    let out = wirevault(&["query", store.to_str().unwrap(), "--count", "--from", "1970-01-01T00:00:00Z", "udp"]);
    assert!(out.status.success());
    let count: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(count, all.iter().filter(|f| f.3.get(23) == Some(&17) && f.3[12..14] == [8, 0]).count());
});

wvtest!(query_output_pipes_into_tcpdump_and_equals_it, needs = ["editcap", "tcpdump", corpus], |t| {
    let (store, _) = split_store(&t);
    assert!(wirevault(&["index", store.to_str().unwrap()]).status.success());
    let src = t.corpus_file("afs.pcap");
    for expr in ["udp port 7001", "host 192.168.1.1 or host 132.54.3.1", "not udp", "greater 500 and udp"] {
        let want = Command::new("tcpdump").args(["-r"]).arg(&src).args(["-w", "-", expr]).output().unwrap();
        let mut q =
            Command::new(bin()).args(["query", store.to_str().unwrap(), expr]).stdout(Stdio::piped()).spawn().unwrap();
        let td = Command::new("tcpdump").args(["-r", "-", "-w", "-"]).stdin(q.stdout.take().unwrap()).output().unwrap();
        assert!(q.wait().unwrap().success(), "query {expr} failed");
        let (w, g) = (sorted_by_time(frames(&want.stdout)), sorted_by_time(frames(&td.stdout)));
        assert!(td.status.success(), "{expr}: {}", String::from_utf8_lossy(&td.stderr));
        assert_eq!(g.len(), w.len(), "{expr}");
        assert!(g == w, "{expr}");
    }
    // `| head -c`: the reader goes away; the query ends quietly with success.
    let mut q = Command::new(bin())
        .args(["query", store.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(q.stdout.take());
    let out = q.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
});

/// A store of one file, `afs.pcap` (needs the corpus).
fn store_with_one_file(t: &Test) -> TempDir {
    let src = t.corpus_file("afs.pcap");
    let dir = TempDir::new(t.name);
    std::fs::create_dir_all(dir.join("stream-000")).unwrap();
    std::fs::copy(&src, dir.join("stream-000/a.pcap")).unwrap();
    assert!(wirevault(&["index", dir.to_str().unwrap()]).status.success());
    dir
}

wvtest!(user_errors_are_one_sentence_and_exit_2, needs = [corpus], |t| {
    let store = store_with_one_file(&t);
    let s = store.to_str().unwrap();
    for args in [
        vec!["query", s, "host", "and"],
        vec!["query", s, "--from", "yesterday-ish"],
        vec!["query", s, "--from", "10 parsecs ago"],
        vec!["query", s, "--from", "2h ago", "--to", "3h ago"],
    ] {
        let out = wirevault(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("wirevault: "), "{err}");
    }
    let out = wirevault(&["query", s, "host", "and"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid filter expression 'host and'"));
    // An empty or damaged capture says what is wrong with it (it was told
    // to run `wirevault index`, which fails on it too).
    let dir = TempDir::new("bad-capture");
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let out = wirevault(&["query", empty.to_str().unwrap(), "--count"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot be read as a capture file: truncated file header"), "{err}");
});

wvtest!(query_of_a_store_being_recorded_says_so, needs = [corpus], |t| {
    let store = store_with_one_file(&t);
    std::fs::write(store.join("stream-000/b.pcap.part"), b"partial").unwrap();
    // A recorder holds the store's writer lock (without it, the .part is a crash's leftover).
    let _recording = wv_store::lock::StoreLock::exclusive(store.path(), "record").unwrap();
    let out = wirevault(&["query", store.to_str().unwrap(), "--count", "--limit", "5", "udp"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 file(s) still being written are not included"));
});

wvtest!(index_a_single_file_then_query_it, needs = [corpus], |t| {
    let src = t.corpus_file("afs.pcap");
    let dir = TempDir::new("single");
    let f = dir.join("afs.pcap");
    std::fs::copy(&src, &f).unwrap();
    assert!(wirevault(&["index", f.to_str().unwrap()]).status.success());
    assert!(Path::new(&format!("{}.idx", f.display())).is_file());
    let out = wirevault(&["query", f.to_str().unwrap(), "-w", dir.join("out.pcap").to_str().unwrap(), "udp port 7001"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = frames(&std::fs::read(dir.join("out.pcap")).unwrap());
    assert!(!got.is_empty());
});

/// Into a pipe, stored nanosecond files whose records go out whole are
/// spliced from the file instead of copied. Whatever the shape of the query
/// (two streams overlapping in time, rotation, time ranges cutting files,
/// --limit, a filter) and whatever a stored file holds (a record whose
/// nanoseconds field is 10^9 or more, which the copy path writes normalised),
/// the bytes in the pipe are exactly those `-w FILE` writes, and tcpdump reads
/// them. `--count` counts them.
wvtest!(pipe_output_equals_file_output_byte_for_byte, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("splice");
    // Two recordings at nearly the same time, their files then indexed as the two
    // streams of one store: files of both streams overlap in time.
    let rec = |name: &str| {
        Command::new(bin())
            .args(["record", "-q", "--buffer", "64M", "--file-size", "1M", "-o"])
            .arg(tmp.join(name))
            .args(["--synthetic", "size=imix,count=40k,rate=100kpps"])
            .spawn()
            .unwrap()
    };
    // The second starts later: the first stream's first files go out alone
    // (spliced), the rest is merged with the second stream's.
    let mut r0 = rec("a");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut r1 = rec("b");
    assert!(r0.wait().unwrap().success() && r1.wait().unwrap().success());
    let store = tmp.join("store");
    for (from, stream) in [("a", "stream-000"), ("b", "stream-001")] {
        std::fs::create_dir_all(store.join(stream)).unwrap();
        for e in std::fs::read_dir(tmp.join(from).join("stream-000")).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "pcap") {
                std::fs::rename(e.path(), store.join(stream).join(e.file_name())).unwrap();
            }
        }
    }
    let out = Command::new(bin()).arg("index").arg(&store).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cat = crate::util::catalog(&store);
    assert!(cat.len() >= 8, "{} stored files", cat.len());
    let streams: std::collections::BTreeSet<_> = cat.iter().map(|e| e["stream"].as_u64().unwrap()).collect();
    assert_eq!(streams.len(), 2, "two streams");

    // One record of a stored file gets a nanoseconds field of 10^9 or more
    // (one second less, 10^9 nanoseconds more: the same time).
    let first_of_0 = cat.iter().filter(|e| e["stream"] == 0).min_by_key(|e| e["first_ns"].as_u64()).unwrap();
    let victim = store.join(first_of_0["file"].as_str().unwrap());
    let bytes = std::fs::read(&victim).unwrap();
    let mut r = Reader::new(&bytes[..]).unwrap();
    let mut offsets = Vec::new();
    while let Ok(Some(p)) = r.next_packet() {
        offsets.push(p.offset as usize);
    }
    let at = offsets[offsets.len() / 2];
    let mut bytes = bytes;
    let sec = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let nsec = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
    bytes[at..at + 4].copy_from_slice(&(sec - 1).to_le_bytes());
    bytes[at + 4..at + 8].copy_from_slice(&(nsec + 1_000_000_000).to_le_bytes());
    std::fs::write(&victim, &bytes).unwrap();

    let first = cat.iter().map(|e| e["first_ns"].as_u64().unwrap()).min().unwrap();
    let last = cat.iter().map(|e| e["last_ns"].as_u64().unwrap()).max().unwrap();
    let (a, b) = (first + (last - first) / 3, first + 2 * (last - first) / 3);
    let (a, b) = (time_arg(a), time_arg(b));
    let s = store.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["--from", &a],
        vec!["--to", &b],
        vec!["--from", &a, "--to", &b],
        vec!["--limit", "1000"],
        vec!["greater 500"],
    ];
    let file = tmp.join("out.pcap");
    for args in cases {
        let piped = Command::new(bin()).args(["query", s]).args(&args).output().unwrap();
        assert!(piped.status.success(), "{args:?}: {}", String::from_utf8_lossy(&piped.stderr));
        let _ = std::fs::remove_file(&file);
        let w = Command::new(bin()).args(["query", s]).args(&args).arg("-w").arg(&file).output().unwrap();
        assert!(w.status.success(), "{args:?}: {}", String::from_utf8_lossy(&w.stderr));
        let written = std::fs::read(&file).unwrap();
        assert!(written.len() > 24, "{args:?}: no packets");
        assert_eq!(piped.stdout.len(), written.len(), "{args:?}: pipe and -w sizes");
        assert!(piped.stdout == written, "{args:?}: pipe and -w bytes differ");
        // --count (files counted on several threads when there is no
        // --limit) counts what -w writes.
        let c = Command::new(bin()).args(["query", s, "--count"]).args(&args).output().unwrap();
        assert!(c.status.success(), "{args:?}: {}", String::from_utf8_lossy(&c.stderr));
        let n: usize = String::from_utf8_lossy(&c.stdout).trim().parse().unwrap();
        assert_eq!(n, frames(&written).len(), "{args:?}: --count");
        let from_pipe = tmp.join("piped.pcap");
        std::fs::write(&from_pipe, &piped.stdout).unwrap();
        let td = Command::new("tcpdump").args(["--nano", "-r"]).arg(&from_pipe).args(["-w", "-"]).output().unwrap();
        assert!(td.status.success(), "{args:?}: tcpdump: {}", String::from_utf8_lossy(&td.stderr));
        let (t, p) = (frames(&td.stdout), frames(&piped.stdout));
        assert_eq!(t.len(), p.len(), "{args:?}: packets tcpdump reads");
        assert!(t == p, "{args:?}: tcpdump reads other packets than the query wrote");
    }
});

/// `ip6 protochain 17` walks the IPv6 extension headers with a loop that
/// jumps back: query selects what tcpdump selects (it matched only UDP right
/// behind the IPv6 header, the jump back read as one past the program's end).
#[test]
fn protochain_selects_what_tcpdump_selects() {
    use crate::util::{read_capture, tcpdump_frames, write_pcap, Frame as F};
    if !have("tcpdump") {
        return;
    }
    let dir = TempDir::new("protochain");
    let ip6 = |nh: u8, ext: &[u8]| {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd, 0x60, 0, 0, 0];
        let payload = (ext.len() * 8 + 12) as u16;
        f.extend(payload.to_be_bytes());
        f.extend([nh, 64]);
        f.extend([0x20, 1, 0x0d, 0xb8].iter().chain(&[0; 11]).chain(&[1]));
        f.extend([0x20, 1, 0x0d, 0xb8].iter().chain(&[0; 11]).chain(&[2]));
        for &next in ext {
            f.extend([next, 0, 1, 4, 0, 0, 0, 0]);
        }
        f.extend([4, 0xd2, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]);
        f
    };
    let chains: [(u8, &[u8]); 6] = [(17, &[]), (0, &[17]), (0, &[60, 17]), (60, &[43, 17]), (0, &[60, 6]), (6, &[])];
    let frames: Vec<F> = (0..60u64)
        .map(|i| {
            let (nh, ext) = chains[i as usize % chains.len()];
            let data = ip6(nh, ext);
            F { ts_ns: 1_700_000_000_000_000_000 + i * 1000, origlen: data.len() as u32, data }
        })
        .collect();
    let file = dir.join("chains.pcap");
    write_pcap(&file, 1, 65535, false, &frames);
    let out = dir.join("out.pcap");
    let o = wirevault(&["query", file.to_str().unwrap(), "-w", out.to_str().unwrap(), "ip6 protochain 17"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, want) = tcpdump_frames(&file, &["ip6 protochain 17"], dir.path());
    assert_eq!(want.len(), 40, "tcpdump's own count");
    let (_, got) = read_capture(&out);
    let times = |v: &[crate::util::Rec]| v.iter().map(|r| r.ts_ns).collect::<Vec<_>>();
    assert_eq!(times(&got), times(&want), "the packets selected, by time");
    assert!(got.iter().zip(&want).all(|(g, w)| g.data == w.data), "the same bytes");
}

/// pcapng blocks, little-endian: a section header, an interface (with an
/// optional if_tsresol), an enhanced packet block.
fn ng_block(ty: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len().next_multiple_of(4)) as u32;
    let mut b = [ty.to_le_bytes(), len.to_le_bytes()].concat();
    b.extend(body);
    b.resize(len as usize - 4, 0);
    b.extend(len.to_le_bytes());
    b
}

fn ng_shb() -> Vec<u8> {
    ng_block(0x0a0d_0d0a, &[&0x1a2b_3c4du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat())
}

fn ng_idb(tsresol: Option<u8>) -> Vec<u8> {
    let mut body = [&1u16.to_le_bytes()[..], &[0, 0], &65535u32.to_le_bytes()].concat();
    if let Some(r) = tsresol {
        body.extend([9, 0, 1, 0, r, 0, 0, 0, 0, 0, 0, 0]);
    }
    ng_block(1, &body)
}

fn ng_epb(iface: u32, ts: u64, data: &[u8]) -> Vec<u8> {
    let n = (data.len() as u32).to_le_bytes();
    let body = [&iface.to_le_bytes()[..], &((ts >> 32) as u32).to_le_bytes(), &(ts as u32).to_le_bytes(), &n, &n, data];
    ng_block(6, &body.concat())
}

/// Interfaces declared after the first packet (two files joined by `cat`,
/// the second in nanoseconds; an interface added while capturing): an
/// indexed query narrowed by time or by a port reads every packet with its
/// own interface, as tcpdump does (it read the later packets with the first
/// section's interfaces: stamps 1000 times too late, or "no interface 1").
#[test]
fn pcapng_interfaces_after_packets_are_read_by_indexed_queries() {
    use crate::util::{make_frame, tcpdump_frames, Kind};
    if !have("tcpdump") {
        return;
    }
    let dir = TempDir::new("late-idb");
    // UDP frames; the DNS ones of the second part (port 53) are the ones asked for.
    let frame = |i: u32, kind: Kind| make_frame(i, kind, 80);
    let early: Vec<u8> =
        (0..256u32).flat_map(|i| ng_epb(0, 1_000_000_000 + u64::from(i), &frame(2 * i + 1, Kind::Udp))).collect();
    let joined = [
        ng_shb(),
        ng_idb(None),
        early.clone(),
        ng_shb(),
        ng_idb(Some(9)),
        (0..100u32)
            .flat_map(|i| ng_epb(0, 2_000_000_000_000 + u64::from(i) * 1000, &frame(2 * i, Kind::Dns)))
            .collect(),
    ]
    .concat();
    let added = [
        ng_shb(),
        ng_idb(None),
        early,
        ng_idb(None),
        (0..100u32).flat_map(|i| ng_epb(1, 2_000_000_000 + u64::from(i), &frame(2 * i, Kind::Dns))).collect(),
    ]
    .concat();
    for (name, bytes) in [("joined", joined), ("added", added)] {
        let sub = dir.join(name);
        std::fs::create_dir(&sub).unwrap();
        let file = sub.join("x.pcapng");
        std::fs::write(&file, bytes).unwrap();
        let o = wirevault(&["index", sub.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (_, want) = tcpdump_frames(&file, &["udp port 53"], dir.path());
        assert_eq!(want.len(), 100, "{name}: tcpdump's count");
        let first = want[0].ts_ns / 1_000_000_000;
        for args in [vec!["udp port 53"], vec!["--from", &*first.to_string()]] {
            let out = dir.join(format!("{name}.pcap"));
            let mut a = vec!["query", sub.to_str().unwrap(), "-w", out.to_str().unwrap()];
            a.extend(args.iter().copied());
            let o = wirevault(&a);
            assert!(
                o.status.success() && o.stderr.is_empty(),
                "{name} {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let got = frames(&std::fs::read(&out).unwrap());
            let times: Vec<u64> = got.iter().map(|f| f.0).collect();
            assert_eq!(times, want.iter().map(|r| r.ts_ns).collect::<Vec<_>>(), "{name} {args:?}");
        }
    }
}

/// A file of an indexed directory that grew since (a capture still being
/// written, appended to): a time range past its catalogued end still finds
/// the new packets, with the note that its index is stale (the catalog's
/// times skipped the file, and the answer was 0).
#[test]
fn a_grown_file_of_a_directory_is_read_past_its_catalogued_end() {
    use crate::util::{test_frames, write_pcap};
    let dir = TempDir::new("grown");
    let captures = dir.join("captures");
    std::fs::create_dir(&captures).unwrap();
    let frames = test_frames(200, 1_700_000_000_000_000_000);
    let whole = dir.join("whole.pcap");
    write_pcap(&whole, 1, 65535, true, &frames);
    let bytes = std::fs::read(&whole).unwrap();
    let half = 24 + frames[..100].iter().map(|f| 16 + f.data.len()).sum::<usize>();
    let file = captures.join("x.pcap");
    std::fs::write(&file, &bytes[..half]).unwrap();
    assert!(wirevault(&["index", captures.to_str().unwrap()]).status.success());
    std::fs::write(&file, &bytes).unwrap();
    let from = time_arg(frames[150].ts_ns);
    let o = wirevault(&["query", captures.to_str().unwrap(), "--from", &from, "--count"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "50");
    assert!(String::from_utf8_lossy(&o.stderr).contains("changed size"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `index DIR` takes every capture file, whatever its name (tcpdump's
/// `-C`/`-W` rings write `trace.pcap1`, `trace.pcap00`; other tools `.dmp`,
/// `.PCAP`, no extension), and no other file (it took names ending in
/// .pcap, .pcapng or .cap only, and left the rest out without a word).
#[test]
fn index_of_a_directory_takes_captures_by_content_not_name() {
    use crate::util::{test_frames, write_pcap};
    let dir = TempDir::new("ring-names");
    let frames = test_frames(60, 1_700_000_000_000_000_000);
    let names = ["trace.pcap", "trace.pcap1", "trace.pcap00", "old.dmp", "UPPER.PCAP", "noext"];
    for (i, name) in names.iter().enumerate() {
        write_pcap(&dir.join(name), 1, 65535, i % 2 == 0, &frames[i * 10..i * 10 + 10]);
    }
    std::fs::write(dir.join("notes.txt"), "not a capture\n").unwrap();
    std::fs::write(dir.join("x.pcap.gz"), [0x1f, 0x8b, 8, 0]).unwrap();
    let o = wirevault(&["index", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("indexed 6 file(s), 60 packets"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = wirevault(&["query", dir.path().to_str().unwrap(), "--count"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "60");
}

/// A directory holding one capture of a link type libpcap cannot filter
/// (PKTAP) beside Ethernet ones: a filtered query answers from the others
/// and says which packets it left out (the whole query was refused, exit
/// 2); an expression no link type takes is still refused.
wvtest!(a_link_type_the_filter_cannot_take_is_left_out_with_a_warning, needs = [corpus], |t| {
    use crate::util::{test_frames, write_pcap};
    let pktap = t.corpus_file("pktap-heap-overflow.pcap");
    let tmp = TempDir::new("pktap");
    let dir = TempDir::new("pktap-store");
    write_pcap(&dir.join("eth.pcap"), 1, 65535, false, &test_frames(100, 1_700_000_000_000_000_000));
    std::fs::copy(&pktap, dir.join("pktap.pcap")).unwrap();
    assert!(wirevault(&["index", dir.path().to_str().unwrap()]).status.success());
    let want = crate::util::tcpdump_frames(&dir.join("eth.pcap"), &["udp"], tmp.path()).1.len();
    assert!(want > 0);
    for threads in ["", "-w"] {
        let out = tmp.join("out.pcap");
        let mut args = vec!["query", dir.path().to_str().unwrap()];
        args.extend(if threads.is_empty() { vec!["--count"] } else { vec!["-w", out.to_str().unwrap()] });
        args.push("udp");
        let o = wirevault(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(err.matches("cannot be applied to link type").count(), 1, "{err}");
        if threads.is_empty() {
            assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), want.to_string());
        } else {
            assert_eq!(frames(&std::fs::read(&out).unwrap()).len(), want);
        }
    }
    let o = wirevault(&["query", dir.path().to_str().unwrap(), "--count", "udpp"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
});

/// A time range that lies outside the store (after its newest packet, before its oldest):
/// `query --count`, `query` and `analyze` say so on standard error with the sentence
/// `/api/v1/count` answers in `outside` for the same range (before: a silent 0). A range
/// inside the store says nothing of the kind.
#[test]
fn a_range_outside_the_store_is_said_on_standard_error() {
    use crate::util::{run_wirevault, Http, Served};
    let tmp = TempDir::new("outside");
    let store = tmp.path().join("s");
    let s = store.to_str().unwrap();
    run_wirevault(&["record", "--synthetic", "size=64,count=500", "-o", s, "-q", "--buffer", "64M"])
        .expect(0, "record");
    let served = have("curl").then(|| Served::start(&store, tmp.path(), &[]));
    for (from, to) in [(Some("2500-01-01T00:00:00Z"), None), (None, Some("1971-01-01T00:00:00Z"))] {
        let mut range: Vec<&str> = Vec::new();
        let mut params = Vec::new();
        if let Some(f) = from {
            range.extend(["--from", f]);
            params.push(("from", f));
        }
        if let Some(t) = to {
            range.extend(["--to", t]);
            params.push(("to", t));
        }
        let edge =
            if from.is_some() { "starts after the newest stored packet" } else { "ends before the oldest packet" };
        let count = run_wirevault(&[&["query", s, "--count"], range.as_slice()].concat());
        count.expect(0, "query --count");
        assert_eq!(count.stdout.trim(), "0");
        let line =
            count.stderr.lines().find(|l| l.contains(edge)).unwrap_or_else(|| panic!("{range:?}: {}", count.stderr));
        if let Some(sv) = &served {
            let r = Http::new(&format!("http://{}", sv.addr)).get("/api/v1/count", &params);
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let why = v["outside"].as_str().unwrap_or_else(|| panic!("API: {v}"));
            assert!(line.ends_with(why), "CLI {line:?} against the API's {why:?}");
        }
        let out = tmp.path().join("out.pcap");
        let q = run_wirevault(&[&["query", s, "-w", out.to_str().unwrap()], range.as_slice()].concat());
        q.expect(0, "query -w");
        assert!(q.stderr.contains(edge), "query -w {range:?}: {}", q.stderr);
        let a = run_wirevault(&[&["analyze", s, "--json"], range.as_slice()].concat());
        a.expect(0, "analyze");
        assert!(a.stderr.contains(edge), "analyze {range:?}: {}", a.stderr);
    }
    let inside = run_wirevault(&["query", s, "--count", "--from", "1971-01-01T00:00:00Z"]);
    assert_eq!(inside.expect(0, "inside").stdout.trim(), "500");
    assert!(!inside.stderr.contains("newest") && !inside.stderr.contains("oldest"), "{}", inside.stderr);
}
