//! `histogram`: packets and captured bytes per time bucket, for charts.
//!
//! Exact either way. Without a filter, a bucket that only whole pcap files
//! fall into (a file's first and last packet in that bucket) is summed
//! from the catalog without reading a packet (a file being written, from
//! what its live entry says of its valid prefix); the buckets a file straddles,
//! and every bucket when there is a filter, are counted by reading their
//! time range through the query layer (whose index narrows a filter).

use crate::api::ApiError;
use crate::export::Selection;
use crate::server::State;
use wv_store::catalog::Entry;

/// The most buckets one answer has.
pub(crate) const MAX_BUCKETS: u64 = 10_000;

/// One answer.
#[derive(serde::Serialize)]
pub(crate) struct Histogram {
    pub from_ns: u64,
    pub to_ns: u64,
    pub step_ns: u64,
    /// Per bucket, from `from_ns` on: `[packets, bytes]`.
    pub buckets: Vec<[u64; 2]>,
    /// Buckets summed from the catalog, and read.
    pub from_catalog: usize,
    pub read: usize,
}

/// The steps chosen when none is given: the first that makes at most 200 buckets.
const NICE_STEPS_MS: [u64; 17] = [
    1,
    10,
    100,
    1_000,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
    600_000,
    1_800_000,
    3_600_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    604_800_000,
];

/// The buckets of `sel` (its limit is ignored) by `step_ns` (`None`: chosen).
pub(crate) fn histogram(state: &State, sel: &Selection, step_ns: Option<u64>) -> Result<Histogram, ApiError> {
    let cat = state.view.catalog().map_err(ApiError::Unavailable)?;
    let (oldest, newest) = match cat.span {
        Some(span) => span,
        None => {
            // Nothing stored: the filter is still checked (a 400 as on any
            // store), and a range given whole still gets its empty buckets.
            sel.prepare(&state.view, None)?;
            match (sel.from, sel.to) {
                (Some(a), Some(b)) if a < b => (a, b - 1),
                _ => {
                    return Ok(Histogram {
                        from_ns: 0,
                        to_ns: 0,
                        step_ns: step_ns.unwrap_or(1_000_000_000),
                        buckets: vec![],
                        from_catalog: 0,
                        read: 0,
                    })
                }
            }
        }
    };
    let from = sel.from.unwrap_or(oldest);
    let to = sel.to.unwrap_or(newest.saturating_add(1));
    if from >= to {
        // One end given, the other taken from the store: say which.
        use crate::store_view::time;
        return Err(ApiError::BadRequest(match (sel.from, sel.to) {
            (Some(f), None) => format!(
                "from {} is after the newest stored packet ({}): give an earlier from, or a to after it",
                time(f),
                time(newest)
            ),
            (None, Some(t)) => format!(
                "to {} is not after the oldest stored packet ({}): give a later to, or a from before it",
                time(t),
                time(oldest)
            ),
            _ => "from must be earlier than to".into(),
        }));
    }
    let span = to - from;
    let step = match step_ns {
        Some(s) => s,
        None => NICE_STEPS_MS
            .iter()
            .map(|ms| ms * 1_000_000)
            .find(|s| span.div_ceil(*s) <= 200)
            .unwrap_or(span.div_ceil(200)),
    };
    let n = span.div_ceil(step);
    if n > MAX_BUCKETS {
        return Err(ApiError::BadRequest(format!(
            "step {} ns makes {n} buckets over this range, more than {MAX_BUCKETS}; give a larger step or a shorter range",
            step
        )));
    }
    // The last bucket holds `to` itself when `to` is u64::MAX (times a u64
    // cannot hold are stored as u64::MAX and lie in every open range).
    let bucket = |t: u64| ((t.saturating_sub(from) / step).min(n - 1)) as usize;
    let mut h = Histogram {
        from_ns: from,
        to_ns: to,
        step_ns: step,
        buckets: vec![[0, 0]; n as usize],
        from_catalog: 0,
        read: 0,
    };
    // Which buckets must be read: all with a filter; else those a file straddles.
    let mut read = vec![!sel.expr.trim().is_empty(); n as usize];
    let overlapping =
        || cat.entries().filter(|e| e.packets > 0 && wv_query::time::overlaps(e.first_ns, e.last_ns, from, to));
    let whole = |e: &Entry| {
        e.format == Some(wv_wire::Format::Pcap)
            && e.first_ns >= from
            && wv_query::time::before_end(e.last_ns, to)
            && bucket(e.first_ns) == bucket(e.last_ns)
    };
    for e in overlapping().filter(|e| !whole(e)) {
        let (a, b) = (bucket(e.first_ns.max(from)), bucket(e.last_ns.min(to - 1)));
        read[a..=b].iter_mut().for_each(|r| *r = true);
    }
    for e in overlapping().filter(|e| whole(e)) {
        let b = bucket(e.first_ns);
        if !read[b] {
            // A nanosecond pcap: a 24-byte file header and 16 bytes per record.
            let captured = e.bytes.saturating_sub(24 + 16 * e.packets);
            h.buckets[b][0] += e.packets;
            h.buckets[b][1] += captured;
        }
    }
    h.from_catalog = read.iter().filter(|r| !**r).count();
    h.read = n as usize - h.from_catalog;
    // Read each run of buckets to be read with one query.
    let mut i = 0;
    while i < read.len() {
        if !read[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < read.len() && read[i] {
            i += 1;
        }
        // A step may reach past u64 nanoseconds (one bucket of 600 years):
        // the bucket ends at `to`.
        let edge = |k: usize| from.saturating_add((k as u64).saturating_mul(step)).min(to);
        let (a, b) = (edge(start), edge(i));
        let run =
            Selection { from: Some(a), to: Some(b), expr: sel.expr.clone(), limit: None, cancel: sel.cancel.clone() };
        let p = run.prepare(&state.view, None)?;
        let buckets = &mut h.buckets;
        let mut seen = 0u32;
        let mut each = |pk: wv_query::PacketRef<'_>| -> std::io::Result<()> {
            seen = seen.wrapping_add(1);
            if seen.is_multiple_of(4096) {
                crate::export::yield_to_capture(state);
            }
            let k = bucket(pk.ts_ns);
            buckets[k][0] += 1;
            buckets[k][1] += pk.data.len() as u64;
            Ok(())
        };
        wv_query::run(p, wv_query::Sink::Packets(&mut each))
            .map_err(|e| crate::export::query_failed(&state.view, e))?;
    }
    Ok(h)
}

/// The step parameter: a duration (`1s`, `500ms`, `5m`; the grammar of
/// every duration option, [`wv_units::parse_duration`]) above zero.
pub(crate) fn parse_step(s: &str) -> Result<u64, ApiError> {
    let d = wv_units::parse_duration(s).map_err(|e| ApiError::BadRequest(wv_units::duration_error("step", s, &e)))?;
    match d.as_nanos() as u64 {
        0 => Err(ApiError::BadRequest("step must be longer than 0".into())),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> String {
        match parse_step(s) {
            Err(ApiError::BadRequest(why)) => why,
            other => panic!("{s:?}: {:?}", other.map_err(|e| e.to_string())),
        }
    }

    #[test]
    fn a_step_is_a_duration_above_zero() {
        assert_eq!(parse_step("1s").ok(), Some(1_000_000_000));
        assert_eq!(parse_step("500ms").ok(), Some(500_000_000));
        assert_eq!(parse_step("5m").ok(), Some(300_000_000_000));
        assert_eq!(refused("0s"), "step must be longer than 0");
        assert_eq!(refused("fast"), wv_units::duration_error("step", "fast", &wv_units::DurationError::Form));
    }

    /// The histogram of `sel` over an empty store.
    fn of_empty(name: &str, sel: Selection, step_ns: Option<u64>) -> Result<Histogram, ApiError> {
        let store = crate::server::TestStore::new(&format!("histogram-{name}"));
        histogram(&store.state(), &sel, step_ns)
    }

    fn range(from: Option<u64>, to: Option<u64>, expr: &str) -> Selection {
        Selection { from, to, expr: expr.into(), limit: None, cancel: Default::default() }
    }

    const DAY_NS: u64 = 86_400_000_000_000;

    #[test]
    fn the_chosen_step_is_the_first_nice_one_of_at_most_200_buckets() {
        let h = of_empty("day", range(Some(0), Some(DAY_NS), ""), None).unwrap_or_else(|e| panic!("{e}"));
        // 5 minutes would make 288 buckets; 10 minutes make 144.
        assert_eq!((h.from_ns, h.to_ns, h.step_ns, h.buckets.len()), (0, DAY_NS, 600_000_000_000, 144));
        assert_eq!((h.from_catalog, h.read), (144, 0));
        assert!(h.buckets.iter().all(|b| *b == [0, 0]));
        // Exactly 200 buckets of a nice step still fit.
        let h = of_empty("fit", range(Some(0), Some(200_000_000_000), ""), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((h.step_ns, h.buckets.len()), (1_000_000_000, 200));
        // 1,000 days by the widest nice step, a week; past it, a 200th of the span.
        let h = of_empty("weeks", range(Some(0), Some(1_000 * DAY_NS), ""), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((h.step_ns, h.buckets.len()), (7 * DAY_NS, 143));
        let long = 2_000 * DAY_NS;
        let h = of_empty("long", range(Some(0), Some(long), ""), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((h.step_ns, h.buckets.len()), (long / 200, 200));
    }

    #[test]
    fn a_given_step_makes_whole_buckets_up_to_the_cap() {
        let h = of_empty("step", range(Some(1_000), Some(1_000 + 1_000_000_000), ""), Some(300_000_000))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((h.step_ns, h.buckets.len()), (300_000_000, 4));
        let e = of_empty("cap", range(Some(0), Some(1_000_000_000), ""), Some(1)).err().map(|e| e.to_string());
        let want = "step 1 ns makes 1000000000 buckets over this range, more than 10000; give a larger step or a shorter range";
        assert_eq!(e.as_deref(), Some(want));
        assert!(of_empty("edge", range(Some(0), Some(10_000), ""), Some(1)).is_ok());
    }

    #[test]
    fn a_filter_has_every_bucket_read_and_a_bad_one_is_refused() {
        let h = of_empty("filter", range(Some(0), Some(DAY_NS), "tcp"), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((h.from_catalog, h.read), (0, 144));
        let e = of_empty("bad", range(Some(0), Some(DAY_NS), "tcp and and"), None).err();
        assert!(matches!(e, Some(ApiError::BadRequest(_))), "{:?}", e.map(|e| e.to_string()));
    }

    #[test]
    fn an_empty_store_without_a_whole_range_has_no_buckets() {
        let h = of_empty("open", range(Some(5), None, ""), Some(7)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((h.from_ns, h.to_ns, h.step_ns, h.buckets.len()), (0, 0, 7, 0));
        let h = of_empty("none", range(None, None, ""), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((h.step_ns, h.buckets.len()), (1_000_000_000, 0));
    }
}
