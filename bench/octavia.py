"""Benchmark the teapot Octavia provider: Octavia API → driver → management API → manager
→ driver → DriverLibrary → Octavia's database.

Processes as in tests/octavia/stack.py: the management fake API server, the real
`teapot-lb manager`, and Octavia 19 (`octavia-api`, `octavia-driver-agent`, SQLite,
noauth) from .venv-octavia with the teapot provider. The client is openstacksdk.

- lb: create a load balancer (VIP only) → provisioning ACTIVE, `--runs` times;
- full: one graph create (TCP listener, pool, 3 members, TCP health monitor) → ACTIVE with
  the members ONLINE (the manager has programmed the next hops), `--runs` times;
- delete: cascade delete → gone from Octavia and its TenantLoadBalancer gone.

Times are taken from before the POST to the first GET that shows the state (GETs every
10 ms: the polling is the benchmark's, the product's path has none). Traffic is not
wired here (no lab): `first_request_p50_s` is null and the full-stack figure is to
ACTIVE/ONLINE, said so in `full_stack_to`.

    .venv/bin/python bench/octavia.py [--runs 20]

Last line, JSON: lb_active_p50_s, first_request_p50_s, full_stack_active_p50_s, ...
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from controller_scale import percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from octavia.stack import PROJECT, Rest, connection, missing, running  # noqa: E402
from teapot_lb.lab.wait import wait_for  # noqa: E402

SUBNET = "11111111-2222-4333-8444-555555555555"
WITHIN = 30.0
EVERY = 0.01


def _until_active(conn: Any, lb_id: str, start: float) -> float:
    def check() -> bool:
        lb = conn.load_balancer.get_load_balancer(lb_id)
        if lb.provisioning_status == "ERROR":
            raise RuntimeError(f"load balancer {lb_id} in ERROR")
        return bool(lb.provisioning_status == "ACTIVE")

    wait_for(check, timeout=WITHIN, what=f"{lb_id} ACTIVE", every=EVERY)
    return time.perf_counter() - start


def lb_create(conn: Any, name: str) -> tuple[float, str]:
    start = time.perf_counter()
    lb = conn.load_balancer.create_load_balancer(
        name=name, vip_subnet_id=SUBNET, project_id=PROJECT, provider="teapot"
    )
    return _until_active(conn, lb.id, start), lb.id


def full_create(conn: Any, name: str) -> tuple[float, str]:
    members = [{"address": f"192.0.2.{21 + i}", "protocol_port": 80} for i in range(3)]
    pool = {
        "name": f"{name}-pool", "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN",
        "members": members,
        "healthmonitor": {"type": "TCP", "delay": 2, "timeout": 1, "max_retries": 2},
    }  # fmt: skip
    start = time.perf_counter()
    lb = conn.load_balancer.create_load_balancer(
        name=name, vip_subnet_id=SUBNET, project_id=PROJECT, provider="teapot",
        listeners=[{"name": f"{name}-l", "protocol": "TCP", "protocol_port": 80,
                    "default_pool": pool}],
    )  # fmt: skip
    _until_active(conn, lb.id, start)

    def online() -> bool:
        found = conn.load_balancer.get_load_balancer(lb.id)
        if found.operating_status != "ONLINE" or not found.pools:
            return False
        members = list(conn.load_balancer.members(found.pools[0]["id"]))
        return len(members) == 3 and all(m.operating_status == "ONLINE" for m in members)

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


def run(runs: int) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-octavia-") as tmp,
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
    return {
        "runs": runs,
        "lb_active_p50_s": round(percentile(lb_times, 0.5), 3),
        "lb_active_max_s": round(max(lb_times), 3),
        "full_stack_active_p50_s": round(percentile(full_times, 0.5), 3),
        "full_stack_active_max_s": round(max(full_times), 3),
        "full_stack_to": "ACTIVE and ONLINE (traffic not wired in this benchmark)",
        "first_request_p50_s": None,
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
    print(f"full stack -> ACTIVE/ONLINE p50:    {figures['full_stack_active_p50_s']} s "
          "(goal <= 5 to the first request; traffic not wired here)")  # fmt: skip
    print(f"cascade delete -> gone p50:         {figures['cascade_delete_p50_s']} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
