//! Flow records over the API and in the console: a capture built here with known flows
//! (TCP and UDP between many hosts, one of them VLAN-tagged) recorded with `--flows` from the
//! file; `/api/v1/flows` answers what `wirevault flows --json` answers, each record's packets
//! link returns exactly the frames tcpdump selects by the record's key (as many as the record
//! counts), and the console's flow table shows the same flows and downloads the same packets.

use crate::analyze::{eth_ip, ether, ipv4, tcp, udp};
use crate::util::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

pub(crate) const T0: u64 = 1_700_000_000_000_000_000;
pub(crate) const FLOWS: u32 = 40;

/// Flow `k`: 10.1.0.(k+1):(40000+k) to 10.2.0.1, TCP to 80 for even k and UDP to 53 for odd
/// ones, 2 + k % 7 packets each way; flow 5 also tagged VLAN 7 (a second flow with the same
/// addresses and ports). Frames of all flows interleave, 100 us apart.
pub(crate) fn built() -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut t = 0u64;
    for round in 0..8u32 {
        for k in 0..FLOWS {
            if round >= 2 + k % 7 {
                continue;
            }
            let (c, s) = ([10, 1, 0, k as u8 + 1], [10, 2, 0, 1]);
            let (cp, sp) = (40000 + k as u16, if k % 2 == 0 { 80 } else { 53 });
            let body = vec![b'x'; 20 + (k as usize * 13 + round as usize * 7) % 300];
            for back in [false, true] {
                let (a, b, ap, bp) = if back { (s, c, sp, cp) } else { (c, s, cp, sp) };
                let l4 = if k % 2 == 0 { tcp(ap, bp, round * 1000, 0, 0x18, 512, &body) } else { udp(ap, bp, &body) };
                let ip = ipv4(a, b, if k % 2 == 0 { 6 } else { 17 }, &l4);
                let mut emit = |data: Vec<u8>| {
                    frames.push(Frame { ts_ns: T0 + t, origlen: data.len() as u32, data });
                    t += 100_000;
                };
                emit(eth_ip(&ip));
                if k == 5 {
                    emit(ether(&[0x81, 0x00, 0x00, 0x07, 0x08, 0x00], &ip));
                }
            }
        }
    }
    frames
}

/// A store of [`built`] recorded with flows, the capture it came from, and a server over it.
pub(crate) fn store_with_flows(tmp: &TempDir) -> (std::path::PathBuf, std::path::PathBuf) {
    let pcap = tmp.join("built.pcap");
    write_pcap(&pcap, 1, 65535, true, &built());
    let store = tmp.join("store");
    run_ok(wirevault().arg("record").arg("-r").arg(&pcap).arg("-o").arg(&store).args(["-q", "--flows"]));
    (store, pcap)
}

/// A new file name's number.
fn next() -> u32 {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The frames of `pcap` that tcpdump selects with `filter`.
fn tcpdump_frames(pcap: &Path, filter: &str, tmp: &Path) -> Vec<Vec<u8>> {
    let out = tmp.join(format!("tcpdump-{}.pcap", next()));
    run_ok(Command::new("tcpdump").arg("-r").arg(pcap).arg("-w").arg(&out).arg(filter));
    read_capture(&out).1.into_iter().map(|r| r.data).collect()
}

fn frames_of(bytes: &[u8], tmp: &Path) -> Vec<Vec<u8>> {
    let f = tmp.join(format!("got-{}.pcap", next()));
    std::fs::write(&f, bytes).unwrap();
    read_capture(&f).1.into_iter().map(|r| r.data).collect()
}

/// A record's packets: both directions.
fn packets(r: &Value) -> u64 {
    r["to_server"]["packets"].as_u64().unwrap() + r["to_client"]["packets"].as_u64().unwrap()
}

wvtest!(flows_api_answers_as_the_cli_and_its_links_as_tcpdump, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("flows-api");
    let (store, pcap) = store_with_flows(&tmp);
    let served = Served::start(&store, tmp.path(), &[]);
    let http = Http::new(&format!("http://{}", served.addr));

    let api = http.get("/api/v1/flows", &[("sort", "bytes")]);
    assert_eq!(api.status, 200, "{}", api.text());
    let api = api.json();
    let flows = api["flows"].as_array().unwrap();
    assert_eq!(flows.len(), FLOWS as usize + 1, "{}: one record per flow, the tagged one apart", t.name);
    assert_eq!(api["matched"], flows.len());
    let cli: Vec<Value> = serde_json::from_slice(
        &run_ok(wirevault().arg("flows").arg(&store).args(["--json", "--sort", "bytes"])).stdout,
    )
    .unwrap();
    let without_link: Vec<Value> = flows
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f.as_object_mut().unwrap().remove("packets_url");
            f
        })
        .collect();
    assert_eq!(without_link, cli, "the API's records are the CLI's, in the same order");

    // Each record's link: exactly tcpdump's frames for its key, as many as it counts.
    let mut checked_vlan = false;
    for f in flows {
        let url = f["packets_url"].as_str().unwrap();
        let got = http.get(url, &[]);
        assert_eq!(got.status, 200, "{url}: {}", got.text());
        let got = frames_of(&got.body, tmp.path());
        assert_eq!(got.len() as u64, packets(f), "{url}: the record counts {} packets", packets(f));
        let filter = percent_decode(url.split("filter=").nth(1).unwrap());
        assert_eq!(got, tcpdump_frames(&pcap, &filter, tmp.path()), "{filter}: the link's frames vs tcpdump -r");
        checked_vlan |= f["vlans"] == json!([7]);
    }
    assert!(checked_vlan, "the tagged flow has its own record and link");

    // Filter, limit and the words a flow key cannot answer.
    let some = http.get("/api/v1/flows", &[("filter", "udp and host 10.1.0.2"), ("limit", "5")]).json();
    assert_eq!(some["flows"].as_array().unwrap().len(), 1, "{some}");
    assert_eq!(some["flows"][0]["client_port"], 40001);
    let few = http.get("/api/v1/flows", &[("limit", "3")]).json();
    assert_eq!((few["flows"].as_array().unwrap().len(), few["matched"].as_u64()), (3, Some(FLOWS as u64 + 1)));
    let bad = http.get("/api/v1/flows", &[("filter", "tcp[13] & 2 != 0")]);
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"].as_str().unwrap().contains("\"tcp[13]\""), "{}", bad.text());
    let bad = http.get("/api/v1/flows", &[("sort", "size")]);
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("start, bytes, packets"), "{}", bad.text());
});

/// `%XX` escapes back to bytes (the links escape every byte but letters and digits).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        if b[i] == b'%' && i + 3 <= b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).expect("an escape"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

wvtest!(console_flow_table_shows_the_apis_flows_and_downloads_their_packets, |t| {
    if !crate::console::browser_ready(t.name) {
        return;
    }
    let tmp = TempDir::new("flows-console");
    let (store, _) = store_with_flows(&tmp);
    let served = Served::start(&store, tmp.path(), &[]);
    let base = format!("http://{}", served.addr);
    let http = Http::new(&base);
    let filter = "tcp";
    let api = http.get("/api/v1/flows", &[("filter", filter), ("sort", "bytes"), ("limit", "100")]).json();
    let flows = api["flows"].as_array().unwrap();
    assert_eq!(flows.len(), FLOWS as usize / 2, "{api}");
    let downloads = tmp.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let seen = crate::console::drive(
        None,
        tmp.path(),
        json!({
            "url": format!("{base}/"), "mode": "flows", "timeout": 60, "filter": filter,
            "downloads": downloads, "screenshot": crate::console::artifacts().join("console-flows.png"),
        }),
    );
    assert_eq!(crate::console::problems(&seen["log"]), Vec::<String>::new(), "the page logged errors");
    let rows = seen["rows"].as_array().unwrap();
    assert_eq!(rows.len(), flows.len(), "{seen}");
    for (r, f) in rows.iter().zip(flows) {
        let cells: Vec<&str> = r["cells"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        // start | duration | protocol | client | server | packets -> | packets <- | bytes -> | bytes <- | end
        let want = [
            format!("{}:{}", f["client"].as_str().unwrap(), f["client_port"]),
            format!("{}:{}", f["server"].as_str().unwrap(), f["server_port"]),
            f["to_server"]["packets"].to_string(),
            f["to_client"]["packets"].to_string(),
            f["to_server"]["bytes"].to_string(),
            f["to_client"]["bytes"].to_string(),
        ];
        assert_eq!(&cells[3..9], &want[..], "row {cells:?} vs {f}");
        assert_eq!(cells[2], "tcp");
        assert!(r["packets"].as_str().unwrap().ends_with(f["packets_url"].as_str().unwrap()), "{r}");
    }
    assert!(seen["note"].as_str().unwrap().contains(&format!("{} matching flows", flows.len())), "{seen}");
    let got = std::fs::read(seen["download"].as_str().unwrap()).expect("the flow's download");
    let want = http.get(flows[0]["packets_url"].as_str().unwrap(), &[]).body;
    assert!(got == want, "the console's download of the first flow differs from its API link");
});
