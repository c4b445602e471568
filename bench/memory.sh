#!/usr/bin/env bash
# Memory benchmark: the recorder's peak resident memory against its arena
# (--buffer), for the index builders' worst case (64-byte frames, 1 GiB files)
# and IMIX, unpaced and paced at 10 GbE line rate from a cold start.
#
#   bench/memory.sh [DIR] [BUFFER]     (defaults: ./bench-mem, 1G)
#
# Environment: WIREVAULT (binary; default: build the release one), CASES
# (default "64u 64p imix"), SECONDS_PACED (default 40).
#
# Prints a Markdown table: peak VmRSS (sampled every 0.2 s), what is above the
# arena, packets written and dropped. Target (issue "Record"): resident memory
# near the configured buffer plus a small constant.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-./bench-mem}
BUFFER=${2:-1G}
BIN=${WIREVAULT:-${CARGO_TARGET_DIR:-target}/release/wirevault}
[ -n "${WIREVAULT:-}" ] || cargo build --release -q -p wirevault
CASES=${CASES:-"64u 64p imix"}
PACED=${SECONDS_PACED:-40}
mkdir -p "$DIR"

buffer_mib=$(python3 -c "
s='$BUFFER'.upper(); m={'K':1/1024,'M':1,'G':1024,'T':1024*1024}
print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s)//(1<<20))")

run() { # name args...
  local name=$1; shift
  local store="$DIR/store"
  rm -rf "$store"
  "$BIN" record -o "$store" --buffer "$BUFFER" --max-size 8G -q "$@" 2>"$DIR/err" &
  local pid=$! max=0 r
  while kill -0 "$pid" 2>/dev/null; do
    r=$(awk '/VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null || true)
    if [ -n "$r" ] && [ "$r" -gt "$max" ]; then max=$r; fi
    sleep 0.2
  done
  local rc=0
  wait "$pid" || rc=$?
  python3 - "$name" "$store/stats.json" "$max" "$buffer_mib" "$rc" <<'PY'
import json, sys
name, stats, mx, buf, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]) / 1024, int(sys.argv[4]), sys.argv[5]
d = json.load(open(stats))
dropped = sum(d["dropped"].values())
print(f"| {name} | {mx:,.0f} | {mx - buf:,.0f} | {d['written']:,} | {dropped:,} | {d['written'] / d['elapsed_s'] / 1e6:.2f} | {rc} |")
PY
  rm -rf "$store"
}

echo "## Memory benchmark ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, --buffer $BUFFER, 1 GiB files, $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo
echo "| run | peak RSS MiB | above the arena MiB | written | dropped | Mpps | exit |"
echo "|---|---|---|---|---|---|---|"
for c in $CASES; do
  case $c in
    64u) run "64 B, unpaced, 300M packets" --synthetic size=64,count=300000000 ;;
    64p) run "64 B, paced 14.88 Mpps, ${PACED} s" --synthetic "size=64,rate=14.88M,duration=${PACED}s" ;;
    imix) run "IMIX, unpaced, 60M packets, 65536 flows" --synthetic size=imix,count=60000000,flows=65536 ;;
    *) echo "unknown case $c (known: 64u 64p imix)" >&2; exit 2 ;;
  esac
done
echo
echo "Synthetic traffic (1,024 flows unless said), --max-size 8G so retention deletes files"
echo "during the longer runs. The unpaced runs never drop (the generator waits for the store);"
echo "the paced run starts cold and counts every drop. 'above the arena' = peak RSS - --buffer:"
echo "index builders, catalog, thread stacks, binary."
