//! What a recording's configuration is checked against on this machine before anything is
//! created: its memory, its CPUs, the size of the store's volumes and the store's own
//! `disk-bench.json` result (`wirevault record` and `wirevault tune` take the same).

use crate::{Error, Result};
use std::path::Path;

/// The size of the file systems holding `dirs` (each once), each judged at the path or its
/// nearest existing parent: nothing is created yet (`--max-size PERCENT` and `tune` take a
/// share of it).
pub fn volumes_size(dirs: &[&Path]) -> Result<u64> {
    volumes_space(dirs).map(|(_, total)| total)
}

/// The free and total bytes of the file systems holding `dirs`, each once (see
/// [`volumes_size`]).
pub fn volumes_space(dirs: &[&Path]) -> Result<(u64, u64)> {
    let mut seen = Vec::new();
    let (mut free, mut total) = (0u64, 0u64);
    for dir in dirs {
        let on = dir.ancestors().find(|p| p.exists()).filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let dev = std::fs::metadata(on).map(|m| std::os::unix::fs::MetadataExt::dev(&m)).ok();
        if dev.is_some_and(|d| seen.contains(&d)) {
            continue;
        }
        seen.extend(dev);
        let (f, t) = wv_sys::fs::fs_space(on)
            .map_err(|e| Error::failed(format!("cannot read the size of the volume of {}: {e}", dir.display())))?;
        free = free.saturating_add(f);
        total = total.saturating_add(t);
    }
    Ok((free, total))
}

/// The free bytes of the volumes besides the store's own file system (0 without volumes, or
/// when they cannot be measured): what `tune` weighs a budget against beside the store's.
pub fn other_volumes_free(store: &Path, volumes: &[std::path::PathBuf]) -> u64 {
    if volumes.is_empty() {
        return 0;
    }
    let all: Vec<&Path> = std::iter::once(store).chain(volumes.iter().map(|v| v.as_path())).collect();
    let free = |dirs: &[&Path]| volumes_space(dirs).map_or(0, |(f, _)| f);
    free(&all).saturating_sub(free(&all[..1]))
}

/// `-o DIR`: a new store or an existing directory, not a file.
pub fn store_dir(store: &Path) -> Result<()> {
    if std::fs::metadata(store).is_ok_and(|m| !m.is_dir()) {
        return Err(Error::failed(format!(
            "-o {} is not a directory: a store is a directory (give a new or an existing store directory)",
            store.display()
        )));
    }
    Ok(())
}

/// `--user USER`: a user this machine knows.
pub fn user_known(user: &str) -> Result<()> {
    match wv_sys::cpu::lookup_user(user) {
        Some(_) => Ok(()),
        None => Err(Error::config(format!("--user: no user named {user} (see /etc/passwd)"))),
    }
}

/// `--buffer TEXT` of `v` bytes, if this machine has that much memory.
pub fn buffer_fits(text: &str, v: u64) -> Result<u64> {
    let ram = wv_sys::cpu::total_memory();
    if ram > 0 && v > ram {
        return Err(Error::config(format!(
            "--buffer {text} is more than this machine's memory ({} MiB); give at most a share of it, e.g. 1G",
            ram >> 20
        )));
    }
    Ok(v)
}

/// `--cpus LIST`, if every CPU in it is available to this process.
pub fn cpus_available(c: &str) -> Result<Vec<usize>> {
    let v = wv_units::parse_cpu_list(c)
        .ok_or_else(|| Error::config(format!("--cpus \"{c}\" is not a list like 0,1 or 2-5")))?;
    let allowed = wv_sys::cpu::allowed_cpus();
    if let Some(bad) = v.iter().find(|c| !allowed.contains(c)) {
        return Err(Error::config(format!(
            "--cpus: CPU {bad} is not available to this process (allowed: {allowed:?})"
        )));
    }
    Ok(v)
}

/// `--ring-size` of `v` bytes per worker (`text` as given) for `workers` workers, if it is at
/// most half this machine's memory.
pub fn rings_fit(text: &str, v: u64, workers: usize) -> Result<u64> {
    let ram = wv_sys::cpu::total_memory();
    if ram > 0 && v.saturating_mul(workers as u64) > ram / 2 {
        return Err(Error::config(format!(
            "--ring-size {text} for {workers} worker(s) is more than half this machine's memory ({} MiB); give less",
            ram >> 20
        )));
    }
    Ok(v)
}

/// The shortest disk-bench run whose buffer a recording takes (its worst 10-second window
/// needs 10 s).
pub const DISK_BENCH_MIN_S: u64 = 10;

/// The buffer a `wirevault disk-bench --rate R --json` result kept in the store as
/// `disk-bench.json` asks for (its `buffer_with_margin_bytes`: the measured dips at that rate,
/// with margin), at most half the machine's memory; `None` when the store has none;
/// `Some(Err(warning))` when the result cannot speak for the store's disk: it measured another
/// file system than the store's, or ran less than [`DISK_BENCH_MIN_S`] (too short to see how
/// long the disk's dips last). Then the default applies.
pub fn disk_bench_buffer(store: &Path) -> Result<Option<std::result::Result<u64, String>>> {
    use wv_diskbench::report::{ParseError, Report, VERSION};
    let path = store.join(wv_store::layout::DISK_BENCH);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
            return Ok(None)
        }
        Err(e) => {
            return Err(Error::failed(format!("cannot read {}: {e}; remove it or give --buffer", path.display())))
        }
    };
    let not_a_result = || {
        Error::config(format!(
            "{} is not a `wirevault disk-bench DIR --rate R --json` result with a buffer (a sustained rate); run that again, or remove the file, or give --buffer",
            path.display()
        ))
    };
    let report = match Report::parse(text.as_bytes()) {
        Ok(r) => r,
        Err(ParseError::Version(v)) => {
            return Err(Error::config(format!(
                "{} is a disk-bench result of version {v} and this wirevault reads version {VERSION}: run disk-bench again, or remove the file, or give --buffer",
                path.display()
            )))
        }
        Err(ParseError::Malformed(_)) => return Err(not_a_result()),
    };
    let Some(b) = report.rate.as_ref().and_then(|r| r.buffer_with_margin_bytes) else {
        return Err(not_a_result());
    };
    let dev = |p: &Path| std::fs::metadata(p).ok().map(|m| std::os::unix::fs::MetadataExt::dev(&m));
    // A relative directory (an older disk-bench wrote it as given) is taken from the store,
    // where the file is kept.
    let measured = store.join(&report.dir);
    let ignored = |why: String| {
        Ok(Some(Err(format!(
            "{} {why}: its buffer is not used, the default is; run disk-bench on the store's volume for {DISK_BENCH_MIN_S} s or more, or give --buffer",
            path.display()
        ))))
    };
    if dev(&measured).is_none_or(|d| Some(d) != dev(store)) {
        return ignored(format!("measured {}, not the store's file system", measured.display()));
    }
    let secs = report.elapsed_s;
    if secs < DISK_BENCH_MIN_S as f64 {
        return ignored(format!("comes from a run of {secs:.1} s"));
    }
    let ram = wv_sys::cpu::total_memory();
    Ok(Some(Ok(if ram > 0 { b.min(ram / 2) } else { b }.max(64 << 20))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_volume_named_twice_is_counted_once() {
        let here = Path::new(".");
        let (_, one) = volumes_space(&[here]).unwrap();
        let (_, twice) = volumes_space(&[here, Path::new("./no/such/dir/yet")]).unwrap();
        assert!(one > 0);
        assert_eq!(one, twice);
    }

    #[test]
    fn cpu_lists_are_checked_against_this_process() {
        assert!(cpus_available("x").unwrap_err().message.contains("is not a list like 0,1 or 2-5"));
        let e = cpus_available("1023").unwrap_err();
        assert!(e.message.starts_with("--cpus: CPU 1023 is not available"), "{}", e.message);
        assert_eq!(cpus_available(&wv_sys::cpu::allowed_cpus()[0].to_string()).unwrap().len(), 1);
    }

    #[test]
    fn a_store_without_a_disk_bench_result_has_no_buffer_from_it() {
        assert!(disk_bench_buffer(Path::new("/nonexistent-store")).unwrap().is_none());
    }
}
