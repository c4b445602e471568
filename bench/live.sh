#!/usr/bin/env bash
# Live capture benchmark (issue "Live"): wirevault against tcpdump -w, dumpcap, netsniff-ng and
# stenographer's stenotype on a veth pair fed by trafgen, in two private network namespaces.
#
#   sudo bench/live.sh [WORKDIR]        (WORKDIR: where captures go, default ./bench-live.PID;
#                                        removed afterwards; must be on the disk under test)
#
# Environment: WIREVAULT (binary), N64 / N1514 (frames per run, default 3M each), TOOLS
# (default "tcpdump dumpcap netsniff-ng stenotype wirevault"; add wirevault-xdp for the same
# command with --source xdp: AF_XDP against AF_PACKET on the same veth, and wirevault-zc for
# `record --format pcapng --zero-copy`, wirevault-flows for the same command with --flows, and wirevault-default for every default of record: the arena
# from memory, not BUF), SCENARIOS (default
# "1core contention"), SIZES (default "64 1514"), BUF (capture buffer per tool, default 256 MiB),
# NICE (nice level of generator and tools, default -10), TOOL_PREFIX (wraps every tool, e.g.
# "chrt -f 1"), KEEP_LOGS (directory to keep each tool's stdout/stderr in), WV_ARGS (extra
# `wirevault record` options, e.g. "--dedup 1ms --flow-cutoff 100G"), VARY (1: every frame differs:
# UDP source port counts up, 1024..65535, a flow table's worth of connections; 8 random payload
# bytes per frame, so that the frames of the two trafgen threads differ too. Needed with --dedup,
# which would drop trafgen's identical frames), PERF (a directory: perf samples of each tool's
# threads while the traffic lasts go to PERF/perf-SCENARIO-SIZE-TOOL.data), ROUNDS (default 1: each
# tool runs ROUNDS times per size and scenario, the tools in turn, so that every round compares
# them within the same minutes; a second table gives each tool's median CPU per stored packet and
# the median of its per-round ratios to that round's best peer: one run's figure moves by 10-60%
# on a shared machine).
#
# Contention with the recorder's reductions (issue 15: --dedup and --flow-cutoff keep >= 99.9%):
#   sudo VARY=1 WV_ARGS="--dedup 1ms --flow-cutoff 100G" SCENARIOS=contention bench/live.sh
# (a cutoff above the bytes of any connection: nothing is cut, every frame costs the lookup).
#
# Scenarios:
#   1core       trafgen on CPU 0 (taskset -c 0, -P 1), the capture tool pinned to CPU 1
#               (taskset -c 1; wirevault --cpus 1: capture worker and writer on CPU 1).
#   contention  trafgen on both CPUs (-P 2), the capture tool unpinned.
# Per run: the tool starts in the receiver namespace and warms up (until it holds a packet socket
# and its CPU use has settled), then trafgen sends exactly N frames; once the tool has drained its
# buffers (its CPU use stopped; 2..30 s) it gets SIGINT (SIGKILL after 15 s if it does not exit). CPU = the tool's utime+stime over all threads and reaped
# children (getrusage at exit, via bench/lib/live_helper.py) minus what it used during warm-up
# (reported separately as "startup CPU"). "arrived" = rx_packets delta of the capture veth (what
# the kernel offered to every packet socket); stored % = stored / arrived. Frames are unicast to a
# MAC nobody owns, so the receiving stack drops them without replying (nothing else on the wire;
# IPv6 is off). Kernel-side work (veth, softirq, AF_PACKET copy into the ring) runs on the
# generator's CPU and is in no tool's CPU time.
#
# Goal (issue): 1core: wirevault's CPU ns/stored packet < every peer, ideally <= 1/3 of the best;
# contention: wirevault stores >= 99.9% of the arrived frames.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
ROOT=$BENCH_ROOT
need_root live.sh
[ "$(nproc)" -ge 2 ] || { echo "live.sh needs 2 CPUs" >&2; exit 1; }
need_tools trafgen ip taskset capinfos python3
wv_binary
HELPER="$ROOT/bench/lib/live_helper.py"

N64=${N64:-3000000}
N1514=${N1514:-3000000}
TOOLS=${TOOLS:-"tcpdump dumpcap netsniff-ng stenotype wirevault"}
SCENARIOS=${SCENARIOS:-"1core contention"}
SIZES=${SIZES:-"64 1514"}
BUF=${BUF:-256}   # MiB, for every tool
NICE=${NICE:--10} # generator and tools run at this nice level (shields them from background jobs)
TOOL_PREFIX=${TOOL_PREFIX:-}  # e.g. "chrt -f 1": run every capture tool under this command
WV_ARGS=${WV_ARGS:-}   # extra wirevault record options
VARY=${VARY:-0}        # 1: frames differ from each other (see above)
ROUNDS=${ROUNDS:-1}    # runs of each tool per size and scenario, in turn
ROUND_TAG=""
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a whole number of 1 or more, not '$ROUNDS'" >&2; exit 2; }
WORK=$(realpath -m "${1:-$ROOT/bench-live.$$}")
S=wvlive-s$$      # sender namespace
R=wvlive-r$$      # receiver namespace
STENOTYPE=$(command -v stenotype || echo /usr/sbin/stenotype)

TOOL_PID=""
cleanup() {
  set +e
  [ -n "$TOOL_PID" ] && kill -KILL "$TOOL_PID" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$R" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK"
log() { echo "[live] $*" >&2; }

# --- network: two namespaces, one veth pair, MTU 1500, IPv6 off, private addresses -------------
netns_veth_pair "$S" "$R"
ip netns exec "$S" ip addr add 10.255.0.1/30 dev vethA
ip netns exec "$R" ip addr add 10.255.0.2/30 dev vethB
DST_MAC=02:00:00:00:00:02   # not vethB's: PACKET_OTHERHOST, dropped silently above the taps
for sz in 64 1514; do
  pl=$((sz - 4 - 42))   # 64 B on the wire = 60 B without FCS; 1514 B is without FCS already
  [ "$sz" = 1514 ] && pl=$((1514 - 42))
  if [ "$VARY" = 1 ]; then
    UDP="udp(sport=dinc(1024, 65535), dport=9), drnd(8), fill(0x5a, $((pl - 8)))"
  else
    UDP="udp(sport=40000, dport=9), fill(0x5a, $pl)"
  fi
  cat >"$WORK/udp$sz.cfg" <<EOF
{
  eth(da=$DST_MAC, sa=02:00:00:00:00:01, type=0x0800),
  ipv4(saddr=10.255.0.1, daddr=10.255.0.2, ttl=64, df),
  $UDP
}
EOF
done

rxp() { ip netns exec "$R" cat /sys/class/net/vethB/statistics/rx_packets; }
rxd() { ip netns exec "$R" cat /sys/class/net/vethB/statistics/rx_dropped; }
txd() { ip netns exec "$S" cat /sys/class/net/vethA/statistics/tx_dropped; }
txp() { ip netns exec "$S" cat /sys/class/net/vethA/statistics/tx_packets; }
softnet_drops() { local s=0 b; while read -r _ b _; do s=$((s + 0x$b)); done </proc/net/softnet_stat; echo $s; }

# --- tool command lines (FILE/DIR under $OUT) ---------------------------------------------------
tool_cmd() { # tool scenario out -> prints the command (one word per line)
  local tool=$1 sc=$2 out=$3
  case $tool in
    tcpdump) printf '%s\n' tcpdump -i vethB -w "$out/cap.pcap" -s 0 -B $((BUF * 1024)) ;;
    dumpcap) printf '%s\n' dumpcap -i vethB -w "$out/cap.pcapng" -B "$BUF" ;;
    netsniff-ng) printf '%s\n' netsniff-ng --in vethB --out "$out/cap.pcap" --silent -S "${BUF}MiB" ;;
    stenotype) printf '%s\n' "$STENOTYPE" --iface=vethB --dir="$out/steno" --threads=1 \
      --blocks="$BUF" --seccomp=none --no_watchdogs --blockage_sec=1 --stats_blocks=10 -v ;;
    wirevault | wirevault-xdp | wirevault-zc | wirevault-default | wirevault-flows)
      printf '%s\n' "$BIN" record -i vethB -o "$out/store" -q
      # wirevault-default: every default (the arena from memory); the others BUF as every tool
      [ "$tool" = wirevault-default ] || printf '%s\n' --buffer "${BUF}M"
      # shellcheck disable=SC2086 # WV_ARGS is a list of options
      [ -n "$WV_ARGS" ] && printf '%s\n' $WV_ARGS
      # wirevault-zc: the zero-copy block path (the ring, --buffer plus the default ring, is the only buffer)
      [ "$tool" = wirevault-zc ] && printf '%s\n' --format pcapng --zero-copy
      [ "$sc" = 1core ] && printf '%s\n' --cpus 1
      # AF_XDP on the same veth: native XDP in vethB's driver, copy-mode XSK socket
      [ "$tool" = wirevault-xdp ] && printf '%s\n' --source xdp
      # wirevault-flows: the same command keeping flow records (issue 47: at most +10% CPU)
      [ "$tool" = wirevault-flows ] && printf '%s\n' --flows
      ;;
  esac
  return 0
}
gen_cmd() { # size scenario n
  local sz=$1 sc=$2 n=$3
  if [ "$sc" = 1core ]; then
    echo "ip netns exec $S nice -n $NICE taskset -c 0 trafgen --no-sock-mem -i udp$sz.cfg -o vethA -n $n -P 1 -q"
  else
    echo "ip netns exec $S nice -n $NICE trafgen --no-sock-mem -i udp$sz.cfg -o vethA -n $n -P 2 -q"
  fi
}

# --- one run -------------------------------------------------------------------------------------
ROWS="$WORK/rows.tsv"
: >"$ROWS"
NOTES="$WORK/notes.txt"
: >"$NOTES"

run_one() { # tool size scenario
  local tool=$1 sz=$2 sc=$3 n
  n=$N64; [ "$sz" = 1514 ] && n=$N1514
  local out="$WORK/run-$tool-$sz-$sc$ROUND_TAG"
  rm -rf "$out"; mkdir -p "$out"
  local cmd pin=()
  mapfile -t cmd < <(tool_cmd "$tool" "$sc" "$out")
  [ "$sc" = 1core ] && pin=(taskset -c 1)
  if ! command -v "${cmd[0]}" >/dev/null; then
    printf '%s\t%s\t%s\t%s\n' "$sz" "$sc" "$tool" "NA:not installed" >>"$ROWS"; return
  fi
  if [ "$tool" = stenotype ]; then
    # stenotype drops privileges to nobody:nogroup and writes PKT<thread>/ and IDX<thread>/
    mkdir -p "$out/steno/PKT0" "$out/steno/IDX0"; chown -R nobody:nogroup "$out/steno"
    # Every directory above must be searchable by nobody, or stenotype aborts at open.
    if ! runuser -u nobody -- test -w "$out/steno/PKT0"; then
      printf '%s\t%s\t%s\t%s\n' "$sz" "$sc" "$tool" \
        "NA:user nobody cannot reach $out/steno (a parent directory is not searchable by others): give a WORKDIR under world-searchable directories" >>"$ROWS"
      return
    fi
  fi
  # shellcheck disable=SC2086 # TOOL_PREFIX is a command line: split into words on purpose
  ip netns exec "$R" nice -n "$NICE" "${pin[@]}" $TOOL_PREFIX python3 "$HELPER" run "$out/rusage" -- "${cmd[@]}" \
    >"$out/stdout" 2>"$out/stderr" &
  local wrapper=$!
  local i=0
  while [ ! -s "$out/rusage.pid" ]; do sleep 0.02; i=$((i + 1)); [ $i -lt 500 ] || break; done
  TOOL_PID=$(cat "$out/rusage.pid" 2>/dev/null || true)
  if [ -z "$TOOL_PID" ] || ! kill -0 "$TOOL_PID" 2>/dev/null; then
    wait "$wrapper" || true
    printf '%s\t%s\t%s\t%s\n' "$sz" "$sc" "$tool" "NA:did not start: $(tail -c 300 "$out/stderr" | tr '\n\t' '  ')" >>"$ROWS"
    TOOL_PID=""; return
  fi
  local waited startup
  local marker=()
  case $tool in
    tcpdump) marker=("$out/stderr" 'listening on') ;;
    dumpcap) marker=("$out/stderr" 'Capturing on') ;;
    netsniff-ng) marker=("$out/stdout" 'Running!') ;;
    stenotype) marker=("$out/stderr" 'starting to process packets') ;;
    wirevault | wirevault-xdp | wirevault-zc | wirevault-default | wirevault-flows) marker=("$out/store/stats.json" '"rings":"full"|"rings":null') ;;
  esac
  waited=$(ip netns exec "$R" python3 "$HELPER" ready "$TOOL_PID" 20 "${marker[@]}")
  startup=$(python3 "$HELPER" cpu "$TOOL_PID")
  if ! kill -0 "$TOOL_PID" 2>/dev/null; then
    wait "$wrapper" || true
    printf '%s\t%s\t%s\t%s\n' "$sz" "$sc" "$tool" "NA:exited during warm-up: $(tail -c 300 "$out/stderr" | tr '\n\t' '  ')" >>"$ROWS"
    TOOL_PID=""; return
  fi
  local rx0 rxd0 txd0 txp0 sd0 rx1 rxd1 txd1 txp1 sd1 t0 t1 gen_out sent
  rx0=$(rxp); rxd0=$(rxd); txd0=$(txd); txp0=$(txp); sd0=$(softnet_drops)
  local perf_pid=""
  local perf_data=""
  if [ -n "${PERF:-}" ] && command -v perf >/dev/null; then
    # Samples of the tool's threads while the traffic lasts, for a per-stage breakdown
    # (perf report -i FILE --no-children --sort sym).
    mkdir -p "$PERF"
    perf_data=$PERF/perf-$sc-$sz-$tool$ROUND_TAG.data
    perf record -q -F 4999 -g -p "$TOOL_PID" -o "$perf_data" >/dev/null 2>&1 &
    perf_pid=$!
    sleep 0.3
  fi
  t0=$(now)
  # shellcheck disable=SC2091,SC2015 # gen_cmd prints the generator's command line, run here; "|| true" only keeps set -e quiet
  gen_out=$(cd "$WORK" && $(gen_cmd "$sz" "$sc" "$n") 2>&1 | tr -d '\r' | grep -v 'Cannot set system socket memory' || true)
  t1=$(now)
  rx1=$(rxp); rxd1=$(rxd); txd1=$(txd); txp1=$(txp); sd1=$(softnet_drops)
  sent=$(echo "$gen_out" | awk '/packets outgoing/ {print $1; exit}')
  [ -n "$sent" ] || sent=$((txp1 - txp0))
  # let the tool drain its kernel ring and buffers: SIGINT once its CPU use has stopped
  local drain
  drain=$(python3 "$HELPER" idle "$TOOL_PID" 2 30)
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    log "perf samples of $tool: $perf_data"
  fi
  kill -INT "$TOOL_PID" 2>/dev/null || true
  local killed="" idx_seen=0
  for i in $(seq 150); do
    kill -0 "$TOOL_PID" 2>/dev/null || break
    # stenotype hangs after SIGINT once its index is written (see the report); do not wait 15 s
    if [ "$tool" = stenotype ] && grep -q 'Wrote all index files' "$out/stderr" 2>/dev/null; then
      idx_seen=$((idx_seen + 1)); [ $idx_seen -lt 30 ] || break
    fi
    sleep 0.1
  done
  if kill -0 "$TOOL_PID" 2>/dev/null; then
    killed="still running $(calc "round($i / 10, 1)") s after SIGINT: SIGKILLed"
    [ $idx_seen -gt 0 ] && killed="$killed (3 s after writing its index; packet file left hidden)"
    kill -KILL "$TOOL_PID" 2>/dev/null || true
  fi
  wait "$wrapper" || true
  TOOL_PID=""
  local rc usr sys
  read -r rc usr sys <"$out/rusage"
  # stored packets, counted in what the tool wrote
  local stored drops extra=""
  case $tool in
    tcpdump | netsniff-ng) stored=$(capinfos -c -M -T -r "$out/cap.pcap" 2>/dev/null | awk -F'\t' '{print $2}') ;;
    dumpcap) stored=$(capinfos -c -M -T -r "$out/cap.pcapng" 2>/dev/null | awk -F'\t' '{print $2}') ;;
    stenotype) stored=$(python3 "$HELPER" steno "$out/steno") ;;
    wirevault | wirevault-xdp | wirevault-zc | wirevault-default | wirevault-flows)
      stored=0
      local f c
      for f in "$out"/store/stream-*/*.pcap "$out"/store/stream-*/*.pcap.part "$out"/store/stream-*/*.pcapng "$out"/store/stream-*/*.pcapng.part; do
        [ -f "$f" ] || continue
        c=$(capinfos -c -M -T -r "$f" 2>/dev/null | awk -F'\t' '{print $2}')
        stored=$((stored + ${c:-0}))
      done
      local st="$out/store/stats.json"
      if [ -f "$st" ]; then
        local s_written s_received s_filtered s_dropped s_balanced arrived=$((rx1 - rx0)) probs=()
        local s_dedup s_cut
        read -r s_written s_received s_filtered s_dropped s_balanced s_dedup s_cut < <(stats "$st" written=0 received=0 filtered=0 dropped=0 balanced=False deduplicated=0 cut=0)
        [ "$s_written" = "$stored" ] || probs+=("stats.json written=$s_written but the files hold $stored")
        [ "$s_received" = $((s_written + s_filtered + s_dropped + s_dedup + s_cut)) ] || probs+=("received != written+filtered+deduplicated+cut+dropped")
        [ $((s_dedup + s_cut)) = 0 ] || probs+=("deduplicated $s_dedup, cut $s_cut (the stored % counts them as lost)")
        [ "$s_balanced" = True ] || probs+=("balanced=false")
        [ "$s_received" -le "$arrived" ] || probs+=("received $s_received > arrived $arrived")
        extra=$(IFS=';'; echo "${probs[*]}")
        extra=${extra//;/; }
      else
        extra="no stats.json"
      fi
      ;;
  esac
  stored=${stored:-0}
  case $tool in
    wirevault | wirevault-xdp | wirevault-zc | wirevault-default | wirevault-flows) drops=$(python3 "$HELPER" drops wirevault "$out/store/stats.json") ;;
    *) drops=$(python3 "$HELPER" drops "$tool" "$out/stdout" "$out/stderr") ;;
  esac
  [ "$tool" = stenotype ] && extra="stored = num_pkts summed over its TPACKET_V3 block files (blockfile + index not pcap)"
  [ -n "$killed" ] && extra="${extra:+$extra; }$killed"
  [ "$rc" != 0 ] && [ -z "$killed" ] && extra="${extra:+$extra; }exit status $rc"
  local cpu
  cpu=$(calc "max(0.0, $usr + $sys - $startup)")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sz" "$sc" "$tool" "$sent" \
    "$((rx1 - rx0))" "$stored" "$drops" "$cpu" "$startup" "$(calc "round($t1 - $t0, 2)")" \
    "$((rxd1 - rxd0))" "$((txd1 - txd0))" "$((sd1 - sd0))" "$extra" "$waited" "$drain" >>"$ROWS"
  log "$sc ${sz}B $tool: sent $sent arrived $((rx1 - rx0)) stored $stored cpu ${cpu}s (startup ${startup}s, warm-up ${waited}s, drain ${drain}s) drops: $drops ${extra:+[$extra]}"
  if [ -n "${KEEP_LOGS:-}" ]; then  # debugging: keep the tool's output
    mkdir -p "$KEEP_LOGS/$(basename "$out")"; cp "$out"/std* "$out"/rusage* "$KEEP_LOGS/$(basename "$out")/" 2>/dev/null || true
  fi
  rm -rf "$out"
}

# --- header and runs -----------------------------------------------------------------------------
echo "## Live capture benchmark ($(stamp), kernel $(uname -r), $(nproc) CPUs, captures on $(findmnt -no FSTYPE -T "$WORK"), $(revision))"
echo
EXTRA_ENV=""
[ "$VARY" = 1 ] && EXTRA_ENV+=" VARY=1"
[ -n "$WV_ARGS" ] && EXTRA_ENV+=" WV_ARGS=\"$WV_ARGS\""
[ "$ROUNDS" != 1 ] && EXTRA_ENV+=" ROUNDS=$ROUNDS"
echo "Command: \`sudo N64=$N64 N1514=$N1514 SCENARIOS=\"$SCENARIOS\" SIZES=\"$SIZES\" TOOLS=\"$TOOLS\" BUF=$BUF NICE=$NICE$EXTRA_ENV bench/live.sh\`"
echo
echo "<!-- commands (\$OUT = per-run temp dir; every tool runs as 'ip netns exec RECV nice -n $NICE [taskset -c 1 in 1core] bench/lib/live_helper.py run ... -- TOOL', 1core pins trafgen to CPU 0, contention pins nothing):"
echo "  generator: $(gen_cmd SIZE 1core N)"
echo "  generator: $(gen_cmd SIZE contention N)   (udpSIZE.cfg: eth/ipv4/udp to $DST_MAC, 64 B = 60 B + FCS, 1514 B)"
[ "$VARY" = 1 ] && echo "  frames vary (VARY=1): UDP source port dinc(1024, 65535), 8 random payload bytes (drnd)"
[ -n "$WV_ARGS" ] && echo "  wirevault extra options (WV_ARGS): $WV_ARGS"
# shellcheck disable=SC2016 # $OUT is printed as it is
for t in $TOOLS; do echo "  $t: $(tool_cmd "$t" 1core '$OUT' | tr '\n' ' ')"; done
echo "  wirevault (contention): same without --cpus; versions: $(tcpdump --version 2>&1 | head -1), $(dumpcap -v 2>&1 | head -1 | cut -c1-40), $(netsniff-ng -v 2>&1 | head -1), $(trafgen -v 2>&1 | head -1), stenographer $(dpkg-query -W -f '${Version}' stenographer 2>/dev/null || echo '?')"
echo "-->"
echo

for sz in $SIZES; do
  for sc in $SCENARIOS; do
    for ((round = 1; round <= ROUNDS; round++)); do
      printf '#round\t%s\n' "$round" >>"$ROWS"
      # Each round's logs and perf samples under names of their own.
      ROUND_TAG=""; [ "$ROUNDS" = 1 ] || ROUND_TAG="-round$round"
      for tool in $TOOLS; do
        run_one "$tool" "$sz" "$sc"
      done
    done
  done
done

# --- table ---------------------------------------------------------------------------------------
[ -z "${KEEP_LOGS:-}" ] || { mkdir -p "$KEEP_LOGS"; cp "$ROWS" "$KEEP_LOGS/rows.tsv"; }
python3 - "$ROWS" <<'PY'
import sys
rows, rounds, rnd = [], [], 1
for l in open(sys.argv[1], newline="\n"):
    if l.startswith("#round\t"):
        rnd = int(l.split("\t")[1])
    elif l.strip():
        rows.append(l.rstrip("\n").split("\t"))
        rounds.append(rnd)
print("| scenario | tool | sent | arrived | stored | stored % | drops reported by tool | CPU s | CPU ns/stored pkt | ratio to best peer | startup CPU s | gen s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
notes = []
groups = {}
for r, k in zip(rows, rounds):
    groups.setdefault((r[0], r[1], k), []).append(r)
for (sz, sc, k), rs in groups.items():
    label = f"{sz} B, {'1 generator core' if sc == '1core' else 'contention'}"
    if max(rounds) > 1:
        label += f", round {k}"
    ns = {}
    for r in rs:
        if r[3].startswith("NA:"):
            continue
        stored, cpu = int(r[5]), float(r[7])
        if stored > 0:
            ns[r[2]] = cpu * 1e9 / stored
    peers = [v for k, v in ns.items() if not k.startswith("wirevault")]
    best = min(peers) if peers else None
    vdrops = set()
    for r in rs:
        if r[3].startswith("NA:"):
            print(f"| {label} | {r[2]} | | | | | | | | | | |")
            notes.append(f"{label}, {r[2]}: {r[3][3:]}")
            continue
        sent, arr, stored, cpu, start = int(r[3]), int(r[4]), int(r[5]), float(r[7]), float(r[8])
        pct = f"{100 * stored / arr:.2f}%" if arr else "-"
        n = ns.get(r[2])
        ratio = f"{n / best:.2f}" if n is not None and best else "-"
        nss = f"{n:,.0f}" if n is not None else "-"
        print(f"| {label} | {r[2]} | {sent:,} | {arr:,} | {stored:,} | {pct} | {r[6]} | {cpu:.3f} | {nss} | {ratio} | {start:.2f} | {r[9]} |")
        if r[13]:
            notes.append(f"{label}, {r[2]}: {r[13]}")
        if int(r[10]) or int(r[11]) or int(r[12]) or sent != arr:
            vdrops.add(f"{label}, {r[2]} run: sent {sent:,}, arrived {arr:,} (vethB rx_dropped +{r[10]}, vethA tx_dropped +{r[11]}, softnet drops +{r[12]})")
    notes.extend(sorted(vdrops))
print()
print("CPU s = the tool's user+system CPU from the end of its warm-up to its exit (all threads and children); "
      "startup CPU s = what it used before (socket, ring and buffer set-up); CPU ns/stored pkt = CPU s / stored; "
      "ratio = ns/pkt over the best (lowest) non-wirevault tool of the same scenario (and round); stored % = stored / arrived "
      "(rx_packets delta of the capture veth); gen s = trafgen's run time.")
if notes:
    print()
    for n in notes:
        print(f"* {n}")
# Several rounds: per tool, the median of its runs, and the median of its per-round ratios to
# that round's best peer (runs side by side share the machine's slow and fast minutes).
if max(rounds, default=1) > 1:
    from statistics import median
    per = {}  # (sz, sc) -> round -> tool -> (ns, stored %)
    for r, k in zip(rows, rounds):
        if r[3].startswith("NA:") or int(r[5]) == 0:
            continue
        arr = int(r[4])
        per.setdefault((r[0], r[1]), {}).setdefault(k, {})[r[2]] = (
            float(r[7]) * 1e9 / int(r[5]), 100 * int(r[5]) / arr if arr else 0.0)
    print()
    print("| scenario | tool | runs | stored % (lowest) | CPU ns/stored pkt, each round | median | ratio to the round's best peer, each round | median ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for (sz, sc), by_round in per.items():
        label = f"{sz} B, {'1 generator core' if sc == '1core' else 'contention'}"
        tools = list(dict.fromkeys(t for rs in by_round.values() for t in rs))
        # A round's ratio only where every peer of the scenario stored something in it: a
        # failed peer would make a worse one that round's best.
        all_peers = {t for t in tools if not t.startswith("wirevault")}
        for t in tools:
            ns, pct, ratios, shown = [], [], [], []
            for k in sorted(by_round):
                rs = by_round[k]
                if t not in rs:
                    continue
                ns.append(rs[t][0]); pct.append(rs[t][1])
                peers = [v[0] for p, v in rs.items() if p in all_peers]
                if all_peers and len(peers) == len(all_peers):
                    ratios.append(rs[t][0] / min(peers))
                    shown.append(f"{ratios[-1]:.2f}")
                else:
                    shown.append("-")
            each = ", ".join(f"{v:,.0f}" for v in ns)
            rat = ", ".join(shown)
            med = f"{median(ratios):.2f}" if ratios else "-"
            print(f"| {label} | {t} | {len(ns)} | {min(pct):.2f}% | {each} | {median(ns):,.0f} | {rat} | {med} |")
PY
