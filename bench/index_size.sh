#!/usr/bin/env bash
# Index size (issue "Index every packet ..."): wirevault's index beside stenographer's (stenotype)
# on the same live traffic. Both tools capture the same veth at the same time while trafgen sends
# a paced stream of UDP/TCP frames with random 5-tuples (65,536 client addresses, 16 servers,
# random ports: nearly every packet a new flow, the index's worst case), once per mix:
# 64-byte frames, 1514-byte frames, and IMIX (7:4:1 of 64/594/1514 bytes, round robin).
#
#   sudo bench/index_size.sh [WORKDIR]      (default ./bench-index.PID; removed afterwards)
#
# Environment: WIREVAULT (binary), N (frames per mix, default 500000), GAP (trafgen inter-frame
# gap, default 10us: slow enough that neither tool drops), MIXES (default "64 1514 imix").
#
# Columns: pcap bytes = the bytes of wirevault's pcap files (the same frames as a standard pcap
# file: 24-byte file header + 16 bytes + frame per packet); index bytes: wirevault = its *.idx
# files; stenotype = its IDX0/ directory (LevelDB tables written when it closes its packet file).
# "% of pcap" puts both indexes over the same pcap size (scaled to the packets each tool stored).
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
ROOT=$BENCH_ROOT
need_root index_size.sh
STENOTYPE=$(command -v stenotype || echo /usr/sbin/stenotype)
need_tools trafgen ip python3 "$STENOTYPE"
wv_binary
HELPER="$ROOT/bench/lib/live_helper.py"
N=${N:-500000}
GAP=${GAP:-10us}
MIXES=${MIXES:-"64 1514 imix"}
WORK=$(realpath -m "${1:-$ROOT/bench-index.$$}")
S=wvidx-s$$
R=wvidx-r$$
PIDS=()
cleanup() {
  set +e
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$S" 2>/dev/null
  ip netns del "$R" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "[index_size] $*" >&2; }
mkdir -p "$WORK"

netns_veth_pair "$S" "$R"

# One frame definition of SIZE bytes (without FCS); PROTO udp or tcp.
frame() { # size proto
  local size=$1 proto=$2 hdr=42
  [ "$proto" = tcp ] && hdr=54
  cat <<EOF
{
  eth(da=02:00:00:00:00:02, sa=02:00:00:00:00:01, type=0x0800),
  ipv4(saddr=10.1.0.0, saddr[2:2]=drnd(), daddr=10.2.0.1, daddr[3]=drnd(1, 16), ttl=64, df),
  $proto(sport=drnd(1024, 65535), dport=drnd(1, 1024)),
  fill(0x5a, $((size - hdr)))
}
EOF
}
for mix in $MIXES; do
  cfg="$WORK/$mix.cfg"
  case $mix in
    64) { frame 60 udp; frame 60 tcp; } >"$cfg" ;;
    1514) { frame 1514 udp; frame 1514 tcp; } >"$cfg" ;;
    imix)
      : >"$cfg"
      for i in 1 2 3 4 5 6 7; do frame 60 "$([ $((i % 2)) = 0 ] && echo tcp || echo udp)" >>"$cfg"; done
      for i in 1 2 3 4; do frame 594 "$([ $((i % 2)) = 0 ] && echo tcp || echo udp)" >>"$cfg"; done
      frame 1514 tcp >>"$cfg"
      ;;
    *) echo "unknown mix $mix (64, 1514, imix)" >&2; exit 1 ;;
  esac
done

ROWS="$WORK/rows.tsv"
: >"$ROWS"
for mix in $MIXES; do
  out="$WORK/run-$mix"
  mkdir -p "$out/steno/PKT0" "$out/steno/IDX0"
  chown -R nobody:nogroup "$out/steno"
  PIDS=()
  ip netns exec "$R" "$STENOTYPE" --iface=vethB --dir="$out/steno" --threads=1 --blocks=256 \
    --seccomp=none --no_watchdogs --blockage_sec=1 --stats_blocks=10 -v >"$out/steno.out" 2>"$out/steno.err" &
  PIDS+=($!)
  ip netns exec "$R" "$BIN" record -i vethB -o "$out/store" --buffer 256M -q >"$out/wv.out" 2>"$out/wv.err" &
  PIDS+=($!)
  for _ in $(seq 200); do
    grep -q 'starting to process packets' "$out/steno.err" 2>/dev/null && [ -s "$out/store/stats.json" ] && break
    sleep 0.05
  done
  sleep 1
  log "$mix: sending $N frames (gap $GAP)"
  (cd "$WORK" && ip netns exec "$S" trafgen --no-sock-mem -i "$mix.cfg" -o vethA -n "$N" -t "$GAP" -q -P 1) >/dev/null 2>&1
  sleep 2
  kill -INT "${PIDS[@]}" 2>/dev/null || true
  # stenotype writes its index on SIGINT, then may hang (see bench/live.sh): give it until the
  # message plus a second, at most 15 s, then SIGKILL (its index is on disk by then)
  for _ in $(seq 150); do
    kill -0 "${PIDS[0]}" 2>/dev/null || break
    grep -q 'Wrote all index files' "$out/steno.err" && { sleep 1; break; }
    sleep 0.1
  done
  kill -KILL "${PIDS[0]}" 2>/dev/null || true
  wait "${PIDS[1]}" || log "$mix: wirevault exited with $?"
  wait "${PIDS[0]}" 2>/dev/null || true
  PIDS=()
  wv_pkts=$(stats "$out/store/stats.json" written)
  wv_pcap=$(find "$out/store" -name '*.pcap' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
  wv_idx=$(find "$out/store" -name '*.idx' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
  st_pkts=$(python3 "$HELPER" steno "$out/steno")
  st_idx=$(find "$out/steno/IDX0" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
  st_pkt=$(find "$out/steno/PKT0" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mix" "$wv_pkts" "$wv_pcap" "$wv_idx" "$st_pkts" "$st_idx" "$st_pkt" >>"$ROWS"
  log "$mix: wirevault $wv_pkts packets, pcap $wv_pcap B, index $wv_idx B; stenotype $st_pkts packets, index $st_idx B, packet files $st_pkt B"
  rm -rf "$out"
done

python3 - "$ROWS" "$N" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
sent = int(sys.argv[2])
print("| mix | sent | tool | stored | index bytes | index B/packet | index % of pcap bytes | tool's packet files |")
print("|---|---|---|---|---|---|---|---|")
for mix, wp, wpcap, widx, sp, sidx, spkt in rows:
    wp, wpcap, widx, sp, sidx, spkt = map(int, (wp, wpcap, widx, sp, sidx, spkt))
    per_pkt_pcap = (wpcap - 24) / wp if wp else 0
    name = {"64": "64 B", "1514": "1514 B", "imix": "IMIX 7:4:1"}[mix]
    print(f"| {name} | {sent:,} | wirevault | {wp:,} | {widx:,} | {widx / max(wp, 1):.2f} | "
          f"{100 * widx / max(wpcap, 1):.2f}% | {wpcap:,} B pcap |")
    sp_pcap = per_pkt_pcap * sp
    print(f"| {name} | {sent:,} | stenotype | {sp:,} | {sidx:,} | {sidx / max(sp, 1):.2f} | "
          f"{100 * sidx / max(sp_pcap, 1):.2f}% | {spkt:,} B blockfile |")
PY
echo
echo "<!-- command: bench/index_size.sh (N=$N GAP=$GAP); traffic: trafgen random 5-tuples (65,536 client"
echo "     addresses x 16 servers x random ports, UDP and TCP); both tools capture vethB at the same time;"
echo "     stenographer $(dpkg-query -W -f '${Version}' stenographer 2>/dev/null || echo '?') -->"
