#!/usr/bin/env python3
"""Helpers of bench/queryable.sh: when did each stored frame become queryable?

  queryable.py poll STORE WIREVAULT OUT.json READY_FILE STOP_FILE
      Until STOP_FILE exists: one thread reads what the recorder says is on
      disk (STORE/live-*.json, then catalog.jsonl, as wirevault's readers do:
      files by final name, catalogued ones from the catalog) every 5 ms,
      another runs `wirevault query STORE --count` back to back; each keeps
      (time, count) whenever the count moves. Writes both to OUT.json;
      touches READY_FILE once both loops run.

  queryable.py report STORE WIREVAULT OUT.json
      Reads every stored frame's capture time (`wirevault query STORE -w -`,
      nanosecond pcap in time order: the one stream's order), and for each
      frame i the first poll whose count exceeds i. Prints, for each of the
      two ways: frames, p50, p99 and max of (queryable time - capture time)
      in ms, and how many frames never became queryable while polled.

Both use CLOCK_REALTIME (time.time_ns()), the clock of the frames' stamps.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import threading
import time


def on_disk(store):
    """Packets a reader finds now: live files first, then the catalog."""
    live = []
    for p in sorted(glob.glob(os.path.join(store, "live-*.json"))):
        try:
            with open(p) as f:
                live.extend(json.load(f).get("files", []))
        except (OSError, ValueError):
            pass
    cat = {}
    try:
        with open(os.path.join(store, "catalog.jsonl")) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                cat[e["file"]] = e["packets"]
    except OSError:
        pass
    n = sum(cat.values())
    for e in live:
        name = e["file"][: -len(".part")] if e["file"].endswith(".part") else e["file"]
        if name not in cat:
            n += e["packets"]
    return n


def poll(store, wv, out, ready, stop):
    published, queried = [], []
    started = [False, False]

    def by_files():
        last = -1
        while not os.path.exists(stop):
            t = time.time_ns()
            n = on_disk(store)
            if n != last:
                published.append((t, n))
                last = n
            started[0] = True
            time.sleep(0.005)

    def by_query():
        last = -1
        while not os.path.exists(stop):
            t = time.time_ns()
            r = subprocess.run([wv, "query", store, "--count"], capture_output=True, text=True)
            started[1] = True
            try:
                n = int(r.stdout.strip())
            except ValueError:
                time.sleep(0.05)
                continue
            if n != last:
                queried.append((t, n))
                last = n

    threads = [threading.Thread(target=by_files), threading.Thread(target=by_query)]
    for th in threads:
        th.start()
    while not all(started):
        time.sleep(0.01)
    open(ready, "w").close()
    for th in threads:
        th.join()
    with open(out, "w") as f:
        json.dump({"published": published, "queried": queried}, f)


def stamps(store, wv):
    """Capture times of the stored frames, in time order."""
    p = subprocess.Popen([wv, "query", store, "-w", "-"], stdout=subprocess.PIPE)
    f = p.stdout
    head = f.read(24)
    if len(head) < 24:
        return []
    ts = []
    while True:
        h = f.read(16)
        if len(h) < 16:
            break
        sec, nsec, caplen, _ = struct.unpack("<IIII", h)
        ts.append(sec * 1_000_000_000 + nsec)
        f.read(caplen)
    p.wait()
    return ts


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def report(store, wv, out):
    with open(out) as f:
        polls = json.load(f)
    ts = stamps(store, wv)
    for way in ("published", "queried"):
        seq = polls[way]
        lat = []
        j = 0
        for i, t in enumerate(ts):
            while j < len(seq) and seq[j][1] <= i:
                j += 1
            if j == len(seq):
                break
            lat.append((seq[j][0] - t) / 1e6)
        missed = len(ts) - len(lat)
        lat.sort()
        print(way, len(ts), f"{pct(lat, 0.5):.0f}", f"{pct(lat, 0.99):.0f}", f"{lat[-1] if lat else float('nan'):.0f}", missed)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "poll":
        poll(*args)
    elif cmd == "report":
        report(*args)
    else:
        sys.exit(f"unknown command {cmd}")
