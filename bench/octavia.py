"""Benchmark the teapot Octavia provider: Octavia API → driver → management API → manager
→ driver → DriverLibrary → Octavia's database.

Processes as in teapot_lb.lab.octavia: the management fake API server, the real
`teapot-lb manager`, and Octavia 19 (`octavia-api`, `octavia-driver-agent`, SQLite,
noauth) from .venv-octavia with the teapot provider. The client is openstacksdk.

- lb: create a load balancer (VIP only) → provisioning ACTIVE, `--runs` times;
- full: one graph create (TCP listener, pool, 3 members, TCP health monitor) → ACTIVE with
  the members NO_MONITOR (the manager has programmed the next hops; an L4 pool's monitor
  probes nothing), `--runs` times;
- delete: cascade delete → gone from Octavia and its TenantLoadBalancer gone;
- first request (as root, with BIRD): the same stack in the lab's router namespace with
  route mode wired (teapot_lb.lab.octavia_stack.route_lab — a management speaker peering with
  BIRD, the lab's nodes n1..n3 as members, each accepting the pool's addresses on lo):
  graph create (listener on 7000, pool, 3 members) → the client's first HTTP answer
  from a member through the router's ECMP route.

Times are taken from before the POST to the first GET (or request) that shows the state,
polled every 10 ms: the polling is the benchmark's, the product's path has none. Without
root or BIRD `first_request_p50_s` is null and `first_request_skipped` says why.

    .venv/bin/python bench/octavia.py [--runs 20]

Last line, JSON: lb_active_p50_s, first_request_p50_s, full_stack_active_p50_s, ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from controller_scale import percentile
from teapot_lb.lab.octavia import POOL_CIDR, PROJECT, Rest, missing, running
from teapot_lb.lab.octavia_stack import active, connection, route_lab
from teapot_lb.lab.wait import wait_for

SUBNET = "11111111-2222-4333-8444-555555555555"
WITHIN = 30.0
EVERY = 0.01


def lb_create(conn: Any, name: str) -> tuple[float, str]:
    start = time.perf_counter()
    lb = conn.load_balancer.create_load_balancer(
        name=name, vip_subnet_id=SUBNET, project_id=PROJECT, provider="teapot"
    )
    active(conn, lb.id, within=WITHIN, every=EVERY)
    return time.perf_counter() - start, lb.id


def graph(name: str, port: int, addresses: list[str]) -> dict[str, Any]:
    """A graph create's body: a TCP listener on `port`, its pool with members at
    `addresses` on the same port, a TCP health monitor."""
    pool = {
        "name": f"{name}-pool", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
        "members": [{"address": a, "protocol_port": port} for a in addresses],
        "healthmonitor": {"type": "TCP", "delay": 2, "timeout": 1, "max_retries": 2},
    }  # fmt: skip
    return {
        "name": name, "vip_subnet_id": SUBNET, "project_id": PROJECT, "provider": "teapot",
        "listeners": [{"name": f"{name}-l", "protocol": "TCP", "protocol_port": port,
                       "default_pool": pool}],
    }  # fmt: skip


def full_create(conn: Any, name: str) -> tuple[float, str]:
    body = graph(name, 80, [f"192.0.2.{21 + i}" for i in range(3)])
    start = time.perf_counter()
    lb = conn.load_balancer.create_load_balancer(**body)
    active(conn, lb.id, within=WITHIN, every=EVERY)

    def online() -> bool:
        found = conn.load_balancer.get_load_balancer(lb.id)
        if found.operating_status != "ONLINE" or not found.pools:
            return False
        members = list(conn.load_balancer.members(found.pools[0]["id"]))
        # An L4 pool's monitor probes nothing: a member programmed as a next hop says
        # NO_MONITOR (OFFLINE before).
        return len(members) == 3 and all(m.operating_status == "NO_MONITOR" for m in members)

    wait_for(online, timeout=WITHIN, what=f"{lb.id} ONLINE", every=EVERY)
    return time.perf_counter() - start, lb.id


def delete(conn: Any, rest: Rest, lb_id: str) -> float:
    start = time.perf_counter()
    conn.load_balancer.delete_load_balancer(lb_id, cascade=True)
    wait_for(
        lambda: conn.load_balancer.find_load_balancer(lb_id) is None and rest.tlb(lb_id) is None,
        timeout=WITHIN,
        what=f"{lb_id} gone",
        every=EVERY,
    )
    return time.perf_counter() - start


def first_requests(runs: int) -> list[float]:
    """Graph create → the client's first answer from a member, in the route-mode lab."""
    from ipaddress import ip_network

    from teapot_lb.lab.standalone_lab import NODES, PORT

    times = []
    with (
        _workdir("bench-octavia-lab-") as tmp,
        route_lab(Path(tmp), "octb") as (lab, stack, rest),
    ):
        conn = connection(stack)
        for ip in list(ip_network(POOL_CIDR))[:8]:  # members accept every VIP they may get
            lab.bind_service_ip(str(ip))
        active(conn, conn.load_balancer.create_load_balancer(**graph("warm-up", PORT, [])).id)
        for i in range(runs):
            body = graph(f"web-{i}", PORT, sorted(NODES.values()))
            start = time.perf_counter()
            lb = conn.load_balancer.create_load_balancer(**body)
            wait_for(lambda vip=lb.vip_address: lab.who(vip, timeout=0.2), timeout=WITHIN,
                     what=f"an answer from {lb.vip_address}", every=EVERY)  # fmt: skip
            times.append(time.perf_counter() - start)
            active(conn, lb.id, within=WITHIN)  # traffic may flow before the status report
            delete(conn, rest, lb.id)
            wait_for(lambda vip=lb.vip_address: lab.who(vip, timeout=0.2) is None,
                     timeout=WITHIN, what=f"{lb.vip_address} withdrawn")  # fmt: skip
    return times


@contextlib.contextmanager
def _workdir(prefix: str) -> Iterator[str]:
    """A temporary directory for the processes' logs, kept (and named) on failure."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    except BaseException:
        print(f"bench/octavia.py: logs kept in {path}", file=sys.stderr)
        raise
    shutil.rmtree(path, ignore_errors=True)


def lab_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("bird") is None:
        return "needs BIRD 2 (bird)"
    return None


def run(runs: int) -> dict[str, Any]:
    with (
        _workdir("bench-octavia-") as tmp,
        running(Path(tmp)) as (
            stack,
            rest,
        ),
    ):
        conn = connection(stack)
        lb_times, full_times, delete_times = [], [], []
        lb_create(conn, "warm-up")  # the first call loads the driver and connects
        for i in range(runs):
            seconds, lb_id = lb_create(conn, f"lb-{i}")
            lb_times.append(seconds)
            delete_times.append(delete(conn, rest, lb_id))
        for i in range(runs):
            seconds, lb_id = full_create(conn, f"full-{i}")
            full_times.append(seconds)
            delete_times.append(delete(conn, rest, lb_id))
    skipped = lab_missing()
    requests = [] if skipped else first_requests(runs)
    return {
        "runs": runs,
        "lb_active_p50_s": round(percentile(lb_times, 0.5), 3),
        "lb_active_max_s": round(max(lb_times), 3),
        "full_stack_active_p50_s": round(percentile(full_times, 0.5), 3),
        "full_stack_active_max_s": round(max(full_times), 3),
        "full_stack_to": "ACTIVE and every member NO_MONITOR (programmed)",
        "first_request_p50_s": round(percentile(requests, 0.5), 3) if requests else None,
        "first_request_max_s": round(max(requests), 3) if requests else None,
        "first_request_skipped": skipped,
        "cascade_delete_p50_s": round(percentile(delete_times, 0.5), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    why = missing()
    if why:
        sys.exit(f"bench/octavia.py: {why}")
    figures = run(args.runs)
    print(f"runs:                               {figures['runs']}")
    print(f"LB create -> ACTIVE p50:            {figures['lb_active_p50_s']} s (goal <= 2)")
    print(f"full stack -> ACTIVE/ONLINE p50:    {figures['full_stack_active_p50_s']} s")
    print(f"full stack -> first request p50:    {figures['first_request_p50_s']} s (goal <= 5)"
          + (f" [skipped: {figures['first_request_skipped']}]"
             if figures["first_request_skipped"] else ""))  # fmt: skip
    print(f"cascade delete -> gone p50:         {figures['cascade_delete_p50_s']} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
