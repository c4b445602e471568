#!/usr/bin/env bash
# Flow file size (issue 47: "Flow files at most 1% of the pcap bytes on IMIX at 65,536 flows"):
# wirevault's Parquet flow records beside its index and the pcap bytes they describe. A python3
# generator writes an IMIX pcap (7:4:1 of 64/576/1500-byte Ethernet/IPv4 frames, UDP and TCP,
# round robin) of N frames over FLOWS 5-tuples (10.1.x.y -> 10.2.0.z, ports from the flow's
# number), timestamps 2 µs apart; `wirevault record -r FILE -o STORE --flows` records it.
#
#   bench/flow_size.sh [WORKDIR]      (default ./bench-flows.PID; removed afterwards)
#
# Environment: WIREVAULT (binary), N (frames, default 2000000), FLOWS (default 65536),
# ROUNDS (default 1; each round records the same pcap into a fresh store).
#
# Columns: pcap bytes = the generated file; index = the store's *.idx files; flow files = the
# store's flows/**/*.parquet, their record count and the share of them that ended `evicted` (the
# flow table full: --max-flows flows at once; pyarrow reads only the end_reason column). Arkime's per-session document
# size: no figure was found in the documentation searched for this script (Arkime/Moloch FAQ,
# settings and estimator pages), so the table gives none rather than an invented one.
# `--markdown` as the first argument also writes the table into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
need_tools python3
python3 -c 'import pyarrow.parquet' 2>/dev/null || { echo "pyarrow is missing: pip install pyarrow" >&2; exit 1; }
wv_binary
N=${N:-2000000}
FLOWS=${FLOWS:-65536}
ROUNDS=${ROUNDS:-1}
WORK=$(realpath -m "${1:-$BENCH_ROOT/bench-flows.$$}")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
log() { echo "[flow_size] $*" >&2; }
mkdir -p "$WORK"
PCAP="$WORK/imix.pcap"

log "writing $N IMIX frames over $FLOWS flows"
python3 - "$PCAP" "$N" "$FLOWS" <<'PY'
import struct, sys
path, n, flows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def csum(b):
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
def template(size, proto):
    l4 = 8 if proto == 17 else 20
    ip_len = size - 14
    eth = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, proto, 0, bytes(4), bytes(4))
    if proto == 17:
        l4h = struct.pack("!HHHH", 0, 0, ip_len - 20, 0)
    else:
        l4h = struct.pack("!HHIIBBHHH", 0, 0, 1, 0, 5 << 4, 0x18, 65535, 0, 0)
    return bytearray(eth + ip + l4h + b"\x5a" * (ip_len - 20 - l4))
# 7:4:1 of 64/576/1500 bytes on the wire (FCS included: 60/572/1496 captured); a flow's
# protocol is fixed by its number (even UDP, odd TCP), so there are exactly FLOWS 5-tuples
sizes = [60] * 7 + [572] * 4 + [1496]
tpls = {(s, p): template(s, p) for s in set(sizes) for p in (17, 6)}
with open(path, "wb", buffering=1 << 22) as f:
    f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
    t = 1_700_000_000 * 10**9
    for i in range(n):
        flow = i % flows
        fr = tpls[(sizes[i % 12], 6 if flow & 1 else 17)]
        fr[26:30] = bytes((10, 1, (flow >> 8) & 0xFF, flow & 0xFF))
        fr[30:34] = bytes((10, 2, 0, 1 + (flow % 16)))
        fr[24:26] = b"\0\0"
        fr[24:26] = struct.pack("!H", csum(bytes(fr[14:34])))
        fr[34:38] = struct.pack("!HH", 1024 + (flow * 7919) % 64000, 1 + flow % 1024)
        f.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(fr), len(fr)))
        f.write(fr)
        t += 2000
PY

ROWS="$WORK/rows.tsv"
: >"$ROWS"
for r in $(seq "$ROUNDS"); do
  store="$WORK/store-$r"
  "$BIN" record -r "$PCAP" -o "$store" --flows -q >"$WORK/wv.out" 2>"$WORK/wv.err" || {
    echo "wirevault record failed: $(tail -1 "$WORK/wv.err")" >&2
    exit 1
  }
  sum() { find "$store" "$@" -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}'; }
  pcap=$(stat -c %s "$PCAP")
  idx=$(sum -name '*.idx')
  fl=$(sum -path '*/flows/*' -name '*.parquet')
  read -r recs evicted < <(python3 -c '
import sys, pathlib, pyarrow.compute as pc, pyarrow.parquet as pq
n = ev = 0
for p in pathlib.Path(sys.argv[1], "flows").rglob("*.parquet"):
    end = pq.read_table(p, columns=["end_reason"]).column("end_reason")
    n += len(end)
    ev += pc.sum(pc.equal(end, "evicted")).as_py() or 0
print(n, ev)' "$store")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$pcap" "$idx" "$fl" "$recs" "$evicted" >>"$ROWS"
  log "round $r: pcap $pcap B, index $idx B, flow files $fl B, $recs records, $evicted evicted"
  rm -rf "$store"
done

table_header round frames "pcap bytes" "index bytes" "index % of pcap" "flow-file bytes" "flow records" "evicted % of records" "flow files % of pcap" "B per flow record" "Arkime session document"
while IFS=$'\t' read -r r pcap idx fl recs evicted; do
  table_row "$r" "$(calc "$N" ,)" "$(calc "$pcap" ,)" "$(calc "$idx" ,)" "$(calc "100*$idx/$pcap" .2f)%" \
    "$(calc "$fl" ,)" "$(calc "$recs" ,)" "$(calc "100*$evicted/max($recs,1)" .1f)%" "$(calc "100*$fl/$pcap" .3f)%" "$(calc "$fl/max($recs,1)" .1f)" "no figure found"
done <"$ROWS"
echo
echo "<!-- command: bench/flow_size.sh (N=$N FLOWS=$FLOWS ROUNDS=$ROUNDS); traffic: generated IMIX pcap"
echo "     (7:4:1 of 64/576/1500 B, UDP/TCP, 2 us apart), recorded with record -r --flows; Arkime's"
echo "     per-session document size: no published figure found in the docs searched, none given -->"
