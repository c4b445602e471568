//! The HTTP server's security: only loopback without TLS; bearer tokens
//! (401 without or with a wrong one, revoked by a reload); client
//! certificates checked against a CA and its CRL, with a server
//! certificate for a name other than localhost; and hostile requests
//! (path tricks, malformed filters and times, huge limits, other methods,
//! slow clients) that get one clear answer each, never a crash.

use crate::util::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A store of synthetic traffic to serve.
fn small_store(tmp: &TempDir) -> PathBuf {
    let store = tmp.join("store");
    record_synthetic(&store, "size=imix,count=5000,flows=20");
    store
}

/// Test PKI: a CA, a server certificate for `recorder.example.test`, client
/// certificates for alice and bob, and a CRL of the CA revoking bob's.
struct Pki {
    ca: PathBuf,
    server: (PathBuf, PathBuf),
    alice: (PathBuf, PathBuf),
    bob: (PathBuf, PathBuf),
    crl: PathBuf,
    /// A CRL of the CA that revokes nobody.
    crl_none: PathBuf,
}

fn pki(dir: &Path) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SerialNumber};
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "wirevault test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let ca_path = write("ca.pem", ca_cert.pem());
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>, cn: &str, serial: u64, client: bool| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.serial_number = Some(SerialNumber::from(serial));
        p.extended_key_usages = vec![if client {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = p.signed_by(&key, &issuer).unwrap();
        (write(&format!("{cn}.pem"), cert.pem()), write(&format!("{cn}.key"), key.serialize_pem()))
    };
    let server = leaf(vec!["recorder.example.test".into()], "recorder.example.test", 10, false);
    let alice = leaf(vec![], "alice", 11, true);
    let bob = leaf(vec![], "bob", 12, true);
    let crl = |revoked: Vec<u64>| {
        rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2024, 1, 1),
            next_update: rcgen::date_time_ymd(2099, 1, 1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .into_iter()
                .map(|n| rcgen::RevokedCertParams {
                    serial_number: SerialNumber::from(n),
                    revocation_time: rcgen::date_time_ymd(2024, 1, 1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&issuer)
        .unwrap()
        .pem()
        .unwrap()
    };
    let crl_none = write("crl-none.pem", crl(vec![]));
    let crl = write("crl.pem", crl(vec![12]));
    Pki { ca: ca_path, server, alice, bob, crl, crl_none }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn listening_beyond_loopback_needs_tls_and_a_way_to_know_who_asks() {
    let tmp = TempDir::new("serve-refuse");
    let store = small_store(&tmp);
    let o = run_wirevault(&["serve", s(&store), "--listen", "0.0.0.0:0"]);
    o.expect(2, "plain non-loopback");
    assert!(o.stderr.contains("without TLS"), "{}", o.stderr);
    let p = pki(tmp.path());
    let o = run_wirevault(&[
        "serve",
        s(&store),
        "--listen",
        "0.0.0.0:0",
        "--tls-cert",
        s(&p.server.0),
        "--tls-key",
        s(&p.server.1),
    ]);
    o.expect(2, "TLS without tokens or client certificates");
    assert!(o.stderr.contains("--token-file") && o.stderr.contains("--client-ca"), "{}", o.stderr);
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "size=64,count=10",
        "-o",
        s(&tmp.join("s2")),
        "--listen",
        "0.0.0.0:9",
    ]);
    o.expect(2, "record --listen refused the same way");
    assert!(!tmp.join("s2").join("stream-000").exists(), "nothing recorded when the server is refused");
    let o = run_wirevault(&["serve", s(&store), "--listen", "not an address"]);
    o.expect(2, "bad address");
    assert!(o.stderr.contains("--listen not an address"), "{}", o.stderr);
}

wvtest!(tokens_are_required_checked_and_revoked_by_a_reload, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-tokens");
    let store = small_store(&tmp);
    let p = pki(tmp.path());
    let tokens = tmp.join("tokens");
    std::fs::write(
        &tokens,
        "# who may ask\nalice:0123456789abcdef0123456789abcdef\nbob:fedcba9876543210fedcba9876543210\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run_wirevault(&["serve", s(&store), "--token-file", s(&tokens)]);
    o.expect(2, "a token file others can read");
    assert!(o.stderr.contains("chmod 600"), "{}", o.stderr);
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();

    // Any address, TLS, tokens: as an operator would run it.
    let served = Served::start(
        &store,
        tmp.path(),
        &["--tls-cert", s(&p.server.0), "--tls-key", s(&p.server.1), "--token-file", s(&tokens)],
    );
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    let base = format!("https://recorder.example.test:{port}");
    let resolve = format!("recorder.example.test:{port}:127.0.0.1");
    let http = Http::new(&base).with(&["--cacert", s(&p.ca), "--resolve", &resolve]);
    let none = http.get("/api/v1/status", &[]);
    assert_eq!(none.status, 401, "{}", none.text());
    assert!(none.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")));
    let wrong = http.with(&["-H", "Authorization: Bearer 0123456789abcdef0123456789abcdeX"]).get("/api/v1/count", &[]);
    assert_eq!(wrong.status, 401);
    assert_eq!(
        http.with(&["-H", "Authorization: Bearer 0123456789abcdef0123456789abcdeX"]).get("/metrics", &[]).status,
        401
    );
    let bob = http.with(&["-H", "Authorization: Bearer fedcba9876543210fedcba9876543210"]);
    assert_eq!(bob.get("/api/v1/count", &[]).json()["matched"], 5000);
    let cookie = http.with(&["-b", "wv_token=0123456789abcdef0123456789abcdef"]);
    assert_eq!(cookie.get("/api/v1/query", &[("limit", "3")]).status, 200, "the console's cookie");
    // The console's assets are public; they hold no data.
    assert_eq!(http.get("/", &[]).status, 200);
    // Revoke bob: delete his line, SIGHUP.
    std::fs::write(&tokens, "alice:0123456789abcdef0123456789abcdef\n").unwrap();
    served.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while bob.get("/api/v1/status", &[]).status != 401 {
        assert!(std::time::Instant::now() < deadline, "bob's token still works after the reload:\n{}", served.log());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The reload is logged just after the new tokens take effect: wait for the line.
    while !served.log().contains("reloaded 1 token(s)") {
        assert!(std::time::Instant::now() < deadline, "the reload is not logged:\n{}", served.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(served.log().contains("token=\"bob\""), "requests are logged with the token's name:\n{}", served.log());
    // Plain HTTP to a TLS port is not served.
    assert!(Http::new(&format!("http://127.0.0.1:{port}")).try_get("/api/v1/status", &[]).map(|r| r.status) != Ok(200));
});

wvtest!(client_certificates_are_checked_against_the_ca_and_its_crl, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-certs");
    let store = small_store(&tmp);
    let p = pki(tmp.path());
    let served = Served::start(
        &store,
        tmp.path(),
        &[
            "--tls-cert",
            s(&p.server.0),
            "--tls-key",
            s(&p.server.1),
            "--client-ca",
            s(&p.ca),
            "--client-crl",
            s(&p.crl),
        ],
    );
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    let resolve = format!("recorder.example.test:{port}:127.0.0.1");
    let http = Http::new(&format!("https://recorder.example.test:{port}")).with(&[
        "--cacert",
        s(&p.ca),
        "--resolve",
        &resolve,
    ]);
    let alice = http.with(&["--cert", s(&p.alice.0), "--key", s(&p.alice.1)]);
    let r = alice.get("/api/v1/count", &[("filter", "udp")]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(http.try_get("/api/v1/status", &[]).is_err(), "no client certificate: refused");
    let bob = http.with(&["--cert", s(&p.bob.0), "--key", s(&p.bob.1)]);
    assert!(bob.try_get("/api/v1/status", &[]).is_err(), "bob's certificate is revoked");
    assert!(served.log().contains("cert=\"alice\""), "the log names the certificate:\n{}", served.log());
    assert!(served.log().contains("TLS handshake refused"), "{}", served.log());
});

wvtest!(hostile_requests_get_clear_answers_and_never_a_crash, needs = ["curl", "tcpdump"], |t| {
    let tmp = TempDir::new("serve-hostile");
    let store = small_store(&tmp);
    let served = Served::start(&store, tmp.path(), &["--max-queries", "2"]);
    let http = Http::new(&format!("http://{}", served.addr));
    // A filter that does not parse: 400 with the CLI's sentence.
    let cli = run_wirevault(&["query", s(&store), "--count", "port", "99999999"]);
    cli.expect(2, "bad filter");
    let r = http.get("/api/v1/count", &[("filter", "port 99999999")]);
    assert_eq!(r.status, 400);
    let sentence = r.json()["error"].as_str().unwrap().to_string();
    assert!(cli.stderr.contains(&sentence), "API: {sentence}\nCLI: {}", cli.stderr);
    assert_eq!(
        http.get("/api/v1/query", &[("filter", "port 99999999")]).status,
        400,
        "pcap export too, before any byte"
    );
    // A time that does not parse: the CLI's sentence too.
    let cli = run_wirevault(&["query", s(&store), "--count", "--from", "yesterday-ish"]);
    let r = http.get("/api/v1/count", &[("from", "yesterday-ish")]);
    assert_eq!(r.status, 400);
    assert!(cli.stderr.contains(r.json()["error"].as_str().unwrap()), "{} / {}", r.text(), cli.stderr);
    for (k, v) in
        [("limit", "0"), ("limit", "-5"), ("limit", "99999999999999999999999"), ("nonsense", "1"), ("step", "0s")]
    {
        let r = http.get("/api/v1/count", &[(k, v)]);
        assert_eq!(r.status, 400, "{k}={v}: {}", r.text());
        assert!(r.json()["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    let r = http.get("/api/v1/histogram", &[("step", "1ns"), ("from", "0"), ("to", "2000000000")]);
    assert_eq!(r.status, 400, "a billion buckets: {}", r.text());
    assert!(r.text().contains("buckets"), "{}", r.text());
    // Status takes no parameter, and says so as the others do.
    let r = http.get("/api/v1/status", &[("x", "1")]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["error"].as_str().is_some_and(|e| e.contains("takes none")));
    // A huge limit is just a limit.
    let r = http.get("/api/v1/query", &[("limit", "18446744073709551615")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-wirevault-truncated"), None);
    // Path tricks: nothing outside the embedded assets and the API.
    for path in [
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/console.js/../../../etc/passwd",
        "/api/v1/../../../etc/passwd",
        "//etc/passwd",
        "/catalog.jsonl",
        "/stream-000",
    ] {
        let r = Http::new(&format!("http://{}", served.addr)).with(&["--path-as-is"]).get(path, &[]);
        assert!(r.status == 404, "{path}: {} {}", r.status, r.text());
        assert!(!r.text().contains("root:"), "{path} leaked a file");
    }
    // Other methods: 405.
    let r = http.with(&["-X", "POST"]).get("/api/v1/status", &[]);
    assert_eq!(r.status, 405, "{}", r.text());
    let r = http.with(&["-X", "DELETE"]).get("/api/v1/files", &[]);
    assert_eq!(r.status, 405);
    // A slow client that never finishes its request holds only its own
    // connection: others are served meanwhile, and it is dropped.
    let mut slow = std::net::TcpStream::connect(&served.addr).unwrap();
    slow.write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    assert_eq!(http.get("/api/v1/status", &[]).status, 200, "served beside a slow client");
    slow.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"), "the unfinished request was not answered as complete");
    // A client that goes away mid-export stops it; the server lives on.
    let mut c = std::net::TcpStream::connect(&served.addr).unwrap();
    c.write_all(b"GET /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut first = [0u8; 64];
    let _ = c.read(&mut first).unwrap();
    drop(c);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(http.get("/api/v1/status", &[]).status, 200);
    assert!(served.log().contains("client went away") || served.log().contains("complete"), "{}", served.log());
    assert_no_panic(&served.log(), "serve");
});

/// A store without packets answers as any store does: a filter that does
/// not parse is a 400, and a range given whole gets its buckets, all zero.
/// `limit=0` is refused by the API and by the CLI alike.
#[test]
fn an_empty_store_checks_filters_and_keeps_ranges() {
    let tmp = TempDir::new("serve-empty");
    let store = tmp.join("store");
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=64,count=10",
        "-o",
        s(&store),
        "-q",
        "--no-tune-warnings",
        "tcp port 9",
    ])
    .expect(0, "record nothing");
    let served = Served::start(&store, tmp.path(), &[]);
    let http = Http::new(&format!("http://{}", served.addr));
    for f in ["tcp and", "inbound"] {
        let r = http.get("/api/v1/histogram", &[("filter", f)]);
        assert_eq!(r.status, 400, "{f}: {}", r.text());
    }
    let r = http
        .get("/api/v1/histogram", &[("from", "2020-01-01T00:00:00Z"), ("to", "2020-01-02T00:00:00Z"), ("step", "1h")]);
    assert_eq!(r.status, 200, "{}", r.text());
    let b = r.json()["buckets"].as_array().unwrap().clone();
    assert_eq!(b.len(), 24, "{}", r.text());
    assert!(b.iter().all(|x| x[0] == 0 && x[1] == 0), "{}", r.text());
    assert_eq!(http.get("/api/v1/histogram", &[("step", "99999999999d")]).status, 400, "a step past u64 ns");
    assert_eq!(http.get("/api/v1/count", &[("limit", "0")]).status, 400);
    let o = run_wirevault(&["query", s(&store), "--count", "--limit", "0"]);
    o.expect(2, "--limit 0");
    assert!(o.stderr.contains("above 0"), "{}", o.stderr);
}

/// A reload that fails part-way (the key file is junk) changes nothing:
/// the token file, read before the key, does not take effect either.
wvtest!(a_reload_that_fails_changes_nothing, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-reload-atomic");
    let store = small_store(&tmp);
    let p = pki(tmp.path());
    let tokens = tmp.join("tokens");
    let (old, new) = ("0123456789abcdef0123456789abcdef", "99999999999999999999999999999999");
    std::fs::write(&tokens, format!("alice:{old}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let served = Served::start(
        &store,
        tmp.path(),
        &["--tls-cert", s(&p.server.0), "--tls-key", s(&p.server.1), "--token-file", s(&tokens)],
    );
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    let resolve = format!("recorder.example.test:{port}:127.0.0.1");
    let http = Http::new(&format!("https://recorder.example.test:{port}")).with(&[
        "--cacert",
        s(&p.ca),
        "--resolve",
        &resolve,
    ]);
    let with = |t: &str| http.with(&["-H", &format!("Authorization: Bearer {t}")]);
    assert_eq!(with(old).get("/api/v1/status", &[]).status, 200);
    // A new token, and a key that does not load.
    std::fs::write(&tokens, format!("carol:{new}\n")).unwrap();
    let key = std::fs::read(&p.server.1).unwrap();
    std::fs::write(&p.server.1, "not a key\n").unwrap();
    served.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !served.log().contains("reload failed, the previous settings stay") {
        assert!(std::time::Instant::now() < deadline, "the failed reload is not logged:\n{}", served.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(with(old).get("/api/v1/status", &[]).status, 200, "the previous token stays:\n{}", served.log());
    assert_eq!(with(new).get("/api/v1/status", &[]).status, 401, "the new token must not be half-applied");
    // The key mended: the next reload takes both.
    std::fs::write(&p.server.1, key).unwrap();
    served.signal(libc::SIGHUP);
    while !served.log().contains("reloaded 1 token(s)") {
        assert!(std::time::Instant::now() < deadline, "the reload is not logged:\n{}", served.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(with(new).get("/api/v1/status", &[]).status, 200);
    assert_eq!(with(old).get("/api/v1/status", &[]).status, 401);
});

/// A histogram whose `from` lies past the newest packet says that, not
/// that `from` must be earlier than a `to` nobody gave.
#[test]
fn a_histogram_past_the_store_says_what_is_wrong() {
    let tmp = TempDir::new("serve-hist-range");
    let store = small_store(&tmp);
    let served = Served::start(&store, tmp.path(), &[]);
    let http = Http::new(&format!("http://{}", served.addr));
    let r = http.get("/api/v1/histogram", &[("from", "2262-01-01T00:00:00Z")]);
    assert_eq!(r.status, 400, "{}", r.text());
    let e = r.json()["error"].as_str().unwrap().to_string();
    assert!(!e.contains("earlier than to") && e.contains("newest stored packet") && e.contains("2262"), "{e}");
    let r = http.get("/api/v1/histogram", &[("to", "1971-01-01T00:00:00Z")]);
    assert_eq!(r.status, 400, "{}", r.text());
    let e = r.json()["error"].as_str().unwrap().to_string();
    assert!(!e.contains("from must be") && e.contains("oldest stored packet") && e.contains("1971"), "{e}");
    let r = http.get("/api/v1/histogram", &[("from", "2030-01-01T00:00:00Z"), ("to", "2020-01-01T00:00:00Z")]);
    assert_eq!(r.status, 400);
    assert!(r.text().contains("from must be earlier than to"), "{}", r.text());
}

/// A keep-alive TLS connection opened with a client certificate that a
/// reload then revokes is not served again: the reload of a changed CRL
/// closes every TLS connection after its current request.
wvtest!(a_certificate_revoked_by_a_reload_is_not_served_on_an_open_connection, needs = ["curl", "python3"], |t| {
    use std::io::{BufRead, BufReader};
    let tmp = TempDir::new("serve-crl-reload");
    let store = small_store(&tmp);
    let p = pki(tmp.path());
    // The CRL in force at first revokes nobody.
    let crl = tmp.join("served-crl.pem");
    std::fs::copy(&p.crl_none, &crl).unwrap();
    let served = Served::start(
        &store,
        tmp.path(),
        &["--tls-cert", s(&p.server.0), "--tls-key", s(&p.server.1), "--client-ca", s(&p.ca), "--client-crl", s(&crl)],
    );
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    // One connection, two requests: the second after a line on stdin.
    let script = r#"
import socket, ssl, sys
port, ca, cert, key = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port))), server_hostname="recorder.example.test")
def ask():
    try:
        s.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            got = s.recv(65536)
            if not got:
                return "closed"
            buf += got
        head, _, body = buf.partition(b"\r\n\r\n")
        n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
        while len(body) < n:
            got = s.recv(65536)
            if not got:
                return "closed"
            body += got
        return head.split(b" ")[1].decode()
    except (OSError, ssl.SSLError) as e:
        return "closed " + type(e).__name__
print(ask(), flush=True)
sys.stdin.readline()
print(ask(), flush=True)
"#;
    let mut py = Background(
        std::process::Command::new("python3")
            .args(["-c", script, &port, s(&p.ca), s(&p.bob.0), s(&p.bob.1)])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(py.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "200", "bob is served before the reload:\n{}", served.log());
    // Revoke bob, reload.
    std::fs::copy(&p.crl, &crl).unwrap();
    served.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !served.log().contains("reloaded TLS") {
        assert!(std::time::Instant::now() < deadline, "the reload is not logged:\n{}", served.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    use std::io::Write;
    writeln!(py.0.stdin.as_mut().unwrap()).unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("closed"), "bob was served after his certificate was revoked: {line}\n{}", served.log());
    // A new connection with his certificate is refused; alice's is served.
    let resolve = format!("recorder.example.test:{port}:127.0.0.1");
    let http = Http::new(&format!("https://recorder.example.test:{port}")).with(&[
        "--cacert",
        s(&p.ca),
        "--resolve",
        &resolve,
    ]);
    assert!(http.with(&["--cert", s(&p.bob.0), "--key", s(&p.bob.1)]).try_get("/api/v1/status", &[]).is_err());
    let alice = http.with(&["--cert", s(&p.alice.0), "--key", s(&p.alice.1)]);
    assert_eq!(alice.get("/api/v1/status", &[]).status, 200);
});

/// One client address cannot take every connection slot: 100 idle
/// connections from 127.0.0.1 hold 64, the others are answered 503 with
/// Retry-After at once; a client from another address is served meanwhile;
/// once the idle ones close, 127.0.0.1 is served again. (Before, 512 idle
/// connections from anyone locked every other client out until they timed
/// out, with no token or certificate needed on a TLS server.)
wvtest!(one_address_cannot_take_every_connection, needs = ["curl", "promtool"], |t| {
    use std::io::Read;
    let tmp = TempDir::new("serve-per-address");
    let store = small_store(&tmp);
    let served = Served::start(&store, tmp.path(), &[]);
    let mut idle: Vec<std::net::TcpStream> =
        (0..100).map(|_| std::net::TcpStream::connect(&served.addr).expect("connect")).collect();
    let last = idle.last_mut().unwrap();
    last.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = last.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("Retry-After"), "{answer:?}");
    let code = |from: &str| {
        let url = format!("http://{}/api/v1/status", served.addr);
        let o = std::process::Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "5", "--interface", from, &url])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert_eq!(code("127.0.0.2"), "200", "another address is served:\n{}", served.log());
    assert_eq!(code("127.0.0.1"), "503", "{}", served.log());
    assert!(served.log().contains("127.0.0.1 holds 64 connections already"), "{}", served.log());
    // Each refusal is an answer, counted: the 36 idle ones and curl's.
    let m = Http::new(&format!("http://{}", served.addr)).with(&["--interface", "127.0.0.2"]).get("/metrics", &[]);
    promtool_ok(&m.body, "after refused connections");
    assert!(m.text().contains("wirevault_http_requests_total{code=\"503\"} 37"), "{}", m.text());
    drop(idle);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while code("127.0.0.1") != "200" {
        assert!(std::time::Instant::now() < deadline, "127.0.0.1 not served again:\n{}", served.log());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
});
