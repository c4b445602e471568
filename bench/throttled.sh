#!/usr/bin/env bash
# The buffer against the page cache (issue 17, "Also"): a burst of 1514-byte frames recorded
# onto a throttled disk by wirevault, tcpdump and netsniff-ng, one after the other, each on a
# fresh ext4 on a loop device whose writes are limited to WBPS bytes/s (cgroup v2 io.max on the
# loop device's major:minor, for a cgroup the tool runs in; on a cgroup v1 host the root blkio
# cgroup's blkio.throttle.write_bps_device, which also throttles the kernel's writeback
# threads). The burst (N frames, about N x 1.5 KB) is larger than the disk writes while it
# lasts, so what is stored depends on where each tool parks the rest: wirevault in its arena
# (default size from the machine's memory, or --buffer WV_BUFFER), tcpdump and netsniff-ng in
# the page cache (buffered writes, up to vm.dirty_ratio of memory).
# For each tool: stored % (packets in its files / frames sent), its CPU after start-up
# (getrusage, minus what it used before the burst), that start-up CPU, and for wirevault the
# start-up and arena pre-fault CPU it reports itself (stats.json). Flushing the page cache is
# done by kernel threads after the tool exits (at umount): not in the peers' CPU.
#
#   sudo bench/throttled.sh [DIR]   (default ./bench-throttled; the disk image lives there)
#
# Environment: N (frames, default 2000000), WBPS (write limit in bytes/s, default 200000000),
# IMG (image size, default 12G, sparse), TOOLS (default "wirevault tcpdump netsniff-ng"),
# WV_BUFFER (wirevault --buffer; default: its own default), NICE (default 0). The tool
# "wirevault-spill" is wirevault with --spill-above WV_SPILL (default 50; writes go through the
# page cache while the arena is more than half full; wirevault's default is the arena alone);
# "wirevault-zc" is the zero-copy path (--format pcapng --zero-copy: the kernel's ring is the
# buffer). wirevault faults its arena in only as the backlog needs it, at background priority (a
# disk that keeps up uses a few blocks): the burst is sent once its full rings capture
# (stats.json "rings": "full"), and the faulting the burst causes is in the CPU after start-up.
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
DIR=$(work_dir "${1:-./bench-throttled}")
N=${N:-2000000}
WBPS=${WBPS:-200000000}
IMG=${IMG:-12G}
TOOLS=${TOOLS:-wirevault tcpdump netsniff-ng}
NICE=${NICE:-0}
need_root throttled.sh
need_tools trafgen capinfos losetup mkfs.ext4 python3 ip
wv_binary
HELPER=bench/lib/live_helper.py
S=wvthr-s-$$ R=wvthr-r-$$
MNT=$DIR/mnt
LOOP=""
CG=""
MAJMIN=""
cleanup() {
  set +e
  [ -n "${TOOL_PID:-}" ] && kill -KILL "$TOOL_PID" 2>/dev/null
  mountpoint -q "$MNT" && umount "$MNT"
  if [ -n "$MAJMIN" ] && [ -z "$CG" ]; then echo "$MAJMIN 0" >/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device; fi
  [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  ip netns del "$S" 2>/dev/null
  ip netns del "$R" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "[throttled] $*" >&2; }

# --- the throttled disk --------------------------------------------------------------------------
truncate -s "$IMG" "$DIR/disk.img"
LOOP=$(losetup -f --show "$DIR/disk.img")
MAJMIN=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')
mkdir -p "$MNT"
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw io /sys/fs/cgroup/cgroup.controllers; then
  grep -qw io /sys/fs/cgroup/cgroup.subtree_control || echo +io >/sys/fs/cgroup/cgroup.subtree_control
  CG=/sys/fs/cgroup/wv-throttled-$$
  mkdir "$CG"
  echo "$MAJMIN wbps=$WBPS" >"$CG/io.max"
  how="cgroup v2 io.max wbps=$WBPS on $MAJMIN for the tool's cgroup"
elif [ -w /sys/fs/cgroup/blkio/blkio.throttle.write_bps_device ]; then
  echo "$MAJMIN $WBPS" >/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device
  how="cgroup v1 blkio.throttle.write_bps_device $WBPS on $MAJMIN (root cgroup: every writer, writeback too)"
else
  echo "no cgroup io controller to throttle with (neither cgroup v2 io nor v1 blkio)" >&2
  exit 1
fi

# --- the link ------------------------------------------------------------------------------------
netns_veth_pair "$S" "$R"
pl=$((1514 - 42))
cat >"$DIR/udp1514.cfg" <<EOF
{
  eth(da=02:00:00:00:00:02, sa=02:00:00:00:00:01, type=0x0800),
  ipv4(saddr=10.255.0.1, daddr=10.255.0.2, ttl=64, df),
  udp(sport=40000, dport=9),
  fill(0x5a, $pl)
}
EOF

tool_cmd() { # tool -> the command, one word per line
  case $1 in
    tcpdump) printf '%s\n' tcpdump -i vethB -w "$MNT/cap.pcap" -s 0 ;;
    netsniff-ng) printf '%s\n' netsniff-ng --in vethB --out "$MNT/cap.pcap" --silent ;;
    wirevault | wirevault-spill | wirevault-zc)
      printf '%s\n' "$BIN" record
      [ "$1" = wirevault-spill ] && printf '%s\n' --spill-above "${WV_SPILL:-50}"
      [ "$1" = wirevault-zc ] && printf '%s\n' --format pcapng --zero-copy
      printf '%s\n'  -i vethB -o "$MNT/store" -q --no-tune-warnings --timestamps sw
      [ -n "${WV_BUFFER:-}" ] && printf '%s\n' --buffer "$WV_BUFFER"
      ;;
  esac
  return 0
}

ROWS=$DIR/rows
: >"$ROWS"
run_one() {
  local tool=$1 cmd out=$DIR/out-$1
  mkdir -p "$out"
  mkfs.ext4 -q -F "$LOOP"
  mount "$LOOP" "$MNT"
  mapfile -t cmd < <(tool_cmd "$tool")
  local enter=()
  # shellcheck disable=SC2016 # $$ and $0 are the inner shell's
  [ -n "$CG" ] && enter=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG")
  ip netns exec "$R" nice -n "$NICE" "${enter[@]}" python3 "$HELPER" run "$out/rusage" -- "${cmd[@]}" \
    >"$out/stdout" 2>"$out/stderr" &
  local wrapper=$! i=0
  while [ ! -s "$out/rusage.pid" ]; do sleep 0.02; i=$((i + 1)); [ $i -lt 500 ] || break; done
  TOOL_PID=$(cat "$out/rusage.pid" 2>/dev/null || true)
  local marker=()
  case $tool in
    tcpdump) marker=("$out/stderr" 'listening on') ;;
    netsniff-ng) marker=("$out/stdout" 'Running!') ;;
    wirevault*) marker=("$MNT/store/stats.json" 'state') ;;
  esac
  ip netns exec "$R" python3 "$HELPER" ready "$TOOL_PID" 60 "${marker[@]}" >/dev/null
  # wirevault captures at once on a small ring and its full rings follow: the burst comes once
  # they capture (a recorder is started before the traffic it must keep).
  case $tool in
    wirevault*)
      for _ in $(seq 1200); do
        grep -q '"rings":"full"' "$MNT/store/stats.json" 2>/dev/null && break
        sleep 0.1
      done
      ;;
  esac
  local startup t0 gen_s
  startup=$(python3 "$HELPER" cpu "$TOOL_PID")
  t0=$(now)
  ip netns exec "$S" nice -n "$NICE" trafgen --no-sock-mem -i "$DIR/udp1514.cfg" -o vethA -n "$N" -P 1 -q >/dev/null 2>&1 || true
  gen_s=$(since "$t0")
  # Until the tool has stopped working (wirevault: its arena drained to the disk).
  python3 "$HELPER" idle "$TOOL_PID" 2 600 >/dev/null
  kill -INT "$TOOL_PID" 2>/dev/null || true
  for _ in $(seq 600); do kill -0 "$TOOL_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$TOOL_PID" 2>/dev/null || true
  wait "$wrapper" || true
  TOOL_PID=""
  local usr sys stored=0 f c extra=""
  read -r _ usr sys <"$out/rusage"
  for f in "$MNT"/cap.pcap "$MNT"/store/stream-*/*.pcap "$MNT"/store/stream-*/*.pcapng; do
    [ -f "$f" ] || continue
    c=$(capinfos -c -M -T -r "$f" 2>/dev/null | awk -F'\t' '{print $2}')
    stored=$((stored + ${c:-0}))
  done
  if [ "${tool%-*}" = wirevault ] || [ "$tool" = wirevault ]; then
    local w su pf bg ab af sp kd
    read -r w su pf bg ab af sp kd < <(stats "$MNT/store/stats.json" written startup_cpu_s arena_prefault_cpu_s arena_background_cpu_s=0 arena_bytes dropped.arena_full spilled_bytes dropped.kernel=0)
    [ "$w" = "$stored" ] || extra="stats.json written $w but the files hold $stored; "
    if [ "$ab" = 0 ]; then
      extra="${extra}no arena: the kernel's ring (set up in the ${su}s of start-up) is the buffer"
    else
      local used
      read -r used < <(stats "$MNT/store/stats.json" arena_used_bytes=0)
      extra="${extra}arena $((ab >> 20)) MiB, $((used >> 20)) MiB of it used: ${pf}s CPU faulting before capture (of ${su}s start-up), ${bg}s in the background; arena-full drops $af, kernel drops $kd, spilled $((sp >> 20)) MiB"
    fi
  fi
  umount "$MNT"
  local cpu
  cpu=$(calc "max(0.0, $usr + $sys - $startup)" .2f)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$N" "$stored" "$(calc "100.0 * $stored / $N" .2f)" \
    "$cpu" "$(calc "$startup" .2f)" "$gen_s" "$extra" >>"$ROWS"
  log "$tool: stored $stored of $N, CPU ${cpu}s after start-up ${startup}s; burst ${gen_s}s; $extra"
}

for t in $TOOLS; do
  if ! have "$(tool_cmd "$t" | head -1)"; then
    printf '%s\t%s\t-\t-\t-\t-\t-\tnot installed\n' "$t" "$N" >>"$ROWS"
    continue
  fi
  run_one "$t"
done

echo "throttled.sh: $N frames of 1514 B in one burst (trafgen, 1 thread) onto ext4 on $LOOP, $how; $(nproc) CPUs, $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) MiB RAM, $(stamp), revision $(revision)"
echo
table_header "tool" "sent" "stored" "stored %" "CPU s after start-up" "start-up CPU s" "burst s" "notes"
while IFS=$'\t' read -r a b c d e f g h; do table_row "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h"; done <"$ROWS"
