#!/usr/bin/env bash
# How far out of time order fanout delivers one link's packets (issue 17, item 5). A veth
# pair in two namespaces; tcpreplay sends N UDP frames over FLOWS flows, each carrying its
# sequence number; `wirevault record --workers 2` stores them (PACKET_FANOUT_HASH: each flow
# to one of two rings). From the stored files (read through the catalog, in recording order),
# per stream and for the link as a whole (every packet in the order it was sent): how many
# packets carry an earlier timestamp than a packet before them, and by how much (ns, and the
# number of earlier packets with a later stamp): max over all, p99 over the inverted ones.
# With RPS=1 (default) the receiving veth spreads its packets over every CPU (rps_cpus), as a
# multi-queue NIC with RSS does: two CPUs then fill the rings concurrently. Query merges the
# streams by time, so an inversion *across* streams costs nothing; one *within* a stream is
# what a reader of a single stream's files sees (and what `wirevault timestamps` counts).
#
#   bench/ordering.sh [DIR]     (default ./bench-ordering; removed at the end unless KEEP=1)
#
# Environment: N (frames, default 500000), FLOWS (default 4096), SIZE (bytes per frame,
# default 128), PPS (tcpreplay rate, default 0 = --topspeed), RPS (default 1), WORKERS
# (default 2).
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
DIR=$(work_dir "${1:-./bench-ordering}")
N=${N:-500000}
FLOWS=${FLOWS:-4096}
SIZE=${SIZE:-128}
PPS=${PPS:-0}
RPS=${RPS:-1}
WORKERS=${WORKERS:-2}
need_root ordering.sh
need_tools tcpreplay python3 ip
wv_binary
HELPER=bench/lib/ordering.py
S=wvord-s-$$ R=wvord-r-$$
cleanup() {
  [ -n "${REC:-}" ] && kill "$REC" 2>/dev/null && wait "$REC" 2>/dev/null
  ip netns del "$S" 2>/dev/null || true
  ip netns del "$R" 2>/dev/null || true
  [ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"
}
trap cleanup EXIT

python3 "$HELPER" gen "$DIR/sent.pcap" "$N" "$FLOWS" "$SIZE"
netns_veth_pair "$S" "$R"
if [ "$RPS" = 1 ]; then
  ncpu=$(nproc)
  mask=$(printf '%x' $(( (1 << ncpu) - 1 )))
  ip netns exec "$R" sh -c "echo $mask > /sys/class/net/vethB/queues/rx-0/rps_cpus"
fi
rm -rf "$DIR/store"
ip netns exec "$R" "$BIN" record -i vethB -o "$DIR/store" --workers "$WORKERS" -q --no-tune-warnings \
  --timestamps sw 2>"$DIR/record.err" &
REC=$!
until [ -s "$DIR/store/stats.json" ]; do sleep 0.05; kill -0 "$REC" || { cat "$DIR/record.err" >&2; exit 1; }; done
rate=(--topspeed)
[ "$PPS" != 0 ] && rate=(--pps "$PPS")
t0=$(now)
ip netns exec "$S" tcpreplay -q -i vethA "${rate[@]}" "$DIR/sent.pcap" >/dev/null 2>&1
gen_s=$(since "$t0")
# Let the last ring blocks retire (40 ms timeout), then stop.
sleep 0.5
kill -TERM "$REC"
wait "$REC" || true
REC=
read -r received written dropped < <(stats "$DIR/store/stats.json" received written dropped)

echo "ordering.sh: $N frames of $SIZE B over $FLOWS flows, $WORKERS workers, RPS=$RPS, sent in ${gen_s}s, $(stamp), revision $(revision)"
echo "recorder: received $received, written $written, dropped $dropped"
echo
table_header "view" "packets" "inverted" "inverted %" "max ns" "p99 ns (inverted)" "max pkts" "p99 pkts (inverted)"
python3 "$HELPER" analyze "$DIR/store" "$N"
