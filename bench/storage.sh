#!/usr/bin/env bash
# Storage benchmark: how close `wirevault record --synthetic` comes to the
# disk's O_DIRECT sequential write bandwidth (fio, same directory, same run),
# and how many 64-byte packets per second one worker stores.
#
#   bench/storage.sh [DIR] [GB]      (defaults: ./bench-store, 8 GB per run)
#
# Prints a Markdown table. Targets (issue "Record"): 1514-byte frames reach
# >= 95% of fio's bandwidth; 64-byte frames at 14.88 Mpps with zero loss.
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
DIR=${1:-./bench-store}
GB=${2:-8}
wv_binary
need_tools fio python3
mkdir -p "$DIR"
BYTES=$((GB * 1000 * 1000 * 1000))

# fio: sequential O_DIRECT writes, 4 MiB blocks, 8 in flight, io_uring, fsync at the end.
rm -rf "$DIR/fio"; mkdir -p "$DIR/fio"
fio_kbs=$(fio --name=seq --directory="$DIR/fio" --rw=write --bs=4M --size=$((GB * 1000))M --direct=1 \
  --ioengine=io_uring --iodepth=8 --numjobs=1 --end_fsync=1 --output-format=terse 2>/dev/null | awk -F';' '{print $48}')
rm -rf "$DIR/fio"
fio_mbs=$(calc "round($fio_kbs * 1024 / 1e6)")

run() { # name spec extra-args...
  local name=$1 spec=$2; shift 2
  rm -rf "$DIR/wv"
  "$BIN" record -o "$DIR/wv" --synthetic "$spec" -q "$@" 2>/dev/null || true
  local el fb pk dr
  read -r el fb pk dr < <(stats "$DIR/wv/stats.json" elapsed_s file_bytes written dropped)
  python3 - "$name" "$el" "$fb" "$pk" "$dr" "$fio_mbs" <<'PY'
import sys
name, el, fb, pk, dr, fio = sys.argv[1:]
el, fb, pk, dr, fio = float(el), int(fb), int(pk), int(dr), float(fio)
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
  python3 - "$name" "$DIR/wv" "$fio_mbs" "$(stats "$DIR/wv/stats.json" dropped)" <<'PY'
import json, sys
name, store, fio = sys.argv[1], sys.argv[2], float(sys.argv[3])
e = sorted((json.loads(l) for l in open(store + "/catalog.jsonl")), key=lambda e: e["first_ns"])
dr = int(sys.argv[4])
rest = e[4:]
pk = sum(x["packets"] for x in rest)
fb = sum(x["bytes"] for x in rest)
el = (rest[-1]["last_ns"] - rest[0]["first_ns"]) / 1e9
mbs = fb / el / 1e6
print(f"| {name} | {pk:,} | {fb/1e9:.2f} | {el:.2f} | {mbs:,.0f} | {100*mbs/fio:.1f}% | {pk/el/1e6:.2f} | {dr:,} |")
PY
  rm -rf "$DIR/wv"
}

echo "## Storage benchmark ($(stamp), $(nproc) cores, $GB GB per run, dir $DIR on $(findmnt -no FSTYPE -T "$DIR"), $(revision))"
echo
echo "Command: \`bench/storage.sh $DIR $GB\`"
echo
table_header run packets "GB written" seconds MB/s "of fio" Mpps dropped
table_row "fio seq write O_DIRECT 4M qd8" "" "$GB" "" "$fio_mbs" "100%" "" ""
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
