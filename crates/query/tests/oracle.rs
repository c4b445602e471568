//! Oracle: for every Ethernet file of tcpdump's test corpus, indexed, and a
//! set of expressions, the query's output equals what `tcpdump -r FILE -w -
//! EXPRESSION` writes, frame for frame (ns timestamp, caplen, origlen, bytes).
//! Expressions name hosts, ports and VLANs found in each file, and every
//! packet is its own index block (most corpus files hold fewer packets than
//! one default block), so the index really narrows and a posting list that
//! missed a packet would show.

use crate::util::{frames, run_query, tcpdump, Frame};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use wv_wire::packet::{self, Addr};
use wv_wire::reader::Reader;

fn query(store: &Path, expr: &str, from: Option<u64>, to: Option<u64>) -> Vec<Frame> {
    frames(&run_query(store, expr, from, to).0)
}

/// Keys seen in a file, to build expressions that hit something.
#[derive(Default)]
struct Seen {
    v4: Vec<[u8; 4]>,
    v6: Vec<[u8; 16]>,
    ports: Vec<u16>,
    vlans: Vec<u16>,
}

fn seen(file: &Path) -> Option<(u32, Seen)> {
    let mut r = Reader::new(std::fs::File::open(file).ok()?).ok()?;
    let mut s = Seen::default();
    let mut lt = None;
    let (mut v4, mut v6, mut ports, mut vlans) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    while let Ok(Some(p)) = r.next_packet() {
        lt.get_or_insert(p.linktype);
        let k = packet::parse(p.linktype, p.data);
        for a in [k.src, k.dst] {
            match a {
                Addr::V4(a) if v4.len() < 3 && v4.insert(a) => s.v4.push(a),
                Addr::V6(a) if v6.len() < 2 && v6.insert(a) => s.v6.push(a),
                _ => {}
            }
        }
        if let Some((a, b)) = k.ports {
            for p in [a, b] {
                if ports.len() < 2 && ports.insert(p) {
                    s.ports.push(p);
                }
            }
        }
        for &v in k.vlans() {
            if vlans.len() < 2 && vlans.insert(v) {
                s.vlans.push(v);
            }
        }
    }
    Some((lt?, s))
}

fn expressions(s: &Seen) -> Vec<String> {
    let mut e: Vec<String> = [
        "ip",
        "tcp",
        "not tcp",
        "udp port 53",
        "port 80 or port 443",
        "icmp or icmp6",
        "vlan",
        "arp or rarp",
        "portrange 1-1023 and ip6",
        "ip proto 17 and not port 53",
        "greater 200",
        "net 10.0.0.0/8 or net 192.168",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ip4 = |a: &[u8; 4]| std::net::Ipv4Addr::from(*a).to_string();
    if let Some(a) = s.v4.first() {
        e.push(format!("host {}", ip4(a)));
        e.push(format!("src host {} or dst net {}/24", ip4(a), std::net::Ipv4Addr::from([a[0], a[1], a[2], 0])));
        e.push(format!("(tcp or udp) and not host {}", ip4(a)));
        if let Some(b) = s.v4.get(1) {
            e.push(format!("host {} or {}", ip4(a), ip4(b)));
            e.push(format!("host {} and host {}", ip4(a), ip4(b)));
        }
    }
    if let Some(a) = s.v6.first() {
        e.push(format!("ip6 host {}", std::net::Ipv6Addr::from(*a)));
    }
    if let Some(p) = s.ports.first() {
        e.push(format!("port {p}"));
        e.push(format!("tcp dst port {p} or udp src port {p}"));
        if let (Some(a), Some(q)) = (s.v4.first(), s.ports.get(1)) {
            e.push(format!("host {} and (port {p} or {q})", ip4(a)));
        }
    }
    if let Some(v) = s.vlans.first() {
        e.push(format!("vlan {v}"));
        e.push(format!("vlan {v} and ip"));
        e.push(format!("not vlan {v}"));
        if let Some(a) = s.v4.first() {
            e.push(format!("vlan and host {}", ip4(a)));
            e.push(format!("host {} or vlan {v}", ip4(a)));
        }
    }
    e
}

#[test]
fn equals_tcpdump_on_every_ethernet_corpus_file() {
    const TEST: &str = "equals_tcpdump_on_every_ethernet_corpus_file";
    let Some(corpus) = wv_testkit::corpus_dir(TEST) else { return };
    if !wv_testkit::need_tools(TEST, &["tcpdump"]) {
        return;
    }
    let dir = wv_testkit::TempDir::new("query-oracle");
    let mut names: Vec<_> = std::fs::read_dir(&corpus).unwrap().flatten().map(|e| e.path()).collect();
    names.sort();
    let mut work = Vec::new();
    for src in names {
        let Some((lt, s)) = seen(&src) else { continue };
        if lt != 1 {
            continue;
        }
        let dst = dir.join(src.file_name().unwrap());
        std::fs::copy(&src, &dst).unwrap();
        wv_index::index_file_with(&dst, 1).unwrap_or_else(|e| panic!("{}: {e}", dst.display()));
        work.push((dst, expressions(&s)));
    }
    assert!(work.len() > 400, "only {} Ethernet files", work.len());
    let total: usize = work.iter().map(|w| w.1.len()).sum();
    // Two workers: the machine has two cores and tcpdump is the slow part.
    let chunks: Vec<Vec<(PathBuf, Vec<String>)>> = {
        let mut c = vec![Vec::new(), Vec::new()];
        for (i, w) in work.into_iter().enumerate() {
            c[i % 2].push(w);
        }
        c
    };
    let results: Vec<(usize, Vec<String>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                sc.spawn(move || {
                    let (mut nonempty, mut bad) = (0, Vec::new());
                    for (file, exprs) in chunk {
                        for e in exprs {
                            let want = tcpdump(file, e);
                            let got = query(file, e, None, None);
                            nonempty += usize::from(!want.is_empty());
                            if got != want {
                                bad.push(format!(
                                    "{} `{e}`: tcpdump {} frames, query {}",
                                    file.display(),
                                    want.len(),
                                    got.len()
                                ));
                            }
                        }
                    }
                    (nonempty, bad)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let nonempty: usize = results.iter().map(|r| r.0).sum();
    let bad: Vec<&String> = results.iter().flat_map(|r| r.1.iter()).collect();
    eprintln!("oracle: {total} (file, expression) pairs, {nonempty} with matches, {} differ", bad.len());
    assert!(
        bad.is_empty(),
        "{} differences:\n{}",
        bad.len(),
        bad.iter().take(40).map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}
