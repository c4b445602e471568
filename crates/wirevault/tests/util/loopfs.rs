//! ext4 file systems on loop devices, for tests of full, slow or failing disks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An ext4 file system on a loop device with direct I/O to its backing file
/// (so O_DIRECT reaches the disk, not the page cache), mounted at `dir`;
/// unmounted, detached and removed on drop (also when the test fails).
pub struct LoopFs {
    pub dir: PathBuf,
    image: PathBuf,
    dev: String,
}

impl LoopFs {
    /// A new `mib` MiB file system (`None` if any step fails; needs root,
    /// losetup and mkfs.ext4).
    pub fn new(tag: &str, mib: u64) -> Option<LoopFs> {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let image = base.join(format!("wv-loop-{tag}-{}.img", std::process::id()));
        let dir = base.join(format!("wv-loop-{tag}-{}.mnt", std::process::id()));
        fs::create_dir_all(&dir).ok()?;
        // Allocated, not sparse, and initialised by mkfs, so that neither the
        // backing file's block allocation nor ext4's lazy inode-table
        // initialisation runs during a measurement.
        let q = |c: &mut Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
        if !q(Command::new("fallocate").args(["-l", &format!("{mib}M")]).arg(&image)) {
            return None;
        }
        let out = Command::new("losetup").args(["--find", "--show", "--direct-io=on"]).arg(&image).output().ok()?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let lfs = LoopFs { dir, image, dev };
        if !out.status.success() || lfs.dev.is_empty() {
            return None;
        }
        (q(Command::new("mkfs.ext4").args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", &lfs.dev]))
            && q(Command::new("mount").arg(&lfs.dev).arg(&lfs.dir)))
        .then_some(lfs)
    }
}

impl LoopFs {
    /// Makes ext4 act as on a metadata error (`trigger_fs_error`), remounted
    /// read-only first asked for with `errors=remount-ro`: the file system
    /// refuses every later write, as a failing disk's does. False if the
    /// kernel has no such knob.
    pub fn fail(&self) -> bool {
        let ok = Command::new("mount")
            .args(["-o", "remount,errors=remount-ro"])
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        let name = self.dev.trim_start_matches("/dev/");
        ok && fs::write(format!("/sys/fs/ext4/{name}/trigger_fs_error"), "wirevault test\n").is_ok()
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = fs::remove_dir(&self.dir);
        let _ = fs::remove_file(&self.image);
    }
}
