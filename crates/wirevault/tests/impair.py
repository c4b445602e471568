#!/usr/bin/env python3
"""A user-space link impairment between two interfaces, standing in for
`tc qdisc ... netem` where the kernel has no netem (CONFIG_NET_SCH_NETEM).

    impair.py IN OUT --delay-ms D --jitter-ms J --loss P --duplicate P --seed S

Frames arriving on IN are sent out of OUT after D ms plus a uniform [0, J) ms
(so that, as with netem's jitter, frames closer together than J may leave
reordered); a share P of them is lost, a share P is duplicated (the copy leaves
right behind its original, as a SPAN port's copy would, where netem's copy
draws its own delay). Frames arriving on OUT are sent out of IN at once,
untouched. Choices come from a seeded generator, in arrival order.

On SIGTERM it stops (frames still waiting are not sent) and prints, for each
frame that came in on IN, one line:

    F RECV_NS VERDICT OUT_NS COPY_NS PROTO DPORT DUE_NS

RECV_NS is the kernel's receive stamp (the delay counts from it, so that time
spent waiting in the socket counts in it, as a recorder would see); VERDICT is
sent, lost or dup; OUT_NS when it (COPY_NS its copy) left, 0 when it did not;
PROTO tcp, udp, icmp or other; DUE_NS when it was due to leave (OUT_NS less
DUE_NS: how late the forwarder was); then a last line with each
socket's own kernel counters (a frame the forwarder itself missed would make
the expectations wrong):

    S RECEIVED_IN DROPPED_IN RECEIVED_OUT DROPPED_OUT
"""

import argparse
import heapq
import random
import select
import signal
import socket
import struct
import time

ETH_P_ALL = 3
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35


def open_socket(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((ifname, 0))
    s.setblocking(False)
    return s


def proto_port(frame):
    """(protocol name, destination port) of an Ethernet/IPv4 frame."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return "other", 0
    ihl = (frame[14] & 0x0F) * 4
    p = frame[23]
    name = {6: "tcp", 17: "udp", 1: "icmp"}.get(p, "other")
    at = 14 + ihl
    if p in (6, 17) and len(frame) >= at + 4:
        return name, struct.unpack("!H", frame[at + 2 : at + 4])[0]
    return name, 0


def stats(s):
    return struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inner")
    ap.add_argument("outer")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--duplicate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    inner, outer = open_socket(a.inner), open_socket(a.outer)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    pending = []  # (send at, order, frame, log record, field)
    log = []
    order = 0
    print("ready", flush=True)
    while not stop:
        now = time.time_ns()
        while pending and pending[0][0] <= now:
            _, _, frame, rec, field = heapq.heappop(pending)
            outer.send(frame)
            rec[field] = time.time_ns()
            now = rec[field]
        timeout = max(0.0, (pending[0][0] - now) / 1e9) if pending else 0.05
        ready, _, _ = select.select([inner, outer], [], [], timeout)
        for s in ready:
            while True:
                try:
                    frame, anc, _, addr = s.recvmsg(65536, 64)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                if s is outer:
                    inner.send(frame)
                    continue
                recv = time.time_ns()
                for level, kind, data in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, nsec = struct.unpack("qq", data[:16])
                        recv = sec * 10**9 + nsec
                proto, port = proto_port(frame)
                rec = [recv, "sent", 0, 0, proto, port, 0]
                log.append(rec)
                if rng.random() < a.loss:
                    rec[1] = "lost"
                    continue
                at = recv + int((a.delay_ms + rng.random() * a.jitter_ms) * 1e6)
                rec[6] = at
                heapq.heappush(pending, (at, order, frame, rec, 2))
                order += 1
                if rng.random() < a.duplicate:
                    rec[1] = "dup"
                    heapq.heappush(pending, (at, order, frame, rec, 3))
                    order += 1
    out = ["F %d %s %d %d %s %d %d" % tuple(r) for r in log]
    out.append("S %d %d %d %d" % (stats(inner) + stats(outer)))
    print("\n".join(out), flush=True)


if __name__ == "__main__":
    main()
