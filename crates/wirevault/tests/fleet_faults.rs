//! The fleet's faults (issue 46): a node stopped, a node whose server is
//! paused (SIGSTOP) before and in the middle of its export, a wrong token, a
//! malformed fleet file, an unknown node name. Each is one sentence naming
//! the node (or the file) and what to do, in every output mode (pcap, pcapng,
//! `--count`); a node left out exits 1 unless `--allow-partial`, a fleet file
//! or `--node` the command line must change exits 2; and the rest of the
//! answer is exact: what `tcpdump -r` selects from the unsplit capture, less
//! the frames of the node left out.

use crate::fleet::{count, expected, fleet_file, fleet_query, lab, node_of, s, token_file, Lab, TOKEN};
use crate::util::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The nodes' names in the fleet files below, by the rank `node_of` gives a frame.
const NAMES: [&str; 3] = ["a", "b", "c"];

/// A number for this file's temp names (util's is its own).
fn unique() -> u32 {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The whole capture's time range.
fn whole(lab: &Lab) -> (u64, u64) {
    (lab.first, lab.last + 1)
}

/// What the fleet answers without node `lost`: every other node's frames, in the merge's order.
fn without(lab: &Lab, lost: usize, expr: &str) -> Vec<Frame> {
    expected(lab, expr, whole(lab)).into_iter().filter(|f| node_of(&f.data) != lost).collect()
}

/// The lines of `stderr` that name node `name`.
fn naming<'a>(stderr: &'a str, name: &str) -> Vec<&'a str> {
    let needle = format!("node {name} ");
    stderr.lines().filter(|l| l.contains(&needle)).collect()
}

/// Checks one warning naming node `name` with `needle` (what happened) and
/// `todo` (what to do), and no other line naming it.
fn one_warning(stderr: &str, name: &str, needle: &str, todo: &str, what: &str) {
    let lines = naming(stderr, name);
    assert_eq!(lines.len(), 1, "{what}: one line names node {name}:\n{stderr}");
    let l = lines[0];
    assert!(l.starts_with("wirevault: warning: "), "{what}: not a warning: {l}");
    assert!(l.contains(needle) && l.contains(todo), "{what}: no {needle:?} and {todo:?} in: {l}");
    for other in NAMES.iter().filter(|n| **n != name) {
        assert!(naming(stderr, other).is_empty(), "{what}: node {other} named though it answered:\n{stderr}");
    }
}

/// The section header's comment of a pcapng file, as capinfos reads it.
fn capture_comment(file: &Path) -> String {
    let o = run_ok(Command::new("capinfos").arg("-k").arg(file));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Node `lost` (named `NAMES[lost]`) of `fleet` is left out: in pcap, pcapng and
/// `--count`, exit 1 and its warning; with `--allow-partial` exit 0, the same
/// warning and exactly the other nodes' frames; the pcapng answer's section
/// header names it.
fn left_out(lab: &Lab, fleet: &Path, extra: &[&str], lost: usize, needle: &str, todo: &str) {
    let name = NAMES[lost];
    let out = lab.tmp.join(format!("partial-{}.pcap", unique()));
    let ng = lab.tmp.join(format!("partial-{}.pcapng", unique()));
    for expr in ["", "tcp[tcpflags] & tcp-syn != 0", "not vlan"] {
        let want = without(lab, lost, expr);
        let what = format!("without {name}, {expr:?}");
        let mut args = vec!["--fleet", s(fleet)];
        args.extend_from_slice(extra);
        let (o, got) = fleet_query(&args, expr, whole(lab), &out);
        o.expect(1, &what);
        one_warning(&o.stderr, name, needle, todo, &what);
        assert!(o.stderr.contains("--allow-partial"), "{what}: exit 1 not explained:\n{}", o.stderr);
        // The answer of the nodes that gave theirs is written all the same.
        assert_same_frames(&want, &got, true, &what);
        let o = count(&args, expr, whole(lab));
        o.expect(1, &format!("--count {what}"));
        one_warning(&o.stderr, name, needle, todo, &format!("--count {what}"));
        assert_eq!(o.stdout.trim(), want.len().to_string(), "--count {what}");

        args.push("--allow-partial");
        let (o, got) = fleet_query(&args, expr, whole(lab), &out);
        o.expect(0, &format!("--allow-partial {what}"));
        one_warning(&o.stderr, name, needle, todo, &format!("--allow-partial {what}"));
        assert_eq!(o.stderr.lines().count(), 1, "--allow-partial {what}: one line:\n{}", o.stderr);
        assert_same_frames(&want, &got, true, &format!("--allow-partial {what}"));
        let o = count(&args, expr, whole(lab));
        o.expect(0, &format!("--allow-partial --count {what}"));
        assert_eq!(o.stdout.trim(), want.len().to_string(), "--allow-partial --count {what}");
        one_warning(&o.stderr, name, needle, todo, &format!("--allow-partial --count {what}"));

        // pcapng: the others' frames as tcpdump reads them, the section header naming the node.
        args.extend(["--format", "pcapng"]);
        let (o, _) = fleet_query(&args, expr, whole(lab), &ng);
        o.expect(0, &format!("pcapng {what}"));
        one_warning(&o.stderr, name, needle, todo, &format!("pcapng {what}"));
        let (_, got) = tcpdump_frames(&ng, &[], lab.tmp.path());
        assert_same_frames(&want, &got, true, &format!("pcapng {what}"));
        let comment = capture_comment(&ng);
        assert!(
            comment.contains("nodes left out of this answer: ") && comment.contains(&format!("{name} (")),
            "pcapng {what}: the section header does not name node {name}:\n{comment}"
        );
        for other in NAMES.iter().filter(|n| **n != name) {
            assert!(!comment.contains(&format!(" {other} (")), "pcapng {what}: names node {other}:\n{comment}");
        }
    }
}

/// The lab with a, b and c as in the fleet test: a read locally, b served
/// with a token, c served without. Returns the servers (kept running while
/// they live) and the token file b takes.
fn served(lab: &Lab) -> (Served, Served, PathBuf) {
    let tokens = token_file(lab.tmp.path(), TOKEN);
    let b = Served::start(&lab.stores[1], lab.tmp.path(), &["--token-file", s(&tokens)]);
    let c = Served::start(&lab.stores[2], lab.tmp.path(), &[]);
    (b, c, tokens)
}

fn fleet_of(lab: &Lab, file: &str, extra: &str, b: &str, b_token: &Path, c: &str) -> PathBuf {
    fleet_file(
        lab.tmp.path(),
        file,
        extra,
        &[
            ("a", lab.stores[0].display().to_string(), None),
            ("b", format!("http://{b}"), Some(b_token)),
            ("c", format!("http://{c}"), None),
        ],
    )
}

/// A node whose server is gone (the port refuses): named, "start its recorder".
wvtest!(a_node_down_is_named_and_the_rest_is_exact, needs = ["tcpdump", "tshark", "capinfos"], |t| {
    let lab = lab("fleet-down", 6_000);
    let (b, c, tokens) = served(&lab);
    let c_addr = c.addr.clone();
    drop(c);
    let fleet = fleet_of(&lab, "fleet.toml", "retries = 0", &b.addr, &tokens, &c_addr);
    left_out(&lab, &fleet, &[], 2, "cannot be reached", "start its recorder or server");
    // The same node given as --store URL is named by its address.
    let want = without(&lab, 2, "");
    let out = lab.tmp.join("down-store.pcap");
    let url = format!("http://{c_addr}");
    let args = ["--store", s(&lab.stores[0]), "--store", &url, "--allow-partial", "--retries", "0"];
    let (o, got) = fleet_query(&args, "", whole(&lab), &out);
    o.expect(0, "--store URL down");
    assert!(o.stderr.contains(&format!("node {c_addr} ({url}) is left out")), "{t}: {}", o.stderr);
    assert_same_frames(&want.iter().filter(|f| node_of(&f.data) == 0).cloned().collect::<Vec<_>>(), &got, true, t.name);
    // No node at all: an empty answer is no partial one, exit 1 even with --allow-partial.
    for mode in [vec!["-w", s(&out)], vec!["--count"]] {
        let mut a = vec!["query", "--store", &url, "--allow-partial", "--retries", "0"];
        a.extend(mode);
        let o = run_wirevault(&a);
        o.expect(1, &format!("{a:?}"));
        assert!(o.stderr.contains("no node answered"), "{t}: {}", o.stderr);
        assert_eq!(naming(&o.stderr, &c_addr).len(), 1, "{t}: {}", o.stderr);
    }
});

/// A token the server does not know: named, "check its token_file".
wvtest!(a_wrong_token_is_named_and_the_rest_is_exact, needs = ["tcpdump", "tshark", "capinfos"], |t| {
    let lab = lab("fleet-token", 6_000);
    let (b, c, _) = served(&lab);
    let wrong = token_file(lab.tmp.path(), "fedcba9876543210fedcba9876543210");
    let fleet = fleet_of(&lab, "fleet.toml", "", &b.addr, &wrong, &c.addr);
    left_out(&lab, &fleet, &[], 1, "refused the credentials (401", "check its token_file");
});

/// A server paused (SIGSTOP) before the query: it accepts the connection and
/// never answers; at --node-timeout it is named as stalled, the rest goes on.
wvtest!(a_node_paused_before_its_answer_is_named_at_the_timeout, needs = ["tcpdump", "tshark", "capinfos"], |t| {
    let lab = lab("fleet-paused", 6_000);
    let (b, c, tokens) = served(&lab);
    let fleet = fleet_of(&lab, "fleet.toml", "retries = 0", &b.addr, &tokens, &c.addr);
    c.signal(libc::SIGSTOP);
    let start = Instant::now();
    left_out(&lab, &fleet, &["--node-timeout", "1s"], 2, "stalled", "raise --node-timeout");
    // 3 expressions, 5 answers each, each waiting 1 s on c: far from the default 30 s each.
    assert!(start.elapsed() < Duration::from_secs(90), "{t}: took {:?}", start.elapsed());
    c.signal(libc::SIGCONT);
});

/// A server paused (SIGSTOP) in the middle of its export: what it sent is
/// merged, it is dropped at --node-timeout and named with how many of its
/// packets are in the answer, and the other nodes' answers go on to the end.
/// In pcapng (whose section header went out before b stalled) the first
/// packet after b left says so in its comment. Through `serve --fleet` the
/// same, b partial in the trailer.
wvtest!(a_node_paused_mid_export_is_dropped_at_the_timeout, needs = ["tcpdump", "tshark"], |t| {
    // Each node holds some 40 MB: more than the sockets' and the merge's
    // buffers can take in, so the pause comes before b's answer is all sent.
    let lab = lab("fleet-sigstop", 130_000);
    let (b, c, tokens) = served(&lab);
    let fleet = fleet_of(&lab, "fleet.toml", "", &b.addr, &tokens, &c.addr);
    let err = lab.tmp.join("query.err");
    let (from, to) = (time_arg(lab.first), time_arg(lab.last + 1));
    let mut child = wirevault()
        .args([
            "query",
            "--fleet",
            s(&fleet),
            "--node-timeout",
            "2s",
            "--format",
            "pcapng",
            "--from",
            &from,
            "--to",
            &to,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("start wirevault query");
    let mut stdout = child.stdout.take().unwrap();
    // The first megabyte of the answer, then b stops.
    let mut answer = vec![0u8; 1 << 20];
    stdout.read_exact(&mut answer).expect("the first megabyte of the answer");
    b.signal(libc::SIGSTOP);
    let paused = Instant::now();
    stdout.read_to_end(&mut answer).expect("read the rest of the answer");
    let status = child.wait().expect("wait for wirevault query");
    let took = paused.elapsed();
    b.signal(libc::SIGCONT);
    let stderr = std::fs::read_to_string(&err).unwrap();
    let o = Outcome { code: status.code(), stdout: String::new(), stderr: stderr.clone() };
    o.expect(1, "b paused mid-export");
    one_warning(&stderr, "b", "is missing from the answer after", "raise --node-timeout", t.name);
    assert!(stderr.contains("it stalled, sending nothing for 2 s"), "{t}: {stderr}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(40),
        "{t}: the rest took {took:?} after the pause"
    );
    // How many of b's packets went out before it was dropped.
    let merged: usize = stderr
        .split("is missing from the answer after ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{t}: no count of b's merged packets in:\n{stderr}"));
    let all = expected(&lab, "", whole(&lab));
    let b_total = all.iter().filter(|f| node_of(&f.data) == 1).count();
    assert!(merged > 0 && merged < b_total, "{t}: b paused after {merged} of its {b_total} packets: not mid-export");
    // Every frame of a and c, and b's first `merged`.
    let want_after = |merged: usize| -> Vec<Frame> {
        let mut seen_b = 0;
        all.iter()
            .filter(|f| {
                if node_of(&f.data) != 1 {
                    return true;
                }
                seen_b += 1;
                seen_b <= merged
            })
            .cloned()
            .collect()
    };
    let want = want_after(merged);
    let file = lab.tmp.join("sigstop.pcapng");
    std::fs::write(&file, &answer).unwrap();
    let (_, got) = read_capture(&file);
    assert_same_frames(&want, &got, true, t.name);
    // tcpdump reads the partial answer whole; tshark shows where b left.
    assert_eq!(tcpdump_count(&file, ""), want.len() as u64, "{t}: tcpdump's count of the answer");
    let o = run_ok(Command::new("tshark").arg("-r").arg(&file).args([
        "-Y",
        "frame.comment",
        "-T",
        "fields",
        "-e",
        "frame.comment",
    ]));
    let comments = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = comments.lines().collect();
    assert_eq!(lines.len(), 1, "{t}: one packet comment:\n{comments}");
    assert!(
        lines[0].starts_with("nodes left out of this answer from here on: b (")
            && lines[0].contains(&format!("after {merged} of its packets")),
        "{t}: {}",
        lines[0]
    );
    eprintln!("{t}: b dropped after {merged} of {b_total} packets, the rest in {took:?}");

    // The same pause through `serve --fleet`: the answer goes on without b, whose state in the
    // trailer is partial with the packets of its that went out, the others' complete.
    let served_fleet =
        fleet_of(&lab, "fleet-served.toml", "node_timeout = \"2s\"\nretries = 0", &b.addr, &tokens, &c.addr);
    let server = Served::with_args(&["--fleet", s(&served_fleet), "--listen", "127.0.0.1:0"], lab.tmp.path());
    let head = lab.tmp.join("served.head");
    let mut curl = Command::new("curl")
        .args(["-sS", "-G", "-H", "TE: trailers", "-D"])
        .arg(&head)
        .args(["--data-urlencode", &format!("from={from}"), "--data-urlencode", &format!("to={to}")])
        .args(["--data-urlencode", "format=pcapng"])
        .arg(format!("http://{}/api/v1/query", server.addr))
        .stdout(Stdio::piped())
        .spawn()
        .expect("start curl");
    let mut stdout = curl.stdout.take().unwrap();
    let mut answer = vec![0u8; 1 << 20];
    stdout.read_exact(&mut answer).expect("the first megabyte of the API's answer");
    b.signal(libc::SIGSTOP);
    stdout.read_to_end(&mut answer).expect("read the rest of the API's answer");
    let status = curl.wait().expect("wait for curl");
    b.signal(libc::SIGCONT);
    assert!(status.success(), "{t}: curl exited {status}");
    let dump = std::fs::read_to_string(&head).unwrap();
    assert!(dump.starts_with("HTTP/1.1 200"), "{t}: {dump}");
    let trailer: serde_json::Value = dump
        .lines()
        .filter_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("x-wirevault-nodes")))
        .map(|(_, v)| serde_json::from_str(v.trim()).expect("X-Wirevault-Nodes is JSON"))
        .nth(1)
        .unwrap_or_else(|| panic!("{t}: no trailer after the answer:\n{dump}"));
    let state = |i: usize| trailer[i]["state"].as_str().unwrap_or_default().to_string();
    assert_eq!([state(0), state(1), state(2)], ["complete", "partial", "complete"], "{t}: {trailer}");
    let b_sent = trailer[1]["packets"].as_u64().unwrap() as usize;
    assert!(b_sent > 0 && b_sent < b_total, "{t}: b paused after {b_sent} of its {b_total} packets: not mid-export");
    let why = trailer[1]["error"].as_str().unwrap_or_default();
    assert!(why.contains("node b") && why.contains("stalled"), "{t}: the trailer says what happened to b: {why}");
    let file = lab.tmp.join("sigstop-served.pcapng");
    std::fs::write(&file, &answer).unwrap();
    let (_, got) = read_capture(&file);
    assert_same_frames(&want_after(b_sent), &got, true, &format!("{t} through serve --fleet"));
});

/// A fleet file that does not parse or says something wrong: one sentence
/// naming the file (and the line), exit 2 (what a config file says); a fleet
/// file that is not there: exit 1; nothing written.
wvtest!(a_malformed_fleet_file_is_one_sentence, |t| {
    let tmp = TempDir::new("fleet-malformed");
    let out = tmp.join("out.pcap");
    let check = |code: i32, text: Option<&str>, needles: &[&str]| {
        let file = tmp.join(format!("fleet-{}.toml", unique()));
        if let Some(text) = text {
            std::fs::write(&file, text).unwrap();
        }
        for mode in [vec!["-w", s(&out)], vec!["--count"]] {
            let mut args = vec!["query", "--fleet", s(&file)];
            args.extend(mode);
            let o = run_wirevault(&args);
            let what = format!("{text:?} {args:?}");
            o.expect(code, &what);
            assert_eq!(o.stderr.trim().lines().count(), 1, "{t}: {what}: {}", o.stderr);
            assert!(o.stderr.contains(s(&file)), "{t}: {what}: the file is not named: {}", o.stderr);
            for n in needles {
                assert!(o.stderr.contains(n), "{t}: {what}: no {n:?} in {}", o.stderr);
            }
            assert!(!out.exists(), "{t}: {what}: an answer was written");
        }
    };
    check(1, None, &["cannot read the fleet file"]);
    check(2, Some("[[node]\nname = \"a\"\n"), &["line 1"]);
    check(2, Some("[[node]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\ntoken = \"x\"\n"), &["line 4", "token"]);
    check(2, Some("[[node]]\nname = \"a\"\n"), &["url"]);
    check(2, Some("retries = 1\n"), &["lists no node"]);
    check(2, Some("[[node]]\nname = \"a\"\nurl = \"s\"\n[[node]]\nname = \"a\"\nurl = \"t\"\n"), &["two nodes \"a\""]);
    check(2, Some("node_timeout = \"soon\"\n[[node]]\nname = \"a\"\nurl = \"s\"\n"), &["node_timeout"]);
    check(2, Some("[[node]]\nname = \"a\"\nurl = \"http://192.0.2.1:80\"\n"), &["node \"a\"", "https://"]);
    check(2, Some("[[node]]\nname = \"a\"\nurl = \"ftp://x\"\n"), &["node \"a\"", "ftp"]);
    // A token file the fleet file names that is not there: the host is not as it says.
    check(1, Some("[[node]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\ntoken_file = \"nope\"\n"), &["nope"]);
});

/// `--node NAME` the fleet file does not have: one sentence naming it and the
/// nodes there are, exit 2; `--node` picks nodes, and their answer is exact.
wvtest!(an_unknown_node_name_is_one_sentence, needs = ["tcpdump"], |t| {
    let lab = lab("fleet-node-name", 3_000);
    let (b, c, tokens) = served(&lab);
    let fleet = fleet_of(&lab, "fleet.toml", "", &b.addr, &tokens, &c.addr);
    let out = lab.tmp.join("out.pcap");
    for mode in [vec!["-w", s(&out)], vec!["--count"]] {
        let mut args = vec!["query", "--fleet", s(&fleet), "--node", "a,z"];
        args.extend(mode);
        let o = run_wirevault(&args);
        o.expect(2, &format!("{args:?}"));
        assert_eq!(o.stderr.trim().lines().count(), 1, "{t}: {}", o.stderr);
        assert!(
            o.stderr.contains("no node is named \"z\"") && o.stderr.contains("its nodes are a, b, c"),
            "{t}: {}",
            o.stderr
        );
        assert!(!out.exists(), "{t}: an answer was written");
    }
    // --node a --node c: exactly their frames.
    let want: Vec<Frame> = expected(&lab, "", whole(&lab)).into_iter().filter(|f| node_of(&f.data) != 1).collect();
    let (o, got) = fleet_query(&["--fleet", s(&fleet), "--node", "a", "--node", "c"], "", whole(&lab), &out);
    o.expect(0, "--node a --node c");
    assert_same_frames(&want, &got, true, t.name);
});

/// Test PKI for TLS nodes: the fleet's CA, a server certificate for
/// localhost and a client certificate it signed; another CA and a client
/// certificate of its own. Paths: (ca, server cert, server key, client
/// cert, client key, other ca, other cert, other key).
fn pki(dir: &Path) -> [PathBuf; 8] {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let new_ca = |cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let pem = p.self_signed(&key).unwrap().pem();
        (pem, Issuer::new(p, key))
    };
    let leaf = |issuer: &Issuer<'_, KeyPair>, names: Vec<String>, cn: &str, client: bool| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![if client {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = p.signed_by(&key, issuer).unwrap();
        (write(&format!("{cn}.pem"), cert.pem()), write(&format!("{cn}.key"), key.serialize_pem()))
    };
    let (ca_pem, ca) = new_ca("fleet test CA");
    let (other_pem, other) = new_ca("another CA");
    let server = leaf(&ca, vec!["localhost".into()], "localhost", false);
    let client = leaf(&ca, vec![], "fleet-client", true);
    let stranger = leaf(&other, vec![], "stranger", true);
    [
        write("ca.pem", ca_pem),
        server.0,
        server.1,
        client.0,
        client.1,
        write("other-ca.pem", other_pem),
        stranger.0,
        stranger.1,
    ]
}

/// b served over TLS, asking for client certificates: with the fleet's CA and
/// a client certificate it signed, b's answer is merged (the whole link, exact);
/// a client certificate of another CA, or a fleet file trusting another CA, is
/// named as a failed handshake, and the rest is exact.
wvtest!(a_wrong_certificate_is_named_and_the_rest_is_exact, needs = ["tcpdump", "tshark", "capinfos"], |t| {
    let lab = lab("fleet-tls", 6_000);
    let [ca, srv, srv_key, cert, key, other_ca, stranger, stranger_key] = pki(lab.tmp.path());
    let b = Served::start(
        &lab.stores[1],
        lab.tmp.path(),
        &["--tls-cert", s(&srv), "--tls-key", s(&srv_key), "--client-ca", s(&ca)],
    );
    let c = Served::start(&lab.stores[2], lab.tmp.path(), &[]);
    let port = b.addr.rsplit_once(':').unwrap().1;
    let fleet = |file: &str, ca: &Path, cert: &Path, key: &Path| {
        let text = format!(
            "[[node]]\nname = \"a\"\nurl = \"{}\"\n[[node]]\nname = \"b\"\nurl = \"https://localhost:{port}\"\n\
             ca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n[[node]]\nname = \"c\"\nurl = \"http://{}\"\n",
            lab.stores[0].display(),
            ca.display(),
            cert.display(),
            key.display(),
            c.addr
        );
        let p = lab.tmp.join(file);
        std::fs::write(&p, text).unwrap();
        p
    };
    let good = fleet("good.toml", &ca, &cert, &key);
    let out = lab.tmp.join("tls.pcap");
    let want = expected(&lab, "", whole(&lab));
    let (o, got) = fleet_query(&["--fleet", s(&good)], "", whole(&lab), &out);
    o.expect(0, "TLS with the right certificates");
    assert_same_frames(&want, &got, true, t.name);
    let todo = "check its ca, cert and key";
    left_out(&lab, &fleet("stranger.toml", &ca, &stranger, &stranger_key), &[], 1, "failed the TLS handshake", todo);
    left_out(&lab, &fleet("other-ca.toml", &other_ca, &cert, &key), &[], 1, "failed the TLS handshake", todo);
});
