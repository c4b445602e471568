#!/usr/bin/env python3
"""Helpers for bench/live.sh (no third-party modules).

  live_helper.py run RESULT -- CMD...   run CMD, write its pid to RESULT.pid, wait for it and write
                                        "exit_status user_s sys_s" (getrusage of CMD and its reaped
                                        children, microsecond precision) to RESULT. SIGINT/SIGTERM
                                        are ignored by the wrapper (send them to the pid in RESULT.pid).
  live_helper.py cpu PID                CPU seconds used so far by PID (all threads, incl. exited ones)
  live_helper.py ready PID MAX_S [FILE REGEX]
                                        wait until REGEX matches in FILE (the tool says it runs), PID
                                        holds a packet socket of its network namespace and its CPU
                                        use has settled (ring set up); print the seconds waited
  live_helper.py idle PID MIN_S MAX_S   wait until PID's CPU use has stopped (it drained its buffers)
  live_helper.py steno DIR              packets in stenotype's block files below DIR (TPACKET_V3
                                        blocks of 1 MiB: tpacket_block_desc.hdr.num_pkts at offset 12)
  live_helper.py drops TOOL FILE...     the drop count a tool reports (its stderr/stdout/log/stats)
"""
import glob
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    # Precise part: sum_exec_runtime of the live threads (ns); /proc/PID/stat adds exited threads
    # (tick resolution). Take the larger of the two.
    live = 0
    for t in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            live += int(open(t).read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        ticks = int(f[11]) + int(f[12])  # utime, stime (fields 14, 15)
    except (OSError, IndexError, ValueError):
        ticks = 0
    return max(live / 1e9, ticks / HZ)


def packet_socket_inodes():
    inodes = set()
    try:
        with open("/proc/net/packet") as f:  # namespace of the reader == the tool's (same netns)
            next(f)
            for line in f:
                p = line.split()
                if p:
                    inodes.add(p[-1])
    except OSError:
        pass
    return inodes


def has_packet_socket(pid):
    mine = set()
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            l = os.readlink(fd)
        except OSError:
            continue
        if l.startswith("socket:["):
            mine.add(l[8:-1])
        elif l == "anon_inode:bpf_link":
            return True  # wirevault --source xdp: its XDP program is attached (AF_XDP sockets follow)
    return bool(mine & packet_socket_inodes())


def cmd_run(result, argv):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def child():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    p = subprocess.Popen(argv, preexec_fn=child)
    with open(result + ".pid.tmp", "w") as f:
        f.write(f"{p.pid}\n")
    os.rename(result + ".pid.tmp", result + ".pid")
    _, status, ru = os.wait4(p.pid, 0)
    if os.WIFSIGNALED(status):
        code = 128 + os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
    with open(result, "w") as f:
        f.write(f"{code} {ru.ru_utime:.6f} {ru.ru_stime:.6f}\n")


def cmd_ready(pid, max_s, marker=None, regex=None):
    t0 = time.monotonic()
    while marker and time.monotonic() - t0 < max_s and os.path.exists(f"/proc/{pid}"):
        try:
            if re.search(regex, open(marker, errors="replace").read()):
                break
        except OSError:
            pass
        time.sleep(0.05)
    while time.monotonic() - t0 < max_s and os.path.exists(f"/proc/{pid}"):
        if has_packet_socket(pid):
            break
        time.sleep(0.05)
    # settled: < 5 ms of CPU in 200 ms, five times in a row
    calm = 0
    last = cpu_seconds(pid)
    while time.monotonic() - t0 < max_s and os.path.exists(f"/proc/{pid}") and calm < 5:
        time.sleep(0.2)
        now = cpu_seconds(pid)
        calm = calm + 1 if now - last < 0.005 else 0
        last = now
    print(f"{time.monotonic() - t0:.1f}")


def cmd_idle(pid, min_s, max_s):
    """Wait until PID has drained what it had buffered: its CPU use stays < 5 ms per 200 ms for
    1 s; at least min_s, at most max_s. Print the seconds waited."""
    t0 = time.monotonic()
    calm = 0
    last = cpu_seconds(pid)
    while os.path.exists(f"/proc/{pid}"):
        time.sleep(0.2)
        now = cpu_seconds(pid)
        calm = calm + 1 if now - last < 0.005 else 0
        last = now
        el = time.monotonic() - t0
        if (calm >= 5 and el >= min_s) or el >= max_s:
            break
    print(f"{time.monotonic() - t0:.1f}")


def cmd_steno(d):
    total = 0
    for path in glob.glob(os.path.join(d, "**", "PKT*", "*"), recursive=True) + glob.glob(
        os.path.join(d, "**", "PKT*", ".*"), recursive=True
    ):
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            while True:
                blk = f.read(1 << 20)
                if len(blk) < 16:
                    break
                total += struct.unpack_from("<I", blk, 12)[0]
    print(total)


def cmd_drops(tool, files):
    text = ""
    for fn in files:
        try:
            text += open(fn, errors="replace").read() + "\n"
        except OSError:
            pass
    out = "?"
    if tool == "tcpdump":
        k = re.findall(r"(\d+) packets? dropped by kernel", text)
        i = re.findall(r"(\d+) packets? dropped by interface", text)
        if k:
            out = f"{int(k[-1]):,} kernel" + (f", {int(i[-1]):,} if" if i and int(i[-1]) else "")
    elif tool == "dumpcap":
        m = re.findall(r"received/dropped on interface '[^']*': (\d+)/(\d+) \(([^)]*)\)", text)
        if m:
            out = f"{int(m[-1][1]):,} ({m[-1][2]})"
    elif tool == "netsniff-ng":
        inc = re.findall(r"(\d+)\s+packets incoming \((\d+) unread on exit\)", text)
        pas = re.findall(r"(\d+)\s+packets passed filter", text)
        rate = re.findall(r"([\d.]+)% packet droprate", text)
        if inc:
            # netsniff-ng reports kernel drops only as a rate (tp_drops/ tp_packets)
            out = f"{rate[-1] if rate else '?'}% droprate, {int(inc[-1][1]):,} unread"
    elif tool == "stenotype":
        m = re.findall(r"packets=(\d+) blocks=\d+ polls=\d+ drops=(\d+)", text)
        if m:
            out = f"{int(m[-1][1]):,} (last stats line, at {int(m[-1][0]):,} pkts)"
        else:
            out = "no stats line"
    elif tool == "wirevault":
        for fn in files:
            if fn.endswith(".json"):
                try:
                    d = json.load(open(fn))["dropped"]
                    out = f"{sum(d.values()):,} (k {d['kernel']:,}, arena {d['arena_full']:,}, " \
                          f"wr {d['write_error']:,}, shut {d['shutdown']:,}" \
                          + (f", fill {d['fill_ring']:,})" if d.get('fill_ring') else ")")
                except (OSError, ValueError, KeyError):
                    pass
    print(out)


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    if a[0] == "run":
        i = a.index("--")
        cmd_run(a[1], a[i + 1:])
    elif a[0] == "cpu":
        print(f"{cpu_seconds(int(a[1])):.6f}")
    elif a[0] == "ready":
        cmd_ready(int(a[1]), float(a[2]), *(a[3:5] if len(a) >= 5 else []))
    elif a[0] == "idle":
        cmd_idle(int(a[1]), float(a[2]), float(a[3]))
    elif a[0] == "steno":
        cmd_steno(a[1])
    elif a[0] == "drops":
        cmd_drops(a[1], a[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
