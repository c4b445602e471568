//! `wirevault serve --config FILE`: the TOML file says what the flags say
//! (the store too), the command line overrides it, and a bad key is one
//! sentence with exit code 2. The served store answers as the CLI does.

use crate::util::*;

#[test]
fn serve_reads_its_options_from_a_config_file_and_flags_win() {
    let tmp = TempDir::new("serve-config");
    let store = tmp.join("store");
    run_wirevault(&["record", "--synthetic", "size=200,count=3000", "-o", store.to_str().unwrap(), "-q"])
        .expect(0, "record");
    let cfg = tmp.join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "store = {:?}\nlisten = \"127.0.0.1:0\"\nmax-bytes = \"100K\"\nmax-queries = 3\n",
            store.to_str().unwrap()
        ),
    )
    .unwrap();
    // Everything from the file, the store included.
    let served = Served::with_args(&["--config", cfg.to_str().unwrap()], tmp.path());
    let http = Http::new(&format!("http://{}", served.addr));
    let st = http.get("/api/v1/status", &[]).json();
    assert_eq!(st["store"].as_str(), store.to_str(), "{st}");
    assert_eq!(st["limits"]["max_bytes"].as_u64(), Some(100 * 1024), "{st}");
    assert_eq!(st["limits"]["max_queries"].as_u64(), Some(3), "{st}");
    // The served answer is the CLI's, cut by the file's max-bytes.
    let r = http.get("/api/v1/query", &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("x-wirevault-truncated").is_some_and(|h| h.contains("max-bytes")), "{:?}", r.headers);
    assert!(r.body.len() as u64 <= 100 * 1024, "{}", r.body.len());
    drop(served);
    // The command line overrides the file.
    let served = Served::with_args(
        &[store.to_str().unwrap(), "--config", cfg.to_str().unwrap(), "--max-bytes", "2M"],
        tmp.path(),
    );
    let http = Http::new(&format!("http://{}", served.addr));
    assert_eq!(http.get("/api/v1/status", &[]).json()["limits"]["max_bytes"].as_u64(), Some(2 << 20));
    let out = tmp.join("cli.pcap");
    run_wirevault(&["query", store.to_str().unwrap(), "-w", out.to_str().unwrap()]).expect(0, "query");
    let r = http.get("/api/v1/query", &[]);
    assert_eq!(r.body, std::fs::read(&out).unwrap(), "HTTP answer equals the CLI's");
    drop(served);
    // A key serve does not have: one sentence, exit 2.
    std::fs::write(&cfg, "store = \"x\"\nfilter = \"udp\"\n").unwrap();
    let o = run_wirevault(&["serve", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("key filter: unknown key") && !o.stderr.contains("and filter"), "{}", o.stderr);
    assert_no_panic(&o.stderr, "serve --config");
    // No store at all.
    let o = run_wirevault(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("give the store to serve"), "{}", o.stderr);
}
