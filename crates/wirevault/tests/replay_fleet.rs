//! `replay --store SRC...` / `--fleet`: the packets of several stores sent merged by time, as
//! `query` over the same sources merges them (docs/fleet.md). tcpdump on the far end of a
//! veth pair must see, byte for byte and in order, what tcpdump reads from the unsplit link;
//! a node that does not answer before the first packet means nothing is sent (packets on a
//! wire cannot be taken back), unless --allow-partial.

use crate::fleet::{expected, lab, s};
use crate::replay::Capture;
use crate::util::*;
use std::process::Stdio;

/// `replay -i veth-a ARGS` in namespace A while tcpdump captures veth-b.
fn replay(pair: &VethPair, dir: &std::path::Path, name: &str, args: &[&str]) -> (Outcome, Vec<Rec>) {
    let cap = Capture::start(&pair.ns_b, pair.if_b, dir, name);
    let o = VethPair::exec(&pair.ns_a, bin())
        .args(["replay", "-i", pair.if_a, "--topspeed"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run replay");
    (Outcome::from_output(o), cap.stop())
}

wvtest!(replay_over_several_stores_sends_the_merged_link, needs = [root, "ip", "tcpdump"], |t| {
    let _g = heavy_lock();
    let lab = lab("replay-fleet", 3000);
    let pair = VethPair::new();
    let stores: Vec<&str> = lab.stores.iter().map(|p| s(p)).collect();
    let mut args = Vec::new();
    for st in &stores {
        args.extend(["--store", *st]);
    }
    let (o, got) = replay(&pair, lab.tmp.path(), "all", &args);
    o.expect(0, "replay over three stores");
    let want = expected(&lab, "", (lab.first, lab.last + 1));
    assert_eq!(want.len(), 3000, "{}", t.name);
    assert_same_frames(&want, &got, false, "the three stores replayed merged");
    // A filter and a limit over the merge, as query takes them.
    let mut a = args.clone();
    a.extend(["--limit", "500", "tcp"]);
    let (o, got) = replay(&pair, lab.tmp.path(), "tcp", &a);
    o.expect(0, "replay tcp --limit 500");
    let want: Vec<Frame> = expected(&lab, "tcp", (lab.first, lab.last + 1)).into_iter().take(500).collect();
    assert_same_frames(&want, &got, false, "tcp, the first 500 of the merge");
});

wvtest!(replay_with_a_node_down_sends_nothing_unless_allow_partial, needs = [root, "ip", "tcpdump"], |t| {
    let _g = heavy_lock();
    let lab = lab("replay-fleet-down", 600);
    let pair = VethPair::new();
    // Nothing listens on port 1 of loopback: refused at connect, before the first packet.
    let args = ["--store", s(&lab.stores[0]), "--store", "http://127.0.0.1:1", "--retries", "0"];
    let (o, got) = replay(&pair, lab.tmp.path(), "down", &args);
    o.expect(1, "a node down");
    assert!(got.is_empty(), "{}: {} frames sent with a node down", t.name, got.len());
    assert!(o.stderr.contains("127.0.0.1:1") && o.stderr.contains("nothing was sent"), "{}", o.stderr);
    assert!(o.stderr.contains("--allow-partial") && !o.stderr.contains("selection is empty"), "{}", o.stderr);
    let mut a = args.to_vec();
    a.push("--allow-partial");
    let (o, got) = replay(&pair, lab.tmp.path(), "partial", &a);
    o.expect(0, "a node down, --allow-partial");
    assert!(o.stderr.contains("127.0.0.1:1"), "the node left out is still named: {}", o.stderr);
    let want = query_frames(&lab.stores[0], &lab.tmp.join("node0.pcap"), &[]);
    let want: Vec<Frame> = want.iter().map(Rec::frame).collect();
    assert_same_frames(&want, &got, false, "the node that answered");
});
