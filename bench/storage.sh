#!/usr/bin/env bash
# Storage benchmark: how close `wirevault record --synthetic` comes to the
# disk's O_DIRECT sequential write bandwidth (fio, same directory, same run),
# and how many 64-byte packets per second one worker stores.
#
#   bench/storage.sh [DIR] [GB]      (defaults: ./bench-store, 8 GB per run)
#   ONLY=volumes VMB=500 bench/storage.sh DIR   (only the several-volumes rows)
#
# Several volumes (root): 1 worker on 1 volume, 2 workers on 1 volume and
# 2 workers on 2 volumes (`record --workers 2 --volume`), VMB MB per run
# (default GB*1000). The volumes are VOLS="DIR_A DIR_B" (directories on two
# real disks) or, by default, two loop-mounted ext4 images in DIR: both then
# sit on DIR's one disk, which bounds the scaling.
#
# Prints a Markdown table. Targets (issue "Record"): 1514-byte frames reach
# >= 95% of fio's bandwidth; 64-byte frames at 14.88 Mpps with zero loss.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
DIR=${1:-./bench-store}
GB=${2:-8}
wv_binary
need_tools fio python3
mkdir -p "$DIR"
BYTES=$((GB * 1000 * 1000 * 1000))
if [ "${ONLY:-all}" != volumes ]; then

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
fi

# --- Several volumes ------------------------------------------------------------------------------
[ "${ONLY:-all}" = all ] || [ "${ONLY:-}" = volumes ] || exit 0
VMB=${VMB:-$((GB * 1000))}
LOOPS=()
MNTS=()
vol_cleanup() {
  set +e
  local m l
  for m in "${MNTS[@]}"; do mountpoint -q "$m" && umount "$m"; rmdir "$m"; done
  for l in "${LOOPS[@]}"; do losetup -d "$l"; done
  rm -f "$DIR"/vol-?.img
}
if [ -n "${VOLS:-}" ]; then
  read -r VA VB <<<"$VOLS"
  where="directories $VA and $VB"
else
  need_root "storage.sh (several volumes: loop mounts)"
  need_tools losetup mkfs.ext4
  trap vol_cleanup EXIT
  DIR=$(realpath "$DIR")
  for v in a b; do
    fallocate -l "$((VMB * 2 + 300))M" "$DIR/vol-$v.img"
    l=$(losetup --find --show --direct-io=on "$DIR/vol-$v.img")
    LOOPS+=("$l")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$l"
    mkdir -p "$DIR/vol-$v"
    mount "$l" "$DIR/vol-$v"
    MNTS+=("$DIR/vol-$v")
  done
  VA=$DIR/vol-a VB=$DIR/vol-b
  where="two loop-mounted ext4 images on the one disk of $DIR ($(findmnt -no SOURCE -T "$DIR")): the scaling is bounded by that disk"
fi

vrun() { # name workers extra-args...
  local name=$1 workers=$2; shift 2
  local n=$((VMB * 1000 * 1000 / 1530 / workers))
  rm -rf "$VA/wv" "$VB/wv"
  "$BIN" record -o "$VA/wv" --synthetic "size=1514,count=$n" --workers "$workers" -q "$@" 2>/dev/null || true
  local el fb pk dr
  read -r el fb pk dr < <(stats "$VA/wv/stats.json" elapsed_s file_bytes written dropped)
  python3 - "$name" "$el" "$fb" "$pk" "$dr" "${BASE_MBS:-0}" "$DIR/vol-mbs" <<'PY'
import sys
name, el, fb, pk, dr, base, out = sys.argv[1:]
el, fb, pk, dr, base = float(el), int(fb), int(pk), int(dr), float(base)
mbs = fb / el / 1e6
rel = f"{mbs / base:.2f}x" if base else "1.00x"
print(f"| {name} | {pk:,} | {fb/1e9:.2f} | {el:.2f} | {mbs:,.0f} | {rel} | {dr:,} |")
open(out, "w").write(f"{mbs}\n")
PY
  rm -rf "$VA/wv" "$VB/wv"
}

echo
echo "## Several volumes ($(stamp), $(nproc) cores, $VMB MB per run, 1514-byte frames, $(revision))"
echo
echo "Volumes: $where."
echo
table_header run packets "GB written" seconds MB/s "vs 1 worker, 1 volume" dropped
vrun "1 worker, 1 volume" 1
BASE_MBS=$(cat "$DIR/vol-mbs")
vrun "2 workers, 1 volume" 2
vrun "2 workers, 2 volumes (--volume)" 2 --volume "$VB/wv"
rm -f "$DIR/vol-mbs"
echo
echo "Each run writes the same total; with 2 workers each generates half of it on its own stream"
echo "(stream i on volume i). 'seconds' runs from the first packet until the last file is closed."
