#!/usr/bin/env bash
# Storage benchmark: how close `wirevault record --synthetic` comes to the
# disk's O_DIRECT sequential write bandwidth (fio, same directory, same run),
# and how many 64-byte packets per second one worker stores.
#
#   bench/storage.sh [DIR] [GB]      (defaults: ./bench-store, 8 GB per run)
#
# Prints a Markdown table. Targets (issue "Record"): 1514-byte frames reach
# >= 95% of fio's bandwidth; 64-byte frames at 14.88 Mpps with zero loss.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-./bench-store}
GB=${2:-8}
BIN=${WIREVAULT:-${CARGO_TARGET_DIR:-target}/release/wirevault}
[ -n "${WIREVAULT:-}" ] || cargo build --release -q -p wirevault
command -v fio >/dev/null || { echo "fio is missing: run scripts/install-deps.sh" >&2; exit 1; }
mkdir -p "$DIR"
BYTES=$((GB * 1000 * 1000 * 1000))

stat_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"; }

# fio: sequential O_DIRECT writes, 4 MiB blocks, 8 in flight, io_uring, fsync at the end.
rm -rf "$DIR/fio"; mkdir -p "$DIR/fio"
fio_kbs=$(fio --name=seq --directory="$DIR/fio" --rw=write --bs=4M --size=$((GB * 1000))M --direct=1 \
  --ioengine=io_uring --iodepth=8 --numjobs=1 --end_fsync=1 --output-format=terse 2>/dev/null | awk -F';' '{print $48}')
rm -rf "$DIR/fio"
fio_mbs=$(python3 -c "print(round($fio_kbs * 1024 / 1e6))")

run() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  rm -rf "$DIR/wv"
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" record -o "$DIR/wv" --synthetic "$spec" -q "$@" 2>/dev/null || true
  t1=$(date +%s.%N)
  local s="$DIR/wv/stats.json"
  local el fb pk dr ar
  el=$(stat_field "$s" elapsed_s); fb=$(stat_field "$s" file_bytes); pk=$(stat_field "$s" written)
  dr=$(python3 -c "import json; d=json.load(open('$s'))['dropped']; print(sum(d.values()))")
  ar=$(stat_field "$s" received)
  python3 - "$name" "$el" "$fb" "$pk" "$dr" "$ar" "$fio_mbs" "$t0" "$t1" <<'PY'
import sys
name, el, fb, pk, dr, ar, fio, t0, t1 = sys.argv[1:]
el, fb, pk, dr, ar, fio = float(el), int(fb), int(pk), int(dr), int(ar), float(fio)
mbs = fb / el / 1e6
print(f"| {name} | {pk:,} | {fb/1e9:.2f} | {el:.2f} | {mbs:,.0f} | {100*mbs/fio:.1f}% | {pk/el/1e6:.2f} | {dr:,} |")
PY
  rm -rf "$DIR/wv"
}

# Like run, but the rate comes from the catalog over the files after the
# first four: whatever memory the pipeline faults in is in place by then, so
# this is the rate the store sustains once warm (compare with the short run).
steady() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  rm -rf "$DIR/wv"
  "$BIN" record -o "$DIR/wv" --synthetic "$spec" -q "$@" 2>/dev/null || true
  python3 - "$name" "$DIR/wv" "$fio_mbs" <<'PY'
import json, sys
name, store, fio = sys.argv[1], sys.argv[2], float(sys.argv[3])
e = sorted((json.loads(l) for l in open(store + "/catalog.jsonl")), key=lambda e: e["first_ns"])
s = json.load(open(store + "/stats.json"))
dr = sum(s["dropped"].values())
rest = e[4:]
pk = sum(x["packets"] for x in rest)
fb = sum(x["bytes"] for x in rest)
el = (rest[-1]["last_ns"] - rest[0]["first_ns"]) / 1e9
mbs = fb / el / 1e6
print(f"| {name} | {pk:,} | {fb/1e9:.2f} | {el:.2f} | {mbs:,.0f} | {100*mbs/fio:.1f}% | {pk/el/1e6:.2f} | {dr:,} |")
PY
  rm -rf "$DIR/wv"
}

echo "## Storage benchmark ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $GB GB per run, dir $DIR on $(findmnt -no FSTYPE -T "$DIR"))"
echo
echo "| run | packets | GB written | seconds | MB/s | of fio | Mpps | dropped |"
echo "|---|---|---|---|---|---|---|---|"
echo "| fio seq write O_DIRECT 4M qd8 | | $GB | | $fio_mbs | 100% | | |"
n1514=$((BYTES / 1530))
n64=$((BYTES / 80))
run "wirevault 1514 B, unpaced" "size=1514,count=$n1514"
run "wirevault 1514 B, unpaced, --no-index" "size=1514,count=$n1514" --no-index
run "wirevault 64 B, unpaced" "size=64,count=$n64"
run "wirevault 64 B, unpaced, --no-index" "size=64,count=$n64" --no-index
run "wirevault 64 B, paced 14.88 Mpps, 10 s" "size=64,rate=14.88M,duration=10s"
steady "wirevault 64 B, unpaced, $((4 * GB)) GB, files 5 and later (steady state)" "size=64,count=$((4 * n64))"
run "wirevault IMIX, unpaced" "size=imix,count=$((BYTES / 374))"
echo
echo "Unpaced runs never drop (the generator waits for the store), so their Mpps is the"
echo "store's capacity; the paced run holds line rate and counts any drop. 'seconds' runs from the"
echo "first packet until the last file is closed (fsync, rename), so the arena's drain is included."
echo "The steady-state row takes packets and time from the catalog (generator timestamps of the"
echo "first and last packet of files 5 to the end; unpaced, the generator runs at the store's pace)."
echo "Its first four files are left out: they include faulting in the pipeline's memory, so the"
echo "difference to the short 64 B run is what a cold start costs."
