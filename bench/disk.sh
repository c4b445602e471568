#!/usr/bin/env bash
# disk-bench against fio, and the paper's method on this machine's disk.
#
#   bench/disk.sh [DIR]          (default ./bench-disk)
#
# 1. Overhead: `wirevault disk-bench` and fio's O_DIRECT sequential write
#    (io_uring, 4 MiB blocks, 8 in flight, files preallocated and fsynced,
#    registered buffers in huge pages, as the writer's arena) on the same directory, alternating A B B A for ROUNDS
#    rounds of CMP_FILES files of CMP_SIZE each. Table: mean, 99% CI, p5/p95
#    of each round's throughput per tool, and the ratio of the means
#    (target: within 5%).
# 2. The paper's method: PAPER_FILES files of PAPER_SIZE (100 x 2G), or as
#    many as 80% of the free space allows (stated), with the buffer needed at
#    RATE (9.95 Gb/s: 1514-byte frames with pcap headers on 10 GbE).
#
# Sizes (environment): ROUNDS=4 CMP_FILES=4 CMP_SIZE=1G PAPER_FILES=100
# PAPER_SIZE=2G RATE=9.95gbps. A smoke run:
#   ROUNDS=2 CMP_FILES=2 CMP_SIZE=64M PAPER_FILES=4 PAPER_SIZE=64M bench/disk.sh
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
wv_binary
need_tools fio python3
DIR=$(work_dir "${1:-./bench-disk}")
ROUNDS=${ROUNDS:-4}
CMP_FILES=${CMP_FILES:-4}
CMP_SIZE=${CMP_SIZE:-1G}
PAPER_FILES=${PAPER_FILES:-100}
PAPER_SIZE=${PAPER_SIZE:-2G}
RATE=${RATE:-9.95gbps}
OUT="$DIR/.results"
mkdir -p "$OUT"
rm -f "$OUT"/*.json

size_bytes() { python3 -c "import sys; s=sys.argv[1]; print(int(s[:-1]) << {'K':10,'M':20,'G':30,'T':40}[s[-1]])" "$1"; }
CMP_BYTES=$(size_bytes "$CMP_SIZE")

ours() { # round
  "$BIN" disk-bench "$DIR" --files "$CMP_FILES" --file-size "$CMP_SIZE" --json >"$OUT/wv-$1.json"
}
# fio's buffers in huge pages (--mem=shmhuge) as the writer's arena: 24 more
# reserved 2 MiB pages while the script runs (root), the old count restored.
need_root disk.sh
HUGE_OLD=$(cat /proc/sys/vm/nr_hugepages)
trap 'echo "$HUGE_OLD" >/proc/sys/vm/nr_hugepages' EXIT
echo $((HUGE_OLD + 24)) >/proc/sys/vm/nr_hugepages
theirs() { # round
  fio --name=wv-fio --directory="$DIR" --rw=write --ioengine=io_uring --direct=1 --bs=4M --iodepth=8 \
    --fsync_on_close=1 --fallocate=posix --file_service_type=sequential --fixedbufs=1 --scramble_buffers=0 --mem=shmhuge \
    --nrfiles="$CMP_FILES" --filesize="$CMP_SIZE" --size=$((CMP_FILES * CMP_BYTES)) \
    --output-format=json >"$OUT/fio-$1.json"
  rm -f "$DIR"/wv-fio.*
}

for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 4 == 0 || r % 4 == 3)); then ours "$r"; theirs "$r"; else theirs "$r"; ours "$r"; fi
done

echo "## disk-bench vs fio ($(stamp), $(revision)): $ROUNDS rounds of $CMP_FILES x $CMP_SIZE, O_DIRECT io_uring 4M x 8, $DIR"
echo
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, math, sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])
# Two-sided 99% Student t critical values for small samples (df 1..30), normal beyond.
T = [63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977, 2.947,
     2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750]
def q(xs, p):
    xs = sorted(xs); h = (len(xs) - 1) * p; lo = math.floor(h); hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])
def row(name, xs):
    m = st.mean(xs)
    half = (T[len(xs) - 2] if len(xs) <= 31 else 2.576) * st.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    g = lambda v: f"{v / 1e9:.3f}"
    print(f"| {name} | {len(xs)} | {g(m)} | [{g(m - half)}, {g(m + half)}] | {g(q(xs, .05))} | {g(q(xs, .95))} |")
    return m
wv = [json.load(open(f"{out}/wv-{r}.json"))["mean_bytes_per_s"] for r in range(rounds)]
fio = [json.load(open(f"{out}/fio-{r}.json"))["jobs"][0]["write"]["bw_bytes"] for r in range(rounds)]
print("| tool | runs | mean GB/s | 99% CI | p5 | p95 |")
print("|---|---:|---:|---|---:|---:|")
a = row("wirevault disk-bench", wv)
b = row("fio", fio)
print()
print(f"disk-bench / fio: {a / b:.3f} (target: 0.95 .. 1.05)")
PY

# The paper's method, limited to 80% of the free space.
read -r free < <(python3 -c "import os,sys; s=os.statvfs(sys.argv[1]); print(s.f_bavail*s.f_frsize)" "$DIR")
PAPER_BYTES=$(size_bytes "$PAPER_SIZE")
fit=$((free * 8 / 10 / PAPER_BYTES))
files=$PAPER_FILES
note="the paper's $PAPER_FILES x $PAPER_SIZE"
if ((fit < files)); then
  files=$fit
  note="$fit x $PAPER_SIZE: as many as 80% of the $(calc "$free / 1e9" .1f) GB free allows (the paper: $PAPER_FILES)"
fi
echo
echo "## The paper's method on $DIR: $note, at $RATE"
echo
if ((files < 2)); then
  echo "not enough free space for two files of $PAPER_SIZE"
  exit 1
fi
"$BIN" disk-bench "$DIR" --files "$files" --file-size "$PAPER_SIZE" --rate "$RATE" --json --plot "$OUT/paper.svg" >"$OUT/paper.json"
python3 - "$OUT/paper.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = lambda v: "-" if v is None else f"{v / 1e9:.3f}"
r = d["rate"]
print("| files | mean GB/s | 99% CI | p5 | p95 | min | max | worst 1 s | worst 10 s | sustains | buffer | x1.5, record --buffer |")
print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---|")
lo, hi = d["ci99_bytes_per_s"]
buf = "-" if r["buffer_bytes"] is None else f"{r['buffer_bytes'] / 2**20:.0f} MiB"
print(f"| {d['files']} x {d['file_size'] >> 20} MiB | {g(d['mean_bytes_per_s'])} | [{g(lo)}, {g(hi)}] | {g(d['p5_bytes_per_s'])} "
      f"| {g(d['p95_bytes_per_s'])} | {g(d['min_bytes_per_s'])} | {g(d['max_bytes_per_s'])} | {g(d['worst_1s_bytes_per_s'])} "
      f"| {g(d['worst_10s_bytes_per_s'])} | {'yes' if r['sustained'] else 'NO'} | {buf} | {r['record_buffer_arg'] or '-'} |")
PY
echo
echo "Series plot: $OUT/paper.svg"
