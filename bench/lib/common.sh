# shellcheck shell=bash
# Shared by the bench scripts: `source "$(dirname "$0")/lib/common.sh"` at the
# top of each. It moves to the repository's root, so every path a script
# prints or takes is relative to the repository.
#
# What it provides:
#   wv_binary                 sets BIN: $WIREVAULT if given, else the release build
#                             (built first when cargo is there)
#   need_tools TOOL...        exits with a sentence naming the first missing tool
#   have TOOL                 true if TOOL is installed
#   need_root NAME            exits unless running as root
#   work_dir DIR              creates DIR (given by the user or ./bench-*) and prints its
#                             absolute path; scratch files go there, never in /tmp
#   stats FILE KEY[=DEFAULT]...
#                             fields of a stats.json, space-separated; a dotted KEY walks
#                             objects; an object (e.g. "dropped") prints the sum of its
#                             values; a missing or null field prints DEFAULT (or "-")
#   now                       wall clock in seconds with nanoseconds
#   since T0                  seconds since T0 (from `now`), 3 decimals
#   time_cmd CMD...           runs CMD (output discarded, failure ignored), prints its seconds
#   best_of N CMD...          the least of N time_cmd runs
#   calc EXPR [FORMAT]        evaluates a Python arithmetic expression, formatted (e.g. .2f)
#   rss_kib PID               resident memory of PID in KiB (empty if it is gone)
#   time_rss OUT CMD...       runs CMD (standard output into OUT, failure exits), prints its
#                             seconds and its peak resident memory in KiB (getrusage)
#   stamp                     UTC time for table titles
#   revision                  short git revision of the tree (or ?)
#   table_header COL...       a Markdown table's header and separator lines
#   table_row CELL...         one Markdown table row
#   netns_veth_pair S R       namespaces S and R joined by vethA (in S) / vethB (in R),
#                             MTU 1500, IPv6 off, links up
#   markdown_mode "$@"        called by each script right after sourcing this file: with
#                             --markdown as the first argument it runs the script without it,
#                             shows its output and, if the run succeeded, writes that output
#                             as the script's own section of bench/RESULTS.md (another file:
#                             RESULTS_MD=PATH, relative to the repository); lib/results.py

set -euo pipefail
# The script that sourced this file, for markdown_mode to run again.
BENCH_SCRIPT=$(realpath "$0")
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BENCH_ROOT=$PWD
export BENCH_ROOT

wv_binary() {
  if [ -n "${WIREVAULT:-}" ]; then
    BIN=$WIREVAULT
  else
    if command -v cargo >/dev/null; then
      echo "building wirevault (release) ..." >&2
      cargo build --release -q -p wirevault
    fi
    BIN=${CARGO_TARGET_DIR:-target}/release/wirevault
  fi
  [ -x "$BIN" ] || { echo "no wirevault binary at $BIN: build it (cargo build --release -p wirevault) or set WIREVAULT" >&2; exit 1; }
  BIN=$(realpath "$BIN")
}

have() { command -v "$1" >/dev/null; }

need_tools() {
  local t
  for t in "$@"; do
    have "$t" || { echo "$t is missing: run scripts/install-deps.sh" >&2; exit 1; }
  done
}

need_root() {
  [ "$(id -u)" = 0 ] || { echo "$1 needs root (network namespaces, AF_PACKET)" >&2; exit 1; }
}

work_dir() {
  mkdir -p "$1"
  realpath "$1"
}

stats() {
  python3 - "$@" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    d = {}
out = []
for arg in sys.argv[2:]:
    key, _, default = arg.partition("=")
    v = d
    for k in key.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    if isinstance(v, dict):
        v = sum(v.values())
    out.append(default or "-" if v is None else str(v))
print(" ".join(out))
PY
}

now() { date +%s.%N; }

since() { calc "$(now) - $1" .3f; }

time_cmd() {
  local s
  s=$(now)
  "$@" >/dev/null 2>&1 || true
  since "$s"
}

best_of() {
  local n=$1 b="" x
  shift
  for _ in $(seq "$n"); do
    x=$(time_cmd "$@")
    b=$(calc "min($x, ${b:-1e9})")
  done
  echo "$b"
}

calc() { python3 -c "print(format($1, '${2:-}'))"; }

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }

time_rss() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
with open(sys.argv[1], "wb") as out:
    subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL, check=True)
print(f"{time.time() - t:.3f}", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}

stamp() { date -u +%Y-%m-%dT%H:%MZ; }

revision() { git rev-parse --short HEAD 2>/dev/null || echo '?'; }

table_header() {
  table_row "$@"
  local sep="|" _c
  for _c in "$@"; do sep="$sep---|"; done
  echo "$sep"
}

table_row() {
  local line="|" c
  for c in "$@"; do line="$line $c |"; done
  echo "$line"
}

netns_veth_pair() {
  local s=$1 r=$2 n
  ip netns add "$s"
  ip netns add "$r"
  for n in "$s" "$r"; do
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip netns exec "$n" ip link set lo up
  done
  ip link add vethA netns "$s" mtu 1500 type veth peer name vethB netns "$r" mtu 1500
  ip netns exec "$s" ip link set vethA up
  ip netns exec "$r" ip link set vethB up
}

markdown_mode() {
  [ "${1:-}" = --markdown ] || return 0
  shift
  local out rc=0 results=${RESULTS_MD:-bench/RESULTS.md}
  # The run's output goes to the terminal as it comes (fd 3) and is kept for the section.
  exec 3>&1
  out=$(bash "$BENCH_SCRIPT" "$@" | tee /dev/fd/3) || rc=$?
  exec 3>&-
  if [ "$rc" != 0 ]; then
    echo "bench/$(basename "$BENCH_SCRIPT") exited with $rc: $results left as it was" >&2
    exit "$rc"
  fi
  printf '%s\n' "$out" | python3 bench/lib/results.py "$results" "$BENCH_SCRIPT" "$(stamp)" "$(revision)" "$@"
  exit 0
}
