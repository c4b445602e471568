//! `record --user`: after opening its sockets the recorder runs as an
//! unprivileged user, and its files are 0640; it changes the owner of no
//! file outside the store that a hard link in the store points at.

use crate::util::{assert_no_panic, bin, in_ci, is_root, run_wirevault, synthetic_store, wvtest, TempDir};
use std::fs;
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

wvtest!(user_switch_does_not_chown_hard_links, needs = [root], |t| {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = TempDir::new("hr-chown");
    let secret = tmp.join("secret");
    fs::write(&secret, "").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o666)).unwrap();
    let store = synthetic_store(&tmp, "s");
    let idx = fs::read_dir(store.join("stream-000"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pcap"))
        .unwrap()
        .with_extension("pcap.idx");
    let _ = fs::remove_file(&idx);
    fs::hard_link(&secret, &idx).unwrap();
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "size=100,count=5",
        "-o",
        store.to_str().unwrap(),
        "-q",
        "--buffer",
        "64M",
        "-Z",
        "nobody",
    ]);
    assert_no_panic(&o.stderr, "record -Z nobody");
    assert_eq!(fs::metadata(&secret).unwrap().uid(), 0, "a hard link to a root file was chowned: {}", o.stderr);
    assert!(o.stderr.contains(".pcap.idx") && o.stderr.contains("warning"), "no warning naming it: {}", o.stderr);
});
