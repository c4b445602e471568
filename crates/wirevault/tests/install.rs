//! `scripts/install.sh --service` (issue 44, item 8): the binary, its man
//! pages and completions, the systemd unit, the config and the service user,
//! installed into a scratch root (DESTDIR: nothing outside the test's
//! directory changes), idempotently: a second run rewrites no file and says
//! `nothing changed`; a config the admin edited is kept. The installed unit
//! passes `systemd-analyze verify`, the user is made by systemd-sysusers.

use crate::util::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs install.sh with `DESTDIR=root` and the binary under test; returns its standard error.
fn install(root: &Path, env: &[(&str, &str)]) -> String {
    let o = Command::new("bash")
        .arg(repo().join("scripts/install.sh"))
        .args(["--service", "--binary", bin()])
        .env("DESTDIR", root)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "install.sh: {err}");
    err
}

/// Every file under `root`: its bytes, mode and modification time.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32, i64, i64)> {
    let mut m = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let md = fs::symlink_metadata(e.path()).unwrap();
            if md.is_dir() {
                dirs.push(e.path());
            } else {
                m.insert(e.path(), (fs::read(e.path()).unwrap(), md.mode(), md.mtime(), md.mtime_nsec()));
            }
        }
    }
    m
}

wvtest!(install_service_twice_changes_nothing_the_second_time, needs = [root, "systemd-sysusers"], |t| {
    let tmp = TempDir::new("install-service");
    let root = tmp.join("root");
    let first = install(&root, &[]);
    assert!(first.contains("created the user and group wirevault"), "{first}");
    assert!(first.contains("systemctl enable --now wirevault"), "{first}");

    // What is where.
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    assert_eq!(fs::read(at("/usr/local/bin/wirevault")).unwrap(), fs::read(bin()).unwrap());
    assert_eq!(fs::metadata(at("/usr/local/bin/wirevault")).unwrap().mode() & 0o777, 0o755);
    for page in ["wirevault", "wirevault-record", "wirevault-query", "wirevault-serve"] {
        let text = fs::read_to_string(at(&format!("/usr/local/share/man/man1/{page}.1"))).unwrap();
        assert!(text.contains(".SH EXAMPLES") && text.contains(".SH FILES"), "{page}.1");
        // FILES names the config and the unit where this install put them.
        assert!(text.contains("/usr/local/lib/systemd/system/wirevault.service"), "{page}.1");
    }
    assert!(at("/usr/local/share/bash-completion/completions/wirevault").is_file());
    let config = fs::read(at("/etc/wirevault/wirevault.toml")).unwrap();
    assert_eq!(config, fs::read(repo().join("packaging/wirevault.toml")).unwrap());
    let unit_path = at("/usr/local/lib/systemd/system/wirevault.service");
    let unit = fs::read_to_string(&unit_path).unwrap();
    assert_eq!(unit, fs::read_to_string(repo().join("packaging/wirevault.service")).unwrap(), "PREFIX /usr/local");
    let passwd = fs::read_to_string(at("/etc/passwd")).unwrap();
    let user = passwd.lines().find(|l| l.starts_with("wirevault:")).unwrap_or_else(|| panic!("no user: {passwd}"));
    let f: Vec<&str> = user.split(':').collect();
    assert_eq!((f[5], f[6]), ("/var/lib/wirevault", "/usr/sbin/nologin"), "{user}");
    assert!(f[2].parse::<u32>().unwrap() < 1000, "a system user: {user}");
    let group = fs::read_to_string(at("/etc/group")).unwrap();
    assert!(group.lines().any(|l| l.starts_with(&format!("wirevault:x:{}:", f[3]))), "{group}");

    // The installed unit verifies, with ExecStart at the installed binary.
    if have("systemd-analyze") {
        let check = tmp.join("wirevault.service");
        let installed = at("/usr/local/bin/wirevault");
        fs::write(&check, unit.replace("/usr/local/bin/wirevault", installed.to_str().unwrap())).unwrap();
        let o = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&check).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && text.trim().is_empty(), "systemd-analyze verify: {text}");
    }

    // Twice: nothing rewritten, and it says so.
    let before = snapshot(&root);
    let second = install(&root, &[]);
    assert!(second.contains("nothing changed"), "{second}");
    assert!(
        !["install: installed", "install: updated", "install: created"].iter().any(|w| second.contains(w)),
        "{second}"
    );
    assert!(before == snapshot(&root), "the second run changed files");

    // A config the admin edited is kept; the packaged one goes beside it, once.
    let cfg = at("/etc/wirevault/wirevault.toml");
    let edited = String::from_utf8(config).unwrap().replace("interface = \"eth1\"", "interface = \"mirror0\"");
    fs::write(&cfg, &edited).unwrap();
    let third = install(&root, &[]);
    assert!(third.contains("kept /etc/wirevault/wirevault.toml"), "{third}");
    assert_eq!(fs::read_to_string(&cfg).unwrap(), edited);
    assert_eq!(
        fs::read(at("/etc/wirevault/wirevault.toml.new")).unwrap(),
        fs::read(repo().join("packaging/wirevault.toml")).unwrap()
    );
    let before = snapshot(&root);
    let fourth = install(&root, &[]);
    assert!(fourth.contains("nothing changed") && fourth.contains("kept"), "{fourth}");
    assert!(before == snapshot(&root), "the fourth run changed files");

    // Another prefix: the unit names its binary, and goes where systemd looks for admins' units.
    let opt = tmp.join("opt-root");
    install(&opt, &[("PREFIX", "/opt/wirevault")]);
    let unit = fs::read_to_string(opt.join("etc/systemd/system/wirevault.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/opt/wirevault/bin/wirevault record --config /etc/wirevault/wirevault.toml"),
        "{unit}"
    );
    assert!(opt.join("opt/wirevault/bin/wirevault").is_file());
});
