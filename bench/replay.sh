#!/usr/bin/env bash
# Replay benchmark (issue 15): `wirevault replay` vs `tcpreplay` on the same
# veth pair between two network namespaces, in the same run.
#
#   bench/replay.sh [PACKETS] [DIR]        (defaults: 1000000, ./bench-replay)
#
# Table 1, top speed: PACKETS IMIX frames (the synthetic source, recorded
# into a store, written out as one pcap file for both tools) sent with
# `--topspeed` by each tool; packets per second (packets / wall time) and CPU
# per packet ((user + system) / packets, from /usr/bin/time). Nothing listens
# on the far end: both tools pay the same receive path.
# Table 2, recorded timing: 2000 frames with gaps of 50 us to 2 ms (a fixed
# pseudo-random sequence) sent at recorded timing by each tool while tcpdump
# captures the far end; the error of each inter-packet gap (captured minus
# recorded) as p50 / p99 / max.
# Targets: replay pps >= tcpreplay's, CPU per packet below it; report the
# p99 gap error beside tcpreplay's.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
N=${1:-1000000}
DIR=${2:-./bench-replay}
wv_binary
need_root replay.sh
need_tools ip tcpreplay tcpdump python3 /usr/bin/time
rm -rf "$DIR"
WORK=$(work_dir "$DIR")
S=wvb-rp-s-$$
R=wvb-rp-r-$$
cleanup() {
  ip netns del "$S" 2>/dev/null || true
  ip netns del "$R" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
netns_veth_pair "$S" "$R"
ip -n "$S" link set vethA mtu 9000
ip -n "$R" link set vethB mtu 9000

# The top-speed traffic: a store of synthetic IMIX frames, as one pcap file.
"$BIN" record -o "$WORK/store" --synthetic "size=imix,count=$N,flows=1024" -q 2>/dev/null
"$BIN" query "$WORK/store" -w "$WORK/imix.pcap"

# The timed traffic: 2000 frames of 60..1514 bytes, gaps 50 us .. 2 ms.
python3 - "$WORK/timed.pcap" <<'EOF'
import random, struct, sys
random.seed(15)
out = open(sys.argv[1], "wb")
out.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
t = 1_700_000_000 * 10**9
for i in range(2000):
    t += random.randint(50_000, 2_000_000)
    n = random.choice([60, 60, 60, 60, 60, 60, 60, 590, 590, 590, 590, 1514])
    frame = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5]) + struct.pack(">I", i)
    frame += bytes((i * 7 + k) & 0xFF for k in range(n - len(frame)))
    out.write(struct.pack("<IIII", t // 10**9, t % 10**9, n, n) + frame)
EOF

# run_timed LABEL CMD...: prints "seconds cpu_seconds" of CMD run in $S.
run_timed() {
  local label=$1
  shift
  /usr/bin/time -f "%e %U %S" -o "$WORK/$label.time" ip netns exec "$S" "$@" >"$WORK/$label.out" 2>"$WORK/$label.err" || {
    echo "$label failed:" >&2
    cat "$WORK/$label.err" >&2
    exit 1
  }
  awk '{printf "%s %.6f\n", $1, $2 + $3}' "$WORK/$label.time"
}

echo "## replay --topspeed vs tcpreplay --topspeed ($N IMIX frames, veth, $(stamp), $(revision))"
echo
table_header tool "packets sent" "wall s" "packets/s" "CPU ns/packet"
for tool in wirevault tcpreplay; do
  if [ $tool = wirevault ]; then
    read -r wall cpu < <(run_timed wv-top "$BIN" replay -i vethA --topspeed --json "$WORK/imix.pcap")
    sent=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"])' "$WORK/wv-top.out")
  else
    read -r wall cpu < <(run_timed tr-top tcpreplay -i vethA --topspeed "$WORK/imix.pcap")
    sent=$(awk '/Successful packets:/ {print $3}' "$WORK/tr-top.out")
  fi
  table_row "$tool" "$sent" "$wall" "$(calc "$sent / $wall" ,.0f)" "$(calc "$cpu * 1e9 / $sent" .0f)"
done
echo

# gap_errors RECORDED CAPTURED: p50 p99 max of |captured gap - recorded gap| in us.
gap_errors() {
  python3 - "$1" "$2" <<'EOF'
import struct, sys
def stamps(path):
    b = open(path, "rb").read()
    magic = struct.unpack("<I", b[:4])[0]
    scale = 1 if magic == 0xa1b23c4d else 1000
    off, ts = 24, []
    while off + 16 <= len(b):
        s, f, cap, _ = struct.unpack("<IIII", b[off:off + 16])
        ts.append(s * 10**9 + f * scale)
        off += 16 + cap
    return ts
want, got = stamps(sys.argv[1]), stamps(sys.argv[2])
if len(got) != len(want):
    print(f"captured {len(got)} of {len(want)} - -")
    sys.exit()
err = sorted(abs((got[i] - got[i - 1]) - (want[i] - want[i - 1])) for i in range(1, len(want)))
q = lambda p: err[int((len(err) - 1) * p)] / 1000
print(f"{len(got)} {q(0.5):.1f} {q(0.99):.1f} {err[-1] / 1000:.1f}")
EOF
}

echo "## recorded timing: inter-packet gap error (2000 frames, gaps 50 us..2 ms, captured by tcpdump on the far end)"
echo
table_header tool "frames captured" "gap error p50 us" "p99 us" "max us"
for tool in wirevault tcpreplay; do
  cap="$WORK/cap-$tool.pcap"
  ip netns exec "$R" tcpdump -i vethB -n --immediate-mode --time-stamp-precision=nano -B 65536 -s 2000 -w "$cap" 2>"$WORK/td-$tool.err" &
  td=$!
  until grep -q "listening on" "$WORK/td-$tool.err" 2>/dev/null; do sleep 0.05; done
  if [ $tool = wirevault ]; then
    run_timed wv-timed "$BIN" replay -i vethA "$WORK/timed.pcap" >/dev/null
  else
    run_timed tr-timed tcpreplay -i vethA "$WORK/timed.pcap" >/dev/null
  fi
  sleep 0.5
  kill -INT "$td"
  wait "$td" || true
  read -r n p50 p99 max < <(gap_errors "$WORK/timed.pcap" "$cap")
  table_row "$tool" "$n" "$p50" "$p99" "$max"
done
echo
echo "wirevault's own summary of the timed run: $(tail -1 "$WORK/wv-timed.err")"
