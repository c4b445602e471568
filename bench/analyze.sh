#!/usr/bin/env bash
# Analyze benchmark: `wirevault analyze` (every statistic in one pass) vs the
# equivalent tshark statistics on the same packets, each in its own tshark
# run as a user would ask for it: io,stat, conv,tcp, conv,udp, conv,ip,
# endpoints,ip, the TCP expert info (tcp.analysis.flags) and rtp,streams.
# Packets/s of each and the ratio to analyze's; analyze's peak RSS.
#
#   bench/analyze.sh [PACKETS] [DIR]      (defaults: 20000000, ./bench-analyze)
#
# Target (issue 15): analyze >= 10x the packets/s of each tshark statistic.
# The store is made by the synthetic source (IMIX, 65,536 flows). tshark reads
# the same packets as one pcap written by `wirevault query` (not timed).
# WV_TSHARK_MAX limits tshark to the first N packets (default: all) and the
# table says so; its rate is measured on what it read.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
N=${1:-20000000}
DIR=${2:-./bench-analyze}
wv_binary
need_tools tshark python3
rm -rf "$DIR"
WORK=$(work_dir "$DIR")
STORE=$WORK/store
"$BIN" record -o "$STORE" --synthetic "size=imix,count=$N,flows=65536" -q 2>/dev/null
"$BIN" query "$STORE" -w "$WORK/all.pcap"
TS_MAX=${WV_TSHARK_MAX:-0}
TS_N=$N
TS_OPT=()
if [ "$TS_MAX" -gt 0 ] && [ "$TS_MAX" -lt "$N" ]; then
  TS_N=$TS_MAX
  TS_OPT=(-c "$TS_MAX")
fi

# analyze: time and peak RSS.
read -r wv_s wv_rss < <(time_rss /dev/null "$BIN" analyze --json "$STORE")
wv_pps=$(calc "$N / $wv_s" .0f)

echo "## analyze vs tshark ($(stamp), $(revision), $N packets, IMIX, 65536 flows)"
echo
table_header "statistic" "tool" "packets" "seconds" "packets/s" "analyze / this"
table_row "all (one pass)" "wirevault analyze" "$N" "$wv_s" "$wv_pps" "1"
for stat in "io,stat,1" "conv,tcp" "conv,udp" "conv,ip" "endpoints,ip" "expert:tcp.analysis.flags" "rtp,streams"; do
  if [[ $stat == expert:* ]]; then
    s=$(time_cmd tshark -n -r "$WORK/all.pcap" "${TS_OPT[@]}" -Y "${stat#expert:}")
  elif [[ $stat == rtp,streams ]]; then
    s=$(time_cmd tshark -n -q -r "$WORK/all.pcap" "${TS_OPT[@]}" -o rtp.heuristic_rtp:TRUE -z "$stat")
  else
    s=$(time_cmd tshark -n -q -r "$WORK/all.pcap" "${TS_OPT[@]}" -z "$stat")
  fi
  pps=$(calc "$TS_N / $s" .0f)
  table_row "$stat" "tshark" "$TS_N" "$s" "$pps" "$(calc "$wv_pps / $pps" .1f)"
done
echo
echo "analyze peak RSS: $((wv_rss / 1024)) MiB (bounded: tables capped by --max-flows)."
echo "Rerun: bench/analyze.sh $N"
rm -rf "$WORK"
