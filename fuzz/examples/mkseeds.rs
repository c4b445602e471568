//! Writes seed corpora for every fuzz target from a directory of capture
//! files (e.g. ../shared/corpus/tcpdump-tests), using the project's own
//! reader and writers:
//!
//!   cargo run --release --manifest-path fuzz/Cargo.toml --example mkseeds -- SRC_DIR OUT_DIR
//!
//! OUT_DIR/reader        every capture file as it is
//! OUT_DIR/recover       captures rewritten in wirevault's own layouts (LE ns
//!                       pcap, pcapng SHB+IDB+EPBs), whole and cut mid-record
//! OUT_DIR/packet_index  distinct frames (first byte: link type selector, see
//!                       fuzz_targets/packet_index.rs) and some index files
//! OUT_DIR/query_expr    tcpdump expressions and --from/--to times
//! OUT_DIR/config        synthetic specs, counts, durations, catalog lines, cBPF text

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use wv_wire::reader::Reader;
use wv_wire::{pcap, pcapng};

const EXPRESSIONS: &[&str] = &[
    "",
    "tcp",
    "udp",
    "icmp",
    "ip",
    "ip6",
    "arp",
    "host 10.0.0.1",
    "src host 192.168.1.1",
    "dst host 10.1.2.3 and tcp",
    "net 10.0.0.0/8",
    "net 192.168.0.0 mask 255.255.0.0",
    "src net 172.16/12",
    "port 80",
    "tcp port 443",
    "udp dst port 53",
    "portrange 1000-2000",
    "tcp portrange 6000-6010 or udp port 123",
    "port 80 and not 443",
    "host a or b",
    "host 10.0.0.1 or 10.0.0.2 and port 22",
    "not host 10.0.0.1",
    "!(tcp or udp)",
    "(tcp and port 80) or (udp and port 53)",
    "vlan",
    "vlan 100",
    "vlan 100 and host 10.0.0.1",
    "mpls 17 and udp",
    "pppoes 0x27",
    "geneve and tcp",
    "ip proto 47",
    "ip6 proto 58",
    "proto \\tcp",
    "ip6 host fe80::1",
    "host 2001:db8::1 and port 443",
    "net 2001:db8::/32",
    "ether host 00:11:22:33:44:55",
    "ether broadcast",
    "len > 100",
    "greater 1000",
    "less 64",
    "tcp[tcpflags] & tcp-syn != 0",
    "ip[8] < 64",
    "icmp[icmptype] == icmp-echo",
    "src or dst port 8080",
    "tcp src port 1 and dst port 2",
    "sctp port 9899",
    "host 10.0.0.1 && port 80 || port 443",
    "((((port 1))))",
    "port ftp-data",
    "ip host 1.2.3.4",
    "gateway snoopy",
    "inbound",
    "ip multicast",
    "ip6 multicast",
    "udp port 4789 and vlan 10",
    "host ::ffff:1.2.3.4",
    "port 99999",
    "net 10.0.0.1/33",
];

const TIMES: &[&str] = &[
    "now",
    "NOW",
    " now ",
    "10m ago",
    "2h ago",
    "1.5d ago",
    "1w ago",
    "500ms ago",
    "3us ago",
    "7ns ago",
    "99999999999999999999d ago",
    "1e3s ago",
    "ago",
    "1763806500",
    "1763806500.123456789",
    "0",
    "0.5",
    "18446744073.709551615",
    "99999999999999999999",
    "1.2.3",
    "2026-11-22",
    "2026-11-22T10:15:00Z",
    "2026-11-22T10:15:00.5Z",
    "2026-11-22 10:15:00+01:00",
    "2026-11-22t10:15:00.123456789-05:30",
    "1970-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999999Z",
    "2026-02-30T00:00:00Z",
    "2026-13-01",
    "2026-11-22T24:00:00Z",
    "2026-11-22T10:15:60Z",
    "2026-11-22T10:15Z",
    "2026-11-22T10:15:00+25:00",
];

const CONFIG: &[&str] = &[
    "size=64,count=1M", "size=imix,duration=10s", "size=1514,rate=10gbps", "rate=1M,flows=16",
    "size=60,rate=100mbps,count=10k", "flows=16777216", "flows=0", "size=59", "size=9001",
    "count=2G", "count=1.5k", "count=-1", "duration=500ms", "duration=2m", "duration=1h",
    "duration=1.5s", "duration=3d", "duration=10us", "rate=0pps", "rate=-1gbps", "bogus",
    "size", "=,=,", "10s", "1000", "10k", "1M", "2G", "NaN", "inf", "1e400",
    "{\"stream\":0,\"file\":\"stream-000/20261122T101500.123456789Z-000001.pcap\",\"index\":\"stream-000/20261122T101500.123456789Z-000001.pcap.idx\",\"format\":\"pcap\",\"linktype\":1,\"snaplen\":262144,\"first_ns\":1763806500123456789,\"last_ns\":1763806510000000000,\"packets\":1000,\"bytes\":123456}",
    "{\"stream\":3,\"file\":\"stream-003/x.pcapng\",\"index\":null,\"format\":\"pcapng\",\"linktype\":113,\"snaplen\":65535,\"first_ns\":0,\"last_ns\":0,\"packets\":0,\"bytes\":72,\"extra\":[1,2,{}]}",
    "40 0 0 12\n21 0 5 2048\n48 0 0 23\n21 0 3 6\n6 0 0 262144\n6 0 0 0",
    "32 0 0 4294967295\n6 0 0 1",
    "177 0 0 14\n72 0 0 16\n6 0 0 65535",
    "4 0 0 1\n60 0 0 0\n6 0 0 1",
    "97 0 0 15\n2 0 0 0\n7 0 0 0\n22 0 0 0",
];

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

fn mkdir(out: &Path, t: &str) -> PathBuf {
    let d = out.join(t);
    fs::create_dir_all(&d).expect("create corpus dir");
    d
}

struct Pkt {
    ts_ns: u64,
    origlen: u32,
    data: Vec<u8>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (src, out) = match args.as_slice() {
        [_, s, o] => (PathBuf::from(s), PathBuf::from(o)),
        _ => {
            eprintln!("usage: mkseeds SRC_DIR OUT_DIR");
            std::process::exit(2);
        }
    };
    let reader_dir = mkdir(&out, "reader");
    let recover_dir = mkdir(&out, "recover");
    let index_dir = mkdir(&out, "packet_index");
    let query_dir = mkdir(&out, "query_expr");
    let config_dir = mkdir(&out, "config");

    let mut files: Vec<PathBuf> = fs::read_dir(&src)
        .expect("read SRC_DIR")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();

    let mut seen_frames = HashSet::new();
    let (mut frames, mut recovers, mut indexes) = (0usize, 0usize, 0usize);
    for (i, path) in files.iter().enumerate() {
        let Ok(bytes) = fs::read(path) else { continue };
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if bytes.len() <= 1 << 20 {
            write(&reader_dir, &name, &bytes);
        }
        let Ok(mut r) = Reader::new(&bytes[..]) else { continue };
        let mut pkts = Vec::new();
        let mut linktype = None;
        let mut builder = None;
        while let Ok(Some(p)) = r.next_packet() {
            let lt = *linktype.get_or_insert(p.linktype);
            if p.linktype != lt {
                continue;
            }
            if pkts.len() < 64 {
                pkts.push(Pkt { ts_ns: p.ts_ns, origlen: p.origlen, data: p.data.to_vec() });
            }
            let b = builder.get_or_insert_with(|| wv_index::Builder::with_block_packets(lt, 4));
            b.add(p.ts_ns, p.offset, p.data, p.origlen);
            // Distinct frames (by link type and first 96 bytes: the headers).
            let sel: u8 = match lt {
                1 => 0,
                113 => 1,
                101 => 2,
                228 => 3,
                229 => 4,
                x if (5..256).contains(&x) => x as u8,
                _ => continue,
            };
            let head = &p.data[..p.data.len().min(96)];
            if frames < 4000 && seen_frames.insert((sel, head.to_vec())) {
                let mut f = Vec::with_capacity(1 + head.len());
                f.push(sel);
                f.extend_from_slice(head);
                write(&index_dir, &format!("frame-{frames:05}"), &f);
                frames += 1;
            }
        }
        let Some(lt) = linktype else { continue };
        if i % 16 == 0 {
            if let Some(mut b) = builder {
                if let Ok(idx) = b.encode() {
                    if idx.len() <= 64 << 10 {
                        write(&index_dir, &format!("index-{name}.idx"), &idx);
                        indexes += 1;
                    }
                }
            }
        }
        if i % 3 == 0 && !pkts.is_empty() {
            let (p, n) = wv_files(&pkts, lt);
            write(&recover_dir, &format!("{name}.wv.pcap"), &p);
            write(&recover_dir, &format!("{name}.wv.pcapng"), &n);
            // Cut in the middle of the last record, as a crash leaves it.
            write(&recover_dir, &format!("{name}.wv.pcap.cut"), &p[..p.len() - 3]);
            write(&recover_dir, &format!("{name}.wv.pcapng.cut"), &n[..n.len() - 5]);
            recovers += 4;
        }
    }
    for (i, e) in EXPRESSIONS.iter().enumerate() {
        write(&query_dir, &format!("expr-{i:03}"), e.as_bytes());
    }
    for (i, t) in TIMES.iter().enumerate() {
        write(&query_dir, &format!("time-{i:03}"), t.as_bytes());
    }
    for (i, c) in CONFIG.iter().enumerate() {
        write(&config_dir, &format!("config-{i:03}"), c.as_bytes());
    }
    println!(
        "{} captures: {frames} frames, {indexes} indexes, {recovers} recover seeds, {} query, {} config",
        files.len(),
        EXPRESSIONS.len() + TIMES.len(),
        CONFIG.len()
    );
}

/// The packets as wirevault writes them: LE nanosecond pcap and its pcapng layout.
fn wv_files(pkts: &[Pkt], lt: u32) -> (Vec<u8>, Vec<u8>) {
    let snaplen = wv_wire::MAX_SNAPLEN;
    let mut p = vec![0u8; pcap::FILE_HEADER_LEN];
    pcap::emit_file_header((&mut p[..]).try_into().unwrap(), snaplen, lt);
    let mut n = vec![0u8; pcapng::PREAMBLE_LEN];
    pcapng::emit_preamble((&mut n[..]).try_into().unwrap(), snaplen, lt);
    for k in pkts {
        let caplen = k.data.len() as u32;
        let mut h = [0u8; pcap::RECORD_HEADER_LEN];
        pcap::emit_record_header(&mut h, k.ts_ns, caplen, k.origlen);
        p.extend_from_slice(&h);
        p.extend_from_slice(&k.data);
        let mut e = [0u8; pcapng::EPB_HEADER_LEN];
        pcapng::emit_epb_header(&mut e, k.ts_ns, caplen, k.origlen);
        n.extend_from_slice(&e);
        n.extend_from_slice(&k.data);
        let mut t = [0u8; 7];
        let len = pcapng::emit_epb_trailer(&mut t, caplen);
        n.extend_from_slice(&t[..len]);
    }
    (p, n)
}
