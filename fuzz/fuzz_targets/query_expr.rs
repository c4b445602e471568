//! User text of `query`: the expression planner and the --from/--to time parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Some(p) = wv_query::expr::plan(&s) {
        let _ = p.narrows();
    }
    for now in [0u64, 1_763_806_500_000_000_000, u64::MAX] {
        if let Err(e) = wv_query::parse_time(&s, now) {
            let _ = e.to_string();
        }
    }
});
