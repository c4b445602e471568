#!/usr/bin/env bash
# The HTTP API's cost (issue "A recorder people reach"), three parts in one run:
#
#   sudo bench/serve.sh [WORKDIR]        (WORKDIR on the disk under test; removed afterwards)
#
# 1. Export speed: `curl -o /dev/null` of /api/v1/query against `wirevault query -w /dev/null`
#    with the same arguments over the same synthetic IMIX store (warm cache, best of 3):
#    one large result (the whole store) and many small ones (Q one-flow queries, in sequence:
#    one curl per query, and all of them from one curl on one kept-alive connection).
#    Goal: HTTP >= 90% of the CLI's speed. What each side does: the CLI reads and checks every
#    record, copies it into a 1 MiB buffer and writes that to /dev/null (which copies nothing);
#    the server's query thread (nice 10, as every API query: capture first) does the same into
#    buffers it hands to hyper, which copies them into the socket; curl copies them out of it
#    and writes them to /dev/null. Besides the times, the table gives the CPU seconds of each
#    side (CLI process; server process + curl), the CLI at the server's query priority
#    (nice 10), the server with --query-nice 0 (its query thread then competes with its own
#    consumers, hyper's threads and curl, on equal terms), and the ceiling of this machine's loopback TCP with curl: a Python server that
#    does no query work, only writes the store's files (as many bytes) in 1 MiB writes.
# 2. Capture under query load: a recording with --listen in a network namespace, fed by trafgen
#    on both CPUs (bench/live.sh's contention scenario, 1514-byte frames), once without clients
#    and once while 8 clients query continuously (count and pcap of the last seconds with a
#    filter, through curl in the namespace). Goal: >= 99.9% of the arrived frames stored; the
#    table gives drops by cause and the clients' throughput.
# 3. Latency of /metrics and /api/v1/status while recording at full rate, in both of part 2's
#    runs (without and with the 8 clients): p50 and p99 over M requests each on one kept-alive
#    connection (a Python client). Goal: p99 < 10 ms. The client runs under SCHED_FIFO
#    (`chrt -f 10`), so that what is measured is the server's answer, as a Prometheus on
#    another host sees it, not the client's own wait for one of the two CPUs the flood
#    saturates; /metrics is measured once more from a client at nice 0 beside the flood.
#
# Environment: WIREVAULT (binary), SIZE_GB (store for part 1, default 4), Q (small queries,
# default 200), N (frames per recording, default 3M), M (latency samples, default 300), NICE
# (of the recorder and trafgen, default -10 as in bench/live.sh), EXPORT_ONLY=1 (part 1 only).
# `--markdown` as the first argument also writes the tables into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
ROOT=$BENCH_ROOT
need_root serve.sh
need_tools curl trafgen ip python3 chrt
wv_binary
SIZE_GB=${SIZE_GB:-4}
Q=${Q:-200}
N=${N:-3000000}
M=${M:-300}
NICE=${NICE:--10} # recorder and generator, as in bench/live.sh (clients and their server threads stay at 0)
WORK=$(realpath -m "${1:-$ROOT/bench-serve.$$}")
S=wvsrv-s$$
R=wvsrv-r$$
SERVE_PID=""
cleanup() {
  set +e
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null
  ip netns del "$S" 2>/dev/null
  ip netns del "$R" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK"
log() { echo "[serve] $*" >&2; }

# --- 1. export speed ------------------------------------------------------------------------------
STORE="$WORK/store"
count=$((SIZE_GB * 1000000000 / 590))
log "part 1: recording a ${SIZE_GB} GB IMIX store ($count frames)"
"$BIN" record --synthetic "size=imix,count=$count,flows=1000" -o "$STORE" -q --no-tune-warnings >/dev/null 2>&1
PORT=18099
"$BIN" serve "$STORE" --listen "127.0.0.1:$PORT" --max-bytes 1T 2>"$WORK/serve.log" &
SERVE_PID=$!
for _ in $(seq 100); do grep -q 'api: serving' "$WORK/serve.log" 2>/dev/null && break; sleep 0.05; done
URL="http://127.0.0.1:$PORT/api/v1/query"
cat "$STORE"/stream-*/*.pcap >/dev/null # warm the page cache
bytes=$(curl -s -o /dev/null -w '%{size_download}' "$URL")
# CPU seconds (user + system) of a command and its children.
cpu_of() { python3 -c 'import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); r = resource.getrusage(resource.RUSAGE_CHILDREN); print(f"{r.ru_utime + r.ru_stime:.2f}")' "$@"; }
# CPU seconds the server has used so far.
srv_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f\n", ($14 + $15) / hz}' "/proc/$SERVE_PID/stat"; }
cli_big=$(best_of 3 "$BIN" query "$STORE" -w /dev/null)
cli_big_n10=$(best_of 3 nice -n 10 "$BIN" query "$STORE" -w /dev/null)
http_big=$(best_of 3 curl -s -o /dev/null "$URL")
cli_big_cpu=$(cpu_of "$BIN" query "$STORE" -w /dev/null)
s0=$(srv_cpu)
curl_big_cpu=$(cpu_of curl -s -o /dev/null "$URL")
http_big_cpu=$(calc "$(srv_cpu) - $s0 + $curl_big_cpu" .2f)
# Small: one flow each (the synthetic flows differ in their UDP source port).
small_cli() { for i in $(seq "$Q"); do ${PRIO:-} "$BIN" query "$STORE" -w /dev/null "udp src port $((1024 + i % 1000))"; done; }
small_http() { for i in $(seq "$Q"); do curl -s -o /dev/null -G --data-urlencode "filter=udp src port $((1024 + i % 1000))" "$URL"; done; }
# The same queries from one client on one kept-alive connection (curl -K with Q URLs): the
# server's work per query without curl's own start-up (~6 ms here, against ~4 ms for wirevault's).
for i in $(seq "$Q"); do printf 'url = "%s?filter=udp%%20src%%20port%%20%d"\noutput = "/dev/null"\n' "$URL" $((1024 + i % 1000)); done >"$WORK/small.curl"
small_http_kept() { curl -s -K "$WORK/small.curl"; }
cli_small=$(best_of 3 small_cli)
cli_small_n10=$(PRIO="nice -n 10" best_of 3 small_cli)
http_small=$(best_of 3 small_http)
http_small_kept=$(best_of 3 small_http_kept)
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""
# The same server with its query threads at the priority of everything else (capture's).
"$BIN" serve "$STORE" --listen "127.0.0.1:$PORT" --max-bytes 1T --query-nice 0 2>"$WORK/serve0.log" &
SERVE_PID=$!
for _ in $(seq 100); do grep -q 'api: serving' "$WORK/serve0.log" 2>/dev/null && break; sleep 0.05; done
http_big_n0=$(best_of 3 curl -s -o /dev/null "$URL")
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""
# The ceiling: loopback TCP and curl alone, as many bytes from the page cache, no query work.
python3 - "$PORT" "$WORK/ceiling.ready" "$STORE"/stream-*/*.pcap <<'PY' &
import socket, sys, os
port, ready, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", port)); s.listen()
open(ready, "w").close()
total = sum(os.path.getsize(f) for f in files)
buf = bytearray(1 << 20)
for _ in range(3):
    c, _ = s.accept(); c.recv(65536)
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % total)
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while (n := fh.readinto(buf)):
                c.sendall(memoryview(buf)[:n])
    c.close()
PY
SERVE_PID=$!
for _ in $(seq 100); do [ -e "$WORK/ceiling.ready" ] && break; sleep 0.05; done
ceil_big=$(best_of 3 curl -sf -o /dev/null "http://127.0.0.1:$PORT/")
wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""
rate() { calc "$1 / $2 / 1e6" .0f; }

# --- 2 and 3. capture under query load -----------------------------------------------------------
netns_veth_pair "$S" "$R"
DST_MAC=02:00:00:00:00:02
cat >"$WORK/udp1514.cfg" <<EOF
{
  eth(da=$DST_MAC, sa=02:00:00:00:00:01, type=0x0800),
  ipv4(saddr=10.255.0.1, daddr=10.255.0.2, ttl=64, df),
  udp(sport=40000, dport=9),
  fill(0x5a, $((1514 - 42)))
}
EOF
rxp() { ip netns exec "$R" cat /sys/class/net/vethB/statistics/rx_packets; }
clients() { # base_url seconds_file -> runs 8 query loops until the file disappears
  local base=$1 flag=$2 k
  for k in 1 2 3 4 5 6 7 8; do
    (
      n=0 b=0
      while [ -e "$flag" ]; do
        if [ $((k % 2)) = 0 ]; then
          s=$(ip netns exec "$R" curl -s -o /dev/null -w '%{size_download}' -G --data-urlencode 'from=5s ago' --data-urlencode 'filter=udp and greater 1000' "$base/api/v1/query")
        else
          s=$(ip netns exec "$R" curl -s -o /dev/null -w '%{size_download}' -G --data-urlencode 'filter=udp port 9' "$base/api/v1/count")
        fi
        n=$((n + 1)); b=$((b + ${s:-0}))
      done
      echo "$n $b" >"$WORK/client.$k"
    ) &
  done
}
latency() { # prio host:port path -> p50 p99 in ms, over one kept-alive connection (python's http.client)
  local prio=$1; shift
  # shellcheck disable=SC2086
  ip netns exec "$R" $prio python3 - "$1" "$2" "$M" <<'PY'
import http.client, sys, time
host, path, m = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection(host, timeout=30)
v = []
for _ in range(m):
    t = time.perf_counter()
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    v.append((time.perf_counter() - t) * 1e3)
    assert r.status == 200, r.status
v.sort()
print(f"{v[len(v)//2]:.2f} {v[min(len(v)-1, int(len(v)*0.99))]:.2f}")
PY
}
LATENCY=""
record_run() { # label with_clients
  local label=$1 load=$2 out="$WORK/live-$1"
  rm -rf "$out"; mkdir -p "$out"
  ip netns exec "$R" nice -n "$NICE" "$BIN" record -i vethB -o "$out/store" --buffer 256M -q --no-tune-warnings --listen 127.0.0.1:8080 2>"$out/log" &
  local rec=$!
  for _ in $(seq 300); do [ -s "$out/store/stats.json" ] && grep -q state "$out/store/stats.json" && break; sleep 0.05; done
  local flag="$out/clients.on" rx0 t0 t1
  rm -f "$WORK"/client.*
  if [ "$load" = 1 ]; then touch "$flag"; clients http://127.0.0.1:8080 "$flag"; fi
  rx0=$(rxp); t0=$(now)
  ip netns exec "$S" nice -n "$NICE" trafgen --no-sock-mem -i "$WORK/udp1514.cfg" -o vethA -n "$N" -P 2 -q >/dev/null 2>&1 &
  local gen=$!
  sleep 1
  local mp50 mp99 sp50 sp99 np50 np99
  read -r mp50 mp99 < <(latency "chrt -f 10" 127.0.0.1:8080 /metrics)
  read -r sp50 sp99 < <(latency "chrt -f 10" 127.0.0.1:8080 /api/v1/status)
  read -r np50 np99 < <(latency "nice -n 0" 127.0.0.1:8080 /metrics)
  LATENCY="$LATENCY$(table_row "/metrics, $label" "client never waits for a CPU (SCHED_FIFO)" "$mp50" "$mp99")
$(table_row "/api/v1/status, $label" "client never waits for a CPU (SCHED_FIFO)" "$sp50" "$sp99")
$(table_row "/metrics, $label" "client at nice 0, beside the flood" "$np50" "$np99")
"
  kill -0 "$gen" 2>/dev/null || echo "note: the $label run's traffic ended before the latency samples did" >>"$WORK/notes"
  wait "$gen"; t1=$(now)
  rm -f "$flag"; wait_clients=$(jobs -p | grep -v "^$rec\$" || true)
  # shellcheck disable=SC2086
  [ -n "$wait_clients" ] && wait $wait_clients 2>/dev/null
  sleep 2
  kill -INT "$rec"; wait "$rec" || true
  local arrived written qn=0 qb=0 f
  arrived=$(($(rxp) - rx0))
  written=$(python3 -c "import json;print(json.load(open('$out/store/stats.json'))['written'])")
  drops=$(python3 -c "import json;d=json.load(open('$out/store/stats.json'))['dropped'];print(' '.join(f'{k}={v}' for k,v in d.items() if v))")
  for f in "$WORK"/client.*; do [ -e "$f" ] || continue; read -r a b <"$f"; qn=$((qn + a)); qb=$((qb + b)); done
  local secs; secs=$(calc "$t1 - $t0" .1f)
  table_row "$label" "$arrived" "$(calc "100 * $written / max($arrived, 1)" .3f)%" "${drops:-none}" "$qn in ${secs}s ($(calc "$qn / $secs" .1f)/s)" "$(calc "$qb / 1e6" .0f) MB"
  rm -rf "$out"
}

echo
echo "## HTTP API ($(stamp), $(revision))"
echo
echo "### Export speed (warm cache, best of 3; goal HTTP >= 90% of the CLI)"
echo
table_header "query" "CLI -w /dev/null" "HTTP (curl -o /dev/null)" "HTTP / CLI" "CLI at nice 10" "HTTP / CLI at nice 10"
table_row "whole store, $(calc "$bytes / 1e9" .2f) GB" "$(rate "$bytes" "$cli_big") MB/s ($cli_big s)" "$(rate "$bytes" "$http_big") MB/s ($http_big s)" "$(calc "100 * $cli_big / $http_big" .0f)%" "$cli_big_n10 s" "$(calc "100 * $cli_big_n10 / $http_big" .0f)%"
table_row "$Q one-flow queries" "$cli_small s" "$http_small s" "$(calc "100 * $cli_small / $http_small" .0f)%" "$cli_small_n10 s" "$(calc "100 * $cli_small_n10 / $http_small" .0f)%"
table_row "$Q one-flow queries, one client kept alive" "$cli_small s" "$http_small_kept s" "$(calc "100 * $cli_small / $http_small_kept" .0f)%" "$cli_small_n10 s" "$(calc "100 * $cli_small_n10 / $http_small_kept" .0f)%"
echo
echo "CPU seconds of one whole-store export: CLI $cli_big_cpu s; HTTP $http_big_cpu s (server and curl)."
echo "HTTP with --query-nice 0 (query threads at capture's priority): $(rate "$bytes" "$http_big_n0") MB/s ($http_big_n0 s), $(calc "100 * $cli_big / $http_big_n0" .0f)% of the CLI."
echo "Ceiling of loopback TCP with curl on this machine (no query work, $(calc "$bytes / 1e9" .2f) GB of stored files in 1 MiB writes): $(rate "$bytes" "$ceil_big") MB/s ($ceil_big s), $(calc "100 * $cli_big / $ceil_big" .0f)% of the CLI."
if [ "${EXPORT_ONLY:-0}" = 1 ]; then exit 0; fi
echo
echo "### Capture under query load (trafgen on 2 CPUs, 1514-byte frames, $N per run; goal >= 99.9% stored)"
echo
table_header "run" "arrived" "stored" "drops" "client requests" "client bytes"
record_run "no clients" 0
record_run "8 clients" 1
echo
echo "### Latency while recording at full rate ($M requests each, during the runs above; goal p99 < 10 ms)"
echo
table_header "endpoint, run" "client" "p50 ms" "p99 ms"
printf '%s' "$LATENCY"
if [ -s "$WORK/notes" ]; then cat "$WORK/notes"; fi
