//! The analysers' L2->L4 dissector on arbitrary frames: no panic, bounded
//! output, and the same layers for a frame whether or not the capture cut it
//! (a cut never adds problems beyond what the prefix shows); the tunnels
//! in it walked as the analysers walk them, each payload further in.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use wv_wire::dissect::{dissect, MAX_LAYERS, MAX_PROBLEMS};

fuzz_target!(|data: &[u8]| {
    // First byte: link type (0 Ethernet, 1 SLL, 2 RAW, 3 IPV4, 4 IPV6, else the byte).
    let Some((&sel, frame)) = data.split_first() else {
        return;
    };
    let lt = common::linktype(sel);
    for wire in [frame.len() as u32, frame.len() as u32 + 1000, 0, u32::MAX] {
        let d = dissect(lt, frame, wire);
        assert!(d.layers().len() <= MAX_LAYERS && d.problems().len() <= MAX_PROBLEMS);
        assert!(d.layers().windows(2).all(|w| w[0].offset <= w[1].offset), "{:?}", d.layers());
        let _ = (d.flow.vlans(), d.flow.labels(), d.is_malformed(), format!("{d:?}"));
    }
    // Tunnels, one inside another: each payload starts further into the frame.
    let mut d = dissect(lt, frame, frame.len() as u32);
    let mut inner = frame;
    while let Some(t) = wv_wire::tunnel::inner(&d, inner) {
        assert!(t.at > 0 && t.at <= t.end && t.at <= inner.len(), "{t:?} in {} bytes", inner.len());
        inner = &inner[t.at..t.end.min(inner.len())];
        d = wv_wire::dissect::dissect_encap(t.encap, inner, inner.len() as u32);
    }
    // Every prefix, marked as cut by the capture, reports no truncation past the cut
    // where the whole frame reports nothing wrong (a header longer than the frame on the
    // wire is truncated however much of it was captured; the whole frame may name the
    // same header's fault otherwise, e.g. its version).
    let whole = dissect(lt, frame, frame.len() as u32);
    for cut in [14usize, 18, 22, 34, 38, 54, 58, 74] {
        if cut < frame.len() {
            let d = dissect(lt, &frame[..cut], frame.len() as u32);
            for p in d.problems() {
                assert!(
                    !matches!(p.kind, wv_wire::dissect::ProblemKind::Truncated(_))
                        || (p.offset as usize) < cut
                        || whole.problems().iter().any(|w| w.offset == p.offset),
                    "{p:?} at cut {cut}"
                );
            }
        }
    }
});
