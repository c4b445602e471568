//! Files inside a store, reached without leaving it.
//!
//! A store directory may be owned by the (unprivileged) user a recorder runs
//! as, while `record` and `repair` may run as root: a symlink planted in the
//! store, or a catalog line naming `../x` or `/etc/x`, must never make them
//! open, truncate, chown or delete something outside. Every path taken from
//! a store (its catalog, a directory listing, its fixed names) is therefore
//! opened through a [`Dir`]: relative to the store's directory descriptor,
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! (Linux 5.6 and later). Where `openat2` is missing (ENOSYS, or a seccomp
//! filter answering EPERM) the path is walked one component at a time with
//! `openat(O_NOFOLLOW)`, which gives the same answer because [`check_rel`]
//! already refused `..`, `.`, empty and absolute components. A symlink
//! anywhere on the way is an error (ELOOP), never followed.
//!
//! Files the store creates are 0640 and directories 0750, whatever the
//! umask (the mode is set with `fchmod` after creation).

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Mode of every file wirevault creates in a store.
pub const FILE_MODE: u32 = 0o640;
/// Mode of every directory wirevault creates in a store.
pub const DIR_MODE: u32 = 0o750;
/// Suffix of a file being written under a temporary name, renamed when complete.
pub const PART: &str = ".part";

/// Checks that `rel` is a path wirevault may take from a store: relative,
/// made of normal components only (no `..`, `.`, empty component, no NUL).
pub fn check_rel(rel: &str) -> io::Result<()> {
    let bad = |why: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, format!("\"{rel}\" {why}")));
    if rel.is_empty() {
        return bad("is empty");
    }
    if rel.starts_with('/') {
        return bad("is an absolute path");
    }
    if rel.contains('\0') {
        return bad("contains a NUL byte");
    }
    for c in rel.split('/') {
        match c {
            "" | "." => return bad("has an empty or \".\" component"),
            ".." => return bad("leaves the store (\"..\")"),
            _ => {}
        }
    }
    Ok(())
}

fn cstr(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// The kind of a directory entry, seen without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

fn kind_of_mode(mode: u32) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// What `lstat` says about an entry of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    pub len: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

fn stat_of(st: &libc::stat) -> Stat {
    Stat {
        kind: kind_of_mode(st.st_mode),
        len: st.st_size as u64,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
    }
}

/// How to open a file below a [`Dir`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Create a new file for writing (O_EXCL: an existing name, or a
    /// planted symlink, is an error), mode 0640.
    CreateNew,
    /// Open for writing, creating it (mode 0640) if missing; an existing
    /// file is kept (`truncate`: emptied).
    Create { truncate: bool, append: bool },
}

static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// A directory (the store) that paths are resolved beneath.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// Opens the directory `path` (following links in `path` itself: the
    /// user named it).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = cstr(path.as_os_str().as_bytes())?;
        // SAFETY: `c` is a valid NUL-terminated string; open has no other preconditions.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open returned a fresh descriptor we own.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path: path.to_path_buf() })
    }

    /// The path this directory was opened with (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path()/rel`, for messages.
    pub fn display(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Opens `rel` beneath this directory with raw `flags` (O_NOFOLLOW and
    /// O_CLOEXEC are always added) and `mode` for creation.
    fn open_raw(&self, rel: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        check_rel(rel)?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            match openat2(self.fd.as_raw_fd(), rel, flags, mode) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                }
                // EXDEV: RESOLVE_BENEATH refused an escape; ELOOP: a symlink.
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                    return Err(io::Error::new(io::ErrorKind::PermissionDenied, "path leaves the store"))
                }
                r => return r,
            }
        }
        self.open_walk(rel, flags, mode)
    }

    /// The fallback: each directory component with O_NOFOLLOW|O_DIRECTORY,
    /// the last with O_NOFOLLOW.
    fn open_walk(&self, rel: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        let comps: Vec<&str> = rel.split('/').collect();
        let mut cur: Option<OwnedFd> = None;
        for (i, c) in comps.iter().enumerate() {
            let at = cur.as_ref().map_or(self.fd.as_raw_fd(), |f| f.as_raw_fd());
            let last = i + 1 == comps.len();
            let fl = if last { flags } else { libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC };
            let name = cstr(c.as_bytes())?;
            // SAFETY: `at` is an open directory descriptor, `name` a valid C string.
            let fd = unsafe { libc::openat(at, name.as_ptr(), fl, mode as libc::c_uint) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: openat returned a fresh descriptor we own.
            cur = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        cur.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty path"))
    }

    /// Opens the file `rel` beneath the store, following no symlink.
    /// Created files get mode 0640 whatever the umask. `O_DIRECT` may be
    /// added through `extra_flags`.
    pub fn open_file(&self, rel: &str, how: Open, extra_flags: i32) -> io::Result<File> {
        let (flags, creates) = match how {
            Open::Read => (libc::O_RDONLY, false),
            Open::ReadWrite => (libc::O_RDWR, false),
            Open::CreateNew => (libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, true),
            Open::Create { truncate, append } => (
                libc::O_WRONLY
                    | libc::O_CREAT
                    | if truncate { libc::O_TRUNC } else { 0 }
                    | if append { libc::O_APPEND } else { 0 },
                true,
            ),
        };
        // O_NONBLOCK: a FIFO (or device) planted under a store name must
        // not make the open wait for a writer; it is refused, and the flag is
        // cleared again for a regular file (unless asked for).
        let opened = self.open_raw(rel, flags | extra_flags | libc::O_NONBLOCK, FILE_MODE).map(File::from);
        let (file, st) = regular_only(opened, &self.display(rel), extra_flags & libc::O_NONBLOCK != 0)?;
        if creates && st.st_mode & 0o777 != FILE_MODE {
            // Ours (we created it, or it is our store's file): the store's mode.
            fchmod(file.as_raw_fd(), FILE_MODE)?;
        }
        Ok(file)
    }

    /// Creates the new capture file `rel` (O_EXCL, no symlink followed, 0640)
    /// for writing, with O_DIRECT when the file system allows it. Returns the
    /// file and whether O_DIRECT is on.
    pub fn create_output(&self, rel: &str, direct: bool) -> io::Result<(File, bool)> {
        if direct {
            match self.open_file(rel, Open::CreateNew, libc::O_DIRECT) {
                Ok(f) => return Ok((f, true)),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    // Some file systems create the file before refusing O_DIRECT.
                    if self.lstat(rel).is_ok_and(|s| s.kind == Kind::File && s.len == 0) {
                        let _ = self.unlink(rel);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok((self.open_file(rel, Open::CreateNew, 0)?, false))
    }

    /// Opens the subdirectory `rel` (no symlink on the way).
    pub fn open_dir(&self, rel: &str) -> io::Result<Dir> {
        let fd = self.open_raw(rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        Ok(Dir { fd, path: self.path.join(rel) })
    }

    /// Creates the directory `rel` (mode 0750 whatever the umask) unless it
    /// exists as a real directory; a symlink or a file there is an error.
    pub fn mkdir(&self, rel: &str) -> io::Result<Dir> {
        check_rel(rel)?;
        let (parent, name) = self.parent_of(rel)?;
        let c = cstr(name.as_bytes())?;
        let at = parent.as_ref().map_or(self.fd.as_raw_fd(), |d| d.fd.as_raw_fd());
        // SAFETY: `at` is an open directory descriptor, `c` a valid C string.
        let r = unsafe { libc::mkdirat(at, c.as_ptr(), DIR_MODE as libc::mode_t) };
        let created = if r == 0 {
            true
        } else {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
            false
        };
        let d = self.open_dir(rel)?;
        if created {
            fchmod(d.fd.as_raw_fd(), DIR_MODE)?;
        }
        Ok(d)
    }

    /// The directory holding `rel` (None: this one) and `rel`'s last name.
    fn parent_of<'a>(&self, rel: &'a str) -> io::Result<(Option<Dir>, &'a str)> {
        check_rel(rel)?;
        match rel.rsplit_once('/') {
            Some((dir, name)) => Ok((Some(self.open_dir(dir)?), name)),
            None => Ok((None, rel)),
        }
    }

    fn raw(&self, d: &Option<Dir>) -> RawFd {
        d.as_ref().map_or(self.fd.as_raw_fd(), |d| d.fd.as_raw_fd())
    }

    /// Removes the file (or symlink: the link itself) `rel` beneath the store.
    pub fn unlink(&self, rel: &str) -> io::Result<()> {
        let (parent, name) = self.parent_of(rel)?;
        let c = cstr(name.as_bytes())?;
        // SAFETY: valid directory descriptor and C string; unlinkat never follows the last name.
        if unsafe { libc::unlinkat(self.raw(&parent), c.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Renames `from` to `to` (both beneath the store, in one directory or
    /// two) and fsyncs the destination's directory.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let pt = self.rename_volatile(from, to)?;
        // SAFETY: a valid descriptor.
        if unsafe { libc::fsync(self.raw(&pt)) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Renames `from` to `to` as [`Dir::rename`] does, without the fsync: readers
    /// see the old file or the new one whole, but a crash may keep either (for
    /// files that need not survive one, such as a recorder's live files).
    /// Returns the destination's directory (`None`: this one).
    pub fn rename_volatile(&self, from: &str, to: &str) -> io::Result<Option<Dir>> {
        let (pf, nf) = self.parent_of(from)?;
        let (pt, nt) = self.parent_of(to)?;
        let (cf, ct) = (cstr(nf.as_bytes())?, cstr(nt.as_bytes())?);
        // SAFETY: valid directory descriptors and C strings; renameat follows no last-component link.
        if unsafe { libc::renameat(self.raw(&pf), cf.as_ptr(), self.raw(&pt), ct.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(pt)
    }

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

    /// fsyncs this directory.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: a valid descriptor.
        if unsafe { libc::fsync(self.fd.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `lstat` of `rel` beneath the store (intermediate symlinks are errors,
    /// a final symlink is reported as [`Kind::Symlink`]).
    pub fn lstat(&self, rel: &str) -> io::Result<Stat> {
        let fd = self.open_raw(rel, libc::O_PATH, 0)?;
        Ok(stat_of(&fstat(fd.as_raw_fd())?))
    }

    /// Changes the owner of `rel` (a file or directory beneath the store;
    /// a symlink itself, never its target). Returns what it changed.
    pub fn chown(&self, rel: &str, uid: u32, gid: u32) -> io::Result<Stat> {
        let fd = self.open_raw(rel, libc::O_PATH, 0)?;
        chown_fd(fd.as_fd().as_raw_fd(), uid, gid)
    }

    /// Changes the owner of this directory itself.
    pub fn chown_self(&self, uid: u32, gid: u32) -> io::Result<Stat> {
        chown_fd(self.fd.as_raw_fd(), uid, gid)
    }

    /// The entries of `rel` ("" for this directory), with their kind seen
    /// without following links, sorted by name. `.` and `..` are left out.
    pub fn list(&self, rel: &str) -> io::Result<Vec<(String, Kind)>> {
        let d = if rel.is_empty() { None } else { Some(self.open_dir(rel)?) };
        let fd = self.raw(&d);
        // SAFETY: dup of a valid descriptor; the new one is handed to fdopendir (which owns it).
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dup` is a directory descriptor we own; on success the DIR owns it.
        let dirp = unsafe { libc::fdopendir(dup) };
        if dirp.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so `dup` is still ours to close.
            unsafe { libc::close(dup) };
            return Err(e);
        }
        // SAFETY: a fresh DIR positioned anywhere: start from the beginning.
        unsafe { libc::rewinddir(dirp) };
        let mut out = Vec::new();
        loop {
            // SAFETY: `dirp` is a valid DIR until closedir below.
            let ent = unsafe { libc::readdir(dirp) };
            if ent.is_null() {
                break;
            }
            // SAFETY: readdir returned a valid dirent whose d_name is NUL-terminated.
            let (name, dtype) =
                unsafe { (std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()).to_bytes().to_vec(), (*ent).d_type) };
            if name == b"." || name == b".." {
                continue;
            }
            let Ok(name) = String::from_utf8(name) else { continue };
            let kind = match dtype {
                libc::DT_REG => Kind::File,
                libc::DT_DIR => Kind::Dir,
                libc::DT_LNK => Kind::Symlink,
                libc::DT_UNKNOWN => {
                    let c = cstr(name.as_bytes())?;
                    // SAFETY: zeroed stat is a valid out-parameter.
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    // SAFETY: valid descriptor, C string and out-parameter.
                    if unsafe { libc::fstatat(fd, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0 {
                        kind_of_mode(st.st_mode)
                    } else {
                        Kind::Other
                    }
                }
                _ => Kind::Other,
            };
            out.push((name, kind));
        }
        // SAFETY: `dirp` came from fdopendir and is closed once.
        unsafe { libc::closedir(dirp) };
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

fn chown_fd(fd: RawFd, uid: u32, gid: u32) -> io::Result<Stat> {
    let empty = c"";
    // SAFETY: valid descriptor and an empty C string with AT_EMPTY_PATH: acts on the
    // descriptor itself (an O_PATH descriptor of a symlink changes the link).
    let r = unsafe { libc::fchownat(fd, empty.as_ptr(), uid, gid, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat_of(&fstat(fd)?))
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and out-parameter.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Takes a file just opened with `O_NONBLOCK` (so that a FIFO or device
/// planted under the name `shown` cannot make the open wait) and refuses it
/// with one sentence unless it is a regular file; clears `O_NONBLOCK` again
/// unless `keep_nonblock`. Returns the file and its `fstat`.
pub fn regular_only(opened: io::Result<File>, shown: &Path, keep_nonblock: bool) -> io::Result<(File, libc::stat)> {
    let not_regular = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file (a FIFO, device or socket?); remove it", shown.display()),
        )
    };
    let file = match opened {
        Ok(f) => f,
        // O_WRONLY|O_NONBLOCK on a FIFO without a reader.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Err(not_regular()),
        Err(e) => return Err(e),
    };
    let st = fstat(file.as_raw_fd())?;
    if kind_of_mode(st.st_mode) != Kind::File {
        return Err(not_regular());
    }
    if !keep_nonblock {
        clear_nonblock(file.as_raw_fd())?;
    }
    Ok((file, st))
}

/// What an open descriptor is (a regular file, a FIFO, ...), by `fstat`.
pub fn kind_of_fd(fd: RawFd) -> io::Result<Kind> {
    Ok(kind_of_mode(fstat(fd)?.st_mode))
}

/// Clears O_NONBLOCK on an open file.
pub fn clear_nonblock(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller holds open; F_GETFL has no other argument.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above; F_SETFL takes the flags as its argument.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn fchmod(fd: RawFd, mode: u32) -> io::Result<()> {
    // SAFETY: valid descriptor.
    if unsafe { libc::fchmod(fd, mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct open_how` of openat2(2).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

fn openat2(dirfd: RawFd, rel: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c = cstr(rel.as_bytes())?;
    let creates = flags & (libc::O_CREAT | libc::O_TMPFILE) != 0;
    let how = OpenHow {
        flags: flags as u32 as u64,
        // openat2 refuses a mode without O_CREAT/O_TMPFILE.
        mode: if creates { mode as u64 } else { 0 },
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    loop {
        // SAFETY: valid descriptor, C string and `how` of the size passed; the
        // kernel reads `how` only during the call.
        let fd = unsafe {
            libc::syscall(libc::SYS_openat2, dirfd, c.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>())
        };
        if fd >= 0 {
            // SAFETY: a fresh descriptor we own.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        let e = io::Error::last_os_error();
        // EAGAIN: a concurrent rename during RESOLVE_* lookup; retry.
        if e.raw_os_error() != Some(libc::EAGAIN) {
            return Err(e);
        }
    }
}

/// Opens `path` (a file the user named, such as `--stats-file`) for
/// writing without following a symlink in its last component, creating it
/// 0640 if missing.
pub fn create_nofollow(path: &Path, truncate: bool) -> io::Result<File> {
    let c = cstr(path.as_os_str().as_bytes())?;
    let flags =
        libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC | if truncate { libc::O_TRUNC } else { 0 };
    // SAFETY: valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), flags, FILE_MODE as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Creates (truncating) `path` for writing with mode 0640, with O_DIRECT when
/// the file system allows it. Returns the file and whether O_DIRECT is on.
pub fn create_output(path: &Path, direct: bool) -> io::Result<(File, bool)> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let base = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    if direct {
        // SAFETY: `c` is a valid NUL-terminated path; open has no other preconditions.
        let fd = unsafe { libc::open(c.as_ptr(), base | libc::O_DIRECT, 0o640) };
        if fd >= 0 {
            // SAFETY: fd was just opened and is owned by nobody else.
            return Ok((unsafe { File::from_raw_fd(fd) }, true));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
    }
    // SAFETY: as above.
    let fd = unsafe { libc::open(c.as_ptr(), base, 0o640) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok((unsafe { File::from_raw_fd(fd) }, false))
}

/// Allocates `len` bytes of disk at `offset` for `file` and extends its size
/// to cover them (fallocate mode 0; the new range reads as zeros).
///
/// The writer preallocates its output files this way so that its O_DIRECT
/// writes land inside the file size. On ext4 and XFS a write that extends the
/// file needs the inode lock exclusively, so io_uring cannot issue it inline
/// and hands it to a kernel worker thread (`iou-wrk`) instead; a write inside
/// the size into allocated blocks is issued straight from the submitting
/// thread. The file is cut to its exact length when it closes; after a
/// crash, recovery reads only up to the first hole ([`data_end`]), so the
/// unwritten tail is never mistaken for records. Not every file system can
/// (EOPNOTSUPP); callers may ignore the error and write past the end instead.
pub fn fallocate_extend(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on an owned fd.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as libc::off_t, len as libc::off_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A whole file is preallocated at once only when it is at most this
/// fraction (1/`WHOLE_SHARE`) of the volume's free space.
const WHOLE_SHARE: u64 = 2;

/// Preallocation of one output file ahead of its O_DIRECT writes
/// ([`fallocate_extend`]).
///
/// The first call covers the whole expected size at once: a new file has no
/// write in flight yet, and ext4 and XFS make `fallocate` wait for *every*
/// direct write in flight on the inode (`inode_dio_wait`), so each later
/// call would drain the writer's queue and leave the disk idle while it
/// refills. In 64 MiB steps that was 16 drains per GiB and 2.5-5% of the
/// throughput on this VM's disk (DESIGN.md, "Preallocation"). Where the
/// whole size cannot be had (a nearly full volume), it goes on in `step`s,
/// as far as the space lasts, and so it does for a file larger than half
/// of the free space. The file is cut to its length on close either way.
#[derive(Debug, Clone, Copy)]
pub struct Prealloc {
    allocated: u64,
    whole_refused: bool,
}

impl Prealloc {
    /// For a new file: `whole` when it is written O_DIRECT; a file written
    /// through the page cache gains nothing from a whole-file call (on tmpfs
    /// it would take the memory at once), so it gets the steps alone.
    pub fn new(whole: bool) -> Prealloc {
        Prealloc { allocated: 0, whole_refused: !whole }
    }

    /// Makes `[0, end)` of `file` allocated (best effort) when it is not yet:
    /// at first `size` (rounded up to pages), later `step` at a time. Never
    /// beyond `size` unless `end` is.
    pub fn ensure(&mut self, file: &File, end: u64, size: u64, step: u64) {
        if step == 0 || end <= self.allocated {
            return;
        }
        let page = crate::uring::DIRECT_ALIGN;
        let cap = size.next_multiple_of(page).max(end.next_multiple_of(page));
        if self.allocated == 0 && !self.whole_refused {
            // Only what the volume can easily spare: ext4 keeps what a failed
            // fallocate got, so asking for far more than is free (`--file-size
            // 1T`) would fill the volume for every other writer until close.
            let spare = fd_space(file).map_or(0, |(free, _)| free / WHOLE_SHARE);
            if cap <= spare && fallocate_extend(file, 0, cap).is_ok() {
                self.allocated = cap;
                return;
            }
            self.whole_refused = true;
        }
        let to = end.next_multiple_of(step).min(cap);
        let _ = fallocate_extend(file, self.allocated, to - self.allocated);
        self.allocated = to;
    }

    /// Bytes from the start the file has been extended over.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }
}

/// Reserves `len` bytes of disk at `offset` for `file` without changing its
/// size, so the writes that follow need no block allocation. Not every file
/// system can (EOPNOTSUPP); callers may ignore the error.
pub fn fallocate_keep_size(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on an owned fd.
    let r = unsafe {
        libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset as libc::off_t, len as libc::off_t)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Where the data of `file` ends: the start of its first hole or unwritten
/// extent, or its length where the file system cannot tell. Preallocated
/// but unwritten extents (fallocate) and the range of a write that never
/// completed are what a crash leaves; they read as zeros. Two questions,
/// the nearer answer kept:
/// * the extent map (FIEMAP), which flags unwritten extents whatever the
///   page cache holds (ext4, XFS, btrfs);
/// * SEEK_HOLE, where there is no extent map (tmpfs). SEEK_HOLE alone is
///   not enough on ext4: once the file has been read (a backup, `tcpdump
///   -r`), the cached pages of zeros over an unwritten extent count as data.
pub fn data_end(file: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let len = file.metadata()?.len();
    let mut f = file;
    let cur = f.stream_position()?;
    // SAFETY: plain syscall on an owned fd; it only moves the file offset,
    // which is put back below.
    let hole = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE) };
    let err = (hole < 0).then(io::Error::last_os_error);
    f.seek(SeekFrom::Start(cur))?;
    let hole = match err.map(|e| (e.raw_os_error(), e)) {
        None => (hole as u64).min(len),
        Some((Some(libc::EINVAL | libc::ENXIO | libc::EOPNOTSUPP), _)) => len,
        Some((_, e)) => return Err(e),
    };
    Ok(hole.min(written_end(file, len)?.unwrap_or(len)))
}

/// `struct fiemap` (linux/fiemap.h) with room for [`FIEMAP_EXTENTS`] extents.
#[repr(C)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [FiemapExtent; FIEMAP_EXTENTS],
}

/// `struct fiemap_extent`.
#[repr(C)]
#[derive(Clone, Copy)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

const FIEMAP_EXTENTS: usize = 64;
/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xc020_660b;
/// Write dirty pages first (a crashed process leaves them to the kernel).
const FIEMAP_FLAG_SYNC: u32 = 0x1;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;

/// Where the written extents of `file` (of length `len`) end, from the
/// extent map: the first hole or unwritten extent. None where the file
/// system has no extent map.
pub fn written_end(file: &File, len: u64) -> io::Result<Option<u64>> {
    let mut pos = 0u64;
    while pos < len {
        let mut m = Fiemap {
            start: pos,
            length: len - pos,
            flags: FIEMAP_FLAG_SYNC,
            mapped_extents: 0,
            extent_count: FIEMAP_EXTENTS as u32,
            reserved: 0,
            extents: [FiemapExtent {
                logical: 0,
                physical: 0,
                length: 0,
                reserved64: [0; 2],
                flags: 0,
                reserved: [0; 3],
            }; FIEMAP_EXTENTS],
        };
        // SAFETY: FS_IOC_FIEMAP reads and fills `m`, whose extent array holds
        // `extent_count` entries, on an open descriptor.
        if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut m) } != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EINVAL) => Ok(None),
                _ => Err(e),
            };
        }
        let n = (m.mapped_extents as usize).min(FIEMAP_EXTENTS);
        if n == 0 {
            return Ok(Some(pos));
        }
        for x in &m.extents[..n] {
            // A hole before this extent, or an extent never written.
            if x.logical > pos || x.flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
                return Ok(Some(pos));
            }
            pos = pos.max(x.logical + x.length);
            if x.flags & FIEMAP_EXTENT_LAST != 0 {
                return Ok(Some(pos.min(len)));
            }
        }
    }
    Ok(Some(len))
}

/// Free and total bytes of the file system holding `path` (statvfs).
pub fn fs_space(path: &Path) -> io::Result<(u64, u64)> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statvfs is plain data; zeroed is a valid value to overwrite.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(free_and_total(&s))
}

/// The name of a memory file system (`tmpfs`, `ramfs`) when `path` is on
/// one (statfs's type): what is written there never reaches a disk.
pub fn memory_fs(path: &Path) -> io::Result<Option<&'static str>> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statfs is plain data; zeroed is a valid value to overwrite.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match s.f_type as i64 {
        0x0102_1994 => Some("tmpfs"),
        0x8584_58f6 => Some("ramfs"),
        _ => None,
    })
}

fn free_and_total(s: &libc::statvfs) -> (u64, u64) {
    (s.f_bavail * s.f_frsize, s.f_blocks * s.f_frsize)
}

/// [`fs_space`] of the volume holding an open file.
pub fn fd_space(file: &File) -> io::Result<(u64, u64)> {
    // SAFETY: fstatvfs fills plain data; zeroed is a valid value to overwrite.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: an open descriptor and a valid out-pointer.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(free_and_total(&s))
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

/// Is `name` one plain file name (no `/`, not `.`/`..`)?
pub fn is_plain_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/') && !b.contains(&0)
}

/// For tests: force the `openat` walk instead of `openat2`.
#[doc(hidden)]
pub fn force_fallback(on: bool) {
    NO_OPENAT2.store(on, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wv-fs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The whole size at the first write, whatever the first write's end;
    /// nothing again while the writes stay inside; steps past the size
    /// (an overrun), never past what the data needs; off with step 0.
    #[test]
    fn prealloc_covers_the_whole_file_at_once() {
        let d = tmp("prealloc");
        let f = File::create(d.join("f")).unwrap();
        let len = || f.metadata().unwrap().len();
        let mut p = Prealloc::new(true);
        p.ensure(&f, 4096, (1 << 20) + 5, 64 << 10);
        assert_eq!((p.allocated(), len()), ((1 << 20) + 4096, (1 << 20) + 4096));
        p.ensure(&f, 1 << 20, (1 << 20) + 5, 64 << 10);
        assert_eq!(p.allocated(), (1 << 20) + 4096);
        p.ensure(&f, (1 << 20) + 8192 + 1, (1 << 20) + 5, 64 << 10);
        assert_eq!((p.allocated(), len()), ((1 << 20) + 3 * 4096, (1 << 20) + 3 * 4096));
        let mut buffered = Prealloc::new(false);
        buffered.ensure(&f, (1 << 20) + 3 * 4096 + 1, 4 << 20, 64 << 10);
        assert_eq!(buffered.allocated(), (1 << 20) + (64 << 10), "steps only");
        let g = File::create(d.join("g")).unwrap();
        let mut off = Prealloc::new(true);
        off.ensure(&g, 4096, 1 << 20, 0);
        assert_eq!((off.allocated(), g.metadata().unwrap().len()), (0, 0));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn rel_paths_are_checked() {
        for ok in ["a", "stream-000/x.pcap", "a/b/c"] {
            check_rel(ok).unwrap();
        }
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", "a\0b"] {
            assert!(check_rel(bad).is_err(), "{bad:?} accepted");
        }
    }

    fn hostile(fallback: bool) {
        let root = tmp(if fallback { "walk" } else { "at2" });
        let store = root.join("store");
        std::fs::create_dir_all(store.join("stream-000")).unwrap();
        let victim = root.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, store.join("stream-000/link.pcap")).unwrap();
        std::os::unix::fs::symlink(&root, store.join("stream-001")).unwrap();
        force_fallback(fallback);
        let d = Dir::open(&store).unwrap();
        assert!(d.open_file("stream-000/link.pcap", Open::Read, 0).is_err());
        assert!(d.open_file("stream-000/link.pcap", Open::ReadWrite, 0).is_err());
        assert!(d.open_file("stream-000/link.pcap", Open::Create { truncate: true, append: false }, 0).is_err());
        assert!(d.open_file("stream-001/victim", Open::Read, 0).is_err());
        assert!(d.open_file("../victim", Open::Read, 0).is_err());
        assert!(d.mkdir("stream-001").is_err());
        assert_eq!(d.lstat("stream-000/link.pcap").unwrap().kind, Kind::Symlink);
        d.unlink("stream-000/link.pcap").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let mut f = d.open_file("stream-000/new", Open::CreateNew, 0).unwrap();
        f.write_all(b"x").unwrap();
        assert!(d.open_file("stream-000/new", Open::CreateNew, 0).is_err());
        d.rename("stream-000/new", "stream-000/new2").unwrap();
        let mut s = String::new();
        d.open_file("stream-000/new2", Open::Read, 0).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "x");
        let names: Vec<_> = d.list("").unwrap();
        assert_eq!(names, vec![("stream-000".into(), Kind::Dir), ("stream-001".into(), Kind::Symlink)]);
        force_fallback(false);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn symlinks_and_escapes_are_refused() {
        hostile(false);
        hostile(true);
    }

    #[test]
    fn modes_ignore_the_umask() {
        let root = tmp("mode");
        // SAFETY: umask only changes this process's creation mask (tests of this crate create no files concurrently
        // that check modes).
        let old = unsafe { libc::umask(0o077) };
        let d = Dir::open(&root).unwrap();
        d.mkdir("s").unwrap();
        d.open_file("s/f", Open::CreateNew, 0).unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(0) };
        d.open_file("g", Open::Create { truncate: false, append: true }, 0).unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let mode = |p: &str| std::fs::metadata(root.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("s"), mode("s/f"), mode("g")), (0o750, 0o640, 0o640));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
