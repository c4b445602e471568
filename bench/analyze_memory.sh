#!/usr/bin/env bash
# Analyze's memory on stores up to larger than RAM (issue 15: "uses bounded memory on a store
# larger than RAM"): `wirevault analyze --json` over synthetic IMIX stores of growing size, the
# last larger than the machine's RAM, each with more flows than analyze's flow table holds
# (--max-flows, default 1,048,576): its peak RSS must not grow with the store. tshark's
# `-z conv,ip` (the statistic whose table grows with the traffic) on the smallest store beside
# it, as the peer a user would otherwise run.
#
#   bench/analyze_memory.sh [DIR]        (default ./bench-anmem; each store is removed after use)
#
# Environment: WIREVAULT (binary; default: build the release one), SIZES_GB (default "1 8 X"
# with X = RAM x 1.15, in GB of pcap), FLOWS (default 4194304), TSHARK_GB (tshark runs on
# stores up to this size; default 1; 0 skips it). Needs SIZES_GB's largest free on DIR's disk.
# As root, the page cache is dropped before each analyze run, so every store is read from disk.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
DIR=${1:-./bench-anmem}
wv_binary
need_tools python3
ram_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)
ram_gb=$(calc "$ram_kib * 1024 / 1e9" .1f)
SIZES_GB=${SIZES_GB:-1 8 $(calc "$ram_kib * 1024 * 1.15 / 1e9" .0f)}
FLOWS=${FLOWS:-4194304}
TSHARK_GB=${TSHARK_GB:-1}
# A synthetic IMIX record is 374 bytes on average (7 x 60, 4 x 590, 1 x 1514, and its 16-byte header).
RECORD_BYTES=374
WORK=$(work_dir "$DIR")

drop_cache() {
  sync
  if [ "$(id -u)" = 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

echo "## analyze's memory against the store's size ($(stamp), $(revision), RAM $ram_gb GB, IMIX, $FLOWS flows)"
echo
echo "Command: \`SIZES_GB=\"$SIZES_GB\" FLOWS=$FLOWS TSHARK_GB=$TSHARK_GB bench/analyze_memory.sh\`"
echo
table_header "tool" "store GB" "store / RAM" "packets" "seconds" "packets/s" "peak RSS MiB" "IPv4 conversations" "packets not attributed"
for gb in $SIZES_GB; do
  n=$(calc "int($gb * 1e9 / $RECORD_BYTES)")
  store=$WORK/store
  rm -rf "$store"
  "$BIN" record -o "$store" --synthetic "size=imix,count=$n,flows=$FLOWS" -q 2>/dev/null
  bytes=$(du -sb "$store" | cut -f1)
  size=$(calc "$bytes / 1e9" .1f)
  ratio=$(calc "$bytes / ($ram_kib * 1024)" .2f)
  drop_cache
  read -r s rss < <(time_rss "$WORK/report.json" "$BIN" analyze --json "$store")
  read -r frames kept untracked < <(python3 - "$WORK/report.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["conversations"]["ipv4"]
print(d["frames"], c["count"], c["untracked"]["packets"])
PY
)
  [ "$frames" = "$n" ] || { echo "analyze saw $frames of the $n packets stored" >&2; exit 1; }
  table_row "wirevault analyze --json" "$size" "$ratio" "$n" "$s" "$(calc "$n / $s" ,.0f)" \
    "$(calc "$rss / 1024" ,.0f)" "$kept" "$untracked"
  if [ "$TSHARK_GB" != 0 ] && python3 -c "import sys; sys.exit(0 if $gb <= $TSHARK_GB else 1)" && have tshark; then
    "$BIN" query "$store" -w "$WORK/all.pcap"
    drop_cache
    read -r s rss < <(time_rss /dev/null tshark -n -q -r "$WORK/all.pcap" -z conv,ip)
    table_row "tshark -q -z conv,ip" "$size" "$ratio" "$n" "$s" "$(calc "$n / $s" ,.0f)" \
      "$(calc "$rss / 1024" ,.0f)" "all" "0"
    rm -f "$WORK/all.pcap"
  fi
  rm -rf "$store" "$WORK/report.json"
done
echo
echo "analyze's tables are capped (--max-flows flows and RTP streams, --max-intervals throughput"
echo "rows, --dup-frames remembered frames); packets of flows beyond the cap are counted as not"
echo "attributed. The store is read through the query layer (pread, page cache) and never held."
rm -rf "$WORK"
