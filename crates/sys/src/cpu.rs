//! CPU affinity and core counts.

use std::io;

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu < CPU_SETSIZE was checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 = this thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as in `pin_current_thread`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    // SAFETY: every c < CPU_SETSIZE indexes inside the set.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// CPU time the calling thread has used, in nanoseconds (0 if the clock
/// cannot be read). A system call: not for per-packet use.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time the whole process has used (every thread, user and system), in
/// nanoseconds (0 if the clock cannot be read).
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Clock `id` in nanoseconds (0 if it cannot be read).
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live timespec the kernel writes; no other memory is touched.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec.max(0) as u64 * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`): how much
/// later than asked the kernel may end its sleeps, to group wake-ups. The
/// default is 50 us; a thread that sleeps to a deadline and then spins the
/// last microseconds (replay at recorded timing) wants 1 ns. Best effort:
/// an error leaves the default.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and touches no memory.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            ns.max(1) as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// Total physical memory in bytes.
pub fn total_memory() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages.max(0) as u64) * (size.max(0) as u64)
}

/// Sets the process umask.
pub fn set_umask(mask: u32) {
    // SAFETY: umask has no memory-safety preconditions.
    unsafe {
        libc::umask(mask as libc::mode_t);
    }
}

/// uid and primary gid of a user name (getpwnam_r).
pub fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: passwd is plain data; zeroed is a valid value to overwrite.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the sizes passed; `out` is set to
    // `&mut pw` or null, and the strings point into `buf`, which we do not keep.
    let r = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    (r == 0 && !out.is_null()).then_some((pw.pw_uid, pw.pw_gid))
}

/// Drops to `uid`/`gid` for good: no supplementary groups, real, effective
/// and saved ids all changed (so no capability survives), verified after.
pub fn switch_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain syscalls; glibc applies set*id to every thread of the process.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(gid, gid, gid) != 0
            || libc::setresuid(uid, uid, uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if uid != 0 && (libc::setuid(0) == 0 || libc::geteuid() != uid) {
            return Err(io::Error::other("privileges could not be dropped for good"));
        }
    }
    Ok(())
}

/// Lowers the calling thread's CPU priority to `nice` (0..=19) and its I/O
/// priority to the best-effort class at `io_level` (0 highest ..= 7 lowest):
/// work such as an API query must not take CPU or disk time from capture.
/// Linux applies both per thread (its tid). Raising either back needs
/// privileges, so a thread lowered stays lowered.
pub fn lower_current_thread(nice: i32, io_level: u32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority with PRIO_PROCESS and a tid changes only that thread's nice value.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice.clamp(0, 19)) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // include/uapi/linux/ioprio.h: class in the top 3 of 16 bits; 2 = best effort; who 1 = a thread.
    const IOPRIO_CLASS_BE: libc::c_long = 2;
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    let prio = (IOPRIO_CLASS_BE << 13) | libc::c_long::from(io_level.min(7) as u8);
    // SAFETY: ioprio_set takes three integers and touches no memory of ours.
    if unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid as libc::c_long, prio) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the calling thread at background priority: `SCHED_BATCH` at nice 19, the smallest
/// share of a busy CPU a normal thread gets. Not `SCHED_IDLE`: a thread that may hold the
/// memory map's lock (faulting memory in) must not wait for a CPU indefinitely, or every
/// thread that needs that lock waits with it. Best effort: false where the kernel refuses.
pub fn background_priority_current_thread() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler and setpriority change the calling thread's scheduling
    // (pid/tid 0 and gettid(): the caller) and touch no memory of ours but `param`.
    unsafe {
        let batch = libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) == 0;
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        batch && libc::setpriority(libc::PRIO_PROCESS, tid, 19) == 0
    }
}

/// Puts the calling thread back at normal priority (`SCHED_OTHER`, nice 0) after
/// [`background_priority_current_thread`]. Raising a thread's nice value back needs
/// CAP_SYS_NICE (or RLIMIT_NICE): false where the kernel refuses, and the thread stays where
/// it was.
pub fn normal_priority_current_thread() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in background_priority_current_thread: the calling thread's scheduling only.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 0) == 0
            && libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) == 0
    }
}

/// The memory this process may use: the machine's, or less where its cgroup (v2
/// `memory.max`, v1 `memory.limit_in_bytes`) says so. For defaults sized from memory.
pub fn usable_memory() -> u64 {
    let total = total_memory();
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut limit = u64::MAX;
    for line in cgroup.lines() {
        // "0::/path" (v2) or "N:memory:/path" (v1).
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        let file = match ctrl {
            "" => format!("/sys/fs/cgroup{path}/memory.max"),
            c if c.split(',').any(|c| c == "memory") => format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"),
            _ => continue,
        };
        if let Some(v) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            limit = limit.min(v);
        }
    }
    if total == 0 {
        return 0;
    }
    total.min(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_memory_is_at_most_the_machines() {
        let (usable, total) = (usable_memory(), total_memory());
        assert!(usable > 0 && usable <= total, "{usable} of {total}");
    }

    #[test]
    fn timer_slack_is_set_for_the_calling_thread_only() {
        // SAFETY: PR_GET_TIMERSLACK takes no pointer; it returns the slack.
        let get = || unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        let before = get();
        let inner = std::thread::spawn(move || {
            set_timer_slack_ns(1);
            get()
        })
        .join()
        .unwrap();
        assert_eq!(inner, 1);
        assert_eq!(get(), before);
    }
}
