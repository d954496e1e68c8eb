"""VIP mode (keepalived VRRPv3 driven by ``teapot-lb run``): failover time and reload safety.

The product path: three node namespaces and a client on one bridge (the LAN lab,
:mod:`teapot_lb.lab.lan`); every node runs ``teapot-lb run --modes vip`` (the speaker's
VIP backend: plan → renderer → supervisor → real keepalived) on one manifest directory,
and an HTTP server answering its name; the client sends a request to the VIP every 10 ms.

Phases, in one run:
  1. ``--trials`` master losses with teapot-lb's default advertisement interval:
     SIGKILL the master's keepalived (parent and VRRP child) and set its link down
     at once; measure from the kill to the end of the first request answered by
     another node (requests started after the kill). Then restore the link, let the
     supervisor restart keepalived and the node take its place back.
  2. The same with ``advertisementInterval: 1s`` (OpenELB's default), for comparison.
  3. ``--reloads`` manifest changes that add / remove unrelated Services (one joins
     the measured VIP's instance, one gets an instance of its own, one IPv6); every
     request to the measured VIP during them is counted.
  4. A dual master: two nodes of an instance are split (bridge port isolation),
     both become master and the client follows the second one's GARP; then they
     are joined again. Measured: time until the client's neighbour entry for the
     VIP is the winner's MAC again, and requests failed meanwhile, with teapot-lb's
     GARP settings (capped at 60 s).

The kill happens at a random phase of the master's advertisement cycle.

Last line, JSON: p50_s, max_s (phase 1), advert1s_p50_s, advert1s_max_s (phase 2),
lost_connects_during_reloads, connects_during_reloads, reloads, trials,
default_advert_interval_s, master_rx_lower_pri_events (a master heard a lower-priority
advert: each preemption by a recovered node produces one, as does any dual master),
dual_master_client_back_s, dual_master_failed_connects, cpus.

Run as root: .venv/bin/python bench/vip_failover.py [--trials 20] [--reloads 50]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from teapot_lb.lab.client import Probe, target_of
from teapot_lb.lab.lan import LanLab, node_names, service_doc
from teapot_lb.lab.manifests import SERVICE_PORT, config_doc
from teapot_lb.lab.measure import first_success
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology, netns_available
from teapot_lb.vrrp.group import DEFAULT_ADVERT_INTERVAL_S

NODES = node_names(3)
VIP = "192.0.2.200"
PAIR_VIP = "192.0.2.230"
JOINS, OWN, V6 = "192.0.2.210", "192.0.2.235", "2001:db8::211"


def config(advert_s: float) -> list[dict[str, Any]]:
    """Three VIPAdvertisements with VRID ranges of their own: every node, node-b and
    node-c only (the instance of its own), node-a and node-b (the dual-master pair)."""

    def adv(name: str, pool: list[str], vrids: tuple[int, int], **spec: Any) -> list[Any]:
        body = {
            "addressPools": [name],
            "interface": "eth0",
            "advertisementInterval": f"{advert_s}s",
            "vridRange": {"start": vrids[0], "end": vrids[1]},
            **spec,
        }
        return [
            config_doc("AddressPool", name, {"addresses": pool}),
            config_doc("VIPAdvertisement", name, body),
        ]

    def hostnames(*nodes: str) -> list[dict[str, Any]]:
        expr = {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}
        return [{"matchExpressions": [expr]}]

    return [
        *adv("all", ["192.0.2.200-192.0.2.229", "2001:db8::200-2001:db8::22f"], (1, 50)),
        *adv("pair", ["192.0.2.230-192.0.2.234"], (51, 100),
             nodeSelectors=hostnames("node-a", "node-b")),
        *adv("own", ["192.0.2.235-192.0.2.239"], (101, 150),
             nodeSelectors=hostnames("node-b", "node-c")),
    ]  # fmt: skip


def services(*ips: str) -> list[dict[str, Any]]:
    return [service_doc(f"svc-{i}", ip) for i, ip in enumerate(ips)]


def answered_since(probe: Probe, t: float, node: str) -> bool:
    return any(a.ok and a.node == node for a in probe.snapshot() if a.start >= t)


def trial(lab: LanLab, probe: Probe, interval_s: float, rng: random.Random) -> tuple[float, str]:
    master = lab.settled_master(VIP, timeout=30, all_healthy=True)
    t_ready = time.monotonic()
    wait_for(lambda: answered_since(probe, t_ready, master), timeout=30,
             what=f"client answered by {master}")  # fmt: skip
    # A random phase against the master's advert clock: the procedure above is so
    # regular that a fixed pause would always kill at the same point of the cycle.
    time.sleep(0.2 + rng.uniform(0, interval_s))
    starts = lab.vip_counters(master).get("starts", 0)
    t0 = lab.kill_keepalived(master)
    lab.link(master, up=False)
    target = target_of(VIP, SERVICE_PORT)
    took = wait_for(
        lambda: first_success(probe.snapshot(), t0,
                              accept=lambda a: a.target == target and a.node != master),
        timeout=30,
        what="a request answered by another node",
    )  # fmt: skip
    time.sleep(0.1)  # let late attempts finish, then restore the node
    lab.link(master, up=True)
    wait_for(
        lambda: lab.vip_counters(master).get("starts", 0) > starts and lab.keepalived_pid(master),
        timeout=60,
        what=f"keepalived restarted on {master}",
    )
    return took, master


def phase(lab: LanLab, trials: int, interval_s: float, rng: random.Random) -> list[float]:
    out = []
    probe = lab.http.probe([(VIP, SERVICE_PORT)], 0.01)
    try:
        for i in range(trials):
            took, master = trial(lab, probe, interval_s, rng)
            out.append(took)
            print(f"  trial {i + 1:2d}: master {master} lost -> served again after {took:.3f} s",
                  flush=True)  # fmt: skip
    finally:
        probe.stop()
    return out


def reload_phase(lab: LanLab, reloads: int) -> tuple[int, int, int, int]:
    """(reloads per node, requests during them, lost, answered by another node)."""
    master = lab.settled_master(VIP, timeout=30, all_healthy=True)
    before = {n: lab.vip_counters(n).get("reloads", 0) for n in NODES}
    probe = lab.http.probe([(VIP, SERVICE_PORT)], 0.01)
    try:
        t_ready = time.monotonic()
        wait_for(lambda: answered_since(probe, t_ready, master), timeout=20, what="client")
        t0 = time.monotonic()
        for i in range(reloads):
            adding = i % 2 == 0
            lab.write(services=services(VIP, JOINS, OWN, V6) if adding else services(VIP))
            wait_for(lambda adding=adding: lab.vip_applied(JOINS, adding), timeout=20,
                     what="every node applying the change")  # fmt: skip
        t1 = time.monotonic()
    finally:
        attempts = probe.stop()
    window = [a for a in attempts if t0 <= a.start < t1]
    lost = [a for a in window if not a.ok]
    moved = [a for a in window if a.ok and a.node != master]
    done = min(lab.vip_counters(n).get("reloads", 0) - before[n] for n in NODES)
    return done, len(window), len(lost), len(moved)


def dual_master(lab: LanLab, cap_s: float) -> tuple[float | None, int]:
    """Split two masters apart, heal; seconds until the client is back on the winner's MAC.

    Returns (seconds or None if not within ``cap_s``, requests that failed after healing).
    """
    lab.write(services=services(VIP, PAIR_VIP))
    winner = lab.settled_master(PAIR_VIP, timeout=30, all_healthy=True)
    instance = lab.vip_instance(PAIR_VIP)
    assert instance is not None
    loser = "node-b" if winner == "node-a" else "node-a"
    mac = {n: lab.mac(n) for n in (winner, loser)}
    probe = lab.http.probe([(PAIR_VIP, SERVICE_PORT)], 0.01)
    try:
        wait_for(lambda: lab.client_neighbor(PAIR_VIP) == mac[winner], timeout=10, what="c")
        lab.isolate([winner, loser], isolated=True)
        wait_for(lambda: len(lab.vip_masters(instance)) == 2, timeout=10, what="two masters")
        wait_for(lambda: lab.client_neighbor(PAIR_VIP) == mac[loser], timeout=10, what="c")
        time.sleep(6)  # past every delayed GARP burst of the second master
        t0 = time.monotonic()
        lab.isolate([winner, loser], isolated=False)
        back: float | None = None
        while time.monotonic() - t0 < cap_s:
            if lab.client_neighbor(PAIR_VIP) == mac[winner]:
                back = time.monotonic() - t0
                break
            time.sleep(0.02)
        time.sleep(1.0)  # requests started meanwhile end (timeouts 0.2 s + 0.5 s)
    finally:
        attempts = probe.stop()
    failed = [a for a in attempts if a.start >= t0 and not a.ok]
    return back, len(failed)


def secs(value: float | None) -> str:
    return "more than the cap" if value is None else f"{value:.3f} s"


def summary(name: str, values: list[float]) -> str:
    qs = statistics.quantiles(values, n=20) if len(values) > 1 else values * 19
    return (
        f"{name}: n={len(values)} p50={statistics.median(values):.3f}s p95={qs[18]:.3f}s"
        f" max={max(values):.3f}s min={min(values):.3f}s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--reloads", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    reason = netns_available()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="vip-failover-"))
    default = DEFAULT_ADVERT_INTERVAL_S
    with Topology("vipbn") as topo:
        lab = LanLab(topo, workdir, modes=("vip",), poll_interval=None)  # the CLI default
        try:
            lab.write(config(default), services(VIP))
            lab.start_all()
            print(f"workdir {workdir}; default advert interval {default} s")

            print(f"phase 1: {args.trials} master losses, advert_int {default} s")
            fast_times = phase(lab, args.trials, default, rng)

            print(f"phase 2: {args.trials} master losses, advert_int 1 s")
            lab.write(config(1.0))
            slow_times = phase(lab, args.trials, 1.0, rng)

            print(f"phase 3: {args.reloads} reloads adding/removing unrelated Services")
            lab.write(config(default))
            reloads, window, lost, moved = reload_phase(lab, args.reloads)
            dual = sum(lab.vip_counters(n).get("dual_master_resolutions", 0) for n in NODES)

            print("phase 4: a dual master heals (split by bridge port isolation, then joined)")
            back, failed = dual_master(lab, cap_s=60)
            print(f"  teapot-lb settings: back after {secs(back)}, {failed} failed")
        finally:
            lab.close()

    print(summary(f"advert_int {default} s", fast_times))
    print(summary("advert_int 1 s", slow_times))
    print(
        f"reloads: {reloads} per node, {window} requests during them, {lost} lost,"
        f" {moved} answered by another node than the master"
    )
    result = {
        "p50_s": round(statistics.median(fast_times), 3),
        "max_s": round(max(fast_times), 3),
        "advert1s_p50_s": round(statistics.median(slow_times), 3),
        "advert1s_max_s": round(max(slow_times), 3),
        "lost_connects_during_reloads": lost,
        "connects_during_reloads": window,
        "reloads": reloads,
        "trials": args.trials,
        "default_advert_interval_s": default,
        "master_rx_lower_pri_events": dual,
        "dual_master_client_back_s": None if back is None else round(back, 3),
        "dual_master_failed_connects": failed,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
