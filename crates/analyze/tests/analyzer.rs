//! The analysis as a library, without the binary: the configuration it
//! refuses, the duplicate rule (by time and by count, as `editcap -w` and
//! `editcap -D` apply it) and the nearest-rank percentile. The binary's
//! integration tests compare whole reports with tshark's; these pin the rules
//! they rest on.

use wv_analyze::{percentile, Analyzer, Config, ConfigError, Frame, Report, MAX_DUP_FRAMES, MAX_INTERVALS};

/// A 60-byte Ethernet frame whose bytes depend on `tag`.
fn frame_bytes(tag: u8) -> Vec<u8> {
    let mut b = vec![tag; 60];
    b[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    b
}

/// The report of `frames` (time in ns, tag, length on the wire) under `cfg`.
fn analyse(cfg: Config, frames: &[(u64, u8, u32)]) -> Report {
    let mut a = Analyzer::new(cfg).expect("a valid configuration");
    for &(ts_ns, tag, wire_len) in frames {
        let data = frame_bytes(tag);
        a.feed(&Frame { ts_ns, linktype: 1, wire_len, data: &data });
    }
    a.finish()
}

#[test]
fn configurations_out_of_range_are_refused_by_name() {
    let refused = |cfg: Config| Analyzer::new(cfg).err();
    assert_eq!(refused(Config { step_ns: 0, ..Config::default() }), Some(ConfigError::ZeroStep));
    for dup_frames in [0, MAX_DUP_FRAMES + 1] {
        let got = refused(Config { dup_frames, ..Config::default() });
        assert_eq!(got, Some(ConfigError::DupFrames { max: MAX_DUP_FRAMES }), "dup_frames {dup_frames}");
    }
    assert_eq!(refused(Config { max_flows: 0, ..Config::default() }), Some(ConfigError::ZeroFlows));
    for max_intervals in [0, MAX_INTERVALS + 1] {
        let got = refused(Config { max_intervals, ..Config::default() });
        assert_eq!(got, Some(ConfigError::Intervals { max: MAX_INTERVALS }), "max_intervals {max_intervals}");
    }
    for ok in
        [Config { dup_frames: 1, ..Config::default() }, Config { max_intervals: MAX_INTERVALS, ..Config::default() }]
    {
        assert!(Analyzer::new(ok).is_ok());
    }
}

#[test]
fn a_copy_is_a_duplicate_only_within_the_time_window() {
    let cfg = || Config { dup_window_ns: 1_000_000, ..Config::default() };
    // The copy 0.5 ms later is one; the next, 1.5 ms after that copy, is not.
    let r = analyse(cfg(), &[(0, 1, 60), (500_000, 1, 60), (2_000_000, 1, 60)]);
    assert_eq!((r.duplicates.packets, r.duplicates.bytes), (1, 60));
    // At exactly the window's length it still is.
    let r = analyse(cfg(), &[(0, 1, 60), (1_000_000, 1, 60)]);
    assert_eq!(r.duplicates.packets, 1);
    // Out of time order (several files), the distance counts either way.
    let r = analyse(cfg(), &[(5_000_000, 1, 60), (4_500_000, 1, 60)]);
    assert_eq!(r.duplicates.packets, 1);
}

#[test]
fn a_copy_is_a_duplicate_only_within_the_previous_dup_frames_frames() {
    let frames = [(0, 1, 60), (1, 2, 60), (2, 1, 60)];
    let with = |dup_frames| Config { dup_frames, dup_window_ns: u64::MAX, ..Config::default() };
    // The copy is two frames after its original: out of a window of one frame, inside one of two.
    assert_eq!(analyse(with(1), &frames).duplicates.packets, 0);
    assert_eq!(analyse(with(2), &frames).duplicates.packets, 1);
}

#[test]
fn the_same_bytes_with_another_length_on_the_wire_are_no_duplicate() {
    let r = analyse(Config::default(), &[(0, 1, 60), (1, 1, 1514)]);
    assert_eq!(r.duplicates.packets, 0);
}

#[test]
fn percentile_is_the_nearest_rank() {
    let v = [10, 20, 30, 40];
    assert_eq!(percentile(&v, 0.0), 10);
    assert_eq!(percentile(&v, 0.25), 10);
    assert_eq!(percentile(&v, 0.26), 20);
    assert_eq!(percentile(&v, 0.5), 20);
    assert_eq!(percentile(&v, 0.99), 40);
    assert_eq!(percentile(&v, 1.0), 40);
    assert_eq!(percentile(&[], 0.5), 0);
}
