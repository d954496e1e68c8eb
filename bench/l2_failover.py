#!/usr/bin/env python3
"""L2 failover: teapot-lb's L2 mode (``teapot-lb run``) vs real keepalived (VRRPv3), in namespaces.

The product path: every node runs ``teapot-lb run --modes l2`` (the speaker's L2 backend:
heartbeats, the plan's election, the ARP/NDP responders) on one manifest directory, in
the LAN lab (:mod:`teapot_lb.lab.lan`): a client and three nodes on one bridge, each node
emulating kube-proxy IPVS (the Service IP on ``lo`` with ``arp_ignore``/``arp_announce``,
an HTTP server answering with the node's name). One trial: the client sends a request to
the Service IP every 10 ms; we SIGKILL the owner's speaker and take its link down; the
figure is the time from the kill to the end of the first request, started after the
kill, answered by another node. The owner comes back between trials (same node every
time: it is first in hash order / has the highest priority).

keepalived runs the same trials as a reference: VRRPv3, priorities 254/253/252 (the skew
time is then negligible: keepalived's best case), ``advert_int`` 1 s and 0.1 s; the VIP
lives on ``eth0`` of the master, as keepalived manages it.

Stability: every node namespace runs CPU hogs (two per node, so both cores are saturated
three times over), no failure is injected, and we count ownership changes (must be 0)
and the longest heartbeat silence any node heard (from its status.json).

Run as root: ``.venv/bin/python bench/l2_failover.py [--trials 20] [--stability 60]``.
The last line is JSON: p50_s, p95_s, max_s, keepalived_1s_p50_s, keepalived_100ms_p50_s,
spurious_failovers, stability_s, stability_max_heartbeat_gap_s, trials, keepalived_trials,
load_avg_1m_at_start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from ipaddress import ip_address
from pathlib import Path

from teapot_lb.announce.election import ranking
from teapot_lb.lab.lan import LanLab, service_doc
from teapot_lb.lab.manifests import SERVICE_PORT, config_doc
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

V4 = "192.0.2.100"
PROBE_EVERY = 0.01
CONFIG = [
    config_doc("AddressPool", "lan", {"addresses": [f"{V4}/32"]}),
    config_doc("L2Advertisement", "lan", {"addressPools": ["lan"]}),
]


def measure_kill(lab: LanLab, old: str, kill: Callable[[], None], timeout: float = 15.0) -> float:
    """Probe every 10 ms, run ``kill()``; seconds from the kill to the end of the first
    request started after it that another node answered."""
    probe = lab.http.probe([(V4, SERVICE_PORT)], PROBE_EVERY)
    try:
        wait_for(lambda: any(a.node == old for a in probe.snapshot()), timeout=5,
                 what=f"the probe answered by {old}")  # fmt: skip
        t_kill = time.monotonic()
        kill()
        end = wait_for(
            lambda: min(
                (a.end for a in probe.snapshot() if a.start >= t_kill and a.ok and a.node != old),
                default=None,
            ),
            timeout=timeout,
            what=f"another node answering {V4} after killing {old}",
        )
    finally:
        probe.stop()
    return end - t_kill


def summary(xs: list[float]) -> dict[str, float]:
    ordered = sorted(xs)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": statistics.median(ordered), "p95": p95, "max": ordered[-1]}


def fmt(xs: list[float]) -> str:
    s = summary(xs)
    return f"p50 {s['p50']:.3f} s  p95 {s['p95']:.3f} s  max {s['max']:.3f} s  (n={len(xs)})"


# --- teapot-lb --------------------------------------------------------------------------


def started_lab(topo: Topology, workdir: Path) -> LanLab:
    lab = LanLab(topo, workdir, poll_interval=None)  # teapot-lb run's own default
    lab.write(CONFIG, [service_doc("web", V4)])
    lab.start_all()
    owner = ranking(ip_address(V4), lab.nodes)[0]
    wait_for(lambda: lab.who(V4) == owner, timeout=60, what=f"{owner} answering {V4}",
             detail=lab.logs)  # fmt: skip
    return lab


def teapot_trials(trials: int, workdir: Path) -> list[float]:
    results: list[float] = []
    with Topology("l2bench") as topo:
        lab = started_lab(topo, workdir / "teapot")
        owner = ranking(ip_address(V4), lab.nodes)[0]
        try:
            for i in range(trials):
                killed_wall: list[float] = []

                def kill(node: str = owner, killed_wall: list[float] = killed_wall) -> None:
                    killed_wall.append(time.time())
                    lab.kill(node)
                    lab.link(node, up=False)

                took = measure_kill(lab, owner, kill)
                results.append(took)
                print(
                    f"teapot-lb trial {i + 1:2d}: {took:.3f} s"
                    f"  ({takeover_logged(lab, owner, killed_wall[0])})",
                    flush=True,
                )
                lab.link(owner, up=True)
                lab.start(owner)
                wait_for(lambda: lab.who(V4) == owner, timeout=30, what="the owner back")
                time.sleep(0.5)  # let the returning owner's announcements settle
        finally:
            lab.close()
    return results


def takeover_logged(lab: LanLab, old: str, since: float) -> str:
    """Which node logged taking the IP after ``since`` (wall clock), and how long after."""
    for node in lab.nodes:
        if node == old:
            continue
        for rec in lab.events(node, "ownership"):
            if rec.get("owned") and "timestamp" in rec:
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


def start_keepalived(lab: LanLab, node: str, priority: int, advert: float, d: Path) -> None:
    conf = d / f"{node}.conf"
    conf.write_text(KEEPALIVED_CONF.format(node=node, priority=priority, advert=advert, vip=V4))
    with (d / f"{node}.keepalived.log").open("ab") as log:
        argv = [
            "keepalived", "-n", "-l", "-D", "-P", "-G", "-f", str(conf),
            "-p", str(d / f"{node}.pid"), "-r", str(d / f"{node}.vrrp.pid"),
        ]  # fmt: skip
        lab.nodes[node].host.popen(argv, stdout=log, stderr=log)


def kill_keepalived(d: Path, node: str) -> None:
    # The VRRP child may sit outside the parent's process group: kill both by pid.
    for pid_file in (f"{node}.vrrp.pid", f"{node}.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((d / pid_file).read_text()), signal.SIGKILL)


def keepalived_trials(trials: int, advert: float, workdir: Path) -> list[float]:
    d = workdir / f"keepalived-{advert}"
    d.mkdir(parents=True)
    priorities = {"node-a": 254, "node-b": 253, "node-c": 252}
    results: list[float] = []
    with Topology("kabench") as topo:
        # No Services, no speakers: no IP on lo; keepalived puts the VIP on eth0.
        lab = LanLab(topo, d)
        try:
            for node, prio in priorities.items():
                start_keepalived(lab, node, prio, advert, d)
            wait_for(lambda: lab.who(V4) == "node-a", timeout=30, what="master node-a")
            for i in range(trials):

                def kill() -> None:
                    kill_keepalived(d, "node-a")
                    lab.link("node-a", up=False)

                took = measure_kill(lab, "node-a", kill)
                results.append(took)
                print(f"keepalived advert_int {advert}: trial {i + 1:2d}: {took:.3f} s", flush=True)
                # A rebooted node would not still hold the VIP a killed keepalived left.
                lab.nodes["node-a"].host.ip(
                    "addr", "flush", "dev", "eth0", "to", f"{V4}/32", check=False
                )
                lab.link("node-a", up=True)
                for pid_file in ("node-a.pid", "node-a.vrrp.pid"):
                    (d / pid_file).unlink(missing_ok=True)
                start_keepalived(lab, "node-a", priorities["node-a"], advert, d)
                wait_for(lambda: lab.who(V4) == "node-a", timeout=30, what="master back")
                time.sleep(max(0.5, 3 * advert))  # let the preemption's adverts settle
        finally:
            lab.close()
    return results


# --- stability --------------------------------------------------------------------------


def stability(seconds: float, workdir: Path) -> tuple[int, int, float]:
    """(ownership acquisitions, member deaths, longest heartbeat gap) during ``seconds`` of
    CPU saturation."""
    with Topology("l2stab") as topo:
        lab = started_lab(topo, workdir / "stability")
        try:
            time.sleep(1.0)  # past the start's ownership and membership events
            before = {
                n: (len(lab.events(n, "ownership")), len(lab.events(n, "member")))
                for n in lab.nodes
            }
            hogs = [
                node.host.popen([sys.executable, "-c", "while True: pass"])
                for node in lab.nodes.values()
                for _ in range(2)
            ]
            print(f"stability: {len(hogs)} CPU hogs for {seconds:.0f} s, no failure injected")
            time.sleep(seconds)
            for h in hogs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(h.pid, signal.SIGKILL)
            acquisitions = deaths = 0
            max_gap = 0.0
            for node in lab.nodes:
                owned, members = before[node]
                for rec in lab.events(node, "ownership")[owned:]:
                    if rec.get("owned"):
                        acquisitions += 1
                        print(f"  spurious: {node} acquired {rec.get('ip')}", flush=True)
                for rec in lab.events(node, "member")[members:]:
                    if rec.get("new") == "dead":
                        deaths += 1
                        print(f"  {node} declared {rec.get('member')} dead", flush=True)
                gaps = lab.status(node).get("l2", {}).get("heartbeat_max_gap_s", {})
                max_gap = max([max_gap, *gaps.values()])
        finally:
            lab.close()
        print(f"stability: longest heartbeat silence heard by any node: {max_gap:.3f} s")
        return acquisitions, deaths, max_gap


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
