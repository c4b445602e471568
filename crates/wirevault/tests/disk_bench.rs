//! `wirevault disk-bench`: its mean against fio's O_DIRECT sequential write
//! (io_uring, same block size, queue depth and total) on the real disk and on
//! a loop-mounted ext4, the refusal to overfill a small volume, clean-up
//! (disk full, SIGTERM), the JSON contract `plan --bench` reads, the plots,
//! and bad flags.
//!
//! Noise: the machine is shared, so one run against one run would flake.
//! The comparison runs the two tools in ABBA order several times on the same
//! directory, after a warm-up run, and takes the trimmed mean of the rounds'
//! ratios (each round's two runs share the machine's load of the moment).

use crate::util::{assert_no_panic, in_ci, is_root, need_tools, run_wirevault, wirevault, wvtest, LoopFs, TempDir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A directory on the real disk (the build's target directory, not a tmpfs /tmp).
fn disk_dir(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wv-disk-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Bytes free to an unprivileged writer on the volume holding `dir`.
fn free_bytes(dir: &Path) -> u64 {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid out-parameter.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0, "statvfs {}", dir.display());
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Skips (or, in CI, fails) when the test cannot run here.
fn require(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!in_ci(), "CI must be able to run this test: {what}");
        eprintln!("SKIP: {what}");
    }
    ok
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lost+found")
        .collect();
    v.sort();
    v
}

/// Runs disk-bench with `--json`; the parsed object.
fn bench_json(dir: &Path, args: &[&str]) -> Value {
    let mut a = vec!["disk-bench", dir.to_str().unwrap(), "--json"];
    a.extend_from_slice(args);
    let o = run_wirevault(&a);
    o.expect(0, "disk-bench");
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.stdout))
}

/// fio's O_DIRECT sequential write of `files` files of `file_size` bytes,
/// one after the other, with disk-bench's block size and queue depth on
/// io_uring, each file preallocated (as the writer does) and fsynced on
/// close; its bandwidth in bytes per second. Its buffers are in huge pages
/// (`--mem=mmaphuge` on a private hugetlbfs, see [`HugeFs`]), registered
/// with the ring (`fixedbufs`) and not rescrambled per write, as the
/// writer's arena is huge pages written once. With fio's default 4 KiB
/// pages each 4 MiB write is 1,024 scattered pages, which a virtual disk
/// splits into several requests: fio then wrote 20-45% less on this VM than
/// from huge pages, a difference of memory, not of the write path.
fn fio_bps(dir: &Path, huge: &HugeFs, files: u32, file_size: &str, block: &str, depth: u32) -> f64 {
    let out = Command::new("fio")
        .args(["--name=wv-fio", "--rw=write", "--ioengine=io_uring", "--direct=1", "--fsync_on_close=1"])
        .args(["--fallocate=posix", "--file_service_type=sequential", "--output-format=json"])
        .args(["--fixedbufs=1", "--scramble_buffers=0"])
        .arg(format!("--mem=mmaphuge:{}", huge.dir.join("fio-buffers").display()))
        .arg(format!("--directory={}", dir.display()))
        .arg(format!("--bs={block}"))
        .arg(format!("--iodepth={depth}"))
        .arg(format!("--nrfiles={files}"))
        .arg(format!("--filesize={file_size}"))
        .arg(format!("--size={}", files as u64 * size_bytes(file_size)))
        .stdin(Stdio::null())
        .output()
        .expect("run fio");
    assert!(out.status.success(), "fio failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("fio JSON");
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with("wv-fio") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    v["jobs"][0]["write"]["bw_bytes"].as_f64().expect("fio bw_bytes")
}

/// `256M` and friends (the sizes these tests use).
fn size_bytes(s: &str) -> u64 {
    let (n, unit) = s.split_at(s.len() - 1);
    n.parse::<u64>().unwrap()
        * match unit {
            "K" => 1 << 10,
            "M" => 1 << 20,
            "G" => 1 << 30,
            _ => panic!("size {s}"),
        }
}

/// A hugetlbfs mounted for fio alone, holding `n` 2 MiB huge pages from
/// mount to unmount (`min_size`): pages merely added to the pool are free
/// for anyone, and a recorder started by a test running beside this one
/// maps its arena from free huge pages first, and fio then stops with "no
/// huge pages available" (the likely cause of both comparisons failing in
/// one CI run, whose messages were not kept). The pool grows
/// until the mount gets its pages (memory compacted between tries); the old
/// pool size is put back on drop.
struct HugeFs {
    dir: PathBuf,
    old: u64,
}

impl HugeFs {
    const KNOB: &'static str = "/proc/sys/vm/nr_hugepages";

    fn pool() -> u64 {
        std::fs::read_to_string(Self::KNOB).unwrap().trim().parse().unwrap()
    }

    fn mount(n: u64) -> HugeFs {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wv-hugetlbfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fs = HugeFs { dir, old: Self::pool() };
        let bytes = format!("{}M", 2 * n);
        for _ in 0..20 {
            std::fs::write(Self::KNOB, (Self::pool() + n).to_string()).unwrap();
            let mounted = Command::new("mount")
                .args(["-t", "hugetlbfs", "-o", &format!("pagesize=2M,min_size={bytes},size={bytes}"), "wv-fio"])
                .arg(&fs.dir)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if mounted {
                return fs;
            }
            let _ = std::fs::write("/proc/sys/vm/compact_memory", "1");
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("could not hold {n} huge pages for fio's buffers (pool {})", Self::pool());
    }
}

impl Drop for HugeFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
        let _ = std::fs::write(Self::KNOB, self.old.to_string());
    }
}

/// The trimmed mean of `ratios` on a log scale (the highest and the lowest
/// left out): the geometric mean of the middle ones.
fn trimmed_ratio(ratios: &mut [f64]) -> f64 {
    ratios.sort_by(f64::total_cmp);
    let mid = &ratios[1..ratios.len() - 1];
    (mid.iter().map(|r| r.ln()).sum::<f64>() / mid.len() as f64).exp()
}

/// disk-bench and fio, ABBA, on `dir`: they agree within 10%.
///
/// This VM's disk moves by 10-20% from one one-second run to the next, for
/// either tool alone (2026-11-27: 1.15 to 1.58 GB/s), so a round's ratio
/// ranges from 0.8 to 1.25 with nothing else running (spread ~0.11). The
/// median of six rounds of 2 x 1 GiB, compared before, then leaves 10% in
/// about one test of twenty, one CI run of ten with its two tests (two CI
/// runs failed, at 1.110 and 0.871). Twelve rounds of 2 x 512 MiB
/// take a little longer (deleting a preallocated file costs about as much
/// as writing it), and the trimmed mean of their ratios spreads 0.64 as
/// much as that median with normal noise, 0.68 with heavy tails (simulated).
fn agrees_with_fio(dir: &Path, what: &str) {
    // Files of 512 MiB: fio creates and preallocates its files before its
    // clock starts, disk-bench (as the recorder) while it runs; with small
    // files that fixed cost per file alone separates them.
    const FILES: u32 = 2;
    const SIZE: &str = "512M";
    const ROUNDS: usize = 12;
    let files = FILES.to_string();
    let args = ["--files", &files, "--file-size", SIZE];
    // fio's 8 buffers of 4 MiB in huge pages (and some slack).
    let huge = HugeFs::mount(24);
    // Warm-up: the first writes to a fresh directory allocate metadata.
    bench_json(dir, &args);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let rounds = |n: usize, ours: &mut Vec<f64>, theirs: &mut Vec<f64>| {
        for round in 0..n {
            let mut one = |first_ours: bool| {
                if first_ours {
                    let v = bench_json(dir, &args);
                    assert_eq!(v["mode"], "direct", "{what}: O_DIRECT refused");
                    assert_eq!(v["block_size"], 4 << 20);
                    assert_eq!(v["queue_depth"], 8);
                    ours.push(v["mean_bytes_per_s"].as_f64().unwrap());
                } else {
                    theirs.push(fio_bps(dir, &huge, FILES, SIZE, "4M", 8));
                }
            };
            let ab = round % 4 == 0 || round % 4 == 3;
            one(ab);
            one(!ab);
            assert!(entries(dir).is_empty(), "{what}: files left: {:?}", entries(dir));
        }
    };
    // Each round's two runs ran back to back, under the same load: compare
    // them pairwise, and average the rounds' ratios.
    let judge = |ours: &[f64], theirs: &[f64]| {
        let mut ratios: Vec<f64> = ours.iter().zip(theirs).map(|(a, b)| a / b).collect();
        let ratio = trimmed_ratio(&mut ratios);
        eprintln!("{what}: disk-bench {ours:?}, fio {theirs:?}: ratios {ratios:.3?}, trimmed mean {ratio:.3}");
        ratio
    };
    rounds(ROUNDS, &mut ours, &mut theirs);
    let mut ratio = judge(&ours, &theirs);
    // Outside the band: twelve more rounds, judged with the first twelve in
    // the same band. A real bias of 10% stays outside with twice the data;
    // the disk's noise (one CI run of ~15 left it at 12 rounds, with the
    // CI's other tests loading the disk) narrows by a factor of 1.4.
    if !(0.9..=1.1).contains(&ratio) {
        rounds(ROUNDS, &mut ours, &mut theirs);
        ratio = judge(&ours, &theirs);
    }
    assert!(
        (0.9..=1.1).contains(&ratio),
        "{what}: disk-bench's mean is {ratio:.3} times fio's ({ours:?} vs {theirs:?})"
    );
}

wvtest!(mean_agrees_with_fio_on_the_real_disk, |t| {
    if !need_tools(t.name, &["fio"]) || !require(is_root(), "fio's huge-page buffers need root") {
        return;
    }
    let _heavy = crate::util::heavy_lock();
    let dir = disk_dir("fio");
    agrees_with_fio(&dir, "real disk");
    std::fs::remove_dir_all(&dir).unwrap();
});

wvtest!(mean_agrees_with_fio_on_a_loop_mounted_ext4, |t| {
    if !need_tools(t.name, &["fio", "losetup", "mkfs.ext4"]) || !require(is_root(), "a loop mount needs root") {
        return;
    }
    let _heavy = crate::util::heavy_lock();
    let fs = LoopFs::new("fio", 3 << 10).expect("loop-mounted ext4");
    agrees_with_fio(&fs.dir, "loop ext4");
});

wvtest!(refuses_to_overfill_a_small_volume_and_cleans_up_when_told, |t| {
    if !need_tools(t.name, &["losetup", "mkfs.ext4", "stat"]) || !require(is_root(), "a loop mount needs root") {
        return;
    }
    let fs = LoopFs::new("full", 64).expect("loop-mounted ext4");
    let st = Command::new("stat").args(["-f", "-c", "%a %S"]).arg(&fs.dir).output().unwrap();
    let st = String::from_utf8_lossy(&st.stdout);
    let mut it = st.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    let free = it.next().unwrap() * it.next().unwrap();
    let fit = (free as f64 * 0.8) as u64 / (8 << 20);
    assert!((2..10).contains(&fit), "free {free}");
    let d = fs.dir.to_str().unwrap();
    let o = run_wirevault(&["disk-bench", d, "--files", "10", "--file-size", "8M"]);
    o.expect(2, "overfill");
    let msg = o.stderr.trim();
    assert_eq!(msg.lines().count(), 1, "one sentence: {msg}");
    assert!(msg.contains("free") && msg.contains("80%") && msg.contains("--allow-fill"), "{msg}");
    assert!(msg.contains(&format!("--files {fit}")), "names the largest N ({fit}): {msg}");
    assert!(entries(&fs.dir).is_empty(), "nothing may be written before the refusal");
    // The largest N it names is accepted.
    let ok = bench_json(&fs.dir, &["--files", &fit.to_string(), "--file-size", "8M"]);
    assert_eq!(ok["files"], fit);
    // Told to fill: the volume fills up, exit 3, and nothing is left behind.
    let o = run_wirevault(&["disk-bench", d, "--files", "10", "--file-size", "8M", "--allow-fill"]);
    o.expect(3, "disk full");
    assert!(o.stderr.contains("filled up"), "{}", o.stderr);
    assert!(entries(&fs.dir).is_empty(), "files left after a full disk: {:?}", entries(&fs.dir));
});

/// The JSON contract (`plan --bench` reads it), statistics that hang
/// together, the buffer verdict, the plots, and no file left behind.
wvtest!(json_report_plots_and_cleanup, |t| {
    let dir = disk_dir("json");
    let plots = TempDir::new("disk-bench-plots");
    let svg = plots.join("series.svg");
    let png = plots.join("series.png");
    let v =
        bench_json(&dir, &["--files", "6", "--file-size", "32M", "--rate", "1gbps", "--plot", svg.to_str().unwrap()]);
    assert!(entries(&dir).is_empty(), "files left: {:?}", entries(&dir));
    assert_eq!(v["version"], 1);
    assert_eq!(v["dir"], dir.to_str().unwrap());
    assert_eq!(v["mode"], "direct");
    assert_eq!((v["files"].as_u64(), v["file_size"].as_u64()), (Some(6), Some(32 << 20)));
    assert_eq!(v["total_bytes"], 6 * (32 << 20));
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {v}"));
    let per_file: Vec<f64> =
        v["per_file_bytes_per_s"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert_eq!(per_file.len(), 6);
    let mean = per_file.iter().sum::<f64>() / 6.0;
    assert!((f("mean_bytes_per_s") - mean).abs() <= 1e-6 * mean);
    let ci = v["ci99_bytes_per_s"].as_array().unwrap();
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    assert!(lo <= mean && mean <= hi, "{lo} {mean} {hi}");
    let (min, p5, p95, max) = (f("min_bytes_per_s"), f("p5_bytes_per_s"), f("p95_bytes_per_s"), f("max_bytes_per_s"));
    assert!(min <= p5 && p5 <= p95 && p95 <= max, "{min} {p5} {p95} {max}");
    let min_seen = per_file.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(min, min_seen);
    let total = f("total_bytes");
    assert!((f("overall_bytes_per_s") - total / f("elapsed_s")).abs() <= 1e-6 * total);
    let series: u64 = v["per_second_bytes"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).sum();
    assert!(series <= total as u64, "the series holds only whole seconds");
    assert!(v.get("worst_1s_bytes_per_s").is_some() && v.get("worst_10s_bytes_per_s").is_some());
    let r = &v["rate"];
    assert_eq!(r["bytes_per_s"], 125e6);
    assert_eq!(r["margin"], 1.5);
    // This disk writes far more than 1 Gb/s.
    if f("overall_bytes_per_s") > 125e6 {
        assert_eq!(r["sustained"], true);
        let arg = r["record_buffer_arg"].as_str().unwrap();
        assert!(arg.ends_with('M') || arg.ends_with('G'), "{arg}");
        assert!(r["buffer_with_margin_bytes"].as_u64().unwrap() >= 64 << 20);
    }
    // The SVG is well-formed XML (parsed by Python's parser) and shows the lines.
    if t.has_tools("svg check", &["python3"]) {
        let o = Command::new("python3")
            .args([
                "-c",
                "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); print(d.documentElement.tagName)",
            ])
            .arg(&svg)
            .output()
            .unwrap();
        assert!(o.status.success(), "invalid SVG: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "svg");
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("mean per file") && text.contains("rate 0.125 GB/s (1.00 Gb/s)"), "labels missing");
    }
    // PNG: a real 1000x500 image.
    let o = run_wirevault(&[
        "disk-bench",
        dir.to_str().unwrap(),
        "--files",
        "2",
        "--file-size",
        "8M",
        "--plot",
        png.to_str().unwrap(),
    ]);
    o.expect(0, "png");
    let b = std::fs::read(&png).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        (u32::from_be_bytes(b[16..20].try_into().unwrap()), u32::from_be_bytes(b[20..24].try_into().unwrap())),
        (1000, 500)
    );
    assert!(o.stdout.contains("per file (n = 2)"), "{}", o.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
});

/// A rate the volume keeps up with at every moment needs no buffer: the report says the
/// 64 MiB it advises is record's smallest buffer, not what the dips need (before: "need a 0 B
/// buffer, x1.5 margin: 64.00 MiB", as if 0 B times 1.5 were 64 MiB).
#[test]
fn an_advised_buffer_at_the_floor_says_it_is_the_floor() {
    let dir = disk_dir("floor");
    let o =
        run_wirevault(&["disk-bench", dir.to_str().unwrap(), "--files", "3", "--file-size", "4M", "--rate", "1mbps"]);
    o.expect(0, "disk-bench --rate 1mbps");
    let line = o.stdout.lines().find(|l| l.contains("at 1mbps")).unwrap_or_else(|| panic!("{}", o.stdout));
    assert!(line.contains("64.00 MiB") && line.contains("the smallest buffer record takes"), "{line}");
    assert!(!line.contains("margin: 64.00 MiB"), "{line}");
    assert!(o.stdout.contains("use: wirevault record --buffer 64M"), "{}", o.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn buffered_mode_and_keep() {
    let dir = disk_dir("keep");
    let v = bench_json(&dir, &["--files", "3", "--file-size", "4M", "--buffered", "--keep", "--block-size", "1M"]);
    assert_eq!(v["mode"], "buffered");
    assert_eq!(v["block_size"], 1 << 20);
    let kept: Vec<&str> = v["kept"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(kept.len(), 3);
    for k in &kept {
        assert_eq!(std::fs::metadata(k).unwrap().len(), 4 << 20);
    }
    assert_eq!(entries(&dir).len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigterm_stops_the_run_and_removes_the_files() {
    let dir = disk_dir("term");
    // As many 64 MiB files as half the free space holds, at most 400: a fixed
    // 25 GiB run is refused on a smaller CI disk and ends before the signal.
    let files = (free_bytes(&dir) / 2 / (64 << 20)).min(400);
    assert!(files >= 8, "too little free space in {} for this test", dir.display());
    let mut child = wirevault()
        .args(["disk-bench", dir.to_str().unwrap(), "--files", &files.to_string(), "--file-size", "64M"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while entries(&dir).len() < 2 {
        assert!(Instant::now() < deadline, "no file appeared");
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!("disk-bench ended before it was stopped: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_no_panic(&err, "sigterm");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted") && err.contains("removed"), "{err}");
    assert!(entries(&dir).is_empty(), "files left: {:?}", entries(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_flags_are_one_sentence_and_exit_2() {
    let dir = disk_dir("flags");
    let d = dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--files", "1"], "--files"),
        (&["--file-size", "1000"], "multiple of 4K"),
        (&["--file-size", "lots"], "not a size"),
        (&["--block-size", "4K"], "--block-size"),
        (&["--queue-depth", "0"], "--queue-depth"),
        (&["--rate", "10"], "bits per second"),
        (&["--rate", "10 gigs"], "is not a rate"),
        (&["--margin", "0.5"], "--margin"),
        (&["--plot", "x.pdf"], ".svg or .png"),
        // Refused before the run, not after it.
        (&["--plot", "/nonexistent-dir/x.svg"], "cannot write there"),
    ];
    for (args, want) in cases {
        let mut a = vec!["disk-bench", d];
        a.extend_from_slice(args);
        let o = run_wirevault(&a);
        o.expect(2, &format!("{args:?}"));
        let msg = o.stderr.trim();
        assert_eq!(msg.lines().count(), 1, "{args:?}: one sentence: {msg}");
        assert!(msg.starts_with("wirevault: ") && msg.contains(want), "{args:?}: {msg}");
    }
    let o = run_wirevault(&["disk-bench", &format!("{d}/missing")]);
    o.expect(1, "missing dir"); // the host's matter, not the command line's (issue 44)
    assert!(o.stderr.contains("does not exist"));
    let o = run_wirevault(&["disk-bench", d, "--no-such-flag"]);
    o.expect(2, "unknown flag");
    assert!(entries(&dir).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--rate` takes what `wirevault plan --json` wrote: the largest store rate
/// of its rows, the same number as given in bytes per second.
#[test]
fn rate_from_a_plan_result() {
    let dir = disk_dir("plan-rate");
    let tmp = TempDir::new("disk-bench-plan");
    let plan = tmp.join("plan.json");
    let o = run_wirevault(&["plan", "--link", "1gbps", "--size", "64,1514", "--json"]);
    o.expect(0, "plan");
    std::fs::write(&plan, &o.stdout).unwrap();
    let rows: Value = serde_json::from_str(&o.stdout).unwrap();
    let want = rows.as_array().unwrap().iter().map(|r| r["store_bytes_per_s"].as_f64().unwrap()).fold(0.0, f64::max);
    assert!(want > 1e8, "a 1 Gb/s link stores more than 100 MB/s: {want}");
    let v = bench_json(&dir, &["--files", "2", "--file-size", "8M", "--rate", plan.to_str().unwrap()]);
    let got = v["rate"]["bytes_per_s"].as_f64().unwrap_or_else(|| panic!("no rate in {v}"));
    assert!((got - want).abs() <= 1e-9 * want, "rate {got}, plan's largest store rate {want}");
    // Not a plan result: one sentence, exit 2.
    let junk = tmp.join("junk.json");
    std::fs::write(&junk, "{\"x\": 1}").unwrap();
    let o = run_wirevault(&[
        "disk-bench",
        dir.to_str().unwrap(),
        "--files",
        "2",
        "--file-size",
        "4M",
        "--rate",
        junk.to_str().unwrap(),
    ]);
    o.expect(2, "--rate junk.json");
    assert!(o.stderr.contains("store_bytes_per_s") && o.stderr.trim().lines().count() == 1, "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a tmpfs (which takes O_DIRECT since Linux 6.6) the figures are the
/// speed of memory: a warning says so and the JSON names the file system;
/// on the real disk neither.
wvtest!(a_memory_file_system_is_named_as_such, needs = [root], |t| {
    let tmp = TempDir::new("db-tmpfs");
    let mnt = tmp.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let ok = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"]).arg(&mnt).status();
    assert!(ok.is_ok_and(|s| s.success()), "mount a tmpfs");
    let o = run_wirevault(&["disk-bench", mnt.to_str().unwrap(), "--files", "2", "--file-size", "4M", "--json"]);
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    o.expect(0, "disk-bench on tmpfs");
    assert!(o.stderr.contains("is on tmpfs, in memory"), "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["memory_fs"], "tmpfs");
    let dir = disk_dir("not-memory");
    let v = bench_json(&dir, &["--files", "2", "--file-size", "4M"]);
    assert!(v["memory_fs"].is_null(), "{v}");
    std::fs::remove_dir_all(&dir).unwrap();
});
