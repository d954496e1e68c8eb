#!/usr/bin/env python3
"""L2 failover: teapot-lb's ARP responder vs real keepalived (VRRPv3), in namespaces.

Topology: a client and three nodes on one bridge; each node emulates kube-proxy IPVS (the
Service IP on ``lo`` with ``arp_ignore``/``arp_announce``, a TCP server answering with the
node's name). One trial: the client opens a TCP connection to the Service IP every 10 ms;
we SIGKILL the owner's speaker and take its link down; the figure is the time from the kill
to the client's first connection answered by another node. The owner comes back between
trials (same node every time: it is first in hash order / has the highest priority).

keepalived runs the same trials as a reference: VRRPv3, priorities 254/253/252 (the skew
time is then negligible: keepalived's best case), ``advert_int`` 1 s and 0.1 s; the VIP
lives on ``eth0`` of the master, as keepalived manages it.

Stability: every node namespace runs CPU hogs (two per node, so both cores are saturated
three times over), no failure is injected, and we count ownership changes (must be 0).

Run as root: ``.venv/bin/python bench/l2_failover.py [--trials 20] [--stability 60]``.
The last line is JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from teapot_lb.l2.lab import SERVE_PORT, V4, L2Lab, build, in_netns, wait_for
from teapot_lb.netlab import Topology

PROBE_EVERY = 0.01


def first_other_answer(ip: str, old: str, timeout: float) -> tuple[float, str] | None:
    """From the calling thread's namespace: a connect every 10 ms until one is answered by a
    node other than ``old``; (monotonic time of that connect's completion, node name).

    Nothing blocks: connects and the servers' name lines are both waited for with select,
    so a connection the old owner accepted just before its link went down cannot stall
    the probing (it would stall a blocking read for its whole timeout).
    """
    connecting: dict[socket.socket, float] = {}  # socket -> when the SYN went out
    connected: dict[socket.socket, float] = {}  # socket -> when the connect completed
    next_probe = time.monotonic()
    deadline = next_probe + timeout

    def drop(s: socket.socket) -> None:
        connecting.pop(s, None)
        connected.pop(s, None)
        s.close()

    try:
        while time.monotonic() < deadline:
            now = time.monotonic()
            if now >= next_probe:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.connect_ex((ip, SERVE_PORT))
                connecting[s] = now
                next_probe += PROBE_EVERY
            wait = max(0.0, next_probe - time.monotonic())
            readable, writable, _ = select.select(list(connected), list(connecting), [], wait)
            for s in writable:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    connected[s] = time.monotonic()
                    del connecting[s]
                else:
                    drop(s)
            for s in readable:
                try:
                    name = s.recv(64).decode().strip()
                except OSError:
                    name = ""
                done = connected[s]
                drop(s)
                if name and name != old:
                    return done, name
            for table in (connecting, connected):
                for s, started in list(table.items()):
                    if time.monotonic() - started > 1.5:  # stale: its SYN retransmits at 1 s
                        drop(s)
        return None
    finally:
        for s in [*connecting, *connected]:
            s.close()


def measure_kill(
    lab: L2Lab, ip: str, old: str, kill: Callable[[], None], timeout: float = 15.0
) -> float:
    """Start probing, run ``kill()`` (SIGKILL + link down), return seconds to recovery."""
    box: dict[str, tuple[float, str] | None] = {}

    def probe() -> None:
        box["result"] = in_netns(lab.client.ns, lambda: first_other_answer(ip, old, timeout))

    t = threading.Thread(target=probe)
    t.start()
    time.sleep(0.05)  # the prober is running and succeeding against the old owner
    t_kill = time.monotonic()
    kill()
    t.join()
    result = box.get("result")
    if result is None:
        raise RuntimeError(f"no other node answered {ip} within {timeout} s after killing {old}")
    return result[0] - t_kill


def summary(xs: list[float]) -> dict[str, float]:
    ordered = sorted(xs)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": statistics.median(ordered), "p95": p95, "max": ordered[-1]}


def fmt(xs: list[float]) -> str:
    s = summary(xs)
    return f"p50 {s['p50']:.3f} s  p95 {s['p95']:.3f} s  max {s['max']:.3f} s  (n={len(xs)})"


# --- teapot-lb --------------------------------------------------------------------------


def teapot_trials(trials: int, workdir: Path) -> list[float]:
    results: list[float] = []
    with Topology("l2bench") as topo:
        lab = build(topo, ips=(V4,))
        for node in lab.nodes:
            lab.start_agent(node, workdir)
        owner = wait_for(lambda: lab.connect(V4), 20, "teapot-lb owner")
        for i in range(trials):
            assert lab.connect(V4) == owner

            killed_wall: list[float] = []

            def kill(node: str = owner, killed_wall: list[float] = killed_wall) -> None:
                killed_wall.append(time.time())
                lab.kill_agent(node)
                lab.link(node, up=False)

            took = measure_kill(lab, V4, owner, kill)
            results.append(took)
            print(
                f"teapot-lb trial {i + 1:2d}: {took:.3f} s"
                f"  ({takeover_logged(lab, owner, killed_wall[0])})",
                flush=True,
            )
            lab.link(owner, up=True)
            lab.start_agent(owner, workdir)
            wait_for(lambda: lab.connect(V4, 0.2) == owner, 20, "the owner back")
            time.sleep(0.5)
    return results


def takeover_logged(lab: L2Lab, old: str, since: float) -> str:
    """Which node logged taking the IP after ``since`` (wall clock), and how long after."""
    for node, path in lab.logs.items():
        if node == old:
            continue
        for rec in _records(path.read_text(errors="replace").splitlines()):
            if rec.get("event") == "ownership" and rec.get("owned"):
                at = datetime.fromisoformat(rec["timestamp"]).timestamp()
                if at >= since:
                    return f"{node} logged the takeover at +{at - since:.3f} s"
    return "no takeover logged"


# --- keepalived -------------------------------------------------------------------------

KEEPALIVED_CONF = """\
global_defs {{
    router_id {node}
    vrrp_version 3
    script_user root
}}
vrrp_instance teapot_bench {{
    state BACKUP
    interface eth0
    virtual_router_id 51
    priority {priority}
    advert_int {advert}
    virtual_ipaddress {{
        {vip}/24 dev eth0
    }}
}}
"""


def start_keepalived(lab: L2Lab, node: str, priority: int, advert: float, d: Path) -> None:
    conf = d / f"{node}.conf"
    conf.write_text(KEEPALIVED_CONF.format(node=node, priority=priority, advert=advert, vip=V4))
    log = (d / f"{node}.keepalived.log").open("ab")
    argv = [
        "keepalived", "-n", "-l", "-D", "-P", "-G", "-f", str(conf),
        "-p", str(d / f"{node}.pid"), "-r", str(d / f"{node}.vrrp.pid"),
    ]  # fmt: skip
    lab.agents[node] = lab.nodes[node].popen(argv, stdout=log, stderr=log)
    log.close()


def keepalived_trials(trials: int, advert: float, workdir: Path) -> list[float]:
    d = workdir / f"keepalived-{advert}"
    d.mkdir()
    priorities = {"node-a": 254, "node-b": 253, "node-c": 252}
    results: list[float] = []
    with Topology("kabench") as topo:
        lab = build(topo, ips=())
        for node, prio in priorities.items():
            start_keepalived(lab, node, prio, advert, d)
        wait_for(lambda: lab.connect(V4) == "node-a", 30, "keepalived master node-a")
        for i in range(trials):

            def kill() -> None:
                # The VRRP child may sit outside the parent's process group: kill it by pid.
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int((d / "node-a.vrrp.pid").read_text()), signal.SIGKILL)
                lab.kill_agent("node-a")
                lab.link("node-a", up=False)

            took = measure_kill(lab, V4, "node-a", kill)
            results.append(took)
            print(f"keepalived advert_int {advert}: trial {i + 1:2d}: {took:.3f} s", flush=True)
            # A rebooted node would not still hold the VIP a killed keepalived left behind.
            lab.nodes["node-a"].ip("addr", "flush", "dev", "eth0", "to", f"{V4}/32", check=False)
            lab.link("node-a", up=True)
            for pid_file in ("node-a.pid", "node-a.vrrp.pid"):
                (d / pid_file).unlink(missing_ok=True)
            start_keepalived(lab, "node-a", priorities["node-a"], advert, d)
            wait_for(lambda: lab.connect(V4, 0.2) == "node-a", 30, "keepalived master back")
            time.sleep(max(0.5, 3 * advert))
    return results


# --- stability --------------------------------------------------------------------------


def stability(seconds: float, workdir: Path) -> tuple[int, int, float]:
    """(ownership acquisitions, member deaths, longest heartbeat gap) during ``seconds`` of
    CPU saturation."""
    d = workdir / "stability"
    d.mkdir()
    with Topology("l2stab") as topo:
        lab = build(topo, ips=(V4,))
        for node in lab.nodes:
            lab.start_agent(node, d)
        wait_for(lambda: lab.connect(V4), 20, "an owner")
        time.sleep(1.0)
        starts = {n: p.stat().st_size for n, p in lab.logs.items()}
        hogs = [
            host.popen([sys.executable, "-c", "while True: pass"])
            for host in lab.nodes.values()
            for _ in range(2)
        ]
        print(f"stability: {len(hogs)} CPU hogs for {seconds:.0f} s, no failure injected")
        time.sleep(seconds)
        ends = {n: p.stat().st_size for n, p in lab.logs.items()}  # the window ends here
        for proc in lab.agents.values():  # graceful stop: they log their counters
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in lab.agents.values():
            proc.wait(timeout=30)
        for h in hogs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(h.pid, signal.SIGKILL)
        acquisitions = deaths = 0
        max_gap = 0.0
        for node, path in lab.logs.items():
            raw = path.read_bytes()
            window = raw[starts[node] : ends[node]].decode(errors="replace").splitlines()
            for rec in _records(window):
                if rec.get("event") == "ownership" and rec.get("owned"):
                    acquisitions += 1
                    print(f"  spurious: {node} acquired {rec.get('ip')}", flush=True)
                if rec.get("event") == "member" and rec.get("new") == "dead":
                    deaths += 1
                    print(f"  {node} declared {rec.get('member')} dead", flush=True)
            for rec in _records(raw[ends[node] :].decode(errors="replace").splitlines()):
                if rec.get("event") == "counters":
                    max_gap = max([max_gap, *rec.get("max_gap_s", {}).values()])
        print(f"stability: longest heartbeat silence seen by any node: {max_gap:.3f} s")
        return acquisitions, deaths, max_gap


def _records(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--keepalived-trials", type=int, default=None, help="default: --trials")
    ap.add_argument("--stability", type=float, default=60.0, help="seconds (0: skip)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    k_trials = args.keepalived_trials if args.keepalived_trials is not None else args.trials
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} at start (shared machine)")
    with tempfile.TemporaryDirectory(prefix="l2bench") as tmp:
        workdir = Path(tmp)
        ours = teapot_trials(args.trials, workdir)
        print(f"teapot-lb:                {fmt(ours)}", flush=True)
        k100 = keepalived_trials(k_trials, 0.1, workdir)
        print(f"keepalived advert 0.1 s:  {fmt(k100)}", flush=True)
        k1 = keepalived_trials(k_trials, 1.0, workdir)
        print(f"keepalived advert 1 s:    {fmt(k1)}", flush=True)
        spurious, deaths, gap = (
            stability(args.stability, workdir) if args.stability > 0 else (0, 0, 0.0)
        )
        print(f"stability: {spurious} ownership changes, {deaths} member deaths declared")
    s = summary(ours)
    print(
        json.dumps(
            {
                "p50_s": round(s["p50"], 4),
                "p95_s": round(s["p95"], 4),
                "max_s": round(s["max"], 4),
                "keepalived_1s_p50_s": round(summary(k1)["p50"], 4),
                "keepalived_100ms_p50_s": round(summary(k100)["p50"], 4),
                "spurious_failovers": spurious,
                "stability_s": args.stability,
                "stability_max_heartbeat_gap_s": round(gap, 4),
                "trials": args.trials,
                "keepalived_trials": k_trials,
                "load_avg_1m_at_start": round(load[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
