#!/usr/bin/env bash
# A wirevault fleet on one machine, in network namespaces (docs/fleet.md):
#
#   sender --veth--> splitter ==tc hash==> lnk0 --> recorder 0 (wirevault record)
#                        |               \=> lnk1 --> recorder 1
#                        |                \=> lnk2 --> recorder 2
#                        +-- tcpdump on its ingress: the unsplit capture (the oracle)
#
# The splitter does what a switch's link aggregation does with a symmetric
# hash: every frame goes to one link, chosen by a hash of its IP addresses
# that is the same for both directions of a conversation (src XOR dst). The
# kernel here has no bonding driver, so the hash is tc's: one classic-BPF
# classifier per link on the splitter's ingress, compiled from a pcap
# expression by tcpdump, with a mirred redirect to that link.
#
# Usage (as root):
#   scripts/fleet-lab.sh [OPTIONS] up            build, start, print the fleet file's path
#   scripts/fleet-lab.sh [OPTIONS] send PCAP [TCPREPLAY-OPTIONS]
#                                                replay a capture into the splitter and wait
#                                                until every recorder has it queryable
#   scripts/fleet-lab.sh [OPTIONS] stop          end the captures (recorders flush and close
#                                                their files; the servers go on serving)
#   scripts/fleet-lab.sh [OPTIONS] status        what runs, the links' packet counts
#   scripts/fleet-lab.sh [OPTIONS] down          stop everything, delete the namespaces
#   scripts/fleet-lab.sh pcap OUT [SEED [ROUNDS]] write a test capture: TCP, UDP, ICMP, IPv6,
#                                                802.1Q, QinQ and ARP conversations, both
#                                                directions (ROUNDS times 56 conversations)
# Options:
#   --dir DIR         the lab's directory: stores, logs, fleet file (default /var/tmp/wirevault-fleet-lab)
#   --name PREFIX     namespace prefix (default wvlab): PREFIX-snd, PREFIX-split, PREFIX-lnkN
#   --nodes N         links and recorders (default 3, at most 8)
#   --asymmetric      hash on the source address alone: a conversation's directions
#                     land on two links (the Arkime failure a fleet query must still merge)
#   --port-base P     node N serves on 127.0.0.1:P+N (default 18080)
#   --bin PATH        the wirevault binary (default: $WIREVAULT, target/{release,debug}/wirevault, PATH)
#   --record-args A   more options for every `wirevault record` (one string, split on spaces)
# The options given to `up` are remembered in DIR/lab.env; later commands need only --dir.
set -Eeuo pipefail

dir=/var/tmp/wirevault-fleet-lab
name=wvlab
nodes=3
hash=symmetric
port_base=18080
wv=${WIREVAULT:-}
record_args=""

die() {
    echo "fleet-lab: $*" >&2
    exit 1
}

usage() {
    sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# ---- the test capture --------------------------------------------------------------------

# Writes a deterministic pcap (µs) of conversations between 12 hosts: every frame unique
# (IP ident or sequence numbers), checksums right, both directions of each conversation.
write_pcap() {
    python3 - "$1" "${2:-1}" "${3:-1}" <<'EOF'
import random, struct, sys
out, seed, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)

def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff

ident = [0]
def ip4(s, d, proto, l4):
    ident[0] += 1
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(l4), ident[0] & 0xffff, 0x4000, 64, proto, 0, s, d)
    h = h[:10] + struct.pack('!H', csum(h)) + h[12:]
    return h + l4

def ip6(s, d, proto, l4):
    ident[0] += 1
    return struct.pack('!IHBB16s16s', 0x60000000 | (ident[0] & 0xfffff), len(l4), proto, 64, s, d) + l4

def l4sum(v6, s, d, proto, seg, off):
    pseudo = s + d + (struct.pack('!IxxxB', len(seg), proto) if v6 else struct.pack('!xBH', proto, len(seg)))
    c = csum(pseudo + seg) or 0xffff
    return seg[:off] + struct.pack('!H', c) + seg[off + 2:]

def tcp(sp, dp, seq, ack, flags, payload=b''):
    return struct.pack('!HHIIBBHHH', sp, dp, seq, ack, 0x50, flags, 65535, 0, 0) + payload

def udp(sp, dp, payload):
    return struct.pack('!HHHH', sp, dp, 8 + len(payload), 0) + payload

class Host:
    def __init__(self, addr, vlan=None):
        self.v6 = ':' in addr
        if self.v6:
            import ipaddress
            self.a = ipaddress.IPv6Address(addr).packed
        else:
            self.a = bytes(int(x) for x in addr.split('.'))
        self.mac = bytes([2, 0]) + self.a[-4:]
        self.vlan = vlan

def frame(src, dst, proto, l4, off):
    ip = ip6 if src.v6 else ip4
    if off is not None:
        l4 = l4sum(src.v6, src.a, dst.a, proto, l4, off)
    e = dst.mac + src.mac
    if src.vlan is not None:
        for tpid, vid in src.vlan:
            e += struct.pack('!HH', tpid, vid)
    e += struct.pack('!H', 0x86dd if src.v6 else 0x0800)
    return e + ip(src.a, dst.a, proto, l4)

clients = [Host('10.1.0.%d' % i) for i in range(1, 7)]
servers = [Host('10.2.0.%d' % i) for i in range(1, 4)]
v6c = [Host('fd00::1:%d' % i) for i in range(1, 3)]
v6s = [Host('fd00::2:1')]
vlc = [Host('10.10.0.%d' % i, [(0x8100, 10)]) for i in range(1, 3)]
vls = [Host('10.10.1.1', [(0x8100, 10)])]
qqc = [Host('10.20.0.1', [(0x88a8, 100), (0x8100, 20)])]
qqs = [Host('10.20.1.1', [(0x88a8, 100), (0x8100, 20)])]

def tcp_conv(c, s, port):
    sp = rng.randrange(20000, 60000)
    a, b = rng.randrange(1 << 32), rng.randrange(1 << 32)
    P = 6
    yield frame(c, s, P, tcp(sp, port, a, 0, 0x02), 16)
    yield frame(s, c, P, tcp(port, sp, b, a + 1, 0x12), 16)
    yield frame(c, s, P, tcp(sp, port, a + 1, b + 1, 0x10), 16)
    a += 1; b += 1
    for _ in range(rng.randrange(2, 8)):
        n = rng.randrange(1, 1400)
        yield frame(c, s, P, tcp(sp, port, a, b, 0x18, bytes(rng.randrange(256) for _ in range(n))), 16)
        a += n
        m = rng.randrange(1, 3000)
        yield frame(s, c, P, tcp(port, sp, b, a, 0x18, bytes(rng.randrange(256) for _ in range(m))), 16)
        b += m
    yield frame(c, s, P, tcp(sp, port, a, b, 0x11), 16)
    yield frame(s, c, P, tcp(port, sp, b, a + 1, 0x11), 16)
    yield frame(c, s, P, tcp(sp, port, a + 1, b + 1, 0x10), 16)

def udp_conv(c, s, port):
    sp = rng.randrange(20000, 60000)
    for _ in range(rng.randrange(1, 4)):
        yield frame(c, s, 17, udp(sp, port, bytes(rng.randrange(256) for _ in range(rng.randrange(20, 200)))), 6)
        yield frame(s, c, 17, udp(port, sp, bytes(rng.randrange(256) for _ in range(rng.randrange(20, 600)))), 6)

def icmp_conv(c, s):
    ident = rng.randrange(1 << 16)
    for seq in range(1, rng.randrange(2, 5)):
        for src, dst, t in ((c, s, 8), (s, c, 0)):
            m = struct.pack('!BBHHH', t, 0, 0, ident, seq) + bytes(56)
            m = m[:2] + struct.pack('!H', csum(m)) + m[4:]
            yield frame(src, dst, 1, m, None)

def arp_conv(c, s):
    for op, src, dst in ((1, c, s), (2, s, c)):
        tmac = b'\xff' * 6 if op == 1 else dst.mac
        body = struct.pack('!HHBBH6s4s6s4s', 1, 0x0800, 6, 4, op, src.mac, src.a, bytes(6) if op == 1 else dst.mac, dst.a)
        yield tmac + src.mac + struct.pack('!H', 0x0806) + body + bytes(18)

convs = []
for _ in range(rounds):
    for c in clients:
        for s in servers:
            convs.append(tcp_conv(c, s, rng.choice([80, 443, 22])))
            convs.append(udp_conv(c, s, 53))
        convs.append(icmp_conv(c, rng.choice(servers)))
    for c in v6c:
        convs += [tcp_conv(c, v6s[0], 443), udp_conv(c, v6s[0], 53), udp_conv(c, v6s[0], 123)]
    for c in vlc:
        convs += [tcp_conv(c, vls[0], 80), udp_conv(c, vls[0], 514)]
    convs += [tcp_conv(qqc[0], qqs[0], 8080), udp_conv(qqc[0], qqs[0], 53)]
convs += [arp_conv(clients[0], clients[1]), arp_conv(servers[0], servers[2])]

frames = []
live = list(convs)
while live:
    g = rng.choice(live)
    try:
        frames.append(next(g))
    except StopIteration:
        live.remove(g)

t = 1_700_000_000 * 10**6
with open(out, 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1))
    for p in frames:
        t += rng.randrange(100, 2000)
        f.write(struct.pack('<IIII', t // 10**6, t % 10**6, len(p), len(p)) + p)
print('%s: %d frames, %d conversations' % (out, len(frames), len(convs)))
EOF
}

# ---- the hash ----------------------------------------------------------------------------

# The pcap expression of the hash key as a 32-bit number. Symmetric: the XOR of source and
# destination (the same for both directions), folded so that its low bits depend on all of
# it. Asymmetric: the source alone. Offsets are from the Ethernet header as the splitter's
# ingress sees it: the kernel has moved the outer VLAN tag into the packet's metadata
# (mirred carries it on), so a single-tagged frame looks untagged and QinQ shows its inner tag.
key_expr() { # $1, $2: byte offsets of the source and destination address, $3: its 32-bit words
    local s d i
    s="ether[$1:4]" d="ether[$2:4]"
    for ((i = 1; i < $3; i++)); do
        s="$s ^ ether[$(($1 + 4 * i)):4]" d="$d ^ ether[$(($2 + 4 * i)):4]"
    done
    if [[ $hash == symmetric ]]; then echo "(($s) ^ ($d))"; else echo "($s)"; fi
}

mac_key() {
    local s="(ether[6:4] ^ ether[10:2])" d="(ether[0:4] ^ ether[4:2])"
    if [[ $hash == symmetric ]]; then echo "($s ^ $d)"; else echo "$s"; fi
}

# The pcap expression true for the frames of link $1.
link_expr() {
    local i=$1 n=$nodes tag="(ether[12:2] = 0x8100 or ether[12:2] = 0x88a8)"
    fold() { echo "(($1 ^ ($1 >> 16)) ^ (($1 ^ ($1 >> 16)) >> 8)) % $n = $i"; }
    local v4="ether[12:2] = 0x0800" v6="ether[12:2] = 0x86dd"
    local t4="$tag and ether[16:2] = 0x0800" t6="$tag and ether[16:2] = 0x86dd"
    # ARP by its sender and target IP addresses (at 28 and 38, as IPv4's at 26 and 30), so that
    # a request, broadcast, goes with its reply.
    local arp="ether[12:2] = 0x0806"
    echo "($v4 and $(fold "$(key_expr 26 30 1)"))" \
        "or ($v6 and $(fold "$(key_expr 22 38 4)"))" \
        "or ($t4 and $(fold "$(key_expr 30 34 1)"))" \
        "or ($t6 and $(fold "$(key_expr 26 42 4)"))" \
        "or ($arp and $(fold "$(key_expr 28 38 1)"))" \
        "or (not ($v4 or $v6 or ($t4) or ($t6) or $arp) and $(fold "$(mac_key)"))"
}

# ---- the lab -----------------------------------------------------------------------------

state() { echo "$dir/lab.env"; }

in_ns() {
    local ns=$1
    shift
    ip netns exec "$ns" "$@"
}

# A namespace that sends nothing on its own: no IPv6 (no ND, MLD), set before any link exists.
make_ns() {
    ip netns add "$1"
    in_ns "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    in_ns "$1" ip link set lo up
}

link_up() { # ns dev
    ip -n "$1" link set dev "$2" mtu 9000 arp off multicast off up
}

wait_carrier() { # ns dev
    local i
    for ((i = 0; i < 500; i++)); do
        ip -n "$1" -o link show dev "$2" | grep -q LOWER_UP && return 0
        sleep 0.02
    done
    die "$2 in $1 never came up"
}

# Starts "$@" in the background, detached, its output in logs/$1.log, its pid in pids/$1.
spawn() {
    local tag=$1
    shift
    setsid "$@" </dev/null >"$dir/logs/$tag.log" 2>&1 &
    echo $! >"$dir/pids/$tag"
}

# Whether process $1 runs. An ended process whose parent has gone stays a zombie until
# init reaps it, which on some VMs takes seconds: a zombie has ended.
alive() {
    local st
    st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    st=${st##*) }
    [[ ${st%% *} != Z ]]
}

# Ends the process of pids/$1 (SIGTERM, then SIGKILL after 30 s) if it is still the one we
# started (its command line names $2).
reap() {
    local f="$dir/pids/$1" pid i
    [[ -f $f ]] || return 0
    pid=$(<"$f")
    if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$2"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 3000; i++)); do
            alive "$pid" || break
            sleep 0.01
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
}

find_bin() {
    if [[ -z $wv ]]; then
        local root
        root=$(cd "$(dirname "$0")/.." && pwd)
        for p in "$root/target/release/wirevault" "$root/target/debug/wirevault" "$(command -v wirevault || true)"; do
            if [[ -n $p && -x $p ]]; then
                wv=$p
                break
            fi
        done
    fi
    [[ -n $wv && -x $wv ]] || die "no wirevault binary: build it (cargo build --release) or pass --bin PATH"
    wv=$(realpath "$wv")
}

json_field() { # file key: a top-level scalar of a JSON file, or nothing
    python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))
except Exception: pass' "$1" "$2"
}

wait_recorder() { # node
    local st="$dir/store-lnk$1/stats.json" i
    for ((i = 0; i < 1500; i++)); do
        if [[ -f $st && $(json_field "$st" state) == capturing && $(json_field "$st" rings) != small ]]; then
            return 0
        fi
        alive "$(<"$dir/pids/rec$1")" || die "recorder $1 ended: $(tail -3 "$dir/logs/rec$1.log")"
        sleep 0.02
    done
    die "recorder $1 did not start capturing in 30 s: $(tail -3 "$dir/logs/rec$1.log")"
}

wait_server() { # node
    local i url="http://127.0.0.1:$((port_base + $1))/api/v1/status"
    for ((i = 0; i < 1500; i++)); do
        if curl -sf -o /dev/null -H "Authorization: Bearer $(<"$dir/tokens/lnk$1.token")" "$url"; then
            return 0
        fi
        alive "$(<"$dir/pids/serve$1")" || die "server $1 ended: $(tail -3 "$dir/logs/serve$1.log")"
        sleep 0.02
    done
    die "server $1 did not answer $url in 30 s"
}

build_links() {
    local i
    make_ns "$name-snd"
    make_ns "$name-split"
    ip link add snd0 netns "$name-snd" type veth peer name in0 netns "$name-split"
    link_up "$name-snd" snd0
    link_up "$name-split" in0
    for ((i = 0; i < nodes; i++)); do
        make_ns "$name-lnk$i"
        ip link add "lnk$i" netns "$name-split" type veth peer name "lnk$i" netns "$name-lnk$i"
        link_up "$name-split" "lnk$i"
        link_up "$name-lnk$i" "lnk$i"
    done
    wait_carrier "$name-snd" snd0
    for ((i = 0; i < nodes; i++)); do wait_carrier "$name-lnk$i" "lnk$i"; done
}

# One classifier per link, in order; a frame none of them takes (one too short for its
# headers: a load past its end fails the program) goes to link 0, so nothing is lost.
build_hash() {
    local i bc ns="$name-split"
    in_ns "$ns" tc qdisc add dev in0 clsact
    for ((i = 0; i < nodes; i++)); do
        link_expr "$i" >"$dir/hash-lnk$i.txt"
        bc=$(tcpdump -y EN10MB -ddd "$(<"$dir/hash-lnk$i.txt")" | tr '\n' ',' | sed 's/,$//') ||
            die "tcpdump cannot compile the hash of link $i"
        in_ns "$ns" tc filter add dev in0 ingress pref $((i + 1)) bpf bytecode "$bc" \
            action mirred egress redirect dev "lnk$i"
    done
    in_ns "$ns" tc filter add dev in0 ingress pref 100 u32 match u32 0 0 action mirred egress redirect dev lnk0
}

start_nodes() {
    local i token
    mkdir -p "$dir/tokens"
    chmod 700 "$dir/tokens"
    for ((i = 0; i < nodes; i++)); do
        # shellcheck disable=SC2086 # --record-args is a list of words
        spawn "rec$i" ip netns exec "$name-lnk$i" "$wv" record -i "lnk$i" -o "$dir/store-lnk$i" -q \
            --no-tune-warnings --ring-size 32M --buffer 64M $record_args
    done
    for ((i = 0; i < nodes; i++)); do wait_recorder "$i"; done
    # record --listen would bind inside the recorder's namespace, out of the host's reach
    # (and any address but loopback needs TLS): serve reads the same store, live files
    # included, on the host's loopback, with a bearer token as a fleet over a network needs.
    for ((i = 0; i < nodes; i++)); do
        token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
        (
            umask 077
            echo "fleet:$token" >"$dir/tokens/lnk$i.server"
            echo "$token" >"$dir/tokens/lnk$i.token"
        )
        spawn "serve$i" "$wv" serve "$dir/store-lnk$i" --listen "127.0.0.1:$((port_base + i))" \
            --token-file "$dir/tokens/lnk$i.server"
    done
    for ((i = 0; i < nodes; i++)); do wait_server "$i"; done
}

write_fleet() {
    local i f="$dir/fleet.toml"
    {
        echo "# The fleet of scripts/fleet-lab.sh ($hash hash over $nodes links)."
        for ((i = 0; i < nodes; i++)); do
            echo
            echo "[[node]]"
            echo "name = \"lnk$i\""
            echo "url = \"http://127.0.0.1:$((port_base + i))\""
            echo "token_file = \"$dir/tokens/lnk$i.token\""
            echo "# store = \"$dir/store-lnk$i\""
        done
    } >"$f"
    echo "$f"
}

cmd_up() {
    [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, tc, AF_PACKET)"
    ((nodes >= 1 && nodes <= 8)) || die "--nodes must be 1 to 8, not $nodes"
    for t in ip tc tcpdump tcpreplay curl python3; do
        command -v "$t" >/dev/null || die "$t is missing; run scripts/install-deps.sh"
    done
    find_bin
    cmd_down >/dev/null
    mkdir -p "$dir/logs" "$dir/pids"
    chmod 755 "$dir"
    rm -rf "$dir"/store-lnk* "$dir/unsplit.pcap" "$dir/fleet.toml"
    cat >"$(state)" <<EOF
name=$name
nodes=$nodes
hash=$hash
port_base=$port_base
wv=$wv
sent=0
EOF
    trap 'echo "fleet-lab: up failed; taking the lab down" >&2; cmd_down >/dev/null 2>&1 || true' ERR
    build_links
    build_hash
    spawn tcpdump ip netns exec "$name-split" tcpdump -i in0 -n -p -Z root --immediate-mode -B 65536 \
        --time-stamp-precision=nano -w "$dir/unsplit.pcap"
    start_nodes
    # tcpdump says "listening" once its socket is open; frames before that are not seen.
    for ((i = 0; i < 500; i++)); do
        grep -q "listening on in0" "$dir/logs/tcpdump.log" && break
        sleep 0.02
    done
    grep -q "listening on in0" "$dir/logs/tcpdump.log" || die "tcpdump did not start: $(<"$dir/logs/tcpdump.log")"
    trap - ERR
    write_fleet
}

load_state() {
    [[ -f $(state) ]] || die "no lab in $dir (run up first, or pass --dir)"
    # shellcheck source=/dev/null
    source "$(state)"
}

# How many packets each store holds, as `wirevault query --count` says (live files included).
store_count() {
    "$wv" query "$dir/store-lnk$1" --count 2>/dev/null | awk '{print $1; exit}'
}

cmd_send() {
    local pcap=${1:-} n total i got
    [[ -n $pcap ]] || die "send needs a capture file: send PCAP [tcpreplay options]"
    [[ -r $pcap ]] || die "cannot read $pcap"
    shift
    load_state
    [[ -f $dir/pids/tcpdump ]] || die "the captures are stopped (stop was run); run up again"
    n=$(tcpdump -r "$pcap" --count 2>/dev/null | awk '{print $1}')
    [[ $n =~ ^[0-9]+$ ]] || die "$pcap is not a capture tcpdump can read"
    local args=("$@")
    ((${#args[@]})) || args=(--pps 5000)
    in_ns "$name-snd" tcpreplay -q -i snd0 "${args[@]}" "$pcap" >"$dir/logs/tcpreplay.log" 2>&1 ||
        die "tcpreplay failed: $(tail -3 "$dir/logs/tcpreplay.log")"
    sent=$((sent + n))
    sed -i "s/^sent=.*/sent=$sent/" "$(state)"
    # Queryable means in a store's live files or catalog: about a second after arrival.
    for ((i = 0; i < 600; i++)); do
        total=0
        for ((k = 0; k < nodes; k++)); do
            got=$(store_count "$k")
            total=$((total + ${got:-0}))
        done
        ((total >= sent)) && break
        sleep 0.1
    done
    ((total >= sent)) || die "the stores hold $total of the $sent packets sent after 60 s"
    ((total == sent)) || die "the stores hold $total packets, more than the $sent sent: something else is on the links"
    echo "sent $n packets ($sent in all); the stores hold them all"
}

cmd_stop() {
    load_state
    local i
    reap tcpdump tcpdump
    for ((i = 0; i < nodes; i++)); do reap "rec$i" record; done
    echo "captures stopped; the servers go on (down ends them)"
}

cmd_status() {
    load_state
    local i
    echo "lab $dir: $nodes nodes, $hash hash, namespaces $name-*, $sent packets sent"
    for t in tcpdump $(for ((i = 0; i < nodes; i++)); do echo "rec$i serve$i"; done); do
        if [[ -f $dir/pids/$t ]] && alive "$(<"$dir/pids/$t")"; then echo "  $t: running"; else echo "  $t: stopped"; fi
    done
    # Per classifier (pref 1..N: link 0..N-1; 100: frames no hash took, to link 0): its count.
    in_ns "$name-split" tc -s filter show dev in0 ingress 2>/dev/null |
        awk '/^filter .*(handle|fh 800::)/ { p = $5 } /Sent/ && p { print "  classifier pref " p ": " $4 " packets"; p = "" }'
}

cmd_down() {
    local i ns
    if [[ -f $(state) ]]; then
        # shellcheck source=/dev/null
        source "$(state)"
    fi
    reap tcpdump tcpdump
    for ((i = 0; i < 8; i++)); do
        reap "serve$i" serve
        reap "rec$i" record
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in
            "$name-snd" | "$name-split" | "$name"-lnk[0-7]) ip netns del "$ns" ;;
        esac
    done
    rm -f "$(state)"
    echo "lab $dir is down"
}

main() {
    local cmd=""
    while (($#)); do
        case $1 in
            --dir) dir=${2:?--dir needs a directory}; shift 2 ;;
            --name) name=${2:?--name needs a prefix}; shift 2 ;;
            --nodes) nodes=${2:?--nodes needs a number}; shift 2 ;;
            --asymmetric) hash=asymmetric; shift ;;
            --symmetric) hash=symmetric; shift ;;
            --port-base) port_base=${2:?--port-base needs a port}; shift 2 ;;
            --bin) wv=${2:?--bin needs a path}; shift 2 ;;
            --record-args) record_args=${2?--record-args needs options}; shift 2 ;;
            -h | --help) usage ;;
            up | send | stop | status | down | pcap) cmd=$1; shift; break ;;
            *) die "unknown option or command $1 (see --help)" ;;
        esac
    done
    [[ $nodes =~ ^[0-9]+$ ]] || die "--nodes must be a number, not $nodes"
    [[ $port_base =~ ^[0-9]+$ ]] || die "--port-base must be a port number, not $port_base"
    [[ $name =~ ^[A-Za-z0-9_.-]{1,40}$ ]] || die "--name must be letters, digits, _ . or -"
    dir=$(realpath -m "$dir")
    case $cmd in
        up) cmd_up ;;
        send) cmd_send "$@" ;;
        stop) cmd_stop ;;
        status) cmd_status ;;
        down) cmd_down ;;
        pcap) [[ -n ${1:-} ]] || die "pcap needs an output file: pcap OUT [SEED [ROUNDS]]"; write_pcap "$@" ;;
        *) usage ;;
    esac
}

main "$@"
