//! The store's catalog reader: arbitrary catalog bytes must never panic,
//! and every entry it accepts names a path that stays inside the store.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wv_store::catalog;

fuzz_target!(|data: &[u8]| {
    let r = catalog::parse(data);
    let mut seen = std::collections::HashSet::new();
    for e in &r.entries {
        assert!(catalog::check_entry(e).is_ok());
        assert!(!e.file.starts_with('/') && !e.file.split('/').any(|c| c == ".." || c.is_empty()), "{}", e.file);
        if let Some(ix) = &e.index {
            assert_eq!(*ix, format!("{}.idx", e.file));
        }
        assert!(seen.insert(e.file.clone()), "duplicate {}", e.file);
    }
    let lines = data.split(|b| *b == b'\n').count();
    assert!(r.entries.len() + r.bad_lines.len() + r.rejected.len() + r.duplicates.len() <= lines);
});
