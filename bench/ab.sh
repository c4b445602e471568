#!/usr/bin/env bash
# A/B alternation: the same `wirevault record` run with two builds, A B A B ...,
# so that the noise of a shared machine falls on both alike. Prints one row
# per run (MB/s and Mpps from the run's stats.json, as storage.sh computes
# them) and the median of each build.
#
#   bench/ab.sh A_BIN B_BIN [ROUNDS] [DIR] -- RECORD_ARGS...
#       (defaults: 3 rounds, ./bench-ab; the store is DIR/store, removed after each run)
#
# Example (the IMIX alternation of bench/RESULTS.md, Storage):
#   bench/ab.sh ./wv-old ./wv-new 3 -- --synthetic size=imix,count=21390374
# A_BIN and B_BIN are release binaries built at the two commits (e.g. with
# `git worktree add` and `cargo build --release -p wirevault` in each).
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
usage() { echo "usage: bench/ab.sh A_BIN B_BIN [ROUNDS] [DIR] -- RECORD_ARGS..." >&2; exit 2; }
[ $# -ge 3 ] || usage
A=$(realpath "$1"); B=$(realpath "$2"); shift 2
ROUNDS=3; DIR=./bench-ab
[ "${1:-}" != -- ] && { ROUNDS=$1; shift; }
[ "${1:-}" != -- ] && { DIR=$1; shift; }
[ "${1:-}" = -- ] || usage
shift
[ $# -gt 0 ] || usage
if [ ! -x "$A" ] || [ ! -x "$B" ]; then echo "A_BIN and B_BIN must be executables" >&2; exit 2; fi
need_tools python3
work_dir "$DIR" >/dev/null
RESULTS="$DIR/ab.tsv"
: >"$RESULTS"

echo "## A/B alternation ($(stamp), $(nproc) cores, $ROUNDS rounds)"
echo
echo "Command: \`bench/ab.sh A B $ROUNDS $DIR -- $*\` with A = $(basename "$A"), B = $(basename "$B")"
echo
table_header round build seconds MB/s Mpps dropped
for r in $(seq "$ROUNDS"); do
  for build in A B; do
    bin=$A; [ "$build" = B ] && bin=$B
    rm -rf "$DIR/store"
    "$bin" record -o "$DIR/store" "$@" -q 2>/dev/null || true
    read -r el fb pk dr < <(stats "$DIR/store/stats.json" elapsed_s file_bytes written dropped)
    mbs=$(calc "$fb / $el / 1e6" .0f)
    mpps=$(calc "$pk / $el / 1e6" .2f)
    table_row "$r" "$build" "$el" "$mbs" "$mpps" "$dr"
    printf '%s\t%s\t%s\n' "$build" "$mbs" "$mpps" >>"$RESULTS"
  done
done
rm -rf "$DIR/store"
echo
python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
for b in "AB":
    mbs = [float(r[1]) for r in rows if r[0] == b]
    mpps = [float(r[2]) for r in rows if r[0] == b]
    print(f"* {b}: median {statistics.median(mbs):,.0f} MB/s, {statistics.median(mpps):.2f} Mpps ({len(mbs)} runs)")
PY
rm -f "$RESULTS"
