"""How fast does a speaker push a full table into a receiving BIRD? Ours against the daemons.

Usage (root): ``.venv/bin/python bench/bgp_announce.py [--n 100000] [--n6 20000]
[--senders ours,frr,bird,exabgp,exabgp-api,gobgp]``

One namespace per speaker, all on one LAN with a receiving BIRD (eBGP, no kernel export).
For each sender in turn: a fresh receiver, the sender loaded with N IPv4 /32s and N6 IPv6
/128s *before* its session comes up, each configured at its fastest:

- ``ours``: teapot-lb's Speaker (``teapot_lb/lab/peers/drive_speaker.py``), routes set at boot;
- ``ours-late``: the same, routes handed over (``Speaker.set_routes``) once the session is
  up; timed from that call, route compilation included (not used for the ratios);
- ``frr``: bgpd ``network`` statements, ``coalesce-time 0``, advertisement-interval 0;
- ``bird``: a ``static`` protocol;
- ``exabgp``: static routes in its configuration;
- ``exabgp-api``: the same routes written to ExaBGP's API once the session is up (the
  dynamic path, what a controller would use; the equivalent of ours);
- ``gobgp``: an MRT TABLE_DUMP_V2 file injected while the session is admin-down.

Measured at the receiver (BIRD's control socket): from the session becoming Established
(BIRD's own timestamp) to BIRD holding 99 % and 100 % of the IPv4 routes, and all routes
of both families. BIRD as a sender holds its last batch until its main loop wakes (up to
~3 s), so its 99 % time is what it is compared on. Sender CPU is read from /proc between
Established and completion ("CPU"), and in total since the sender started ("CPU tot":
config parsing, route compilation); peak RSS is the sender's VmHWM (ours: ru_maxrss).

The 100k IPv4 /32s come from 198.18.0.0/15 (RFC 2544, the benchmarking range): the
documentation ranges hold only 768 addresses. They exist only in the BGP RIBs of this
benchmark's namespaces (the receiver installs nothing in any kernel, FRR runs ``-n``).

Receive (``--receivers ours,gobgp``): the other direction, in the same run. A BIRD sender
(a ``static`` protocol) announces ``--rx-n`` IPv4 /32s to each receiver in turn:

- ``ours``: teapot-lb's Speaker in ``drive_speaker.py``, the product's own Speaker/Peer path
  into the peer's Adj-RIB-In (a passive peer: BIRD connects);
- ``gobgp``: gobgpd with a passive neighbor, default import policy accept.

The receiver starts first and settles; its CPU is read from /proc before the BIRD sender
starts and again once it holds every route, so the figure covers the session and the
routes only (startup and imports excluded). Times run from the sender's Established
timestamp to the receiver holding 99 % / 100 % of the routes. Asking GoBGP for a count
costs it CPU (it walks its table), so both receivers are asked only when /proc shows them
idle (see ``ReceiveBench._measure``). BIRD as a sender holds its last UPDATE for up to
~3 s: the 99 % time is the one that shows the receiver.

Prints a table, then one JSON line with every figure and ``ours_vs_best_daemon`` (ours
over the fastest daemon's time) and ``ours_vs_exabgp`` (ours over ExaBGP's API path), and
the receive figures ``receive_100k_s``, ``receive_cpu_s_100k`` (ours, scaled to 100k
routes) and ``gobgp_receive_100k_s``, ``gobgp_receive_cpu_s_100k``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.peers import (
    BgpDaemon,
    Bird,
    ExaBgp,
    Frr,
    GoBgp,
    Lab,
    Neighbor,
    Origination,
    PeerError,
    Teapot,
)
from teapot_lb.netlab import Topology, netns_available

RX_AS = 65000
TX_AS = 65001
BENCH_V4 = ipaddress.IPv4Network("198.18.0.0/15")
BENCH_V6 = ipaddress.IPv6Network("2001:db8:1000::/64")
SENDERS = ("ours", "ours-late", "frr", "bird", "exabgp", "exabgp-api", "gobgp")
RECEIVERS = ("ours", "gobgp")
IDLE_FIRST = 0.05  # receive: ask for the count after this long without CPU use
IDLE_MAX = 0.5
DAEMON_SENDERS = ("frr", "bird", "exabgp", "gobgp")  # candidates for "best daemon"
TICK = os.sysconf("SC_CLK_TCK")


def established(watcher: Bird, peer: str, deadline: float, other: BgpDaemon) -> float:
    """When BIRD (`watcher`) saw its session to `peer` established, polled every 5 ms
    until `deadline`; PeerError with the other side's log tail if it never comes up."""
    while (t_est := watcher.established_at(peer)) is None:
        if time.monotonic() > deadline:
            raise PeerError(f"session never came up\n{other.log_tail()}")
        time.sleep(0.005)
    return t_est


@dataclass
class Result:
    sender: str
    status: str = "ok"
    t99_v4: float | None = None
    t100_v4: float | None = None
    t100_all: float | None = None
    cpu_s: float | None = None
    cpu_total_s: float | None = None
    rss_mb: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def compare_time(self) -> float | None:
        """The time the sender is judged on (BIRD: 99 %, see the module docstring)."""
        return self.t99_v4 if self.sender == "bird" else self.t100_v4


def prefixes(n4: int, n6: int) -> tuple[list[str], list[str]]:
    if n4 > BENCH_V4.num_addresses:
        raise SystemExit(f"--n at most {BENCH_V4.num_addresses}")
    base4 = int(BENCH_V4.network_address)
    base6 = int(BENCH_V6.network_address)
    v4 = [f"{ipaddress.IPv4Address(base4 + i)}/32" for i in range(n4)]
    v6 = [f"{ipaddress.IPv6Address(base6 + i + 1)}/128" for i in range(n6)]
    return v4, v6


# ------------------------------------------------------------------ process accounting


def proc_tree(pids: list[int]) -> list[int]:
    """The pids and all their descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def peak_rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


# ------------------------------------------------------------------ GoBGP's MRT input


def _attr(flags: int, kind: int, value: bytes) -> bytes:
    if len(value) > 255:
        return struct.pack("!BBH", flags | 0x10, kind, len(value)) + value
    return struct.pack("!BBB", flags, kind, len(value)) + value


def write_mrt(
    path: Path, v4: list[str], v6: list[str], nh4: str, nh6: str, *, pad: int = 4096
) -> None:
    """A TABLE_DUMP_V2 file (RFC 6396 §4.3) with one peer and one path per prefix."""
    now = int(time.time())

    def record(subtype: int, body: bytes) -> bytes:
        return struct.pack("!IHHI", now, 13, subtype, len(body)) + body

    peer = struct.pack("!B4s4sI", 0x02, ipaddress.IPv4Address(nh4).packed,
                       ipaddress.IPv4Address(nh4).packed, TX_AS)  # fmt: skip
    index = ipaddress.IPv4Address(nh4).packed + struct.pack("!HH", 0, 1) + peer
    origin = _attr(0x40, 1, b"\x00")
    as_path = _attr(0x40, 2, b"")
    attrs4 = origin + as_path + _attr(0x40, 3, ipaddress.IPv4Address(nh4).packed)
    hop6 = ipaddress.IPv6Address(nh6).packed
    # GoBGP reads a full MP_REACH_NLRI here (AFI, SAFI, next hop, reserved; no NLRI), not
    # RFC 6396's abbreviated form.
    mp_reach = struct.pack("!HBB", 2, 1, len(hop6)) + hop6 + b"\x00"
    attrs6 = origin + as_path + _attr(0x80, 14, mp_reach)
    with path.open("wb") as f:
        f.write(record(1, index))
        seq = 0
        for subtype, prefs, attrs in ((2, v4, attrs4), (4, v6, attrs6)):
            entry = struct.pack("!HIH", 0, now, len(attrs)) + attrs
            for p in prefs:
                net = ipaddress.ip_network(p)
                nbytes = (net.prefixlen + 7) // 8
                head = struct.pack("!IB", seq, net.prefixlen) + net.network_address.packed[:nbytes]
                last = (subtype, head[4:] + struct.pack("!H", 1) + entry)
                f.write(record(subtype, head + struct.pack("!H", 1) + entry))
                seq += 1
        # `gobgp mrt inject` (3.10) loses the last queued updates when it exits: pad the
        # file with copies of the last record (no-ops: the session is still admin-down).
        for _ in range(pad):
            f.write(record(last[0], struct.pack("!I", seq) + last[1]))
            seq += 1


# ------------------------------------------------------------------ one run


class Bench:
    def __init__(self, args: argparse.Namespace, topo: Topology, workdir: Path) -> None:
        self.args = args
        self.lab = Lab(topo)
        self.workdir = workdir
        self.lab.add("rx")
        self.v4, self.v6 = prefixes(args.n, args.n6)
        self.total = len(self.v4) + len(self.v6)
        self.originate = [Origination(p) for p in self.v4 + self.v6]

    def run(self, sender: str) -> Result:
        name = f"tx-{sender}"[:12]
        self.lab.add(name)
        host = self.lab.hosts[name]
        tx4, tx6 = self.lab.v4[name], self.lab.v6[name]
        rx4 = self.lab.v4["rx"]
        receiver = Bird(
            self.lab.hosts["rx"], self.workdir / f"rx-{sender}", asn=RX_AS, router_id=rx4,
            neighbors=[Neighbor(tx4, TX_AS, hold_time=90)],
        )  # fmt: skip
        up = Neighbor(rx4, RX_AS, hold_time=90, local_address=tx4)
        common: dict[str, Any] = {
            "asn": TX_AS, "router_id": tx4, "neighbors": [up], "local_addresses": [tx4, tx6],
        }  # fmt: skip
        wd = self.workdir / sender
        wd.mkdir()
        after_start: Callable[[], None] | None = None
        tx: BgpDaemon
        if sender == "ours":
            tx = Teapot(host, wd, originate=self.originate, listen_port=None, **common)
        elif sender == "ours-late":
            tx = Teapot(host, wd, listen_port=None, **common)
        elif sender == "frr":
            tx = Frr(host, wd, originate=self.originate, **common)
        elif sender == "bird":
            tx = Bird(host, wd, originate=self.originate, **common)
        elif sender == "exabgp":
            tx = ExaBgp(host, wd, originate=self.originate, **common)
        elif sender == "exabgp-api":
            cmds = wd / "commands.txt"
            cmds.write_text(
                "".join(f"announce route {p} next-hop self\n" for p in self.v4)
                + "".join(f"announce route {p} next-hop {tx6}\n" for p in self.v6)
            )
            tx = ExaBgp(host, wd, api_commands=cmds, **common)
        elif sender == "gobgp":
            mrt = wd / "routes.mrt"
            write_mrt(mrt, self.v4, self.v6, tx4, tx6)
            gobgp = GoBgp(host, wd, admin_down=True, **common)
            tx = gobgp

            def after_start() -> None:
                gobgp.inject_mrt(mrt)
                held = gobgp.rib_count("ipv4") + gobgp.rib_count("ipv6")
                if held != self.total:
                    raise PeerError(f"gobgp holds {held} of {self.total} routes after mrt inject")
                gobgp.enable(rx4)
        else:
            raise SystemExit(f"unknown sender {sender!r}; choose from {', '.join(SENDERS)}")

        result = Result(sender)
        receiver.start()
        try:
            t_launch = time.monotonic()
            tx.start(timeout=900)
            if after_start is not None:
                after_start()
            result.extra["startup_s"] = round(time.monotonic() - t_launch, 2)
            self._measure(receiver, tx, result)
        except PeerError as exc:
            result.status = "failed"
            result.note = str(exc).splitlines()[0][:200]
        finally:
            tx.kill()
            receiver.kill()
        return result

    def _measure(self, receiver: Bird, tx: BgpDaemon, result: Result) -> None:
        peer = tx.router_id
        deadline = time.monotonic() + self.args.timeout
        t_est = established(receiver, peer, deadline, tx)
        pids = proc_tree([p.pid for p in tx.procs])
        cpu0 = cpu_seconds(pids)
        if result.sender == "ours-late":
            # The dynamic path: the session is up and empty; the clock starts when the
            # routes are handed to the speaker (their compilation included).
            assert isinstance(tx, Teapot)
            tx.wait_established(self.lab.v4["rx"])
            t_est = time.time()
            timing = tx.set_routes(self.originate)
            # Start the clock where the speaker got the routes: the driver's own JSON
            # and ip_network() parsing is harness cost, not the speaker's.
            t_est += timing["parse_s"]
            result.extra.update({k: round(v, 3) for k, v in timing.items()})
        n4 = len(self.v4)
        while True:
            counts = receiver.imported(peer)
            now = time.time()
            got4 = counts.get("ipv4", 0)
            if result.t99_v4 is None and got4 >= 0.99 * n4:
                result.t99_v4 = now - t_est
            if result.t100_v4 is None and got4 >= n4:
                result.t100_v4 = now - t_est
            if sum(counts.values()) >= self.total:
                result.t100_all = now - t_est
                break
            if time.monotonic() > deadline:
                result.status = "timeout"
                result.note = f"receiver holds {counts} of {n4}+{len(self.v6)}"
                break
            if receiver.established_at(peer) is None:
                raise PeerError(f"session dropped at {counts}\n{tx.log_tail()}")
            time.sleep(0.002)
        pids = proc_tree([p.pid for p in tx.procs])
        result.cpu_total_s = cpu_seconds(pids)
        result.cpu_s = result.cpu_total_s - cpu0
        result.rss_mb = peak_rss_mb(pids)
        if isinstance(tx, Teapot):
            stats = tx.stats()
            result.rss_mb = stats["maxrss_kb"] / 1024


@dataclass
class Received:
    receiver: str
    status: str = "ok"
    t99: float | None = None
    t100: float | None = None
    cpu_s: float | None = None
    rss_mb: float | None = None
    note: str = ""


class ReceiveBench:
    """A BIRD sender announcing ``n`` IPv4 /32s to one receiver at a time."""

    def __init__(self, args: argparse.Namespace, lab: Lab, workdir: Path) -> None:
        self.args = args
        self.lab = lab  # the announce benchmark's LAN
        self.workdir = workdir
        self.lab.add("bird-tx")
        v4, _ = prefixes(args.rx_n, 0)
        self.originate = [Origination(p) for p in v4]

    def run(self, receiver: str) -> Received:
        name = f"rcv-{receiver}"[:12]
        self.lab.add(name)
        host = self.lab.hosts[name]
        rx4, tx4 = self.lab.v4[name], self.lab.v4["bird-tx"]
        down = Neighbor(tx4, TX_AS, hold_time=90, passive=True, families=("ipv4",))
        common: dict[str, Any] = {
            "asn": RX_AS, "router_id": rx4, "neighbors": [down], "local_addresses": [rx4],
        }  # fmt: skip
        wd = self.workdir / f"receive-{receiver}"
        rx: BgpDaemon
        if receiver == "ours":
            rx = Teapot(host, wd, **common)
        elif receiver == "gobgp":
            rx = GoBgp(host, wd, **common)
        else:
            raise SystemExit(f"unknown receiver {receiver!r}; choose from {', '.join(RECEIVERS)}")
        sender = Bird(
            self.lab.hosts["bird-tx"], self.workdir / f"tx-bird-{receiver}", asn=TX_AS,
            router_id=tx4, originate=self.originate,
            neighbors=[Neighbor(rx4, RX_AS, hold_time=90, families=("ipv4",))],
        )  # fmt: skip
        result = Received(receiver)
        try:
            rx.start(timeout=120)
            time.sleep(0.5)  # let the receiver settle: its startup is not the figure
            pids = proc_tree([p.pid for p in rx.procs])
            cpu0 = cpu_seconds(pids)
            sender.start(timeout=300)
            self._measure(sender, rx, rx4, tx4, result)
            pids = proc_tree([p.pid for p in rx.procs])
            result.cpu_s = cpu_seconds(pids) - cpu0
            result.rss_mb = peak_rss_mb(pids)
        except PeerError as exc:
            result.status = "failed"
            result.note = str(exc).splitlines()[0][:200]
        finally:
            sender.kill()
            rx.kill()
        return result

    def _measure(self, sender: Bird, rx: BgpDaemon, rx4: str, tx4: str, result: Received) -> None:
        """Poll the receiver's CPU (free) and ask for its route count only once it idles.

        A count query costs the receiver CPU (GoBGP walks its Adj-RIB-In for it), so it is
        asked only after 50 ms without CPU use, then at growing intervals (up to 0.5 s)
        while nothing changes. The completion time is that of the first query that sees
        every route: an upper bound, within the interval.
        """
        n = len(self.originate)
        deadline = time.monotonic() + self.args.timeout
        t_est = established(sender, rx4, deadline, rx)
        pids = proc_tree([p.pid for p in rx.procs])
        last_cpu = cpu_seconds(pids)
        last_busy = time.monotonic()
        wait = IDLE_FIRST
        next_query = 0.0
        while time.monotonic() < deadline:
            time.sleep(0.01)
            mono = time.monotonic()
            cpu = cpu_seconds(pids)
            if cpu != last_cpu:
                last_cpu, last_busy, wait = cpu, mono, IDLE_FIRST
                continue
            if mono - last_busy < IDLE_FIRST or mono < next_query:
                continue
            got = received_count(rx, tx4)
            now = time.time()
            next_query, wait = mono + wait, min(wait * 2, IDLE_MAX)
            if result.t99 is None and got >= 0.99 * n:
                result.t99 = now - t_est
            if got >= n:
                result.t100 = now - t_est
                return
        result.status = "timeout"
        result.note = f"receiver holds {received_count(rx, tx4)} of {n}"


def received_count(rx: BgpDaemon, peer: str) -> int:
    """Routes ``rx`` holds from ``peer``, in O(1) (never a table walk)."""
    if isinstance(rx, Teapot):
        return int(rx.call("received", peer=peer))
    assert isinstance(rx, GoBgp)
    info = rx.neighbor_info(peer)
    total = 0
    for afi_safi in info.get("afi_safis", []):
        total += int(afi_safi.get("state", {}).get("received", 0))
    return total


def fmt(x: float | None, unit: str = "s") -> str:
    return "-" if x is None else f"{x:.3f}{unit}" if unit == "s" else f"{x:.0f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="IPv4 /32s (default 100000)")
    parser.add_argument("--n6", type=int, default=20_000, help="IPv6 /128s (default 20000)")
    parser.add_argument("--senders", default=",".join(SENDERS), help="comma-separated")
    parser.add_argument("--timeout", type=float, default=300, help="per sender, seconds")
    parser.add_argument(
        "--receivers", default=",".join(RECEIVERS), help="comma-separated; '' for none"
    )
    parser.add_argument(
        "--rx-n", type=int, default=100_000, help="IPv4 /32s BIRD sends each receiver"
    )
    args = parser.parse_args()
    reason = netns_available()
    if reason:
        raise SystemExit(f"bgp_announce: {reason}")
    senders = [s for s in args.senders.split(",") if s]
    receivers = [r for r in args.receivers.split(",") if r]
    results: list[Result] = []
    received: list[Received] = []
    with tempfile.TemporaryDirectory(prefix="bgp-announce-") as tmp, Topology("bgpann") as topo:
        bench = Bench(args, topo, Path(tmp))
        for sender in senders:
            if sender.startswith("ours") and not _ours_available():
                results.append(Result(sender, status="missing", note="teapot_lb.bgp.speaker"))
                continue
            print(f"... {sender}", file=sys.stderr, flush=True)
            results.append(bench.run(sender))
        if receivers:
            rbench = ReceiveBench(args, bench.lab, Path(tmp))
            for receiver in receivers:
                print(f"... receive: {receiver}", file=sys.stderr, flush=True)
                received.append(rbench.run(receiver))

    print(f"\nBGP announce: {args.n} IPv4 /32 + {args.n6} IPv6 /128 into BIRD, "
          "times from session Established")  # fmt: skip
    head = (
        f"{'sender':<12}{'99% v4':>10}{'100% v4':>10}{'100% all':>10}"
        f"{'CPU':>9}{'CPU tot':>9}{'RSS':>8}  note"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        note = r.note if r.status == "ok" else f"{r.status}: {r.note}"
        times = f"{fmt(r.t99_v4):>10}{fmt(r.t100_v4):>10}{fmt(r.t100_all):>10}"
        cost = f"{fmt(r.cpu_s):>9}{fmt(r.cpu_total_s):>9}{fmt(r.rss_mb, 'MB'):>8}"
        print(f"{r.sender:<12}{times}{cost}  {note}")

    if received:
        print(f"\nBGP receive: {args.rx_n} IPv4 /32 from BIRD, times from session Established")
        head = f"{'receiver':<12}{'99%':>10}{'100%':>10}{'CPU':>9}{'RSS':>8}  note"
        print(head)
        print("-" * len(head))
        for x in received:
            note = x.note if x.status == "ok" else f"{x.status}: {x.note}"
            cost = f"{fmt(x.cpu_s):>9}{fmt(x.rss_mb, 'MB'):>8}"
            print(f"{x.receiver:<12}{fmt(x.t99):>10}{fmt(x.t100):>10}{cost}  {note}")

    by = {r.sender: r for r in results}
    ours = by.get("ours")
    ours_t = ours.compare_time if ours else None
    daemons = [r for r in results if r.sender in DAEMON_SENDERS and r.compare_time is not None]
    best = min(daemons, key=lambda r: r.compare_time or 0.0, default=None)
    api = by.get("exabgp-api")

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    summary = {
        "n4": args.n,
        "n6": args.n6,
        "results": {
            r.sender: {
                "status": r.status,
                "t99_v4_s": r.t99_v4,
                "t100_v4_s": r.t100_v4,
                "t100_all_s": r.t100_all,
                "cpu_s": r.cpu_s,
                "cpu_total_s": r.cpu_total_s,
                "rss_mb": r.rss_mb,
                **r.extra,
            }
            for r in results
        },
        "best_daemon": best.sender if best else None,
        "ours_vs_best_daemon": ratio(ours_t, best.compare_time if best else None),
        "ours_vs_exabgp": ratio(ours_t, api.t100_v4 if api else None),
        "receive": {
            x.receiver: {
                "status": x.status,
                "t99_s": x.t99,
                "t100_s": x.t100,
                "cpu_s": x.cpu_s,
                "rss_mb": x.rss_mb,
            }
            for x in received
        },
    }
    rx = {x.receiver: x for x in received}
    scale = 100_000 / args.rx_n
    for key, name in (("", "ours"), ("gobgp_", "gobgp")):
        got = rx.get(name)
        summary[f"{key}receive_100k_s"] = scaled(got.t100 if got else None, scale)
        summary[f"{key}receive_cpu_s_100k"] = scaled(got.cpu_s if got else None, scale)
    if rx.get("ours") and rx.get("gobgp"):
        summary["receive_cpu_ours_vs_gobgp"] = ratio(rx["ours"].cpu_s, rx["gobgp"].cpu_s)
    print(json.dumps(summary))


def scaled(x: float | None, factor: float) -> float | None:
    return None if x is None else round(x * factor, 3)


def _ours_available() -> bool:
    try:
        import teapot_lb.bgp.speaker  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
