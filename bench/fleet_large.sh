#!/usr/bin/env bash
# One flow out of a fleet of large nodes (issue 46: "One flow from three nodes each holding
# >= 20 GB: < 1 s end to end, beside the same query on one node"; issue 47: "`--packets` for
# one flow over three nodes of >= 20 GB each in < 1 s").
#
#   bench/fleet_large.sh [--markdown] [GB] [WORKDIR]   (defaults: 20, ./bench-fleet-large.PID,
#                                                       removed afterwards)
#
# Environment: WIREVAULT (binary), NODES (default 3), ROUNDS (default 3).
# One store of GB gigabytes of IMIX pcap (65,536 flows, flow records on) is recorded; the other
# NODES-1 nodes are hard-linked copies of it (`cp -al`, the small files copied), so that NODES
# nodes of GB each fit on a disk that holds one: every node searches an index of GB of its own,
# and the answer holds the flow NODES times. The page cache is shared by the copies, so "cold"
# is cold for the first node that reads a file and warm for the others. Each node is served by
# `wirevault serve --token-file` on loopback. Per round, caches dropped before each cold run:
#   one node     query --store URL 'EXPR' -w -         (cold, then warm)
#   fleet        query --fleet F 'EXPR' -w -           (cold, then warm)
#   flows        flows --fleet F 'EXPR' -w -           (the flows' records, then their packets;
#                                                       cold, then warm)
# EXPR is one UDP flow of the generator (bench/query.sh's). The script exits 1 if the fleet's or
# `flows --packets`' answer is not NODES times one node's.
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
need_tools curl python3
wv_binary
GB=${1:-20}
NODES=${NODES:-3}
ROUNDS=${ROUNDS:-3}
DIR=$(work_dir "${2:-./bench-fleet-large.$$}")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
log() { echo "[fleet-large] $*" >&2; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

N=$((GB * 1000 * 1000 * 1000 / 374)) # IMIX records average 374 bytes on disk (358 + 16)
EXPR="host 10.0.1.44 and udp port 1324"
log "recording $GB GB ($N IMIX frames, flow records on)"
"$BIN" record -o "$DIR/node1" -q --log-level warn --flows --synthetic "size=imix,count=$N,flows=65536"
for i in $(seq 2 "$NODES"); do
  cp -al "$DIR/node1" "$DIR/node$i"
  # Only the pcap, index and flow files are shared; whatever a server might write is its own.
  find "$DIR/node$i" -type f -size -1M -print0 | while IFS= read -r -d '' f; do cp --remove-destination "$DIR/node1/${f#"$DIR/node$i/"}" "$f"; done
done
PCAP_BYTES=$(find "$DIR/node1" -name '*.pcap' -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')

echo "bench:fleet-large-token-0123456789" >"$DIR/tokens"
echo "fleet-large-token-0123456789" >"$DIR/token"
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

# Runs "$@" with its stdout counted; prints seconds and bytes.
timed() {
  local t0 n
  t0=$(now)
  n=$("$@" | wc -c)
  echo "$(since "$t0") $n"
}
one() { "$BIN" query --store "${URLS[0]}" --token-file "$DIR/token" -w - "$EXPR"; }
fleet() { "$BIN" query --fleet "$FLEET" -w - "$EXPR"; }
flows_list() { "$BIN" flows --fleet "$FLEET" --csv "$EXPR"; }
flows_packets() { "$BIN" flows --fleet "$FLEET" -w - "$EXPR"; }
ONE_N=$("$BIN" query "$DIR/node1" --count "$EXPR")
log "$NODES nodes of $(calc "$PCAP_BYTES / 1e9" .1f) GB; the flow has $ONE_N packets on each"

ROWS="$DIR/rows"
: >"$ROWS"
status=0
for r in $(seq "$ROUNDS"); do
  drop_caches; read -r oc ob < <(timed one)
  read -r ow _ < <(timed one)
  drop_caches; read -r fc fb < <(timed fleet)
  read -r fw _ < <(timed fleet)
  drop_caches; read -r lc _ < <(timed flows_list)
  read -r lw _ < <(timed flows_list)
  drop_caches; read -r pc pb < <(timed flows_packets)
  read -r pw _ < <(timed flows_packets)
  # pcap: one 24-byte header in each answer; NODES copies of the flow's records in the fleet's.
  want=$((24 + NODES * (ob - 24)))
  if [ "$fb" != "$want" ] || [ "$pb" != "$want" ]; then
    log "round $r: the fleet answered $fb bytes and flows --packets $pb, NODES x one node is $want"
    status=1
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$oc" "$ow" "$fc" "$fw" "$lc" "$lw" "$pc" "$pw" >>"$ROWS"
  log "round $r: one node ${oc}s cold ${ow}s warm; fleet ${fc}/${fw}s; flows ${lc}/${lw}s; flows --packets ${pc}/${pw}s"
done

echo "fleet_large.sh: $NODES nodes of $(calc "$PCAP_BYTES / 1e9" .1f) GB of IMIX pcap each (one store and $((NODES - 1)) hard-linked copies, served on loopback with tokens), one UDP flow of $ONE_N packets a node (\`$EXPR\`); $ROUNDS rounds, caches dropped before each cold run; $(nproc) CPUs, $(stamp), revision $(revision)"
echo
table_header "round" "one node, cold s" "one node, warm s" "fleet query, cold s" "fleet query, warm s" "flows --fleet, cold s" "flows --fleet, warm s" "flows --packets, cold s" "flows --packets, warm s"
while IFS=$'\t' read -r r a b c d e f g h; do
  table_row "$r" "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h"
done <"$ROWS"
exit "$status"
