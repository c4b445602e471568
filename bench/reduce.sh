#!/usr/bin/env bash
# Cost of --dedup and --flow-cutoff per packet (issue 15: <= 20 ns each), measured with the
# synthetic source: the same `record --synthetic` run without and with each option, the CPU
# time of the capture thread (stats.json capture_cpu_s: generation, the options, the copy into
# the arena; not the writer, not start-up) divided by the packets; the options' cost is the
# difference to the run without. Frames are all distinct
# (nothing deduplicated) and the cutoff is larger than any flow (nothing cut), so every
# packet pays the full lookup and nothing is saved on the write side.
#
#   bench/reduce.sh [DIR]        (default ./bench-reduce; the stores go there and are removed)
#
# Environment: N (packets per run, default 20M), ROUNDS (default 3; the table shows the
# fastest of each), SIZES (default "64 imix 1514"), FLOWS (default 65536), PIPELINE (default 1:
# a second table from `cargo bench -p wv-capture --bench pipeline`, the same measurement
# without the disk, the index and their threads: the capture worker storing into an arena that
# one thread only releases; steadier on a shared machine, where the end-to-end runs vary by
# tens of percent; 0 skips it).
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
DIR=${1:-./bench-reduce}
N=${N:-20000000}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-64 imix 1514}
FLOWS=${FLOWS:-65536}
wv_binary
need_tools python3
mkdir -p "$DIR"

cpu_of() { # spec args... -> CPU seconds of one run
  local spec=$1; shift
  rm -rf "$DIR/wv"
  "$BIN" record -o "$DIR/wv" --synthetic "$spec" -q "$@" >/dev/null 2>&1 || true
  local written cpu
  read -r written cpu < <(stats "$DIR/wv/stats.json" written capture_cpu_s)
  [ "$written" = "$N" ] || { echo "run $spec $* stored $written of $N packets" >&2; exit 1; }
  rm -rf "$DIR/wv"
  echo "$cpu"
}

echo "reduce.sh: $N packets per run, best of $ROUNDS, $FLOWS flows, $(stamp), revision $(revision)"
echo
table_header "frames" "plain ns/pkt" "--dedup 1ms ns/pkt" "dedup cost" "--flow-cutoff 1G ns/pkt" "cutoff cost" "both ns/pkt" "both cost"
for size in $SIZES; do
  spec="size=$size,count=$N,flows=$FLOWS"
  declare -A best=()
  for _ in $(seq "$ROUNDS"); do
    for cfg in plain dedup cutoff both; do
      case $cfg in
        plain) args=() ;;
        dedup) args=(--dedup 1ms) ;;
        cutoff) args=(--flow-cutoff 1G) ;;
        both) args=(--dedup 1ms --flow-cutoff 1G) ;;
      esac
      c=$(cpu_of "$spec" "${args[@]}")
      best[$cfg]=$(calc "min($c, ${best[$cfg]:-1e9})")
    done
  done
  ns() { calc "${best[$1]} * 1e9 / $N" .1f; }
  d() { calc "(${best[$1]} - ${best[plain]}) * 1e9 / $N" .1f; }
  table_row "$size" "$(ns plain)" "$(ns dedup)" "$(d dedup)" "$(ns cutoff)" "$(d cutoff)" "$(ns both)" "$(d both)"
  unset best
done
rm -rf "$DIR"
if [ "${PIPELINE:-1}" = 1 ]; then
  echo
  echo "Without the disk (crates/capture/benches/pipeline.rs, the current tree):"
  # shellcheck disable=SC2086
  (cd "$(dirname "$0")/.." && cargo bench -q -p wv-capture --bench pipeline -- "$N" "$ROUNDS" "$FLOWS" $SIZES) |
    tail -n +3
fi
