#!/usr/bin/env bash
# Soak benchmark: a long recording with rotation and retention. Samples the
# recorder's resident memory, open file descriptors, store usage and
# counters every INTERVAL seconds and prints a table; at the end checks that
# memory stayed flat, descriptors did not grow, nothing was dropped without
# a cause, and every file in the store is valid.
#
#   bench/soak.sh [MINUTES] [DIR]        (defaults: 30, ./bench-soak; removed at the end)
#
# Traffic: the synthetic source, IMIX, 200k packets/s (~0.77 Gb/s),
# 65536 flows; 256 MiB files, retention at 4 GiB, 256 MiB arena.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
MIN=${1:-30}
DIR=${2:-./bench-soak}
INTERVAL=${INTERVAL:-60}
wv_binary
need_tools capinfos python3
rm -rf "$DIR"
work_dir "$DIR" >/dev/null
STORE=$DIR/store
ERR=$DIR/stderr
CMD=("$BIN" record -o "$STORE" --synthetic "size=imix,rate=200k,flows=65536,duration=${MIN}m" --buffer 256M --file-size 256M --max-size 4G -q)
echo "## Soak: ${MIN} min ($(stamp), $(revision))"
echo
echo "Command: \`INTERVAL=$INTERVAL bench/soak.sh $MIN $DIR\`, which runs \`wirevault ${CMD[*]:1}\`"
echo
"${CMD[@]}" 2> "$ERR" &
PID=$!
sleep 2
table_header minute "RSS MiB" fds threads "store MiB" files written dropped "balanced (known at exit)"
first_rss=""; max_rss=0; first_fd=""; max_fd=0
t0=$(date +%s)
while kill -0 $PID 2>/dev/null; do
  rss=$(rss_kib $PID); rss=$(( ${rss:-0} / 1024 ))
  fds=$(find /proc/$PID/fd -mindepth 1 2>/dev/null | wc -l || true)
  thr=$(find /proc/$PID/task -mindepth 1 -maxdepth 1 2>/dev/null | wc -l || true)
  [ "$rss" -gt 0 ] || break
  used=$(du -sm "$STORE" 2>/dev/null | cut -f1 || true)
  files=$(find "$STORE" -name "*.pcap" | wc -l)
  read -r wr dr bal < <(stats "$STORE/stats.json" written=0 dropped=0 balanced)
  minute=$(( ($(date +%s) - t0) / 60 ))
  table_row "$minute" "$rss" "$fds" "$thr" "$used" "$files" "$wr" "$dr" "$bal"
  [ -n "$first_rss" ] || { first_rss=$rss; first_fd=$fds; }
  [ "$rss" -gt "$max_rss" ] && max_rss=$rss
  [ "$fds" -gt "$max_fd" ] && max_fd=$fds
  sleep "$INTERVAL"
done
wait $PID; rc=$?
echo
echo "Exit code $rc. Summary: $(grep 'packets received' "$ERR" || true)"
grep -E "retention" "$ERR" || true
echo "RSS first/max: ${first_rss}/${max_rss} MiB; fds first/max: ${first_fd}/${max_fd}."
bad=0
for f in "$STORE"/stream-000/*.pcap; do
  capinfos -c "$f" >/dev/null 2>&1 || { echo "invalid: $f"; bad=$((bad+1)); }
done
echo "Files in the store: $(find "$STORE" -name '*.pcap' | wc -l), invalid: $bad, store $(du -sm "$STORE" | cut -f1) MiB (budget 4096)."
rm -rf "$DIR"
