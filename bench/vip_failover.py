"""VIP mode (keepalived VRRPv3 driven by teapot-lb): failover time and reload safety.

Three node namespaces and a client on one bridge; every node runs the VIP agent
(renderer + supervisor + real keepalived) and a TCP server answering its name;
the client starts a connection to the VIP every 10 ms.

Phases, in one run:
  1. ``--trials`` master losses with teapot-lb's default advertisement interval:
     SIGKILL the master's keepalived (parent and VRRP child) and set its link down
     at once; measure from the kill to the client's first connect answered by
     another node (attempts started after the kill). Then restore the link, let the
     supervisor restart keepalived and the node take its place back.
  2. The same with ``advert_int 1`` (OpenELB's default), for comparison.
  3. ``--reloads`` configuration changes that add / remove unrelated Services
     (one joins the measured VIP's instance, one gets an instance of its own, one
     IPv6); every connect attempt to the measured VIP during them is counted.

Last line, JSON: p50_s, max_s (phase 1), advert1s_p50_s, advert1s_max_s (phase 2),
lost_connects_during_reloads, connects_during_reloads, reloads, trials,
master_rx_lower_pri_events (a master heard a lower-priority advert: each
preemption by a recovered node produces one, as does any dual master).

  4. A dual master: two nodes of an instance are split (bridge port isolation),
     both become master and the client follows the second one's GARP; then they
     are joined again. Measured: time until the client's neighbour entry for the
     VIP is the winner's MAC again, and connects failed meanwhile — with
     teapot-lb's GARP settings and with keepalived's defaults (capped at 60 s).
     JSON: dual_master_client_back_s, dual_master_failed_connects,
     dual_master_keepalived_defaults_client_back_s,
     dual_master_keepalived_defaults_failed_connects.

The kill happens at a random phase of the master's advertisement cycle.

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

from teapot_lb.netlab import Topology, netns_available
from teapot_lb.vrrp.lab import VipLab, wait_for
from teapot_lb.vrrp.render import DEFAULT_ADVERT_INTERVAL_S

NODES = ["n1", "n2", "n3"]
VIP = "192.0.2.200"
PAIR_VIP = "192.0.2.201"


def svc(name: str, vip: str, advert: float, **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "interface": "eth0",
        "vips": [vip],
        "candidate_nodes": NODES,
        "advert_interval_s": advert,
        **kw,
    }


def trial(
    lab: VipLab, group: str, settle_timeout_s: float, interval_s: float, rng: random.Random
) -> tuple[float, str]:
    master = lab.settled_master(group, timeout_s=settle_timeout_s, all_healthy=True)
    t_ready = time.monotonic()
    wait_for(
        lambda: lab.answered_by_since(t_ready, VIP, master),
        timeout_s=settle_timeout_s,
        what=f"client answered by {master}",
    )
    # A random phase against the master's advert clock: the procedure above is so
    # regular that a fixed pause would always kill at the same point of the cycle.
    time.sleep(0.2 + rng.uniform(0, interval_s))
    starts = lab.counters(master).get("starts", 0)
    t0 = lab.kill_keepalived(master)
    lab.set_link(master, up=False)
    took = wait_for(
        lambda: lab.first_answer_after(t0, VIP, not_from=master),
        timeout_s=30,
        what="a connect answered by another node",
    )
    # Let late attempts finish, then restore the node.
    time.sleep(0.1)
    lab.set_link(master, up=True)
    wait_for(
        lambda: lab.counters(master).get("starts", 0) > starts and lab.keepalived_pid(master),
        timeout_s=30,
        what=f"keepalived restarted on {master}",
    )
    return took, master


def phase(
    lab: VipLab,
    group: str,
    trials: int,
    settle_timeout_s: float,
    interval_s: float,
    rng: random.Random,
) -> list[float]:
    out = []
    for i in range(trials):
        took, master = trial(lab, group, settle_timeout_s, interval_s, rng)
        out.append(took)
        print(f"  trial {i + 1:2d}: master {master} lost -> client served again after {took:.3f} s")
    return out


KEEPALIVED_DEFAULT_GARP = {
    "master_delay_s": 5,
    "master_repeat": 5,
    "lower_prio_repeat": 0,
    "lower_prio_delay_s": 5,
    "master_refresh_s": 0,
    "higher_prio_send_advert": False,
}


def dual_master(lab: VipLab, garp: dict[str, Any], cap_s: float) -> tuple[float | None, int]:
    """Split two masters apart, heal; seconds until the client is back on the winner's MAC.

    Returns (seconds or None if not within ``cap_s``, connects that failed after healing).
    """
    pair = svc("bench/pair", PAIR_VIP, DEFAULT_ADVERT_INTERVAL_S, candidate_nodes=["n1", "n2"])
    lab.write_config([pair], garp=garp)
    instance = lab.instance_of("bench/pair")
    assert instance is not None
    winner = lab.settled_master("bench/pair", timeout_s=20, all_healthy=True)
    loser = "n2" if winner == "n1" else "n1"
    mac = {n: lab.nodes[n].mac("eth0") for n in (winner, loser)}
    wait_for(lambda: lab.client_neighbour_mac(PAIR_VIP) == mac[winner], timeout_s=10, what="c")
    lab.isolate([winner, loser], isolated=True)
    wait_for(lambda: len(lab.masters(instance)) == 2, timeout_s=10, what="two masters")
    wait_for(lambda: lab.client_neighbour_mac(PAIR_VIP) == mac[loser], timeout_s=10, what="c")
    time.sleep(6)  # past every delayed GARP burst of the second master
    t0 = time.monotonic()
    lab.isolate([winner, loser], isolated=False)
    back: float | None = None
    while time.monotonic() - t0 < cap_s:
        if lab.client_neighbour_mac(PAIR_VIP) == mac[winner]:
            back = time.monotonic() - t0
            break
        time.sleep(0.02)
    time.sleep(2.2)
    failed = [a for a in lab.attempts(since=t0) if PAIR_VIP in a.target and not a.ok]
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
    fast = svc("bench/fast", VIP, default)
    slow = svc("bench/slow", VIP, 1.0)
    extra = [
        svc("bench/joins", "192.0.2.210", default),  # same instance as the VIP
        svc("bench/own", "192.0.2.211", default, candidate_nodes=["n2", "n3"]),
        svc("bench/v6", "2001:db8::211", default),
    ]
    with Topology("vipbn") as topo:
        lab = VipLab(
            topo,
            workdir,
            python=sys.executable,
            agent_args=["--restart-backoff-max", "1", "--restart-stable-after", "1"],
        ).build()
        lab.start([fast])
        lab.start_prober([VIP])
        print(f"workdir {workdir}; default advert interval {default} s")

        print(f"phase 1: {args.trials} master losses, advert_int {default} s")
        fast_times = phase(lab, "bench/fast", args.trials, 20, default, rng)

        print(f"phase 2: {args.trials} master losses, advert_int 1 s")
        lab.write_config([slow])
        slow_times = phase(lab, "bench/slow", args.trials, 30, 1.0, rng)

        print(f"phase 3: {args.reloads} reloads adding/removing unrelated Services")
        lab.write_config([fast])
        master = lab.settled_master("bench/fast", timeout_s=20, all_healthy=True)
        t_ready = time.monotonic()
        wait_for(lambda: lab.answered_by_since(t_ready, VIP, master), timeout_s=20, what="client")
        reloads_before = {n: lab.counters(n).get("reloads", 0) for n in NODES}
        t0 = time.monotonic()
        for i in range(args.reloads):
            lab.write_config([fast, *extra] if i % 2 == 0 else [fast])
            time.sleep(0.05)
        time.sleep(2.5)  # every attempt started during the reloads has finished (timeout 2 s)
        t1 = time.monotonic()
        window = [a for a in lab.attempts(since=t0) if a.start < t1 - 2.5 and VIP in a.target]
        lost = [a for a in window if not a.ok]
        moved = [a for a in window if a.ok and a.node != master]
        reloads = min(lab.counters(n).get("reloads", 0) - reloads_before[n] for n in NODES)
        dual = sum(lab.counters(n).get("dual_master_resolutions", 0) for n in NODES)

        print("phase 4: a dual master heals (n1/n2 split by bridge port isolation, then joined)")
        lab.start_prober([PAIR_VIP])
        ours_back, ours_failed = dual_master(lab, {}, cap_s=60)
        print(f"  teapot-lb settings:    back after {secs(ours_back)}, {ours_failed} failed")
        defaults_back, defaults_failed = dual_master(lab, KEEPALIVED_DEFAULT_GARP, cap_s=60)
        print(
            f"  keepalived's defaults: back after {secs(defaults_back)}, {defaults_failed} failed"
        )

    print(summary(f"advert_int {default} s", fast_times))
    print(summary("advert_int 1 s", slow_times))
    print(
        f"reloads: {reloads} per node, {len(window)} connects during them, {len(lost)} lost,"
        f" {len(moved)} answered by another node than the master"
    )
    result = {
        "p50_s": round(statistics.median(fast_times), 3),
        "max_s": round(max(fast_times), 3),
        "advert1s_p50_s": round(statistics.median(slow_times), 3),
        "advert1s_max_s": round(max(slow_times), 3),
        "lost_connects_during_reloads": len(lost),
        "connects_during_reloads": len(window),
        "reloads": reloads,
        "trials": args.trials,
        "default_advert_interval_s": default,
        "master_rx_lower_pri_events": dual,
        "dual_master_client_back_s": None if ours_back is None else round(ours_back, 3),
        "dual_master_failed_connects": ours_failed,
        "dual_master_keepalived_defaults_client_back_s": (
            None if defaults_back is None else round(defaults_back, 3)
        ),
        "dual_master_keepalived_defaults_failed_connects": defaults_failed,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
