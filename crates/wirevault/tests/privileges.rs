//! `record --user`: after opening its sockets the recorder runs as an
//! unprivileged user, and its files are 0640.

use crate::util::{bin, in_ci, is_root};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

fn uid_of(user: &str) -> Option<u32> {
    let o = Command::new("id").args(["-u", user]).output().ok()?;
    String::from_utf8_lossy(&o.stdout).trim().parse().ok()
}

#[test]
fn drops_to_user_and_creates_0640_files() {
    let nobody = uid_of("nobody");
    if !is_root() || nobody.is_none() {
        assert!(!in_ci(), "CI runs as root and has the user nobody");
        eprintln!("skipped: needs root and the user nobody");
        return;
    }
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wv-user-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    // nobody must be able to reach the store through its parents.
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = base.join("store");
    let out = Command::new(bin())
        .args(["record", "-o", store.to_str().unwrap(), "--synthetic", "size=200,count=5000", "--buffer", "8M"])
        .args(["--block-size", "256K", "--file-size", "256K", "--user", "nobody", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut files = 0;
    // The stream directories' files, and those of flows/ (its own stream directories).
    let mut dirs: Vec<_> =
        std::fs::read_dir(&store).unwrap().flatten().filter(|d| d.path().is_dir()).map(|d| d.path()).collect();
    while let Some(d) = dirs.pop() {
        for f in std::fs::read_dir(&d).unwrap().flatten() {
            let m = f.metadata().unwrap();
            assert_eq!(m.uid(), nobody.unwrap(), "{:?} not written by nobody", f.path());
            if m.is_dir() {
                assert_eq!(m.mode() & 0o777, 0o750, "{:?} mode", f.path());
                dirs.push(f.path());
                continue;
            }
            assert_eq!(m.mode() & 0o777, 0o640, "{:?} mode", f.path());
            files += 1;
        }
    }
    assert!(files >= 4, "expected several files and indexes, got {files}");
    // A bad user name is one clear sentence and exit code 2.
    let bad = Command::new(bin())
        .args([
            "record",
            "-o",
            store.to_str().unwrap(),
            "--synthetic",
            "count=1",
            "--buffer",
            "8M",
            "--block-size",
            "256K",
            "--user",
            "no-such-user-wv",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no user named no-such-user-wv"));
    let _ = std::fs::remove_dir_all(&base);
}
