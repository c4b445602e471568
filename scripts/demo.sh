#!/usr/bin/env bash
# A first look at wirevault: records five seconds of real traffic and shows it.
#
#   scripts/demo.sh [STORE_DIR]        (default ./demo-store)
#
# As root it makes a throwaway pair of network namespaces joined by a veth
# pair (10.200.0.1 <-> 10.200.0.2, nothing else is reachable from them),
# floods pings of several sizes across it for ~5 s, and records the capture
# side with `wirevault record -i`. The namespaces are deleted on exit.
# Without root (or without namespaces) it records the synthetic generator
# instead. Then it prints where the files are and the first packets as
# tcpdump reads them.
set -euo pipefail
cd "$(dirname "$0")/.."

store=${1:-./demo-store}
target=${CARGO_TARGET_DIR:-target}
wv=${WIREVAULT:-}
if [[ -z $wv ]]; then
    for p in "$target/release/wirevault" "$target/debug/wirevault"; do
        if [[ -x $p ]]; then
            wv=$p
            break
        fi
    done
fi
if [[ -z $wv ]]; then
    echo "demo: no wirevault binary under $target/; run cargo build --release first" >&2
    exit 1
fi
wv=$(realpath "$wv")
if [[ -d $store ]] && [[ -n $(ls -A "$store") ]]; then
    echo "demo: $store is not empty; remove it or pass another directory" >&2
    exit 1
fi

show() {
    echo
    echo "Store: $store"
    echo "  catalog: $store/catalog.jsonl ($(wc -l <"$store/catalog.jsonl") closed files)"
    echo "  counters: $store/stats.json"
    local first
    first=$(head -n1 "$store/catalog.jsonl" | sed -n 's/.*"file":"\([^"]*\)".*/\1/p')
    if [[ -n $first ]]; then
        echo "  first file: $store/$first"
        if command -v tcpdump >/dev/null; then
            echo
            echo "\$ tcpdump -nr $store/$first -c 5"
            tcpdump -nr "$store/$first" -c 5 2>/dev/null || true
        fi
    fi
}

synthetic() {
    echo "demo: $1; recording the synthetic generator instead (1M IMIX frames)" >&2
    "$wv" record -q --synthetic size=imix,count=1M -o "$store" --buffer 256M
    show
}

if [[ $(id -u) -ne 0 ]]; then
    synthetic "not root (network namespaces need root)"
    exit 0
fi
if ! command -v ip >/dev/null || ! command -v ping >/dev/null; then
    synthetic "ip or ping missing (scripts/install-deps.sh installs them)"
    exit 0
fi

ns_a=wvdemo-$$-a
ns_b=wvdemo-$$-b
rec_pid=
cleanup() {
    if [[ -n $rec_pid ]] && kill -0 "$rec_pid" 2>/dev/null; then
        kill -TERM "$rec_pid" 2>/dev/null || true
        wait "$rec_pid" 2>/dev/null || true
    fi
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! ip netns add "$ns_a" 2>/dev/null || ! ip netns add "$ns_b" 2>/dev/null; then
    synthetic "cannot create network namespaces here"
    exit 0
fi
for ns in "$ns_a" "$ns_b"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip link add veth-a netns "$ns_a" type veth peer name veth-b netns "$ns_b"
ip -n "$ns_a" addr add 10.200.0.1/24 dev veth-a
ip -n "$ns_b" addr add 10.200.0.2/24 dev veth-b
ip -n "$ns_a" link set veth-a up
ip -n "$ns_b" link set veth-b up

mkdir -p "$store"
echo "demo: recording on veth-b in namespace $ns_b into $store"
ip netns exec "$ns_b" "$wv" record -i veth-b -o "$store" --buffer 256M --file-size 64M -q &
rec_pid=$!
# The recorder writes stats.json once its capture socket is open.
for _ in $(seq 200); do
    [[ -f $store/stats.json ]] && break
    kill -0 "$rec_pid" 2>/dev/null || { echo "demo: the recorder exited early" >&2; exit 1; }
    sleep 0.05
done

echo "demo: flooding pings 10.200.0.1 -> 10.200.0.2 for 5 s (56, 1000 and 1472 byte payloads)"
pids=()
for size in 56 1000 1472; do
    ip netns exec "$ns_a" ping -q -f -s "$size" -w 5 10.200.0.2 >/dev/null &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || echo "demo: a ping exited with an error" >&2
done

kill -TERM "$rec_pid"
wait "$rec_pid"
rec_pid=
show
