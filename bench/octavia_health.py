"""Benchmark health monitoring through the teapot Octavia provider: how long after a
member's server stops Octavia's API shows the member ERROR, and after it starts again
ONLINE.

The world is teapot_lb.lab.octavia_probed: a lab namespace with the real `teapot-lb gateway`
(HAProxy), the Octavia 19 stack with the teapot provider agent enabled, and an HTTP
listener → pool of 2 members with an HTTP monitor (delay 1 s, timeout 1 s, down after 1
failure, up after 1 pass). Each run stops member m2's server (SIGTERM, waited), polls the
member through openstacksdk every 50 ms until ERROR, starts the server again and polls
until ONLINE. The path measured: HAProxy's check → the gateway's `/gateway/backends` →
the provider agent's round (`--interval`, the `[teapot] status_interval`; the product's
default is 5 s) → octavia-driver-agent → Octavia's database → the API.

    sudo .venv/bin/python bench/octavia_health.py [--runs 5] [--interval 5]

Needs root and haproxy. Last line, JSON: member_error_p50_s, member_online_p50_s, ...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from controller_scale import percentile
from teapot_lb.lab.octavia import missing
from teapot_lb.lab.octavia_probed import World, probed, statuses
from teapot_lb.lab.wait import wait_for

EVERY = 0.05
WITHIN = 60.0


def _member_becomes(world: World, status: str) -> float:
    start = time.perf_counter()
    wait_for(lambda: statuses(world)["m2"] == status, timeout=WITHIN,
             what=f"m2 {status}", every=EVERY)  # fmt: skip
    return time.perf_counter() - start


def run(runs: int, interval: float) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="bench-octavia-health-"))
    down, up = [], []
    try:
        with probed(work, "ohb", interval=interval) as world:
            wait_for(lambda: set(statuses(world).values()) == {"ONLINE"}, timeout=WITHIN,
                     what="every object ONLINE", every=EVERY)  # fmt: skip
            for _ in range(runs):
                world.stop("m2")
                down.append(_member_becomes(world, "ERROR"))
                world.start("m2")
                up.append(_member_becomes(world, "ONLINE"))
    except BaseException:
        print(f"bench/octavia_health.py: logs kept in {work}", file=sys.stderr)
        raise
    shutil.rmtree(work, ignore_errors=True)
    return {
        "runs": runs,
        "status_interval_s": interval,
        "monitor": "HTTP delay 1 s timeout 1 s max_retries 1 max_retries_down 1",
        "member_error_p50_s": round(percentile(down, 0.5), 3),
        "member_error_max_s": round(max(down), 3),
        "member_online_p50_s": round(percentile(up, 0.5), 3),
        "member_online_max_s": round(max(up), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=5.0,
                        help="the provider agent's status_interval (s)")  # fmt: skip
    args = parser.parse_args()
    why = missing()
    if why is None and os.geteuid() != 0:
        why = "needs root (network namespaces)"
    if why is None and shutil.which("haproxy") is None:
        why = "needs haproxy"
    if why:
        sys.exit(f"bench/octavia_health.py: {why}")
    figures = run(args.runs, args.interval)
    print(f"runs: {figures['runs']}, agent interval {figures['status_interval_s']} s")
    print(f"server stopped -> member ERROR p50:  {figures['member_error_p50_s']} s "
          f"(max {figures['member_error_max_s']})")  # fmt: skip
    print(f"server started -> member ONLINE p50: {figures['member_online_p50_s']} s "
          f"(max {figures['member_online_max_s']})")  # fmt: skip
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
