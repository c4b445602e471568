//! The fleet query over the lab of `scripts/fleet-lab.sh` (docs/fleet.md): one
//! sender's traffic split over three recorders by a hash of the IP addresses,
//! tcpdump's capture of the unsplit traffic as the oracle. For several
//! expressions, `query --fleet` (and `--store URL` with the token) holds
//! exactly the frames `tcpdump -r` selects from the unsplit capture, each
//! conversation's frames in the link's order, in pcap and pcapng; `--count`
//! and `--limit` agree. With `--asymmetric` too, where a conversation's two
//! directions are on two nodes.
//!
//! The stamps are each recorder's own (microseconds after tcpdump's), so
//! frames are matched by their bytes (every frame of the lab's capture is
//! unique) and the order checked is each conversation's and the answer's
//! own (never a timestamp going back), not the unsplit capture's stamps.

use crate::fleet_lab::conversation;
use crate::util::{
    heavy_lock, read_capture, run_ok, run_wirevault, tcpdump_frames, write_lab_pcap, wvtest, FleetLab, Rec,
    FLEET_LAB_TOOLS,
};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// The expressions checked: everything, SYNs, VLAN-tagged UDP, a subnet, negations, IPv6, ARP.
const EXPRESSIONS: &[&str] =
    &["", "tcp[tcpflags] & tcp-syn != 0", "vlan and udp", "net 10.2.0.0/24", "not icmp and not arp", "ip6", "arp"];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Asserts that `got` holds exactly the frames of `want` (by bytes and
/// original length), never a timestamp going back, each conversation's
/// frames in `want`'s order.
fn same_frames_by_conversation(want: &[Rec], got: &[Rec], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {} frames, tcpdump selects {}", got.len(), want.len());
    let mut index: HashMap<&[u8], usize> = HashMap::new();
    for (i, r) in want.iter().enumerate() {
        index.insert(&r.data, i);
    }
    let mut last: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut last_ts = 0;
    for (j, g) in got.iter().enumerate() {
        let &i = index
            .get(&g.data[..])
            .unwrap_or_else(|| panic!("{what}: frame {j} of the answer is not one tcpdump selects"));
        assert_eq!(g.origlen, want[i].origlen, "{what}: frame {j}'s original length");
        assert!(g.ts_ns >= last_ts, "{what}: frame {j}'s timestamp goes back");
        last_ts = g.ts_ns;
        let key = conversation(&g.data, false).unwrap_or_else(|| panic!("{what}: frame {j} is of no conversation"));
        if let Some(&before) = last.get(&key) {
            assert!(before < i, "{what}: frame {j} (link frame {i}) after link frame {before} of its conversation");
        }
        last.insert(key, i);
    }
}

/// The lab, the traffic sent through it, and every expression's answers checked.
fn check_lab(asymmetric: bool, seed: u32, t: &str) {
    let lab = FleetLab::up(3, asymmetric);
    let pcap = lab.dir.join("traffic.pcap");
    write_lab_pcap(&pcap, seed, 3);
    lab.send(&pcap, &[]);
    lab.stop();
    let fleet = s(&lab.fleet_file).to_string();
    let out = lab.dir.join("fleet.pcap");
    let ng = lab.dir.join("fleet.pcapng");
    // The first recorder by its URL and token, the other two stores read here.
    let mut stores = vec!["--store".to_string(), lab.nodes[0].url.clone(), "--token-file".into()];
    stores.push(s(&lab.nodes[0].token_file).to_string());
    for n in &lab.nodes[1..] {
        stores.extend(["--store".to_string(), s(&n.store).to_string()]);
    }
    // `wirevault ARGS -- EXPR` (no word for the empty expression).
    let wv = |args: &[&str], expr: &str| {
        let mut a = args.to_vec();
        if !expr.is_empty() {
            a.extend(["--", expr]);
        }
        run_wirevault(&a)
    };
    for expr in EXPRESSIONS {
        let filter: Vec<&str> = [*expr].into_iter().filter(|e| !e.is_empty()).collect();
        let (_, want) = tcpdump_frames(&lab.unsplit, &filter, &lab.dir);
        let what = format!("{t} {expr:?}");
        if !expr.is_empty() && *expr != "arp" {
            assert!(!want.is_empty(), "{what}: tcpdump selects nothing: a poor check");
        }
        let o = wv(&["query", "--fleet", &fleet, "-w", s(&out)], expr);
        o.expect(0, &what);
        same_frames_by_conversation(&want, &read_capture(&out).1, &what);
        let mut a = vec!["query", "-w", s(&out)];
        a.extend(stores.iter().map(String::as_str));
        let o = wv(&a, expr);
        o.expect(0, &format!("--store {what}"));
        same_frames_by_conversation(&want, &read_capture(&out).1, &format!("--store {what}"));
        // pcapng, as tcpdump reads it: each packet on its node's interface.
        let o = wv(&["query", "--fleet", &fleet, "--format", "pcapng", "-w", s(&ng)], expr);
        o.expect(0, &format!("pcapng {what}"));
        let (_, got) = tcpdump_frames(&ng, &[], &lab.dir);
        same_frames_by_conversation(&want, &got, &format!("pcapng {what}"));
        let o = run_ok(Command::new("tshark").arg("-r").arg(&ng).args(["-T", "fields", "-e", "frame.interface_name"]));
        let names: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect();
        assert_eq!(names.len(), want.len(), "{what}: tshark's packets");
        assert!(
            names.iter().all(|n| lab.nodes.iter().any(|l| &l.name == n)),
            "{what}: an interface named after no node"
        );
        // --count, and --limit: a prefix of the whole answer.
        let o = wv(&["query", "--fleet", &fleet, "--count"], expr);
        o.expect(0, &format!("--count {what}"));
        assert_eq!(o.stdout.trim(), want.len().to_string(), "--count {what}");
        wv(&["query", "--fleet", &fleet, "-w", s(&out)], expr).expect(0, &what);
        let whole = read_capture(&out).1;
        if whole.len() > 2 {
            let n = (whole.len() / 2).to_string();
            let o = wv(&["query", "--fleet", &fleet, "--limit", &n, "-w", s(&out)], expr);
            o.expect(0, &format!("--limit {what}"));
            assert_eq!(read_capture(&out).1, whole[..whole.len() / 2], "--limit {n} {what}");
        }
    }
}

wvtest!(
    fleet_query_over_the_lab_equals_tcpdump_over_the_unsplit_link,
    needs = [root, FLEET_LAB_TOOLS, "tshark"],
    |t| {
        let _g = heavy_lock();
        check_lab(false, 11, t.name);
    }
);

wvtest!(fleet_query_merges_directions_split_by_an_asymmetric_hash, needs = [root, FLEET_LAB_TOOLS, "tshark"], |t| {
    let _g = heavy_lock();
    check_lab(true, 12, t.name);
});
