use super::*;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

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
