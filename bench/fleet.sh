#!/usr/bin/env bash
# The fleet query (issue 46): one merged answer from several recorders, against the transport's
# ceiling and the fetch-all-then-mergecap way (PcapDB, OpenFPC).
#
#   bench/fleet.sh [--markdown] [WORKDIR]     (default ./bench-fleet.PID, removed afterwards)
#
# Environment: WIREVAULT (binary), NODES (default 3), COUNT (synthetic IMIX frames per node,
# default 1M: about 0.65 GB a node), ROUNDS (default 3), SCALE (node counts for the scaling
# table, default "1 2 4 8"; local stores).
# Each node is a store recorded from `--synthetic size=imix,flows=...` for the same seconds
# (so their packets interleave in time) and served by `wirevault serve --token-file` on
# loopback. Per round, in turn:
#   merged      wirevault query --fleet F -w - > /dev/null: its time, as curl's; the time to its
#               first byte and its peak RSS from a run into a pipe
#   curl        the nodes' /api/v1/query exports fetched concurrently by curl to /dev/null: the
#               transport's ceiling for the same bytes (no merge)
#   mergecap    the exports fetched concurrently to files, then mergecap -w /dev/null
#   one flow    query --fleet F 'host A and port P' (a flow's packets) against the same query
#               on one node's URL
# Memory flat in the answer's size: the merged query's peak RSS for a quarter of the time range
# against the whole of it. Then SCALE local stores (the first node's store given N times is not
# a fleet: N stores are recorded) for one-flow and all-packets times.
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
ROOT=$BENCH_ROOT
need_tools curl mergecap python3
wv_binary
NODES=${NODES:-3}
COUNT=${COUNT:-1000000}
ROUNDS=${ROUNDS:-3}
SCALE=${SCALE:-"1 2 4 8"}
DIR=$(work_dir "${1:-./bench-fleet.$$}")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
log() { echo "[fleet] $*" >&2; }

# N stores recorded at the same time, so that their packets interleave.
record_stores() { # prefix n
  local i pids=()
  for i in $(seq "$2"); do
    "$BIN" record -o "$DIR/$1$i" -q --log-level warn --synthetic "size=imix,count=$COUNT,flows=1000,rate=400k" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}

log "recording $NODES stores of $COUNT IMIX frames"
record_stores node "$NODES"
echo "bench:fleet-bench-token-0123456789" >"$DIR/tokens"
echo "fleet-bench-token-0123456789" >"$DIR/token"
chmod 600 "$DIR/tokens" "$DIR/token"
FLEET="$DIR/fleet.toml"
: >"$FLEET"
URLS=()
for i in $(seq "$NODES"); do
  "$BIN" serve "$DIR/node$i" --listen 127.0.0.1:0 --token-file "$DIR/tokens" 2>"$DIR/serve$i.err" &
  PIDS+=($!)
  for _ in $(seq 300); do grep -q 'api: serving' "$DIR/serve$i.err" && break; sleep 0.1; done
  url=$(sed -n 's/.*api: serving .* on \(http:\/\/[0-9.:]*\).*/\1/p' "$DIR/serve$i.err" | head -1)
  [ -n "$url" ] || { cat "$DIR/serve$i.err" >&2; exit 1; }
  URLS+=("$url")
  printf '[[node]]\nname = "node%s"\nurl = "%s"\ntoken_file = "token"\n\n' "$i" "$url" >>"$FLEET"
done
BYTES=$(for i in $(seq "$NODES"); do "$BIN" query "$DIR/node$i" -w - | wc -c; done | awk '{s += $1} END {print s}')
FLOW=$("$BIN" query "$DIR/node1" --limit 1 -w - | python3 -c '
import sys, struct
d = sys.stdin.buffer.read()[24 + 16:]
ip = d[14:34]
print("host %d.%d.%d.%d and port %d" % (*ip[12:16], struct.unpack("!H", d[34:36])[0]))')
log "$NODES nodes, $BYTES bytes in all; one flow: $FLOW"

# Runs "$@" and prints: seconds to the first byte of its stdout, to the last, the bytes, its peak RSS (KiB).
timed() {
  python3 - "$@" <<'PY'
import os, resource, subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
first, n = None, 0
while True:
    b = p.stdout.read1(1 << 20)
    if not b:
        break
    if first is None:
        first = time.monotonic() - t0
    n += len(b)
p.wait()
last = time.monotonic() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print("%.3f %.3f %d %d" % (first or last, last, n, rss))
PY
}
curl_all() { # out-dir or /dev/null
  local pids=() i=0
  for u in "${URLS[@]}"; do
    i=$((i + 1))
    local to=/dev/null
    [ "$1" != /dev/null ] && to="$1/n$i.pcap"
    curl -s -H "Authorization: Bearer fleet-bench-token-0123456789" "$u/api/v1/query" -o "$to" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}
ROWS="$DIR/rows"
: >"$ROWS"
for r in $(seq "$ROUNDS"); do
  # First byte, bytes and peak RSS through a pipe; the stream's time as curl's is taken,
  # written to /dev/null (a pipe's reader would cost the same two cores a copy curl is spared).
  read -r ttfb _ n rss < <(timed "$BIN" query --fleet "$FLEET" -w -)
  t0=$(now); "$BIN" query --fleet "$FLEET" -w - >/dev/null; ttlb=$(since "$t0")
  # One pcap header in the merged answer, one per node in theirs.
  [ "$n" = $((BYTES - 24 * (NODES - 1))) ] || log "round $r: the merged answer has $n bytes, the nodes $BYTES"
  t0=$(now); curl_all /dev/null; tc=$(since "$t0")
  mkdir -p "$DIR/fetch"; t0=$(now); curl_all "$DIR/fetch"; mergecap -w /dev/null "$DIR"/fetch/*.pcap; tm=$(since "$t0"); rm -rf "$DIR/fetch"
  read -r _ tf _ _ < <(timed "$BIN" query --fleet "$FLEET" -w - "$FLOW")
  read -r _ t1 _ _ < <(timed "$BIN" query --store "${URLS[0]}" --token-file "$DIR/token" -w - "$FLOW")
  # A quarter of the range: the merging process's memory should not grow with the answer.
  first=$("$BIN" query --fleet "$FLEET" --limit 1 -w - | python3 -c 'import sys,struct; d=sys.stdin.buffer.read(); s,f=struct.unpack("<II",d[24:32]); print("%d.%09d" % (s,f))')
  read -r _ _ nq rssq < <(timed "$BIN" query --fleet "$FLEET" --from "$first" --to "$(calc "$first + $COUNT / 400000 / 4" .3f)" -w -)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$ttfb" "$ttlb" "$tc" "$tm" "$tf" "$t1" "$rss" "$nq" "$rssq" >>"$ROWS"
  log "round $r: merged first byte ${ttfb}s, all ${ttlb}s (curl ${tc}s, fetch+mergecap ${tm}s); one flow ${tf}s (one node ${t1}s); RSS ${rss} KiB (${rssq} KiB for $nq bytes)"
done

echo "fleet.sh: $NODES recorders on loopback, $COUNT IMIX frames each ($BYTES bytes in all), served with tokens; $ROUNDS rounds; $(nproc) CPUs, $(stamp), revision $(revision)"
echo
table_header "round" "merged: first byte s" "merged to /dev/null s" "curl to /dev/null s" "merged / curl throughput" "fetch + mergecap s" "one flow, fleet s" "one flow, one node s" "merged RSS MiB (all)" "RSS MiB (a quarter)"
while IFS=$'\t' read -r r a b c m f o rss nq rssq; do
  table_row "$r" "$a" "$b" "$c" "$(calc "$c / $b" .2f)" "$m" "$f" "$o" "$(calc "$rss / 1024" .0f)" "$(calc "$rssq / 1024" .0f) ($(calc "$nq / 1e6" .0f) MB)"
done <"$ROWS"

# How the cost grows with nodes: N local stores.
echo
table_header "local stores" "all packets s" "one flow s"
for n in $SCALE; do
  rm -rf "$DIR"/scale*
  record_stores scale "$n"
  args=()
  for i in $(seq "$n"); do args+=(--store "$DIR/scale$i"); done
  read -r _ ta _ _ < <(timed "$BIN" query "${args[@]}" -w -)
  read -r _ tf _ _ < <(timed "$BIN" query "${args[@]}" -w - "$FLOW")
  table_row "$n" "$ta" "$tf"
done
