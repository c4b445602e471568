//! `wirevault repair STORE`: make a store consistent after a crash (the same
//! check `record` runs when it starts).

use crate::log::Level;
use crate::{exit, fail};
use std::path::{Path, PathBuf};
use wv_store::recover::RepairReport;

/// Arguments of `wirevault repair`.
#[derive(clap::Args)]
pub struct Args {
    /// The store directory (not while a recorder writes to it).
    pub store: PathBuf,
}

/// Prints what a repair did; silent when nothing was needed and `quiet_if_clean`.
pub fn print_report(rep: &RepairReport, store: &Path, quiet_if_clean: bool) {
    if rep.is_clean() {
        if !quiet_if_clean {
            info!("{} is consistent; nothing to repair", store.display());
        }
        return;
    }
    info!(
        "repaired {}: recovered {} partial file(s) with {} packets (cut {} incomplete bytes), deleted {} empty partial file(s), cataloged {} file(s), corrected {} entr(ies) whose file changed size, removed {} stale catalog entr(ies), rebuilt {} index(es), dropped {} damaged catalog line(s), {} duplicate catalog entr(ies) and {} entr(ies) with paths outside the store layout",
        store.display(),
        rep.recovered_files,
        rep.recovered_packets,
        rep.cut_bytes,
        rep.deleted_empty,
        rep.cataloged,
        rep.resized,
        rep.removed_entries,
        rep.reindexed,
        rep.bad_catalog_lines,
        rep.duplicate_entries,
        rep.rejected_entries
    );
    for n in &rep.notes {
        info!("{n}");
    }
    // What could not be mended: the exit code says so too.
    for p in &rep.problems {
        message!(Level::Warn, "{p}");
    }
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    if !a.store.is_dir() {
        return Err(fail(exit::ERROR, format!("{} is not a store directory", a.store.display())));
    }
    // The writer lock: never repair a store that is being recorded (or indexed).
    let _lock =
        wv_store::lock::StoreLock::exclusive(&a.store, "repair").map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let rep = wv_store::recover::repair(&a.store, Some(&wv_index::index_for_repair), Some(&wv_index::check_for_repair))
        .map_err(|e| fail(exit::ERROR, format!("cannot repair {}: {e}", a.store.display())))?;
    print_report(&rep, &a.store, false);
    match super::flows::rebuild_missing(&a.store) {
        Ok(0) => {}
        Ok(n) => info!("rebuilt {n} flow records of the files without a flow file"),
        Err(e) => message!(Level::Warn, "flow records not rebuilt: {e}"),
    }
    Ok(if rep.problems.is_empty() { exit::OK } else { exit::ERROR })
}
