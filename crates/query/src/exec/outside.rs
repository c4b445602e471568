//! Output safety: a query never writes into the store it reads (device
//! and inode of the target, its parents and the stored files compared).

use super::*;
/// Refuses an output path that is the store, lies inside it, or is one of
/// its stored files under another name (a hard link): writing it would
/// truncate recorded packets. Compared by device and inode, not by name:
/// the target (through symlinks, as opening it would follow them) and each
/// of its parent directories up to `/` against the store directory, and an
/// existing target against every catalogued file and index.
pub fn check_output(p: &Prepared, out: &Path) -> Result<(), QueryError> {
    let names = p.entries.iter().flat_map(|e| std::iter::once(e.file.as_str()).chain(e.index.as_deref()));
    // Files on extra volumes by their real (absolute) path: `root.join` keeps it.
    let real: Vec<String> = match &p.store_dir {
        Some(v) => names.map(|n| v.display(n).to_string_lossy().into_owned()).collect(),
        None => names.map(str::to_string).collect(),
    };
    let files: Vec<&str> = real.iter().map(String::as_str).collect();
    check_outside(&p.root, (!p.single).then_some(p.query.store.as_path()), &files, out)
}

/// The check of [`check_output`] for any writer of a file beside a store
/// (`record --stats-file`): `out` must not be the store directory `store`
/// (`None` for a single capture file, whose directory is `root`), lie
/// inside it, or be any file it holds (`files`, relative to `root`, and
/// everything two levels deep in the store) under another name.
pub fn check_outside(root: &Path, store: Option<&Path>, files: &[&str], out: &Path) -> Result<(), QueryError> {
    use std::os::unix::fs::MetadataExt;
    let id = |m: &std::fs::Metadata| (m.dev(), m.ino());
    let shown = store.map_or_else(|| root.join(files.first().copied().unwrap_or_default()), Path::to_path_buf);
    let refuse = || QueryError::OutputInStore { out: out.to_path_buf(), store: shown.clone() };
    // Where opening `out` would land: follow a final symlink (even a
    // dangling one, which open(O_CREAT) would create the target of).
    let mut target = out.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&target) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&target).map_err(QueryError::Output)?;
                target = target.parent().unwrap_or(Path::new(".")).join(link);
            }
            _ => break,
        }
    }
    let mut protected: Vec<(u64, u64)> = Vec::new();
    let store_dir = if store.is_none() { None } else { std::fs::metadata(root).ok().map(|m| id(&m)) };
    protected.extend(store_dir);
    protected.extend(files.iter().filter_map(|f| std::fs::metadata(root.join(f)).ok()).map(|m| id(&m)));
    if store.is_some() {
        // Everything else the store holds (catalog, stats, `.part` files),
        // two levels deep as the layout is: a hard link to any is refused too.
        let mut dirs = vec![root.to_path_buf()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(rd) = std::fs::read_dir(&dirs[i]) {
                for ent in rd.flatten() {
                    let Ok(m) = ent.metadata() else { continue };
                    if m.is_dir() && i == 0 {
                        dirs.push(ent.path());
                    } else if m.is_file() {
                        protected.push(id(&m));
                    }
                }
            }
            i += 1;
        }
    }
    if let Ok(m) = std::fs::metadata(&target) {
        if protected.contains(&id(&m)) {
            return Err(refuse());
        }
    }
    if let Some(store) = store_dir {
        let parent = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // A parent that does not exist: creating the output fails anyway.
        if let Ok(dir) = std::fs::canonicalize(&parent) {
            for d in dir.ancestors() {
                if std::fs::metadata(d).is_ok_and(|m| id(&m) == store) {
                    return Err(refuse());
                }
            }
        }
    }
    Ok(())
}
