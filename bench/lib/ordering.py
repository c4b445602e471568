"""Helpers of bench/ordering.sh.

  ordering.py gen OUT.pcap N FLOWS SIZE
      N UDP/IPv4 frames of SIZE bytes over FLOWS flows (source address and
      port vary), each carrying its sequence number (8 bytes, big endian)
      right after the UDP header: the order they were sent in.
  ordering.py analyze STORE SENT
      Reads the stored files through the store's catalog, in recording order
      per stream, and prints the Markdown rows of the table: per stream (the
      order each ring delivered), and the link (every stored packet in the
      order it was sent).

A packet is *inverted* when an earlier one (earlier in the stream, or sent
earlier on the link) carries a later timestamp. Its distance in ns is the
largest such timestamp minus its own; in packets, how many earlier packets
carry a later timestamp. The maximum is over all packets; p99 over the
inverted ones.
"""
import json
import os
import struct
import sys

SEQ_OFF = 14 + 20 + 8


def gen(out, n, flows, size):
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        t0 = 1_700_000_000 * 10**9
        for seq in range(n):
            flow = seq % flows
            ip_len = size - 14
            src = bytes([10, 1, (flow >> 8) & 0xFF, flow & 0xFF])
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, seq & 0xFFFF, 0, 64, 17, 0, src, bytes([10, 2, 0, 1]))
            udp = struct.pack("!HHHH", 10000 + flow % 50000, 9, ip_len - 20, 0)
            payload = struct.pack("!Q", seq)
            body = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + udp + payload
            body += b"\x00" * (size - len(body))
            t = t0 + seq * 1000
            f.write(struct.pack("<IIII", t // 10**9, t % 10**9, size, size))
            f.write(body)


def records(path):
    """(ts_ns, seq) of a pcap file (µs or ns), None for frames without one."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    else:
        e = ">"
        magic = struct.unpack_from(">I", data, 0)[0]
    scale = 1 if magic == 0xA1B23C4D else 1000
    off = 24
    out = []
    while off + 16 <= len(data):
        s, frac, cap, _ = struct.unpack_from(e + "IIII", data, off)
        off += 16
        frame = data[off : off + cap]
        off += cap
        seq = struct.unpack_from("!Q", frame, SEQ_OFF)[0] if len(frame) >= SEQ_OFF + 8 else None
        out.append((s * 10**9 + frac * scale, seq))
    return out


def inversions(ts):
    """Per packet (ns, packets) of inversion, in the given order."""
    ranks = {t: i + 1 for i, t in enumerate(sorted(set(ts)))}
    tree = [0] * (len(ranks) + 1)
    seen, runmax, out = 0, None, []
    for t in ts:
        r = ranks[t]
        # Earlier packets with a rank <= r, from the Fenwick tree.
        le, i = 0, r
        while i > 0:
            le += tree[i]
            i -= i & -i
        later = seen - le
        ns = runmax - t if runmax is not None and runmax > t else 0
        out.append((ns, later))
        i = r
        while i < len(tree):
            tree[i] += 1
            i += i & -i
        seen += 1
        runmax = t if runmax is None else max(runmax, t)
    return out


def p99(v):
    if not v:
        return 0
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * 0.99))]


def row(name, ts):
    inv = inversions(ts)
    bad = [x for x in inv if x[0] > 0 or x[1] > 0]
    ns = [x[0] for x in bad]
    pk = [x[1] for x in bad]
    pct = 100.0 * len(bad) / len(ts) if ts else 0.0
    cells = [name, len(ts), len(bad), f"{pct:.3f}", max(ns, default=0), p99(ns), max(pk, default=0), p99(pk)]
    print("| " + " | ".join(str(c) for c in cells) + " |")


def analyze(store, sent):
    streams = {}
    with open(os.path.join(store, "catalog.jsonl")) as f:
        for line in f:
            if line.strip():
                e = json.loads(line)
                streams.setdefault(e["stream"], []).append(e["file"])
    link = []
    for s in sorted(streams):
        # Recording order: the per-stream sequence number ends the name.
        files = sorted(streams[s], key=lambda p: p.rsplit("-", 1)[-1])
        recs = [r for p in files for r in records(os.path.join(store, p))]
        row(f"stream {s}", [t for t, _ in recs])
        link.extend(r for r in recs if r[1] is not None and r[1] < sent)
    link.sort(key=lambda r: r[1])
    row("link (send order)", [t for t, _ in link])
    seqs = {q for _, q in link}
    print(f"\nstored {len(link)} of {sent} sent frames ({len(seqs)} distinct)", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        analyze(sys.argv[2], int(sys.argv[3]))
