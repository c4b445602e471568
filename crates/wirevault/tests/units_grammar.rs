//! One grammar per quantity (`wv_units`): each form of a duration, a size, a rate or a CPU
//! list is accepted or refused the same way by every option that takes it, a refused one with
//! the same sentence (only the option's name differs) and exit code 2.

use crate::util::{run_wirevault, test_frames, write_pcap, Outcome, TempDir};

/// A tiny capture file, a store holding one packet, and their paths as text.
struct Inputs {
    _tmp: TempDir,
    pcap: String,
    store: String,
    scratch: String,
}

fn inputs(name: &str) -> Inputs {
    let tmp = TempDir::new(name);
    let pcap = tmp.join("f.pcap");
    write_pcap(&pcap, 1, 65535, true, &test_frames(20, 1_700_000_000_000_000_000));
    let store = tmp.join("store");
    let s = store.to_str().unwrap().to_string();
    run_wirevault(&[
        "record",
        "-q",
        "-o",
        &s,
        "--buffer",
        "8M",
        "--block-size",
        "64K",
        "--synthetic",
        "size=64,count=1",
    ])
    .expect(0, "record a store");
    let scratch = tmp.join("scratch").to_str().unwrap().to_string();
    Inputs { pcap: pcap.to_str().unwrap().to_string(), store: s, scratch, _tmp: tmp }
}

/// A record run that ends at once (one synthetic packet) into a fresh store, plus `extra`.
fn record(i: &Inputs, extra: &[&str]) -> Outcome {
    record_spec(i, "size=64,count=1", extra)
}

/// [`record`] of the synthetic source `spec`.
fn record_spec(i: &Inputs, spec: &str, extra: &[&str]) -> Outcome {
    let _ = std::fs::remove_dir_all(&i.scratch);
    let head = ["record", "-q", "-o", &i.scratch, "--buffer", "8M", "--block-size", "64K", "--no-tune-warnings"];
    let o = run_wirevault(&[&head[..], &["--synthetic", spec], extra].concat());
    let _ = std::fs::remove_dir_all(&i.scratch);
    o
}

/// `--name=value`, so that a value such as `-1` is not taken for an option.
fn opt(name: &str, v: &str) -> String {
    format!("{name}={v}")
}

/// The one line a refusal writes, without the `wirevault: ` prefix.
fn refusal(o: &Outcome, what: &str) -> String {
    o.expect(2, what);
    assert_eq!(o.stderr.trim().lines().count(), 1, "{what}: one sentence: {}", o.stderr);
    o.stderr.trim().strip_prefix("wirevault: ").unwrap_or_else(|| panic!("{what}: no prefix: {}", o.stderr)).to_string()
}

/// A run of one option with the value given.
type Run<'a> = Box<dyn Fn(&str) -> Outcome + 'a>;

/// The options that take a duration, each as (its name in messages, a run of it with value `v`).
fn duration_options(i: &Inputs) -> Vec<(&'static str, Run<'_>)> {
    vec![
        ("--duration", Box::new(move |v: &str| record(i, &[&opt("--duration", v)]))),
        ("--file-time", Box::new(move |v: &str| record(i, &[&opt("--file-time", v)]))),
        ("--dedup", Box::new(move |v: &str| record(i, &[&opt("--dedup", v)]))),
        ("--flow-idle", Box::new(move |v: &str| record(i, &["--flow-cutoff", "10K", &opt("--flow-idle", v)]))),
        ("--step", Box::new(move |v: &str| run_wirevault(&["analyze", &i.pcap, "--json", &opt("--step", v)]))),
        (
            "--dup-window",
            Box::new(move |v: &str| run_wirevault(&["analyze", &i.pcap, "--json", &opt("--dup-window", v)])),
        ),
    ]
}

#[test]
fn every_duration_option_takes_the_same_forms() {
    let i = inputs("units-durations");
    // Each in range of every option (--dedup: at most 10s; --file-time: 10ms at least).
    let accepted = ["20ms", "1.5s", "1", "0.25", "1 s", "2 seconds", ".5s", "20000us"];
    for (name, run) in duration_options(&i) {
        for v in accepted {
            run(v).expect(0, &format!("{name} {v}"));
        }
    }
    // Beyond --dedup's 10 s: a week is a duration to the others, and to --from's `ago`.
    for (name, run) in duration_options(&i).into_iter().filter(|(n, _)| *n != "--dedup") {
        run("1w").expect(0, &format!("{name} 1w"));
    }
    let q = |from: &str| run_wirevault(&["query", &i.pcap, "--count", "--from", from]);
    for v in accepted.iter().chain(&["1w"]) {
        q(&format!("{v} ago")).expect(0, &format!("--from '{v} ago'"));
    }
    // The synthetic spec's duration= (count=1 ends the run first).
    for v in accepted.iter().chain(&["1w"]) {
        let spec = format!("size=64,count=1,duration={v}");
        record_spec(&i, &spec, &[]).expect(0, &spec);
    }
    let _ = std::fs::remove_dir_all(&i.scratch);
}

#[test]
fn every_duration_option_refuses_the_same_forms_with_one_sentence() {
    let i = inputs("units-durations-bad");
    let forms = wv_units::DURATION_FORMS;
    for v in ["1 fortnight", "1e3", "-1s", "1H", "10 parsecs", "1..2s", "s"] {
        let want = |name: &str| format!("{name} \"{v}\" is not a duration: give {forms}");
        for (name, run) in duration_options(&i) {
            assert_eq!(refusal(&run(v), &format!("{name} {v}")), want(name));
        }
        let serve = run_wirevault(&["serve", &i.store, &opt("--send-timeout", v)]);
        assert_eq!(refusal(&serve, &format!("--send-timeout {v}")), want("--send-timeout"));
        let spec = format!("size=64,count=1,duration={v}");
        let synth = run_wirevault(&["record", "-o", &i.scratch, "--synthetic", &spec]);
        assert_eq!(refusal(&synth, &spec), want("synthetic duration"));
        // A time before now: the duration's own forms, in the time's sentence (a leading
        // minus has a sentence of its own: `--from -5` is a habit of other tools).
        if v.starts_with('-') {
            continue;
        }
        let from = run_wirevault(&["query", &i.pcap, "--count", "--from", &format!("{v} ago")]);
        assert!(refusal(&from, &format!("--from '{v} ago'")).contains(forms), "{}", from.stderr);
    }
    // Too long for any duration (past 584 years of nanoseconds).
    for (name, run) in duration_options(&i) {
        let said = refusal(&run("213504d"), &format!("{name} 213504d"));
        assert_eq!(said, format!("{name} \"213504d\" is too long: a duration is at most 213503d (584 years)"));
    }
}

#[test]
fn every_size_option_refuses_the_same_forms_with_one_sentence() {
    let i = inputs("units-sizes");
    let d = i.scratch.clone();
    let options: Vec<(&str, Run<'_>)> = vec![
        ("--buffer", Box::new(|v: &str| record(&i, &[&opt("--buffer", v)]))),
        ("--file-size", Box::new(|v: &str| record(&i, &[&opt("--file-size", v)]))),
        ("--block-size", Box::new(|v: &str| record(&i, &[&opt("--block-size", v)]))),
        ("--ring-size", Box::new(|v: &str| record(&i, &[&opt("--ring-size", v)]))),
        ("--flow-cutoff", Box::new(|v: &str| record(&i, &[&opt("--flow-cutoff", v)]))),
        ("--max-size", Box::new(|v: &str| record(&i, &[&opt("--max-size", v)]))),
        ("--file-size", Box::new(move |v: &str| run_wirevault(&["disk-bench", &d, &opt("--file-size", v)]))),
        ("--disk", Box::new(|v: &str| run_wirevault(&["plan", "--size", "64", &opt("--disk", v)]))),
        ("--buffer", Box::new(|v: &str| run_wirevault(&["tune", "lo", &opt("--buffer", v)]))),
        ("--max-size", Box::new(|v: &str| run_wirevault(&["tune", "lo", "--store", &i.store, &opt("--max-size", v)]))),
        ("--max-bytes", Box::new(|v: &str| run_wirevault(&["serve", &i.store, &opt("--max-bytes", v)]))),
    ];
    for v in ["lots", "1e5", "4 MB", "-1", "1..2M", "NaN"] {
        for (name, run) in &options {
            let said = refusal(&run(v), &format!("{name} {v}"));
            assert_eq!(said, format!("{name} \"{v}\" is not a size: give {}", wv_units::SIZE_FORMS));
        }
    }
    // The same size however it is written.
    for v in ["1M", "1MiB", "1m", "1048576", "1024K", "1.0M"] {
        record(&i, &[&opt("--file-size", v)]).expect(0, &format!("--file-size {v}"));
        run_wirevault(&["plan", "--size", "64", &opt("--disk", v), "--json"]).expect(0, &format!("plan --disk {v}"));
    }
    assert!(!std::path::Path::new(&i.scratch).exists(), "disk-bench wrote with a refused size");
}

#[test]
fn every_rate_option_refuses_the_same_forms_with_one_sentence() {
    let i = inputs("units-rates");
    let options: Vec<(&str, &str, Run<'_>)> = vec![
        (
            "--link",
            wv_units::RATE_FORMS,
            Box::new(|v: &str| run_wirevault(&["plan", "--size", "64", &opt("--link", v)])),
        ),
        (
            "--rate",
            wv_units::RATE_FORMS,
            Box::new(|v: &str| run_wirevault(&["replay", "-i", "lo", &opt("--rate", v), &i.pcap])),
        ),
        (
            "--rate",
            wv_units::BYTE_RATE_FORMS,
            Box::new(|v: &str| run_wirevault(&["disk-bench", &i.scratch, &opt("--rate", v)])),
        ),
    ];
    for (v, why) in [
        ("10", "it has no unit"),
        ("64000", "it has no unit"),
        ("5gigs", "it is not a rate"),
        ("10 gigs", "it is not a rate"),
        ("1e3gbps", "it is not a rate"),
        ("100000tbps", "it is out of range"),
        ("0.1bps", "it is out of range"),
    ] {
        for (name, forms, run) in &options {
            let said = refusal(&run(v), &format!("{name} {v}"));
            assert_eq!(said, format!("{name}: invalid rate '{v}': {why}; give {forms}"));
        }
    }
    // A link's rate and a sending rate are in bits: a rate in bytes is refused by both.
    for (name, forms, run) in &options[..2] {
        let said = refusal(&run("1.2GB/s"), &format!("{name} 1.2GB/s"));
        assert_eq!(
            said,
            format!(
                "{name}: invalid rate '1.2GB/s': it is in bytes (capital B) and this rate is in bits; give {forms}"
            )
        );
    }
    // Bits written every way are the same link.
    for v in ["10g", "10G", "10gbps", "10Gb/s", "10Gbit/s", "10 GBit/s", "10GbE", "10000mbps", "10000000kbit/s"] {
        let o = run_wirevault(&["plan", "--size", "64", &opt("--link", v), "--json"]);
        o.expect(0, &format!("--link {v}"));
        let rows: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(rows[0]["link_bps"].as_f64(), Some(10e9), "--link {v}: {}", o.stdout);
    }
    assert!(!std::path::Path::new(&i.scratch).exists(), "disk-bench ran with a refused rate");
}

#[test]
fn record_and_tune_refuse_a_cpu_list_with_one_sentence() {
    let i = inputs("units-cpus");
    for v in ["3-1", "a", "1-", "1024", "0-1024"] {
        let want = format!("--cpus \"{v}\" is not a list like 0,1 or 2-5");
        assert_eq!(refusal(&record(&i, &[&opt("--cpus", v)]), &format!("record --cpus {v}")), want);
        assert_eq!(refusal(&run_wirevault(&["tune", "lo", &opt("--cpus", v)]), &format!("tune --cpus {v}")), want);
    }
}

#[test]
fn every_count_option_takes_and_refuses_the_same_forms() {
    let i = inputs("units-counts");
    let ends = format!("is not a count above 0: give {}", wv_units::COUNT_FORMS);
    let limit = |sub: &str, v: &str| {
        let mut a = vec![sub];
        if sub == "replay" {
            a.extend(["-i", "lo", "--topspeed"]);
        }
        let l = opt("--limit", v);
        a.extend([i.pcap.as_str(), l.as_str()]);
        if sub == "query" {
            a.push("--count");
        } else if sub == "analyze" {
            a.push("--json");
        }
        run_wirevault(&a)
    };
    let synthetic = |v: &str| record_spec(&i, &format!("size=64,count={v}"), &[]);
    for v in ["5", "1k", "1K"] {
        for sub in ["query", "analyze", "replay"] {
            limit(sub, v).expect(0, &format!("{sub} --limit {v}"));
        }
        record(&i, &[&opt("-c", v)]).expect(0, &format!("-c {v}"));
        synthetic(v).expect(0, &format!("count={v}"));
    }
    for v in ["1.5M", "1m", "1e3", "lots", "-1", "1 M", "99999999999G"] {
        let mut said = Vec::new();
        for sub in ["query", "analyze", "replay"] {
            said.push(refusal(&limit(sub, v), &format!("{sub} --limit {v}")));
        }
        said.push(refusal(&record(&i, &[&opt("--count", v)]), &format!("-c {v}")));
        said.push(refusal(&synthetic(v), &format!("count={v}")));
        for s in &said {
            assert!(s.contains(&format!("\"{v}\" {ends}")), "{v}: {s}");
        }
    }
}
