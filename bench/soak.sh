#!/usr/bin/env bash
# Soak benchmark: a long recording with rotation and retention. Samples the
# recorder's resident memory, open file descriptors, store usage and
# counters every INTERVAL seconds and prints a table; at the end checks that
# memory stayed flat, descriptors did not grow, nothing was dropped without
# a cause, and every file in the store is valid.
#
#   bench/soak.sh [MINUTES] [DIR]        (defaults: 30, ./soak-store)
#
# Traffic: the synthetic source, IMIX, 200k packets/s (~0.77 Gb/s),
# 65536 flows; 256 MiB files, retention at 4 GiB, 256 MiB arena.
set -euo pipefail
cd "$(dirname "$0")/.."
MIN=${1:-30}
DIR=${2:-./soak-store}
INTERVAL=${INTERVAL:-60}
BIN=${WIREVAULT:-${CARGO_TARGET_DIR:-target}/release/wirevault}
[ -n "${WIREVAULT:-}" ] || cargo build --release -q -p wirevault
rm -rf "$DIR"
CMD=("$BIN" record -o "$DIR" --synthetic "size=imix,rate=200k,flows=65536,duration=${MIN}m" --buffer 256M --file-size 256M --max-size 4G -q)
echo "## Soak: ${MIN} min ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "Command: \`${CMD[*]}\`"
echo
"${CMD[@]}" 2> "$DIR.stderr" &
PID=$!
sleep 2
echo "| minute | RSS MiB | fds | threads | store MiB | files | written | dropped | balanced (known at exit) |"
echo "|---|---|---|---|---|---|---|---|---|"
first_rss=""; max_rss=0; first_fd=""; max_fd=0
t0=$(date +%s)
while kill -0 $PID 2>/dev/null; do
  rss=$(awk '/VmRSS/ {print int($2/1024)}' /proc/$PID/status 2>/dev/null || echo 0)
  fds=$(find /proc/$PID/fd -mindepth 1 2>/dev/null | wc -l || true)
  thr=$(find /proc/$PID/task -mindepth 1 -maxdepth 1 2>/dev/null | wc -l || true)
  [ "$rss" -gt 0 ] || break
  used=$(du -sm "$DIR" 2>/dev/null | cut -f1 || true)
  files=$(find "$DIR" -name "*.pcap" | wc -l)
  read -r wr dr bal < <(python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); b=d.get("balanced"); print(d.get("written",0), sum(d.get("dropped",{}).values()), "-" if b is None else b)' "$DIR/stats.json" 2>/dev/null || echo "0 0 ?")
  now=$(( ($(date +%s) - t0) / 60 ))
  echo "| $now | $rss | $fds | $thr | $used | $files | $wr | $dr | $bal |"
  [ -n "$first_rss" ] || { first_rss=$rss; first_fd=$fds; }
  [ "$rss" -gt "$max_rss" ] && max_rss=$rss
  [ "$fds" -gt "$max_fd" ] && max_fd=$fds
  sleep "$INTERVAL"
done
wait $PID; rc=$?
echo
echo "Exit code $rc. Summary: $(grep 'packets received' "$DIR.stderr" || true)"
grep -E "retention" "$DIR.stderr" || true
echo "RSS first/max: ${first_rss}/${max_rss} MiB; fds first/max: ${first_fd}/${max_fd}."
bad=0
for f in "$DIR"/stream-000/*.pcap; do
  capinfos -c "$f" >/dev/null 2>&1 || { echo "invalid: $f"; bad=$((bad+1)); }
done
echo "Files in the store: $(find "$DIR" -name '*.pcap' | wc -l), invalid: $bad, store $(du -sm "$DIR" | cut -f1) MiB (budget 4096)."
rm -rf "$DIR" "$DIR.stderr"
