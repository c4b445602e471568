//! The store sandbox: [`Dir`], paths resolved beneath a directory without
//! leaving it (see the module above), and the files a user names.

use super::{DIR_MODE, FILE_MODE};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

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

/// For tests: force the `openat` walk instead of `openat2`.
#[doc(hidden)]
pub fn force_fallback(on: bool) {
    NO_OPENAT2.store(on, Ordering::Relaxed);
}
