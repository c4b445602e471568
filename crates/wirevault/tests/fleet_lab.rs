//! The fleet lab (`scripts/fleet-lab.sh`, docs/fleet.md): a splitter that
//! spreads one sender's traffic over three links by a hash of the IP addresses,
//! a recorder on each link, tcpdump on the splitter's ingress. What the fleet
//! query's tests build on must hold first: the three stores together hold
//! exactly the frames of the unsplit capture, each once, each store in the
//! link's order; with the symmetric hash every conversation on one node, with
//! `--asymmetric` some conversation on two.
//!
//! The timestamps are each capture's own: a frame is stamped when the splitter
//! receives it (tcpdump) and again when its recorder does, microseconds later,
//! as three real boxes stamp with their own clocks. So a frame is matched by its
//! bytes (every frame of the lab's capture is unique) and its two timestamps must
//! be close, not equal.

use crate::util::{
    heavy_lock, query_frames, read_capture, tcpdump_frames, write_lab_pcap, wvtest, FleetLab, Http, Rec,
    FLEET_LAB_TOOLS,
};
use std::collections::{BTreeSet, HashMap};

/// How far (ns) a recorder's timestamp may be from tcpdump's of the same frame.
const STAMP_SKEW_NS: u64 = 1_000_000_000;

/// What a lab run gives a test: the unsplit frames, and the frames of each node.
struct Run {
    lab: FleetLab,
    unsplit: Vec<Rec>,
    nodes: Vec<Vec<Rec>>,
}

/// Starts a lab of 3 nodes, replays the lab's test capture (3 rounds of conversations,
/// seed `seed`) into it, stops the captures and reads everything back: the stores with
/// `wirevault query -w`, the unsplit capture through tcpdump.
fn run_lab(asymmetric: bool, seed: u32) -> Run {
    let lab = FleetLab::up(3, asymmetric);
    let pcap = lab.dir.join("traffic.pcap");
    write_lab_pcap(&pcap, seed, 3);
    lab.send(&pcap, &[]);
    lab.stop();
    let (_, sent) = read_capture(&pcap);
    let (linktype, unsplit) = tcpdump_frames(&lab.unsplit, &[], &lab.dir);
    assert_eq!(linktype, 1, "the unsplit capture is Ethernet");
    // The tap saw what was sent, in order: else nothing below would mean much.
    assert_eq!(
        unsplit.len(),
        sent.len(),
        "tcpdump on the splitter's ingress saw {} of {} frames",
        unsplit.len(),
        sent.len()
    );
    for (i, (u, s)) in unsplit.iter().zip(&sent).enumerate() {
        assert!(u.data == s.data && u.origlen == s.origlen, "frame {i} reached the splitter changed");
    }
    let nodes =
        lab.nodes.iter().map(|n| query_frames(&n.store, &lab.dir.join(format!("{}.pcap", n.name)), &[])).collect();
    Run { lab, unsplit, nodes }
}

/// Which node holds each frame of the unsplit capture, checking that every stored frame is
/// one of them, stored once, each node's frames in the order the splitter received them,
/// stamped within [`STAMP_SKEW_NS`] of tcpdump's stamp and never earlier than the frame
/// before it on the node; and that no frame is missing.
fn owners(run: &Run) -> Vec<usize> {
    let mut index: HashMap<&[u8], usize> = HashMap::new();
    for (i, r) in run.unsplit.iter().enumerate() {
        assert!(index.insert(&r.data, i).is_none(), "frame {i} of the test capture is not unique");
    }
    let mut owner = vec![usize::MAX; run.unsplit.len()];
    for (k, frames) in run.nodes.iter().enumerate() {
        let name = &run.lab.nodes[k].name;
        let (mut last, mut last_ts) = (None, 0);
        for (j, r) in frames.iter().enumerate() {
            let Some(&i) = index.get(&r.data[..]) else {
                panic!("{name}: stored frame {j} ({} bytes) is not in the unsplit capture", r.data.len());
            };
            assert_eq!(owner[i], usize::MAX, "frame {i} is stored twice: on {} and on {name}", owner[i]);
            owner[i] = k;
            assert!(last < Some(i), "{name}: frame {i} stored after frame {last:?}, out of the link's order");
            assert_eq!(r.origlen, run.unsplit[i].origlen, "{name}: original length of frame {i}");
            let skew = r.ts_ns.abs_diff(run.unsplit[i].ts_ns);
            assert!(skew < STAMP_SKEW_NS, "{name}: frame {i} stamped {skew} ns away from the splitter's stamp");
            assert!(r.ts_ns >= last_ts, "{name}: frame {j}'s timestamp goes back");
            (last, last_ts) = (Some(i), r.ts_ns);
        }
    }
    let missing: Vec<usize> = (0..owner.len()).filter(|&i| owner[i] == usize::MAX).collect();
    assert!(
        missing.is_empty(),
        "{} frames of the unsplit capture on no node, the first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    owner
}

/// A frame's conversation: its VLAN IDs, EtherType, protocol and the two endpoints (address
/// and port; ICMP's echo identifier; ARP's two IP addresses), in sorted order unless
/// `directed`, so that both directions have one key. Frames of another EtherType: `None`.
pub(crate) fn conversation(f: &[u8], directed: bool) -> Option<Vec<u8>> {
    let be16 = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    let mut key = Vec::new();
    let mut o = 12;
    while matches!(be16(o), 0x8100 | 0x88a8) {
        key.extend_from_slice(&(be16(o + 2) & 0x0fff).to_be_bytes());
        o += 4;
    }
    let et = be16(o);
    key.extend_from_slice(&et.to_be_bytes());
    let ip = o + 2;
    let (proto, src, dst, l4) = match et {
        0x0800 => (f[ip + 9], &f[ip + 12..ip + 16], &f[ip + 16..ip + 20], ip + 4 * usize::from(f[ip] & 15)),
        0x86dd => (f[ip + 6], &f[ip + 8..ip + 24], &f[ip + 24..ip + 40], ip + 40),
        0x0806 => (0, &f[ip + 14..ip + 18], &f[ip + 24..ip + 28], f.len()),
        _ => return None,
    };
    key.push(proto);
    let (mut a, mut b) = (src.to_vec(), dst.to_vec());
    match proto {
        6 | 17 => {
            a.extend_from_slice(&f[l4..l4 + 2]);
            b.extend_from_slice(&f[l4 + 2..l4 + 4]);
        }
        1 => key.extend_from_slice(&f[l4 + 4..l4 + 6]), // the echo identifier
        _ => {}
    }
    if !directed && a > b {
        std::mem::swap(&mut a, &mut b);
    }
    key.extend(a);
    key.extend(b);
    Some(key)
}

/// For each conversation (see [`conversation`]), the nodes that hold its frames.
fn spread(run: &Run, owner: &[usize], directed: bool) -> HashMap<Vec<u8>, BTreeSet<usize>> {
    let mut m: HashMap<Vec<u8>, BTreeSet<usize>> = HashMap::new();
    for (i, r) in run.unsplit.iter().enumerate() {
        let key = conversation(&r.data, directed).unwrap_or_else(|| panic!("frame {i} is of no conversation"));
        m.entry(key).or_default().insert(owner[i]);
    }
    m
}

wvtest!(symmetric_hash_puts_each_frame_and_conversation_on_one_node, needs = [root, FLEET_LAB_TOOLS], |t| {
    let _g = heavy_lock();
    let run = run_lab(false, 7);
    let owner = owners(&run);
    let convs = spread(&run, &owner, false);
    assert!(convs.len() > 100, "{t}: only {} conversations in the test capture", convs.len());
    for (key, nodes) in &convs {
        assert_eq!(nodes.len(), 1, "{t}: conversation {key:02x?} on nodes {nodes:?}: the hash is not symmetric");
    }
    // A fair share: no node empty, none with more than half (a third each, give or take the
    // hash over some 25 address pairs).
    let total = owner.len();
    for (k, frames) in run.nodes.iter().enumerate() {
        let share = frames.len() as f64 / total as f64;
        assert!((0.15..0.5).contains(&share), "{t}: node {k} holds {} of {total} frames", frames.len());
    }
    // The classifiers took every frame: none fell through to the catch-all (pref 100).
    let status = run.lab.status();
    assert!(status.contains("classifier pref 100: 0 packets"), "{t}: some frames missed the hash:\n{status}");
    eprintln!(
        "{t}: {total} frames, {} conversations; per node {:?}",
        convs.len(),
        run.nodes.iter().map(Vec::len).collect::<Vec<_>>()
    );
});

wvtest!(asymmetric_hash_splits_directions_and_the_union_stays_exact, needs = [root, FLEET_LAB_TOOLS], |t| {
    let _g = heavy_lock();
    let run = run_lab(true, 8);
    let owner = owners(&run);
    // Hashed on the source address: each direction on one node ...
    for (key, nodes) in spread(&run, &owner, true) {
        assert_eq!(nodes.len(), 1, "{t}: one direction {key:02x?} on nodes {nodes:?}");
    }
    // ... and conversations whose two directions are on two nodes, as Arkime's users see them.
    let convs = spread(&run, &owner, false);
    let split = convs.values().filter(|n| n.len() == 2).count();
    assert!(split > 0, "{t}: no conversation has its directions on two nodes");
    assert!(run.nodes.iter().all(|n| !n.is_empty()), "{t}: a node holds nothing");
    eprintln!("{t}: {split} of {} conversations on two nodes", convs.len());
});

wvtest!(lab_fleet_file_names_each_node_and_its_server_answers, needs = [root, FLEET_LAB_TOOLS], |t| {
    let _g = heavy_lock();
    let run = run_lab(false, 9);
    let text = std::fs::read_to_string(&run.lab.fleet_file).expect("read the fleet file");
    let fleet: toml::Value =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{t}: the fleet file is not TOML: {e}\n{text}"));
    let listed = fleet["node"].as_array().unwrap_or_else(|| panic!("{t}: no [[node]] in\n{text}"));
    assert_eq!(listed.len(), run.lab.nodes.len(), "{t}: nodes in the fleet file");
    for ((n, entry), frames) in run.lab.nodes.iter().zip(listed).zip(&run.nodes) {
        assert_eq!(entry["name"].as_str(), Some(n.name.as_str()), "{t}: node name");
        assert_eq!(entry["url"].as_str(), Some(n.url.as_str()), "{t}: {}'s url", n.name);
        assert_eq!(entry["token_file"].as_str(), n.token_file.to_str(), "{t}: {}'s token file", n.name);
        let http = Http::new(&n.url);
        let auth = format!("Authorization: Bearer {}", n.token());
        let count = http.with(&["-H", &auth]).get("/api/v1/count", &[]);
        assert_eq!(count.status, 200, "{t}: {} /api/v1/count: {}", n.name, count.text());
        assert_eq!(count.json()["matched"], frames.len(), "{t}: {}'s count against its store", n.name);
        let refused = http.get("/api/v1/count", &[]);
        assert_eq!(refused.status, 401, "{t}: {} answered without its token: {}", n.name, refused.text());
    }
});
