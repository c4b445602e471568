//! The store's writer lock: one process at a time changes a store.
//!
//! `record`, `repair` and `index` hold an exclusive `flock` on `STORE/.lock`
//! for as long as they change the store; a second writer is refused with a
//! sentence naming the holder. The kernel drops the lock with the process,
//! so a recorder killed with `kill -9` leaves no stale lock: a store with
//! `.part` files and no holder was left by a crash and wants `repair`,
//! while one with a holder is being recorded. Readers (`query`) only probe.
//!
//! The lock file holds the holder's pid and subcommand, for messages only;
//! the lock itself is the `flock`, never the file's content.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Name of the lock file inside a store.
pub const LOCK_FILE: &str = ".lock";

/// An exclusive hold on a store, released on drop (or when the process ends).
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

/// Who holds a store's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Nobody: no recorder, repair or index runs on the store.
    Free,
    /// A process holds it; `holder` is what it wrote ("pid 123, record"), if readable.
    Held { holder: Option<String> },
}

/// Why a store could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("the store {} is in use by another wirevault process{}; wait for it to end or stop it first", store.display(), holder.as_ref().map_or(String::new(), |h| format!(" ({h})")))]
    Busy { store: std::path::PathBuf, holder: Option<String> },
    #[error("cannot lock the store {}: {source}", store.display())]
    Io { store: std::path::PathBuf, source: io::Error },
}

fn open(store: &Path, create: bool) -> io::Result<File> {
    let path = store.join(LOCK_FILE);
    let opened = OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .mode(0o640)
        // A lock file planted as a symlink must not make us open (and
        // truncate) what it points to; one planted as a FIFO must not make
        // us wait (O_NONBLOCK, cleared for the regular file).
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path);
    wv_sys::fs::regular_only(opened, &path, false).map(|(f, _)| f)
}

fn holder_of(f: &mut File) -> Option<String> {
    let mut s = String::new();
    f.rewind().ok()?;
    f.take(256).read_to_string(&mut s).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

impl StoreLock {
    /// Takes the exclusive lock of `store` for the subcommand `what`
    /// (`record`, `repair`, `index`), without waiting.
    pub fn exclusive(store: &Path, what: &str) -> Result<StoreLock, LockError> {
        let io_err = |source| LockError::Io { store: store.to_path_buf(), source };
        let mut file = open(store, true).map_err(io_err)?;
        match file.try_lock() {
            Ok(()) => {
                // 0640 whatever the umask (best effort: it may be another user's file).
                use std::os::unix::fs::PermissionsExt;
                if file.metadata().is_ok_and(|m| m.permissions().mode() & 0o777 != 0o640) {
                    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o640));
                }
            }
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Busy { store: store.to_path_buf(), holder: holder_of(&mut file) })
            }
            Err(TryLockError::Error(e)) => return Err(io_err(e)),
        }
        // Ours now: say who holds it (for the messages of others).
        let note = format!("pid {}, {what}\n", std::process::id());
        file.set_len(0).and_then(|()| file.rewind()).and_then(|()| file.write_all(note.as_bytes())).map_err(io_err)?;
        Ok(StoreLock { _file: file })
    }
}

/// Whether some process holds the lock of `store` (probed without waiting
/// and released at once). A store without a lock file is free.
pub fn state(store: &Path) -> io::Result<LockState> {
    let mut file = match open(store, false) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LockState::Free),
        Err(e) => return Err(e),
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(LockState::Free)
        }
        Err(TryLockError::WouldBlock) => Ok(LockState::Held { holder: holder_of(&mut file) }),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_at_a_time_and_the_lock_goes_with_its_holder() {
        let dir = std::env::temp_dir().join(format!("wv-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(state(&dir).unwrap(), LockState::Free);
        let held = StoreLock::exclusive(&dir, "record").unwrap();
        let me = format!("pid {}, record", std::process::id());
        assert_eq!(state(&dir).unwrap(), LockState::Held { holder: Some(me.clone()) });
        match StoreLock::exclusive(&dir, "repair") {
            Err(LockError::Busy { holder, .. }) => assert_eq!(holder, Some(me)),
            other => panic!("a second writer was not refused: {other:?}"),
        }
        drop(held);
        assert_eq!(state(&dir).unwrap(), LockState::Free);
        let again = StoreLock::exclusive(&dir, "repair").unwrap();
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlinked_lock_file_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("wv-lock-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(LOCK_FILE)).unwrap();
        assert!(StoreLock::exclusive(&dir, "record").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
