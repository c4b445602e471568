#!/usr/bin/env bash
# Start-up (issue "Trustworthy from the first second"): how soon after its launch each tool
# stores its first frame, with a sender already running, and what its start-up costs in CPU.
#
#   sudo bench/startup.sh [WORKDIR]     (default ./bench-startup.PID, removed afterwards)
#
# Environment: WIREVAULT (binary), TOOLS (default "tcpdump stenotype wirevault wirevault-256M
# wirevault-zc": wirevault with its defaults, with --buffer 256M, and --format pcapng
# --zero-copy), ROUNDS (default 3; the tools in turn each round), PPS (the sender's rate,
# default 10000), BUF (MiB of kernel buffer for tcpdump and stenotype, default 256, as
# bench/live.sh gives every tool).
#
# Per tool and round, two runs in a fresh pair of network namespaces:
#   first frame   a sender (raw socket, frames numbered) runs at PPS; the tool is launched, runs
#                 4 s and gets SIGINT; the time of the first frame it stored minus its launch.
#   start-up CPU  no traffic; the tool is launched and waited for until it says it captures,
#                 holds a packet socket and its CPU use has settled (bench/lib/live_helper.py
#                 ready, as bench/live.sh); its CPU then (all threads), before any packet.
# The table gives each figure's range over the rounds.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
ROOT=$BENCH_ROOT
need_root startup.sh
need_tools ip tcpdump python3
wv_binary
HELPER="$ROOT/bench/lib/live_helper.py"
TOOLS=${TOOLS:-"tcpdump stenotype wirevault wirevault-256M wirevault-zc"}
ROUNDS=${ROUNDS:-3}
PPS=${PPS:-10000}
BUF=${BUF:-256}
WORK=$(realpath -m "${1:-$ROOT/bench-startup.$$}")
S=wvstart-s$$
R=wvstart-r$$
STENOTYPE=$(command -v stenotype || echo /usr/sbin/stenotype)
SENDER=""
cleanup() {
  set +e
  [ -n "$SENDER" ] && kill "$SENDER" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$R" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK"
chmod 755 "$WORK"
log() { echo "[startup] $*" >&2; }
netns_veth_pair "$S" "$R"

tool_cmd() { # tool out -> the command, one word per line
  case $1 in
    tcpdump) printf '%s\n' tcpdump -i vethB -w "$2/cap.pcap" -s 0 -B $((BUF * 1024)) --time-stamp-precision=nano ;;
    stenotype) printf '%s\n' "$STENOTYPE" --iface=vethB --dir="$2/steno" --threads=1 --blocks="$BUF" \
      --seccomp=none --no_watchdogs --blockage_sec=1 --stats_blocks=10 -v ;;
    wirevault) printf '%s\n' "$BIN" record -i vethB -o "$2/store" ;;
    wirevault-256M) printf '%s\n' "$BIN" record -i vethB -o "$2/store" --buffer 256M ;;
    wirevault-zc) printf '%s\n' "$BIN" record -i vethB -o "$2/store" --format pcapng --zero-copy ;;
  esac
}
marker() { # tool out -> FILE REGEX the tool says it captures in
  case $1 in
    tcpdump) printf '%s\n' "$2/stderr" 'listening on' ;;
    stenotype) printf '%s\n' "$2/stderr" 'starting to process packets' ;;
    *) printf '%s\n' "$2/stderr" 'capturing on' ;;
  esac
}

# The first stored frame's time (ns since the epoch) in what the tool wrote below OUT.
first_stored() {
  python3 - "$1" <<'EOF'
import glob, struct, subprocess, sys
out = sys.argv[1]
best = None
def take(t):
    global best
    best = t if best is None or t < best else best
for f in glob.glob(out + "/cap.pcap") + glob.glob(out + "/store/stream-*/*.pcap*"):
    if f.endswith(".idx"):
        continue
    r = subprocess.run(["tcpdump", "-r", f, "-c", "1", "-tt", "--time-stamp-precision=nano"],
                       capture_output=True, text=True).stdout.split()
    if r:
        s, ns = r[0].split(".")
        take(int(s) * 10**9 + int(ns))
# stenotype: TPACKET_V3 blocks of 1 MiB, ts_first_pkt at offset 32 (seconds, nanoseconds).
for f in glob.glob(out + "/steno/PKT0/*") + glob.glob(out + "/steno/PKT0/.*"):
    data = open(f, "rb").read()
    for off in range(0, len(data) - 40, 1 << 20):
        n, = struct.unpack_from("<I", data, off + 12)
        if n:
            s, ns = struct.unpack_from("<II", data, off + 32)
            take(s * 10**9 + ns)
print(best if best is not None else "")
EOF
}

start_sender() {
  ip netns exec "$S" python3 -c "
import socket, struct, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('vethA', 0))
i, per = 0, max(1, $PPS // 1000)
while True:
    t = time.time()
    for _ in range(per):
        s.send(b'\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x88\xb5' + struct.pack('>Q', i) + b'w' * 80); i += 1
    time.sleep(max(0.0, 0.001 - (time.time() - t)))
" &
  SENDER=$!
}

launch() { # tool out -> starts it under the rusage wrapper, prints its pid
  local cmd
  mapfile -t cmd < <(tool_cmd "$1" "$2")
  if [ "$1" = stenotype ]; then
    mkdir -p "$2/steno/PKT0" "$2/steno/IDX0"; chown -R nobody:nogroup "$2/steno"
  fi
  ip netns exec "$R" python3 "$HELPER" run "$2/rusage" -- "${cmd[@]}" >"$2/stdout" 2>"$2/stderr" &
  local i=0
  while [ ! -s "$2/rusage.pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
  cat "$2/rusage.pid"
}

stop() { # pid
  kill -INT "$1" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  sleep 0.2
}

ROWS="$WORK/rows.tsv"
: >"$ROWS"
for round in $(seq "$ROUNDS"); do
  for tool in $TOOLS; do
    out="$WORK/$tool-$round-first"; mkdir -p "$out"; chmod 755 "$out"
    start_sender
    sleep 0.5
    t0=$(date +%s%N)
    pid=$(launch "$tool" "$out")
    sleep 4
    stop "$pid"
    kill "$SENDER" 2>/dev/null; wait "$SENDER" 2>/dev/null || true; SENDER=""
    first=$(first_stored "$out")
    after=NA
    [ -n "$first" ] && after=$(calc "($first - $t0) / 1e9" .3f)
    out2="$WORK/$tool-$round-cpu"; mkdir -p "$out2"; chmod 755 "$out2"
    pid=$(launch "$tool" "$out2")
    mapfile -t mk < <(marker "$tool" "$out2")
    ip netns exec "$R" python3 "$HELPER" ready "$pid" 20 "${mk[@]}" >/dev/null
    cpu=$(python3 "$HELPER" cpu "$pid")
    stop "$pid"
    log "round $round $tool: first frame ${after} s after launch, start-up CPU ${cpu} s"
    printf '%s\t%s\t%s\n' "$tool" "$after" "$cpu" >>"$ROWS"
    rm -rf "$out" "$out2"
  done
done

echo "## Start-up: first frame and CPU (bench/startup.sh), $(stamp), $(revision)"
echo
echo "\`sudo ROUNDS=$ROUNDS PPS=$PPS bench/startup.sh\`: a sender at $PPS frames/s runs before each tool is"
echo "launched; the first stored frame's time minus the launch, and the CPU the tool used until it"
echo "captured and settled with no traffic. Ranges over $ROUNDS rounds, the tools in turn."
echo
table_header "tool" "first frame after launch (s)" "start-up CPU (s)"
for tool in $TOOLS; do
  python3 - "$ROWS" "$tool" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.split("\t")[0] == sys.argv[2]]
def rng(i):
    v = sorted(float(r[i]) for r in rows if r[i] not in ("NA", ""))
    return "NA" if not v else (f"{v[0]:.3f}" if v[0] == v[-1] else f"{v[0]:.3f}-{v[-1]:.3f}")
print(f"| {sys.argv[2]} | {rng(1)} | {rng(2)} |")
EOF
done
