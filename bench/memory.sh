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
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
DIR=${1:-./bench-mem}
BUFFER=${2:-1G}
wv_binary
need_tools python3
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
    r=$(rss_kib "$pid")
    if [ -n "$r" ] && [ "$r" -gt "$max" ]; then max=$r; fi
    sleep 0.2
  done
  local rc=0
  wait "$pid" || rc=$?
  local written dropped elapsed
  read -r written dropped elapsed < <(stats "$store/stats.json" written dropped elapsed_s)
  python3 - "$name" "$max" "$buffer_mib" "$rc" "$written" "$dropped" "$elapsed" <<'PY'
import sys
name, mx, buf, rc = sys.argv[1], int(sys.argv[2]) / 1024, int(sys.argv[3]), sys.argv[4]
written, dropped, elapsed = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
print(f"| {name} | {mx:,.0f} | {mx - buf:,.0f} | {written:,} | {dropped:,} | {written / elapsed / 1e6:.2f} | {rc} |")
PY
  rm -rf "$store"
}

echo "## Memory benchmark ($(stamp), $(nproc) cores, --buffer $BUFFER, 1 GiB files, $(revision))"
echo
echo "Command: \`CASES=\"$CASES\" SECONDS_PACED=$PACED bench/memory.sh $DIR $BUFFER\`"
echo
table_header run "peak RSS MiB" "above the arena MiB" written dropped Mpps exit
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
