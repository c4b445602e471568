//! Durable replacement: write a temporary file, fsync it, rename it over
//! the old one and fsync the directory.

use super::{Dir, Open, PART};
use std::fs::File;
use std::io;
use std::path::Path;

impl Dir {
    /// Makes a file written under a temporary name durable under its final
    /// one: fsyncs `file` (open at `from`), renames `from` to `to` and fsyncs
    /// the directory. The one rule every write-fsync-rename in wirevault
    /// follows (capture files, indexes, the catalog, repaired files).
    pub fn persist(&self, file: &File, from: &str, to: &str) -> io::Result<()> {
        file.sync_all()?;
        self.rename(from, to)
    }

    /// Durably replaces `rel` with what `write` puts into a new file: the
    /// bytes go to `rel.part` (a stale one is removed first; created new,
    /// 0640, never through a symlink), which is then [`Dir::persist`]ed over
    /// `rel`. On any error the temporary file is removed and `rel` keeps
    /// what it had. `E` lets `write` return the caller's own error type.
    pub fn replace<T, E: From<io::Error>>(
        &self,
        rel: &str,
        write: impl FnOnce(&mut File) -> Result<T, E>,
    ) -> Result<T, E> {
        let tmp = format!("{rel}{PART}");
        match self.unlink(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let mut f = self.open_file(&tmp, Open::CreateNew, 0)?;
        let r = write(&mut f).and_then(|v| self.persist(&f, &tmp, rel).map(|()| v).map_err(E::from));
        if r.is_err() {
            let _ = self.unlink(&tmp);
        }
        r
    }
}

/// [`Dir::replace`] of a path the caller names (an index beside a capture
/// the user gave): the parent directory is opened as given, the file name
/// is resolved beneath it.
pub fn replace_durable<T, E: From<io::Error>>(
    path: &Path,
    write: impl FnOnce(&mut File) -> Result<T, E>,
) -> Result<T, E> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Dir::open(parent)?.replace(name, write)
}
