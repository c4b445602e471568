//! `status` of a store with an extra volume (`record --volume DIR` on
//! another file system): its space, and so its time horizon, counts both
//! file systems, as `df` reports them.
//!
//! Needs root (loop mounts), losetup, mkfs.ext4 and df; skips without them
//! (fails in CI).

use crate::util::*;
use std::path::Path;

const TOOLS: &[&str] = &["losetup", "mkfs.ext4", "mount", "umount", "fallocate", "df"];

/// Available and total bytes of the file system holding `dir`, as `df` says.
fn df(dir: &Path) -> (u64, u64) {
    let o = std::process::Command::new("df").args(["-B1", "--output=avail,size"]).arg(dir).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let v: Vec<u64> = text.lines().nth(1).unwrap().split_whitespace().map(|x| x.parse().unwrap()).collect();
    (v[0], v[1])
}

wvtest!(status_counts_the_space_of_every_volume, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("serve-volumes");
    let a = LoopFs::new("sv-a", 96).expect("loop-mounted ext4 (a)");
    let b = LoopFs::new("sv-b", 48).expect("loop-mounted ext4 (b)");
    let store = a.dir.join("store");
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "size=500,count=40000",
        "-o",
        store.to_str().unwrap(),
        "--volume",
        b.dir.to_str().unwrap(),
        "--file-size",
        "2M",
        "-q",
    ]);
    o.expect(0, "record onto two volumes");
    let served = Served::start(&store, tmp.path(), &[]);
    let st = Http::new(&format!("http://{}", served.addr)).get("/api/v1/status", &[]).json();
    let (da, db) = (df(&a.dir), df(&b.dir));
    let disk = &st["disk"];
    assert_eq!(disk["volume_free_bytes"].as_u64(), Some(da.0 + db.0), "free space of both: {disk}");
    assert_eq!(disk["volume_size_bytes"].as_u64(), Some(da.1 + db.1), "size of both: {disk}");
    let vols = disk["volumes"].as_array().unwrap();
    assert_eq!(vols.len(), 2, "{disk}");
    assert_eq!(vols[1]["free_bytes"].as_u64(), Some(db.0), "{disk}");
    assert!(vols[1]["path"].as_str().unwrap().starts_with(b.dir.to_str().unwrap()), "{disk}");
    // The horizon: capacity = free space of both + what the store holds;
    // hours = capacity / rate.
    let h = &st["horizon"];
    let stored = disk["store_bytes"].as_u64().unwrap();
    assert!(stored > 15_000_000, "{disk}");
    assert_eq!(h["capacity_bytes"].as_u64(), Some(da.0 + db.0 + stored), "{h}");
    let rate = h["write_rate_bytes_s"].as_f64().unwrap();
    let want = (da.0 + db.0 + stored) as f64 / rate / 3600.0;
    let got = h["holds_hours"].as_f64().unwrap();
    assert!((got - want).abs() <= want * 1e-3 + 0.01, "holds_hours {got}, want {want}: {h}");
    let full_in = h["full_in_hours"].as_f64().unwrap();
    let want = (da.0 + db.0) as f64 / rate / 3600.0;
    assert!((full_in - want).abs() <= want * 1e-3 + 0.01, "full_in_hours {full_in}, want {want}: {h}");
});
