//! The store directory as a recording finds and leaves it: created or checked
//! to be a store, proven writable, and handed to `--user`.

use crate::{Error, Note, Result};
use std::path::Path;

/// Switches the process to `user` (its uid, primary gid, no supplementary
/// groups) after handing it what wirevault owns in the store. The open
/// sockets keep working; no capability is kept, because none is needed once
/// they are open.
pub fn drop_privileges(user: &str, store: &Path, notes: &mut Vec<Note>) -> Result<()> {
    let (uid, gid) = wv_sys::cpu::lookup_user(user)
        .ok_or_else(|| Error::config(format!("--user: no user named {user} (see /etc/passwd)")))?;
    let (foreign, linked) = chown_store(store, uid, gid)
        .map_err(|e| Error::failed(format!("cannot hand the store {} to {user}: {e}", store.display())))?;
    for skipped in foreign {
        notes.push(Note::warning(format!("{skipped} is not part of the store layout; its owner was left as it is")));
    }
    for skipped in linked {
        notes.push(Note::warning(format!(
            "{skipped} has other hard links or belongs to another user; its owner was left as it is"
        )));
    }
    wv_sys::cpu::switch_user(uid, gid).map_err(|e| Error::failed(format!("cannot switch to user {user}: {e}")))?;
    Ok(())
}

/// Gives `uid:gid` the store directory and what the store layout names in
/// it (catalog, stats, lock, live files, `stream-NNN` directories and the
/// capture and index files in them), never following a symlink (each is opened beneath
/// the store with O_NOFOLLOW and changed through that descriptor). A file
/// with more than one link, or owned by neither root nor `uid`, is left
/// alone: it may be a hard link to a file outside the store. Returns the
/// paths left alone: (not in the layout or symlinks, linked or foreign).
fn chown_store(store: &Path, uid: u32, gid: u32) -> std::io::Result<(Vec<String>, Vec<String>)> {
    use wv_store::layout;
    use wv_sys::fs::{Dir, Kind};
    let dir = Dir::open(store)?;
    dir.chown_self(uid, gid)?;
    let mut skipped = Vec::new();
    let mut linked = Vec::new();
    let safe = |rel: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(store.join(rel))
            .is_ok_and(|m| m.is_file() && m.nlink() == 1 && (m.uid() == 0 || m.uid() == uid))
    };
    let top = [
        layout::CATALOG,
        layout::STATS,
        wv_store::lock::LOCK_FILE,
        wv_store::volume::REGISTRY,
        wv_store::volume::MARKER,
    ];
    for (name, kind) in dir.list("")? {
        let shown = || dir.display(&name).display().to_string();
        // (A writer's live file: writers may start before this hand-over.)
        if kind == Kind::File && (top.contains(&name.as_str()) || wv_store::live::is_live_name(&name)) {
            if safe(&name) {
                dir.chown(&name, uid, gid)?;
            } else {
                linked.push(shown());
            }
        } else if kind == Kind::Dir && is_stream_dir(&name) {
            dir.chown(&name, uid, gid)?;
            for (f, k) in dir.list(&name)? {
                let rel = format!("{name}/{f}");
                let stem = f.strip_suffix(layout::PART).unwrap_or(&f);
                let stem = stem.strip_suffix(layout::INDEX).unwrap_or(stem);
                if k == Kind::File && wv_store::catalog::is_capture_name(stem) {
                    if safe(&rel) {
                        dir.chown(&rel, uid, gid)?;
                    } else {
                        linked.push(dir.display(&rel).display().to_string());
                    }
                } else {
                    skipped.push(dir.display(&rel).display().to_string());
                }
            }
        } else {
            skipped.push(shown());
        }
    }
    Ok((skipped, linked))
}

fn is_stream_dir(name: &str) -> bool {
    name.strip_prefix("stream-")
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| name == wv_store::layout::stream_dir(n))
}

/// What makes a directory a wirevault store: a catalog, a lock file or a
/// `stream-NNN` directory in it. `record` writes into an empty directory or
/// a store, nothing else.
fn is_store(store: &Path) -> std::io::Result<bool> {
    use wv_sys::fs::{Dir, Kind};
    let dir = Dir::open(store)?;
    let list = dir.list("")?;
    Ok(list.is_empty()
        || list.iter().any(|(n, k)| {
            (*k == Kind::File && (n == wv_store::layout::CATALOG || n == wv_store::lock::LOCK_FILE))
                || (*k == Kind::Dir && is_stream_dir(n))
        }))
}

/// A store directory `record` is about to create: if start-up fails before
/// [`NewStore::keep`], dropping it removes the directory again, provided it
/// holds nothing but the lock and `stats.json` (nothing was recorded into it).
pub struct NewStore(Option<std::path::PathBuf>);

impl NewStore {
    /// Armed when `store` does not exist yet.
    pub fn before_prepare(store: &Path) -> NewStore {
        NewStore((!store.exists()).then(|| store.to_path_buf()))
    }

    /// Start-up went through: the store stays.
    pub fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for NewStore {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_file(dir.join(wv_store::lock::LOCK_FILE));
            let _ = std::fs::remove_file(dir.join(wv_store::layout::STATS));
            // Not recursive: anything else in it stays, and so does the directory.
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// Creates the store directory (0750) or checks that the one there is a
/// store, and proves it is writable.
pub fn prepare_store(store: &Path) -> Result<()> {
    let shown = store.display();
    let io_fail = |what: &str, e: std::io::Error| {
        let msg = match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                format!("{what} {shown}: permission denied; choose another -o or fix its permissions")
            }
            std::io::ErrorKind::NotADirectory => format!("{shown}: a component of the path is not a directory"),
            _ => format!("{what} {shown}: {e}; choose another -o or fix its permissions"),
        };
        Error::failed(msg)
    };
    match std::fs::metadata(store) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::failed(format!("{shown} is not a directory; -o names the store directory")))
        }
        Ok(_) => {
            if !is_store(store).map_err(|e| io_fail("cannot read the store directory", e))? {
                return Err(Error::failed(format!("{shown} is not empty and not a wirevault store (no catalog.jsonl, .lock or stream-NNN directory); choose an empty or new directory for -o"),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(wv_sys::fs::DIR_MODE)
                .create(store)
                .map_err(|e| io_fail("cannot create the store directory", e))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(store, std::fs::Permissions::from_mode(wv_sys::fs::DIR_MODE))
                .map_err(|e| io_fail("cannot set the mode of the store directory", e))?;
        }
        Err(e) => return Err(io_fail("cannot reach the store directory", e)),
    }
    let probe = ".wirevault-probe";
    let dir = wv_sys::fs::Dir::open(store).map_err(|e| io_fail("cannot open the store directory", e))?;
    let _ = dir.unlink(probe);
    dir.open_file(probe, wv_sys::fs::Open::CreateNew, 0)
        .map_err(|e| io_fail("cannot write in the store directory", e))?;
    let _ = dir.unlink(probe);
    Ok(())
}

/// `--volume`: registers the extra volumes with the store (see
/// `wv_store::volume`) and returns the writers' rotation over the store
/// directory and them; `None` without `--volume`.
pub fn volumes(
    p: &crate::config::RecorderConfig,
    streams: usize,
) -> Result<Option<std::sync::Arc<wv_store::volume::Rotation>>> {
    if p.volumes.is_empty() {
        return Ok(None);
    }
    let ids = wv_store::volume::register(&p.store, &p.volumes).map_err(|e| Error::failed(e.to_string()))?;
    let open = |path: &Path| {
        wv_sys::fs::Dir::open(path)
            .map_err(|e| Error::failed(format!("cannot open the volume {}: {e}", path.display())))
    };
    let mut vols = vec![(0, open(&p.store)?)];
    for (id, path) in ids.into_iter().zip(&p.volumes) {
        let dir = open(path)?;
        let probe = ".wirevault-probe";
        let _ = dir.unlink(probe);
        dir.open_file(probe, wv_sys::fs::Open::CreateNew, 0).map_err(|e| {
            Error::failed(format!(
                "cannot write in the volume {}: {e}; choose another --volume or fix its permissions",
                path.display()
            ))
        })?;
        let _ = dir.unlink(probe);
        vols.push((id, dir));
    }
    Ok(Some(std::sync::Arc::new(wv_store::volume::Rotation::new(vols, streams))))
}

/// [`drop_privileges`]'s hand-over for an extra volume: it and what the
/// store layout names in it go to `user` (the process does not switch here).
pub fn drop_privileges_of_volume(user: &str, volume: &Path, notes: &mut Vec<Note>) -> Result<()> {
    let (uid, gid) = wv_sys::cpu::lookup_user(user)
        .ok_or_else(|| Error::config(format!("--user: no user named {user} (see /etc/passwd)")))?;
    let (foreign, linked) = chown_store(volume, uid, gid)
        .map_err(|e| Error::failed(format!("cannot hand the volume {} to {user}: {e}", volume.display())))?;
    for skipped in foreign.into_iter().chain(linked) {
        notes.push(Note::warning(format!(
            "{skipped} was left with its owner (not part of the store layout, or linked)"
        )));
    }
    Ok(())
}
