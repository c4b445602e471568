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
//!
//! By job: [`dir`], the store sandbox ([`Dir`]) and the files a user names;
//! [`prealloc`], disk reserved ahead of the writer; [`extents`], where a
//! file's written data ends; [`space`], a volume's free space and kind;
//! [`replace`], the write-fsync-rename every durable file goes through.

pub mod dir;
pub mod extents;
pub mod prealloc;
pub mod replace;
pub mod space;

pub use dir::*;
pub use extents::*;
pub use prealloc::*;
pub use replace::*;
pub use space::*;

/// Mode of every file wirevault creates in a store.
pub const FILE_MODE: u32 = 0o640;
/// Mode of every directory wirevault creates in a store.
pub const DIR_MODE: u32 = 0o750;
/// Suffix of a file being written under a temporary name, renamed when complete.
pub const PART: &str = ".part";

#[cfg(test)]
mod tests;
