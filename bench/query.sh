#!/usr/bin/env bash
# Query benchmark: one flow out of a store of GB gigabytes (default 20),
# wirevault query vs tcpdump -r (and tshark -r) over the same files with the
# same filter; plus the index size of that store.
#
#   bench/query.sh [GB] [DIR]            (defaults: 20, ./bench-query)
#
# Target (issue "Index"): >= 100x faster than tcpdump, under one second.
# Second table (issue 12): the whole store out through a pipe vs to a file,
# and a scan the index cannot narrow vs cat over the same files (warm cache);
# targets: pipe >= 90% of the -w speed, scan >= 90% of cat's.
# WV_SKIP_TSHARK=1 skips tshark.
# tshark is run on the first files only (about 2 GB) and its time is
# extrapolated to the whole store; the table says so.
set -euo pipefail
cd "$(dirname "$0")/.."
GB=${1:-20}
DIR=${2:-./bench-query}
BIN=${WIREVAULT:-${CARGO_TARGET_DIR:-target}/release/wirevault}
[ -n "${WIREVAULT:-}" ] || cargo build --release -q -p wirevault
rm -rf "$DIR"
N=$((GB * 1000 * 1000 * 1000 / 374))   # IMIX records average 374 bytes on disk (358 + 16)
"$BIN" record -o "$DIR" --synthetic "size=imix,count=$N,flows=65536" -q 2>/dev/null
# Flow 300 of the generator: 10.0.1.44:1324 -> 10.200.91.137:5012 (UDP).
EXPR="host 10.0.1.44 and udp port 1324"
FILES=$(find "$DIR" -name '*.pcap' | sort)
NFILES=$(echo "$FILES" | wc -l)
BYTES=$(cat $(find "$DIR" -name '*.pcap') | wc -c)
IDX=$(find "$DIR" -name '*.idx' -printf '%s\n' | awk '{s+=$1} END {print s}')
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true

t() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1 || true; e=$(date +%s.%N); python3 -c "print(f'{$e - $s:.3f}')"; }
wv_cold=$(t "$BIN" query "$DIR" -w /tmp/wvq.pcap "$EXPR")
wv_warm=$(t "$BIN" query "$DIR" -w /tmp/wvq.pcap "$EXPR")
wv_n=$("$BIN" query "$DIR" --count "$EXPR")
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
td_s=$(date +%s.%N); td_n=0
for f in $FILES; do
  c=$(tcpdump -nr "$f" "$EXPR" 2>/dev/null | wc -l); td_n=$((td_n + c))
done
td=$(python3 -c "import time; print(f'{time.time() - $td_s:.3f}')")
# Output speed, warm cache: best of 3 runs each.
best() { local b=; for _ in 1 2 3; do local x; x=$(t "$@"); b=$(python3 -c "print(min(float('$x'), float('${b:-1e9}')))"); done; echo "$b"; }
pipe_q() { "$BIN" query "$DIR" "$@" | cat > /dev/null; }
cat $FILES > /dev/null
cat_s=$(best cat $FILES)
all_w=$(best "$BIN" query "$DIR" -w /dev/null)
all_p=$(best pipe_q)
scan_expr="greater 65535"   # matches nothing; the index cannot narrow it: every byte is read and filtered
scan=$(best "$BIN" query "$DIR" --count "$scan_expr")
td_w_s=$(date +%s.%N)
for f in $FILES; do tcpdump -r "$f" -w - 2>/dev/null | cat > /dev/null; done
td_w=$(python3 -c "import time; print(f'{time.time() - $td_w_s:.3f}')")
gbs() { python3 -c "print(f'{$BYTES/1e9/$1:.2f}')"; }
pct() { python3 -c "print(f'{100*$2/$1:.0f}%')"; }

TS_FILES=$(echo "$FILES" | head -n 2)
TS_BYTES=$(cat $TS_FILES | wc -c)
ts_s=$(date +%s.%N)
[ -n "${WV_SKIP_TSHARK:-}" ] && TS_FILES=""
for f in $TS_FILES; do tshark -r "$f" -Y "ip.addr==10.0.1.44 && udp.port==1324" > /dev/null 2>&1 || true; done
ts_part=$(python3 -c "import time; print(f'{time.time() - $ts_s:.3f}')")
ts=$(python3 -c "print(f'{$ts_part * $BYTES / $TS_BYTES:.1f}')")

echo "## Query benchmark ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
echo
echo "Store: $NFILES files, $(python3 -c "print(f'{$BYTES/1e9:.1f}')") GB of IMIX pcap (65536 flows), index $(python3 -c "print(f'{$IDX/1e6:.1f} MB = {100*$IDX/$BYTES:.2f}%')") of the pcap bytes."
echo "Filter: \`$EXPR\` (one UDP flow)."
echo
echo "| tool | seconds | packets | speed-up of wirevault |"
echo "|---|---|---|---|"
echo "| wirevault query (cold cache) | $wv_cold | $wv_n | |"
echo "| wirevault query (warm) | $wv_warm | $wv_n | |"
echo "| tcpdump -r, every file (cold cache) | $td | $td_n | $(python3 -c "print(f'{$td/$wv_cold:.0f}x (cold), {$td/$wv_warm:.0f}x (warm)')") |"
echo "| tshark -r -Y, extrapolated from $(python3 -c "print(f'{$TS_BYTES/1e9:.1f}')") GB ($ts_part s) | ~$ts | | $(python3 -c "print(f'{$ts/$wv_cold:.0f}x')") |"
[ "$wv_n" = "$td_n" ] && echo && echo "wirevault and tcpdump select the same $wv_n packets." || echo "MISMATCH: wirevault $wv_n, tcpdump $td_n"
echo
echo "Whole store out (every packet), warm cache, best of 3:"
echo
echo "| what | seconds | GB/s | vs |"
echo "|---|---|---|---|"
echo "| cat of the files > /dev/null | $cat_s | $(gbs $cat_s) | |"
echo "| wirevault query -w /dev/null | $all_w | $(gbs $all_w) | |"
echo "| wirevault query \| cat > /dev/null | $all_p | $(gbs $all_p) | $(pct $all_p $all_w) of -w speed |"
echo "| wirevault query --count '$scan_expr' (scan, nothing matches) | $scan | $(gbs $scan) | $(pct $scan $cat_s) of cat speed |"
echo "| tcpdump -r FILE -w - \| cat, every file (once) | $td_w | $(gbs $td_w) | |"
rm -rf "$DIR" /tmp/wvq.pcap
