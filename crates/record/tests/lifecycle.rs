//! The recorder as a library, without the command line: a recording of the synthetic source
//! started, watched and stopped through `wv_record` alone, its report read back.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use wv_record::{Layout, Recorder, RecorderConfig, Reductions, Source, Stamping, State, Tuning};

fn config(store: std::path::PathBuf, count: u64) -> RecorderConfig {
    let spec = wv_capture::synthetic::parse_spec(&format!("size=256,count={count}")).expect("a spec");
    RecorderConfig {
        store,
        volumes: Vec::new(),
        source: Source::Synthetic(spec),
        workers: 1,
        snaplen: wv_wire::MAX_SNAPLEN,
        stream: Layout {
            format: wv_store::Format::Pcap,
            arena_per_worker: 64 << 20,
            block_size: 4 << 20,
            file_size: 1 << 20,
            file_time_ns: None,
        },
        cpus: None,
        count: None,
        duration: None,
        expression: None,
        budget: None,
        user: None,
        direct: true,
        spill: None,
        index: true,
        flows: Some(wv_flows::FlowConfig::default()),
        flows_to: Vec::new(),
        clickhouse: None,
        stats_copy: None,
        tuning: Tuning::default(),
        reduce: Reductions { flow_table: 1024, flow_idle_ns: 60_000_000_000, ..Default::default() },
        timestamps: Stamping::Auto,
        buffer_from: "--buffer",
        zero_copy: false,
    }
}

#[test]
fn a_recording_runs_through_the_library_alone() {
    let dir = std::env::temp_dir().join(format!("wv-record-lib-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = dir.join("store");
    let n = 20_000;
    let stop = Arc::new(AtomicBool::new(false));
    let prepared = Recorder::prepare(config(store.clone(), n), stop).expect("prepared");
    assert!(prepared.repaired().is_clean(), "a new store needs no repair");
    let mut rec = prepared.start().expect("started");
    let during = rec.snapshot();
    assert_eq!((during.state, during.version, during.workers), (State::Capturing, wv_record::stats::VERSION, 1));
    while !rec.is_done() {
        rec.tick();
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = rec.stop();
    assert!(summary.failure.is_none(), "{:?}", summary.failure);
    let st = &summary.stats;
    assert_eq!((st.state, st.total.received, st.total.written, st.balanced), (State::Done, n, n, Some(true)));
    assert_eq!(st.total.dropped_total(), 0);
    assert!(st.total.files >= 4, "1 MiB files: {}", st.total.files);
    assert!(summary.line.starts_with(&format!("{n} packets received")), "{}", summary.line);
    // stats.json is the same report, version and all.
    let written = std::fs::read_to_string(store.join("stats.json")).unwrap();
    assert_eq!(&wv_record::RecordingStats::parse(written.trim_end()).unwrap(), st);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_configuration_the_host_refuses_is_one_sentence_of_its_kind() {
    let dir = std::env::temp_dir().join(format!("wv-record-lib-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A file where the store belongs.
    let file = dir.join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let e = Recorder::prepare(config(file, 10), Arc::new(AtomicBool::new(false))).err().expect("refused");
    assert_eq!(e.problem, wv_record::Problem::Failed);
    assert!(e.message.contains("is not a directory") && !e.message.contains('\n'), "{}", e.message);
    let _ = std::fs::remove_dir_all(&dir);
}
