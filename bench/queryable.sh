#!/usr/bin/env bash
# Capture to queryable (issue 44, item 3): how long after a frame was captured `wirevault query`
# returns it, while its file is still open (default options: 1 GiB files, no --file-time).
#
#   sudo bench/queryable.sh [WORKDIR]   (WORKDIR: where the stores go, default ./bench-queryable.PID;
#                                        removed afterwards; on the disk under test)
#
# Environment: WIREVAULT (binary), RATES (default "10000 max": frames per second, sent evenly by
# tcpreplay --pps; max = trafgen flat out, as fast as one generator thread and the veth go), SECS (seconds of traffic per run,
# default 6), PATHS (default "copy zc xdp": AF_PACKET with the copy writer, `--format pcapng
# --zero-copy`, `--source xdp`), SIZE (frame bytes without FCS, default 64), BUF (--buffer, default
# 256 MiB).
#
# Per run: `wirevault record -i vethB` in the receiver namespace, the generator on CPU 0 in the
# sender's (trafgen's own `-b RATEpps` sends each second's frames in one burst of ~25 ms, which
# makes the latency depend on where the bursts fall between two idle flushes). While it sends, and until every frame stored is queryable (at most
# 10 s after), bench/lib/queryable.py polls two ways: what the recorder says is on disk (its
# live files, then the catalog, every 5 ms: what every reader starts from) and `wirevault query
# --count` back to back (a query also reads the open file's prefix, so it adds its own time). A
# frame's latency is the start of the first poll that counts it minus its capture stamp (both
# CLOCK_REALTIME). Then the recorder gets SIGINT and every stored frame's stamp is read with
# `wirevault query -w -`.
#
# Goal (issue): every frame stored more than 2 s ago is queryable (p100 below 2000 ms; at low
# rates the copy path's 1 s idle flush decides).
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
ROOT=$BENCH_ROOT
need_root queryable.sh
need_tools trafgen tcpreplay ip taskset python3
wv_binary
HELPER="$ROOT/bench/lib/queryable.py"

RATES=${RATES:-"10000 max"}
SECS=${SECS:-6}
PATHS=${PATHS:-"copy zc xdp"}
SIZE=${SIZE:-64}
BUF=${BUF:-256}
WORK=$(realpath -m "${1:-$ROOT/bench-queryable.$$}")
S=wvq-s$$
R=wvq-r$$
REC_PID=""
cleanup() {
  set +e
  [ -n "$REC_PID" ] && kill -KILL "$REC_PID" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$R" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK"
log() { echo "[queryable] $*" >&2; }

netns_veth_pair "$S" "$R"
ip netns exec "$S" ip addr add 10.255.0.1/30 dev vethA
ip netns exec "$R" ip addr add 10.255.0.2/30 dev vethB
# Unicast to a MAC nobody owns: the receiving stack drops the frames without a reply.
cat >"$WORK/udp.cfg" <<EOF
{
  eth(da=02:00:00:00:00:02, sa=02:00:00:00:00:01, type=0x0800),
  ipv4(saddr=10.255.0.1, daddr=10.255.0.2, ttl=64, df),
  udp(sport=40000, dport=9), fill(0x5a, $((SIZE - 42)))
}
EOF
# The same frame 1,000 times, for tcpreplay (which loops it).
python3 - "$WORK/udp.pcap" "$SIZE" <<'PY'
import struct, sys
size = int(sys.argv[2])
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, 0, 0x4000, 64, 17, 0, bytes([10, 255, 0, 1]), bytes([10, 255, 0, 2]))
udp = struct.pack("!HHHH", 40000, 9, size - 34, 0)
frame = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + udp + b"\x5a" * (size - 42)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for _ in range(1000):
        f.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)
PY

path_args() { # path -> record options, one a line
  case $1 in
    copy) ;;
    zc) printf '%s\n' --format pcapng --zero-copy ;;
    xdp) printf '%s\n' --source xdp ;;
    *) echo "unknown path $1 (copy, zc, xdp)" >&2; exit 2 ;;
  esac
}

gen_cmd() { # rate -> the generator's command line
  local rate=$1
  if [ "$rate" = max ]; then
    echo "trafgen --no-sock-mem -i $WORK/udp.cfg -o vethA -P 1 -q"
  else
    echo "tcpreplay -q -i vethA --pps $rate --loop $((rate * SECS / 1000)) $WORK/udp.pcap"
  fi
}

run_one() { # path rate
  local path=$1 rate=$2 out="$WORK/$1-$2" extra
  mkdir -p "$out"
  mapfile -t extra < <(path_args "$path")
  ip netns exec "$R" "$BIN" record -i vethB -o "$out/store" --buffer "${BUF}M" -q "${extra[@]}" \
    >"$out/rec.out" 2>"$out/rec.err" &
  REC_PID=$!
  local i=0
  # From the moment it captures (AF_XDP opens its sockets before it says so; frames sent before
  # that reach no socket, as before any tool's start).
  until grep -qs '"state":"capturing"' "$out/store/stats.json"; do
    sleep 0.05; i=$((i + 1))
    [ $i -lt 400 ] && kill -0 "$REC_PID" 2>/dev/null || { log "$path: record did not start: $(tail -c 300 "$out/rec.err")"; return; }
  done
  python3 "$HELPER" poll "$out/store" "$BIN" "$out/polls.json" "$out/ready" "$out/stop" &
  local poller=$!
  until [ -f "$out/ready" ]; do sleep 0.02; done
  local t0 gen
  t0=$(now)
  # shellcheck disable=SC2046 # gen_cmd prints a command line, split into words on purpose
  if [ "$rate" = max ]; then
    ip netns exec "$S" taskset -c 0 timeout -s INT "$SECS" $(gen_cmd "$rate") >/dev/null 2>&1 || true
  else
    ip netns exec "$S" taskset -c 0 $(gen_cmd "$rate") >/dev/null 2>&1 || true
  fi
  local secs received
  secs=$(since "$t0")
  # Until every frame received is queryable (the open file's last second at low rates), 10 s at
  # most: stats.json is rewritten once a second, so its count must have stood still for longer.
  local before=-1
  for i in $(seq 40); do
    received=$(stats "$out/store/stats.json" received=0)
    if [ "$received" = "$before" ] &&
      [ "$(python3 -c "import sys; sys.path.insert(0, '$ROOT/bench/lib'); import queryable; print(queryable.on_disk('$out/store'))")" -ge "$received" ]; then
      break
    fi
    before=$received
    sleep 1.2
  done
  sleep 0.3
  touch "$out/stop"
  wait "$poller"
  kill -INT "$REC_PID"; wait "$REC_PID" || true; REC_PID=""
  local pps
  pps=$(calc "$received / $secs" .0f)
  while read -r way n p50 p99 max missed; do
    table_row "$path" "$rate" "$pps" "$way" "$n" "$p50" "$p99" "$max" "$missed"
  done < <(python3 "$HELPER" report "$out/store" "$BIN" "$out/polls.json")
  rm -rf "$out"
}

echo "## Capture to queryable ($(stamp), kernel $(uname -r), $(nproc) CPUs, store on $(findmnt -no FSTYPE -T "$WORK"), $(revision))"
echo
echo "Command: \`sudo RATES=\"$RATES\" SECS=$SECS PATHS=\"$PATHS\" SIZE=$SIZE BUF=$BUF bench/queryable.sh\`"
echo
echo "<!-- generator: ip netns exec SENDER taskset -c 0 $(gen_cmd 10000 | sed "s|$WORK/||"), max: $(gen_cmd max | sed "s|$WORK/||") for SECS s; recorder: wirevault record -i vethB --buffer ${BUF}M -q [path options] -->"
echo
table_header path "rate (pps)" "stored pps" "queryable by" frames "p50 ms" "p99 ms" "max ms" "never"
for rate in $RATES; do
  for path in $PATHS; do
    run_one "$path" "$rate"
  done
done
