"""The UPDATE streams bench/relay.py's upstream BIRD received, ours and BIRD-as-route-
server's, compared (issue 35: the upstream spent more CPU on ours in the bench), and
replayed on their own to a fresh upstream BIRD to price each stream apart from the run.

    .venv/bin/python bench/relay.py --tenants 100 --routes 1000 --nodes 2 --pcap up.pcap
    .venv/bin/python bench/relay_stream.py up.pcap                 # what each stream holds
    .venv/bin/python bench/relay_stream.py up.pcap --replay 4      # what each costs upstream

The capture holds the relay's (then BIRD's) connection to the upstream, in that order.
``stats`` prints per stream: UPDATEs, paths per UPDATE, bytes, paths sent more than once,
how far apart (UPDATEs, seconds) a prefix's two paths came, next hop changes between
consecutive UPDATEs, and how many UPDATEs start above the one before (address order).
``--replay N``: N trials per stream, alternating, each in namespaces of its own with a
fresh upstream (bench/relay.py's configuration, kernel FIB included): the stream's OPEN,
then its UPDATEs up to the last path of the burst all at once (``--paced``: at the
captured times); the upstream's CPU and seconds until it imported every path.
"""

from __future__ import annotations

import argparse
import itertools
import socket
import statistics
import struct
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

from relay import RELAY, UP, Bird, cpu_seconds, upstream_conf
from teapot_lb.bgp.wire import IPV6_UNICAST
from teapot_lb.bgp.wire.attribute import Context
from teapot_lb.bgp.wire.header import MessageReader, MessageType, frame
from teapot_lb.bgp.wire.update import decode_update_routes
from teapot_lb.lab.netns import netns_socket
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

ADD_PATH = Context(add_path=frozenset({IPV6_UNICAST}))
_SRC, _DST = (socket.inet_pton(socket.AF_INET6, a) for a in (RELAY, UP))


def segments(pcap: Path) -> dict[int, list[tuple[int, float, bytes]]]:
    """TCP payloads towards the upstream per source port: (sequence, time, payload)."""
    data = pcap.read_bytes()
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    scale = 1e9 if data[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 1e6
    out: dict[int, list[tuple[int, float, bytes]]] = defaultdict(list)
    off = 24
    while off + 16 <= len(data):
        sec, frac, size, _ = struct.unpack(order + "IIII", data[off : off + 16])
        pkt = data[off + 16 : off + 16 + size]
        off += 16 + size
        ip = pkt[14:]  # Ethernet (tcpdump -i eth0)
        if pkt[12:14] != b"\x86\xdd" or ip[6] != 6 or ip[8:24] != _SRC or ip[24:40] != _DST:
            continue
        tcp = ip[40 : 40 + struct.unpack("!H", ip[4:6])[0]]
        sport, _, seq = struct.unpack("!HHI", tcp[:8])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if payload:
            out[sport].append((seq, sec + frac / scale, payload))
    return out


def messages(segs: list[tuple[int, float, bytes]]) -> Iterator[tuple[float, int, bytes]]:
    """(time of the segment that completed it, type, body) per message, retransmissions
    dropped."""
    reader = MessageReader()
    segs.sort(key=lambda s: s[0])
    expect = segs[0][0]
    for seq, at, payload in segs:
        if seq + len(payload) <= expect:
            continue
        reader.feed(payload[max(0, expect - seq) :])
        expect = max(expect, seq + len(payload))
        for msg_type, body in reader.frames():
            yield at, msg_type, body


def streams(pcap: Path) -> list[list[tuple[float, int, bytes]]]:
    """Each connection's messages up to the burst's last path (the teardown after it left
    out), in the order the connections opened."""
    out = []
    for segs in sorted(segments(pcap).values(), key=lambda s: min(x[1] for x in s)):
        kept: list[tuple[float, int, bytes]] = []
        for at, msg_type, body in messages(segs):
            if msg_type == MessageType.UPDATE:
                update = decode_update_routes(body, ADD_PATH)
                if any(u.encodings for u in update.unreach):
                    break  # the run is over: its paths are being withdrawn
            kept.append((at, msg_type, body))
        out.append(kept)
    return out


def stats(name: str, msgs: list[tuple[float, int, bytes]]) -> None:
    per: list[int] = []
    size = 0
    sent: Counter[bytes] = Counter()
    where: dict[bytes, list[tuple[int, float]]] = defaultdict(list)
    hops: list[object] = []
    firsts: list[bytes] = []
    for at, msg_type, body in msgs:
        if msg_type != MessageType.UPDATE:
            continue
        reach = [r for r in decode_update_routes(body, ADD_PATH).reach if r.encodings]
        if not reach:
            continue  # End-of-RIB
        encs = [e for r in reach for e in r.encodings]
        per.append(len(encs))
        size += len(body) + 19
        hops.append(reach[0].next_hops)
        firsts.append(encs[0][4:])
        for enc in encs:
            sent[enc] += 1
            where[enc[4:]].append((len(per), at))
    pairs = [v for v in where.values() if len(v) == 2]
    apart = [b[0] - a[0] for a, b in pairs]
    secs = [b[1] - a[1] for a, b in pairs]
    print(
        f"{name}: {len(per)} UPDATEs, {sum(per)} paths of {len(where)} prefixes, {size} bytes;"
        f" paths per UPDATE mean {statistics.mean(per):.1f}, median {statistics.median(per)};"
        f" paths sent more than once {sum(c - 1 for c in sent.values())};"
        f" prefixes with other than 2 paths {len(where) - len(pairs)}"
    )
    if pairs:
        print(
            f"  a prefix's two paths: UPDATEs apart median {statistics.median(apart)}, max"
            f" {max(apart)}, in one UPDATE {apart.count(0)}; seconds apart median"
            f" {statistics.median(secs):.3f}, p90 {statistics.quantiles(secs, n=10)[-1]:.3f}"
        )
    changes = sum(a != b for a, b in itertools.pairwise(hops))
    rising = sum(a < b for a, b in itertools.pairwise(firsts))
    print(
        f"  next hop changes between consecutive UPDATEs {changes} of {len(hops) - 1};"
        f" an UPDATE starting above the one before {rising} of {len(firsts) - 1}"
    )


def replay(msgs: list[tuple[float, int, bytes]], trial: str, paced: bool) -> tuple[float, float]:
    """One stream to a fresh upstream: (seconds, upstream CPU seconds) until every path
    of it was imported."""
    want = sum(
        len(r.encodings)
        for _, t, b in msgs
        if t == MessageType.UPDATE
        for r in decode_update_routes(b, ADD_PATH).reach
    )
    with (
        tempfile.TemporaryDirectory(prefix="relay-stream-") as tmp,
        Topology(f"rstr{trial}") as topo,
    ):
        switch = topo.add_switch("lan")
        up, relay = topo.add_host("up"), topo.add_host("relay")
        topo.connect(up, switch, addrs=[f"{UP}/64"])
        topo.connect(relay, switch, addrs=[f"{RELAY}/64"])
        bird = Bird(up, Path(tmp), upstream_conf())
        try:
            sock = netns_socket(relay.ns, socket.AF_INET6, socket.SOCK_STREAM)
            wait_for(lambda: sock.connect_ex((UP, 179)) == 0, timeout=30, every=0.2,
                     what="the upstream's BGP port")  # fmt: skip
            for _, msg_type, body in msgs:
                if msg_type != MessageType.UPDATE:
                    sock.sendall(frame(msg_type, body))  # OPEN, KEEPALIVE
            wait_for(lambda: bird.established() == 1, timeout=30, what="the replayed session")
            updates = [(at, frame(t, b)) for at, t, b in msgs if t == MessageType.UPDATE]
            cpu0, started = cpu_seconds(bird.proc.pid), time.monotonic()

            def send() -> None:
                if not paced:
                    sock.sendall(b"".join(m for _, m in updates))
                    return
                burst = next(at for at, m in updates if len(m) > 64)  # after End-of-RIB
                for at, msg in updates:
                    time.sleep(max(0.0, at - burst - (time.monotonic() - started)))
                    sock.sendall(msg)

            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            wait_for(lambda: bird.imported() >= want, timeout=300, every=0.2,
                     what=f"{want} paths imported")  # fmt: skip
            seconds, cpu = time.monotonic() - started, cpu_seconds(bird.proc.pid) - cpu0
            sender.join(timeout=10)
            sock.close()
            return seconds, cpu
        finally:
            bird.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pcap", type=Path)
    ap.add_argument("--replay", type=int, default=0, metavar="N", help="trials per stream")
    ap.add_argument("--paced", action="store_true", help="replay at the captured times")
    args = ap.parse_args()
    found = streams(args.pcap)
    names = ("ours", "bird")
    for name, msgs in zip(names, found, strict=False):
        stats(name, msgs)
    cpu: dict[str, list[float]] = defaultdict(list)
    for k in range(args.replay):
        for name, msgs in zip(names, found, strict=False):
            seconds, used = replay(msgs, f"{name[0]}{k}", args.paced)
            cpu[name].append(used)
            print(f"replay {name} {k}: {seconds:.2f} s, upstream CPU {used:.2f} s", flush=True)
    for name, used in cpu.items():
        print(f"{name}: upstream CPU median {statistics.median(used):.2f} s of {used}")


if __name__ == "__main__":
    main()
