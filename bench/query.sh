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
# The store and the query's output file go under DIR (removed at the end).
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
GB=${1:-20}
DIR=${2:-./bench-query}
wv_binary
need_tools tcpdump python3
[ -n "${WV_SKIP_TSHARK:-}" ] || need_tools tshark
rm -rf "$DIR"
WORK=$(work_dir "$DIR")
STORE=$WORK/store
OUT=$WORK/query.pcap
N=$((GB * 1000 * 1000 * 1000 / 374))   # IMIX records average 374 bytes on disk (358 + 16)
"$BIN" record -o "$STORE" --synthetic "size=imix,count=$N,flows=65536" -q 2>/dev/null
# Flow 300 of the generator: 10.0.1.44:1324 -> 10.200.91.137:5012 (UDP).
EXPR="host 10.0.1.44 and udp port 1324"
mapfile -t FILES < <(find "$STORE" -name '*.pcap' | sort)
NFILES=${#FILES[@]}
BYTES=$(cat "${FILES[@]}" | wc -c)
IDX=$(find "$STORE" -name '*.idx' -printf '%s\n' | awk '{s+=$1} END {print s}')
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
drop_caches

wv_cold=$(time_cmd "$BIN" query "$STORE" -w "$OUT" "$EXPR")
wv_warm=$(time_cmd "$BIN" query "$STORE" -w "$OUT" "$EXPR")
wv_n=$("$BIN" query "$STORE" --count "$EXPR")
drop_caches
td_s=$(now); td_n=0
for f in "${FILES[@]}"; do
  c=$(tcpdump -nr "$f" "$EXPR" 2>/dev/null | wc -l); td_n=$((td_n + c))
done
td=$(since "$td_s")
# Output speed, warm cache: best of 3 runs each.
pipe_q() { "$BIN" query "$STORE" "$@" | cat > /dev/null; }
cat "${FILES[@]}" > /dev/null
cat_s=$(best_of 3 cat "${FILES[@]}")
all_w=$(best_of 3 "$BIN" query "$STORE" -w /dev/null)
all_p=$(best_of 3 pipe_q)
scan_expr="greater 65535"   # matches nothing; the index cannot narrow it: every byte is read and filtered
scan=$(best_of 3 "$BIN" query "$STORE" --count "$scan_expr")
td_w_s=$(now)
for f in "${FILES[@]}"; do tcpdump -r "$f" -w - 2>/dev/null | cat > /dev/null; done
td_w=$(since "$td_w_s")
gbs() { calc "$BYTES/1e9/$1" .2f; }
pct() { echo "$(calc "100*$2/$1" .0f)%"; }

TS_FILES=("${FILES[@]:0:2}")
TS_BYTES=$(cat "${TS_FILES[@]}" | wc -c)
ts_s=$(now)
[ -n "${WV_SKIP_TSHARK:-}" ] && TS_FILES=()
for f in "${TS_FILES[@]}"; do tshark -r "$f" -Y "ip.addr==10.0.1.44 && udp.port==1324" > /dev/null 2>&1 || true; done
ts_part=$(since "$ts_s")
ts=$(calc "$ts_part * $BYTES / $TS_BYTES" .1f)

echo "## Query benchmark ($(stamp), $(nproc) cores, $(revision))"
echo
echo "Command: \`bench/query.sh $GB $DIR\`${WV_SKIP_TSHARK:+ (WV_SKIP_TSHARK=1)}"
echo
echo "Store: $NFILES files, $(calc "$BYTES/1e9" .1f) GB of IMIX pcap (65536 flows), index $(calc "$IDX/1e6" .1f) MB = $(calc "100*$IDX/$BYTES" .2f)% of the pcap bytes."
echo "Filter: \`$EXPR\` (one UDP flow)."
echo
table_header tool seconds packets "speed-up of wirevault"
table_row "wirevault query (cold cache)" "$wv_cold" "$wv_n" ""
table_row "wirevault query (warm)" "$wv_warm" "$wv_n" ""
table_row "tcpdump -r, every file (cold cache)" "$td" "$td_n" "$(calc "$td/$wv_cold" .0f)x (cold), $(calc "$td/$wv_warm" .0f)x (warm)"
[ -n "${WV_SKIP_TSHARK:-}" ] || table_row "tshark -r -Y, extrapolated from $(calc "$TS_BYTES/1e9" .1f) GB ($ts_part s)" "~$ts" "" "$(calc "$ts/$wv_cold" .0f)x"
[ "$wv_n" = "$td_n" ] && echo && echo "wirevault and tcpdump select the same $wv_n packets." || echo "MISMATCH: wirevault $wv_n, tcpdump $td_n"
echo
echo "Whole store out (every packet), warm cache, best of 3:"
echo
table_header what seconds GB/s vs
table_row "cat of the files > /dev/null" "$cat_s" "$(gbs "$cat_s")" ""
table_row "wirevault query -w /dev/null" "$all_w" "$(gbs "$all_w")" ""
table_row "wirevault query \\| cat > /dev/null" "$all_p" "$(gbs "$all_p")" "$(pct "$all_p" "$all_w") of -w speed"
table_row "wirevault query --count '$scan_expr' (scan, nothing matches)" "$scan" "$(gbs "$scan")" "$(pct "$scan" "$cat_s") of cat speed"
table_row "tcpdump -r FILE -w - \\| cat, every file (once)" "$td_w" "$(gbs "$td_w")" ""
rm -rf "$WORK"
