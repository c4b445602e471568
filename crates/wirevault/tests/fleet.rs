//! The fleet: one query over several stores (`query --store ... --store`,
//! `query --fleet FILE`). A link's traffic (TCP connections, UDP, VLAN
//! tagged UDP, IPv6) is split over three stores by a symmetric hash of the
//! IP addresses, as a switch's link aggregation would; two stores are
//! served by `wirevault serve` on loopback (one with a token), one is read
//! locally. The merged answer must hold exactly the frames `tcpdump -r`
//! selects from the unsplit capture, ordered by timestamp, equal
//! timestamps by node then by the node's own order; pcapng gives each node
//! its interface. Faults (a node down, refusing, stopped mid-export, a bad
//! fleet file) are named, one sentence per node, exit 1 unless
//! `--allow-partial`.

use crate::util::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const START_NS: u64 = 1_700_000_000_000_000_000;
pub(crate) const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// A conversation on the link: two hosts, two ports, TCP or UDP, maybe
/// VLAN-tagged, maybe IPv6; `step` frames sent so far.
struct Conv {
    a: [u8; 4],
    b: [u8; 4],
    ports: (u16, u16),
    tcp: bool,
    vlan: Option<u16>,
    v6: bool,
    step: u32,
    len: u32,
}

fn new_conv(rng: &mut Rng) -> Conv {
    let host = |rng: &mut Rng| [10, 0, rng.below(4) as u8, 1 + rng.below(30) as u8];
    let a = host(rng);
    let mut b = host(rng);
    while b == a {
        b = host(rng);
    }
    let tcp = rng.chance(0.6);
    Conv {
        a,
        b,
        ports: (1024 + rng.below(60000) as u16, rng.pick(&[80, 443, 53, 8080, 5001])),
        tcp,
        vlan: (!tcp && rng.chance(0.4)).then(|| rng.pick(&[10, 20])),
        v6: !tcp && rng.chance(0.15),
        step: 0,
        len: 4 + rng.below(60) as u32,
    }
}

/// The next frame of `c` (SYN, SYN-ACK, ACK, data both ways, FIN for TCP).
fn conv_frame(c: &mut Conv, rng: &mut Rng, seq: u32) -> Vec<u8> {
    let back = if c.tcp { c.step % 2 == 1 } else { rng.chance(0.3) };
    let (src, dst, sp, dp) = if back { (c.b, c.a, c.ports.1, c.ports.0) } else { (c.a, c.b, c.ports.0, c.ports.1) };
    let flags: u8 = match c.step {
        0 => 0x02,
        1 => 0x12,
        _ if c.step + 1 == c.len => 0x11,
        _ => 0x18,
    };
    let payload = if c.tcp && c.step < 3 {
        0
    } else if rng.chance(0.6) {
        1400
    } else {
        rng.below(600) as usize
    };
    c.step += 1;
    let mut l4 = Vec::new();
    l4.extend(sp.to_be_bytes());
    l4.extend(dp.to_be_bytes());
    if c.tcp {
        l4.extend(seq.to_be_bytes());
        l4.extend((seq ^ 0x5555).to_be_bytes());
        l4.extend([0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        l4.extend(((8 + payload) as u16).to_be_bytes());
        l4.extend([0, 0]);
    }
    l4.extend(seq.to_be_bytes());
    l4.extend((0..payload.saturating_sub(4)).map(|i| (i as u32 ^ seq) as u8));
    let mut f = Vec::new();
    f.extend([2, 0, 0, 0, 0, dst[3]]);
    f.extend([2, 0, 0, 0, 0, src[3]]);
    if let Some(v) = c.vlan {
        f.extend([0x81, 0x00]);
        f.extend(v.to_be_bytes());
    }
    let proto = if c.tcp { 6 } else { 17 };
    if c.v6 {
        f.extend([0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend((l4.len() as u16).to_be_bytes());
        f.extend([proto, 64]);
        for h in [src, dst] {
            f.extend([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            f.extend(h);
        }
    } else {
        f.extend([0x08, 0x00, 0x45, 0]);
        f.extend(((20 + l4.len()) as u16).to_be_bytes());
        f.extend((seq as u16).to_be_bytes());
        f.extend([0x40, 0, 64, proto, 0, 0]);
        f.extend(src);
        f.extend(dst);
    }
    f.extend(l4);
    f.resize(f.len().max(60), 0);
    f
}

/// The node of a frame: a symmetric hash (XOR) of its IP addresses, as a
/// switch's link aggregation with a symmetric hash spreads a link.
pub(crate) fn node_of(f: &[u8]) -> usize {
    let mut at = 12;
    while f[at..at + 2] == [0x81, 0x00] {
        at += 4;
    }
    let x: Vec<u8> = match f[at..at + 2] {
        [0x08, 0x00] => (0..4).map(|i| f[at + 14 + i] ^ f[at + 18 + i]).collect(),
        [0x86, 0xdd] => (0..4).map(|i| f[at + 2 + 8 + 12 + i] ^ f[at + 2 + 24 + 12 + i]).collect(),
        _ => return 0,
    };
    (x.iter().fold(0u32, |h, b| h.wrapping_mul(31) ^ u32::from(*b)) % 3) as usize
}

/// `n` frames of the link: conversations interleaved at random; time steps
/// of 0 to 2 µs, so that frames of different nodes share timestamps.
fn link(n: u32, seed: u64) -> Vec<Frame> {
    let mut rng = Rng(seed);
    let mut convs: Vec<Conv> = (0..24).map(|_| new_conv(&mut rng)).collect();
    let mut ts = START_NS;
    (0..n)
        .map(|seq| {
            let i = rng.below(convs.len() as u64) as usize;
            let data = conv_frame(&mut convs[i], &mut rng, seq);
            if convs[i].step >= convs[i].len {
                convs[i] = new_conv(&mut rng);
            }
            ts += rng.below(3) * 1000 + rng.below(2) * 7;
            Frame { ts_ns: ts, origlen: data.len() as u32, data }
        })
        .collect()
}

/// The unsplit capture, its three parts recorded as stores.
pub(crate) struct Lab {
    pub tmp: TempDir,
    pub full: PathBuf,
    pub stores: Vec<PathBuf>,
    pub first: u64,
    pub last: u64,
}

pub(crate) fn lab(name: &str, n: u32) -> Lab {
    let tmp = TempDir::new(name);
    let frames = link(n, 46);
    let full = tmp.join("link.pcap");
    write_pcap(&full, 1, 65535, true, &frames);
    let mut stores = Vec::new();
    for k in 0..3 {
        let part: Vec<Frame> = frames.iter().filter(|f| node_of(&f.data) == k).cloned().collect();
        assert!(part.len() > n as usize / 10, "node {k} holds {} of {n} frames: a poor split", part.len());
        let file = tmp.join(format!("part-{k}.pcap"));
        write_pcap(&file, 1, 65535, true, &part);
        let store = tmp.join(format!("store-{k}"));
        let o = wirevault()
            .args(["record", "-q", "--buffer", "8M", "--block-size", "64K", "-o"])
            .arg(&store)
            .arg("--read")
            .arg(&file)
            .output()
            .expect("run wirevault record");
        Outcome::from_output(o).expect(0, "record --read a part");
        stores.push(store);
    }
    let (first, last) = (frames[0].ts_ns, frames[frames.len() - 1].ts_ns);
    Lab { tmp, full, stores, first, last }
}

/// What one recorder of the whole link would answer: `tcpdump -r` over the
/// unsplit capture, in the time range, in the fleet's order (by timestamp,
/// equal ones by node; a node's own frames keep the capture's order).
pub(crate) fn expected(lab: &Lab, expr: &str, range: (u64, u64)) -> Vec<Frame> {
    let args: Vec<&str> = if expr.is_empty() { vec![] } else { vec![expr] };
    let (_, recs) = tcpdump_frames(&lab.full, &args, lab.tmp.path());
    let mut v: Vec<Frame> = recs.iter().filter(|r| r.ts_ns >= range.0 && r.ts_ns < range.1).map(Rec::frame).collect();
    v.sort_by_key(|f| (f.ts_ns, node_of(&f.data)));
    v
}

/// `wirevault query ARGS -w OUT` with the time range and expression; its outcome and frames.
pub(crate) fn fleet_query(args: &[&str], expr: &str, range: (u64, u64), out: &Path) -> (Outcome, Vec<Rec>) {
    let (from, to) = (time_arg(range.0), time_arg(range.1));
    let mut a = vec!["query", "-w", s(out), "--from", &from, "--to", &to];
    a.extend_from_slice(args);
    a.push("--");
    if !expr.is_empty() {
        a.push(expr);
    }
    let o = run_wirevault(&a);
    let recs = if out.exists() { read_capture(out).1 } else { Vec::new() };
    (o, recs)
}

pub(crate) fn count(args: &[&str], expr: &str, range: (u64, u64)) -> Outcome {
    let (from, to) = (time_arg(range.0), time_arg(range.1));
    let mut a = vec!["query", "--count", "--from", &from, "--to", &to];
    a.extend_from_slice(args);
    a.push("--");
    if !expr.is_empty() {
        a.push(expr);
    }
    run_wirevault(&a)
}

/// The expressions checked: everything, one flow, a subnet, SYNs, a
/// negation, VLAN-tagged UDP, IPv6.
fn expressions(lab: &Lab) -> Vec<String> {
    // One TCP flow of the capture: the first SYN's addresses and port.
    let (_, syns) = tcpdump_frames(&lab.full, &["tcp[tcpflags] == tcp-syn"], lab.tmp.path());
    let f = &syns[syns.len() / 2].data;
    let ip = |o: usize| format!("{}.{}.{}.{}", f[o], f[o + 1], f[o + 2], f[o + 3]);
    let port = u16::from_be_bytes([f[34], f[35]]);
    vec![
        String::new(),
        format!("tcp and host {} and host {} and port {port}", ip(26), ip(30)),
        "net 10.0.2.0/24".into(),
        "tcp[tcpflags] & tcp-syn != 0".into(),
        "not net 10.0.1.0/24 and not tcp port 443".into(),
        "vlan and udp".into(),
        "ip6".into(),
    ]
}

/// The time ranges checked: the whole capture, its middle, a short slice.
pub(crate) fn ranges(lab: &Lab) -> Vec<(u64, u64)> {
    let span = lab.last - lab.first;
    vec![
        (lab.first, lab.last + 1),
        (lab.first + span / 4, lab.first + span * 3 / 4),
        (lab.first + span / 2, lab.first + span / 2 + span / 50),
    ]
}

/// A token file for `serve --token-file` and the fleet's `token_file`.
pub(crate) fn token_file(dir: &Path, token: &str) -> PathBuf {
    let p = dir.join(format!("token-{}", &token[..4]));
    fs::write(&p, format!("fleet:{token}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// A fleet file of nodes `(name, url, token file)`, with `extra` lines first.
pub(crate) fn fleet_file(dir: &Path, name: &str, extra: &str, nodes: &[(&str, String, Option<&Path>)]) -> PathBuf {
    let mut t = format!("{extra}\n");
    for (n, url, tok) in nodes {
        t.push_str(&format!("[[node]]\nname = \"{n}\"\nurl = \"{url}\"\n"));
        if let Some(tok) = tok {
            t.push_str(&format!("token_file = \"{}\"\n", tok.display()));
        }
    }
    let p = dir.join(name);
    fs::write(&p, t).unwrap();
    p
}

/// The interface name of each packet of a pcapng file, as tshark reads it.
fn tshark_interfaces(file: &Path) -> Vec<String> {
    let o = run_ok(Command::new("tshark").arg("-r").arg(file).args(["-T", "fields", "-e", "frame.interface_name"]));
    String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
}

/// Three local stores, then two served and one local through a fleet
/// file: every expression and range equals tcpdump over the unsplit
/// capture, in pcap and pcapng; `--count` and `--limit` agree.
wvtest!(fleet_answer_equals_tcpdump_over_the_unsplit_link, needs = ["tcpdump", "tshark"], |t| {
    let lab = lab("fleet-exact", 12_000);
    let local: Vec<String> = lab.stores.iter().map(|p| format!("--store={}", p.display())).collect();
    let local: Vec<&str> = local.iter().map(String::as_str).collect();
    let tokens = token_file(lab.tmp.path(), TOKEN);
    let b = Served::start(&lab.stores[1], lab.tmp.path(), &["--token-file", s(&tokens)]);
    let c = Served::start(&lab.stores[2], lab.tmp.path(), &[]);
    let fleet = fleet_file(
        lab.tmp.path(),
        "fleet.toml",
        "node_timeout = \"20s\"",
        &[
            ("a", lab.stores[0].display().to_string(), None),
            ("b", format!("http://{}", b.addr), Some(&tokens)),
            ("c", format!("http://{}", c.addr), None),
        ],
    );
    let out = lab.tmp.join("out.pcap");
    let ng = lab.tmp.join("out.pcapng");
    let names = ["a", "b", "c"];
    for expr in expressions(&lab) {
        for range in ranges(&lab) {
            let want = expected(&lab, &expr, range);
            let what = format!("{expr:?} in {range:?}");
            for (how, args) in [("local", local.clone()), ("fleet", vec!["--fleet", s(&fleet)])] {
                let (o, got) = fleet_query(&args, &expr, range, &out);
                o.expect(0, &format!("{how} {what}"));
                assert_same_frames(&want, &got, true, &format!("{how} {what}"));
                let o = count(&args, &expr, range);
                o.expect(0, &format!("{how} --count {what}"));
                assert_eq!(o.stdout.trim(), want.len().to_string(), "{how} --count {what}");
            }
            // pcapng: the same frames (as tcpdump reads them), each on its node's interface.
            let (o, _) = fleet_query(&["--fleet", s(&fleet), "--format", "pcapng"], &expr, range, &ng);
            o.expect(0, &format!("pcapng {what}"));
            let (_, got) = tcpdump_frames(&ng, &[], lab.tmp.path());
            assert_same_frames(&want, &got, true, &format!("pcapng {what}"));
            let ifs = tshark_interfaces(&ng);
            let want_ifs: Vec<&str> = want.iter().map(|f| names[node_of(&f.data)]).collect();
            assert_eq!(ifs, want_ifs, "pcapng {what}: each packet on its node's interface");
        }
        // --limit: the first N of the merged answer, and the count agrees.
        let whole = ranges(&lab)[0];
        let want = expected(&lab, &expr, whole);
        let n = (want.len() / 3).max(1);
        let l = n.to_string();
        let (o, got) = fleet_query(&["--fleet", s(&fleet), "--limit", &l], &expr, whole, &out);
        o.expect(0, &format!("--limit {n} {expr:?}"));
        assert_same_frames(&want[..n.min(want.len())], &got, true, &format!("--limit {n} {expr:?}"));
        let o = count(&["--fleet", s(&fleet), "--limit", &l], &expr, whole);
        o.expect(0, "--count --limit");
        assert_eq!(o.stdout.trim(), n.min(want.len()).to_string(), "--count --limit {n} {expr:?}");
    }
    // The interfaces are the nodes, with their locations as descriptions.
    let (o, _) = fleet_query(&["--fleet", s(&fleet), "--format", "pcapng"], "", ranges(&lab)[0], &ng);
    o.expect(0, "pcapng of everything");
    let o = run_ok(Command::new("tshark").arg("-r").arg(&ng).args([
        "-T",
        "fields",
        "-e",
        "frame.interface_name",
        "-e",
        "frame.interface_description",
    ]));
    let locations = [lab.stores[0].display().to_string(), format!("http://{}", b.addr), format!("http://{}", c.addr)];
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.trim().is_empty(), "no packet in the last pcapng answer");
    for line in text.lines() {
        let (name, desc) = line.split_once('\t').unwrap_or((line, ""));
        let k = names.iter().position(|n| *n == name).unwrap_or_else(|| panic!("interface {name:?} is no node"));
        assert_eq!(desc, locations[k], "node {name}'s interface description");
    }
    let o = run_ok(Command::new("capinfos").arg("-M").arg(&ng));
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(info.contains("Number of interfaces in file: 3"), "{info}");
});

/// `analyze` over the fleet reads the fleet's merged answer: its report is the
/// report of `analyze` over that answer written as a file, and counts the
/// packets of the unsplit link; a node left out is named, exit 1 unless
/// `--allow-partial`.
wvtest!(analyze_over_the_fleet_is_analyze_over_its_answer, needs = ["tcpdump"], |t| {
    let lab = lab("fleet-analyze", 6_000);
    let mut args: Vec<String> = vec!["analyze".into(), "--json".into()];
    for st in &lab.stores {
        args.extend(["--store".into(), st.display().to_string()]);
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let fleet = run_wirevault(&a);
    fleet.expect(0, "analyze --store x3");
    let merged = lab.tmp.join("merged.pcap");
    let mut q: Vec<&str> = vec!["query", "-w", s(&merged)];
    q.extend_from_slice(&a[2..]);
    run_wirevault(&q).expect(0, "query --store x3");
    let one = run_wirevault(&["analyze", "--json", s(&merged)]);
    one.expect(0, "analyze merged.pcap");
    let (f, o): (serde_json::Value, serde_json::Value) =
        (serde_json::from_str(&fleet.stdout).unwrap(), serde_json::from_str(&one.stdout).unwrap());
    assert_eq!(f, o, "{t}: analyze over the fleet and over its answer differ");
    let text = fleet.stdout.clone();
    assert!(
        text.contains(&format!("\"packets\": {}", expected(&lab, "", (lab.first, lab.last + 1)).len())),
        "{t}: {text:.400}"
    );
    // A store that is not there: named, exit 1; with --allow-partial exit 0.
    let missing = lab.tmp.join("no-such-store");
    let mut b = a.clone();
    b.extend(["--store", s(&missing)]);
    let o = run_wirevault(&b);
    o.expect(1, "analyze with a missing store");
    assert!(o.stderr.contains("node no-such-store (") && o.stderr.contains("--allow-partial"), "{t}: {}", o.stderr);
    b.push("--allow-partial");
    let o = run_wirevault(&b);
    o.expect(0, "analyze --allow-partial with a missing store");
    let p: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(p, f, "{t}: the partial report is the others' report");
});
