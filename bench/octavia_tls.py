"""Benchmark a TERMINATED_HTTPS load balancer through the teapot Octavia provider and the
real gateway: one graph create (two HTTP pools, three members, a TERMINATED_HTTPS
listener with a default and an SNI certificate, two L7 policies) → the first HTTPS
answer by SNI from a member.

The path timed is the product's: Octavia API → teapot driver → the management API's
Gateway, HTTPRoutes, EndpointSlices and TLS Secrets → `teapot-lb gateway` (cluster
source) → HAProxy in a lab namespace → an HTTP server in another (the setup of
teapot_lb.lab.octavia_traffic, shared with its test; certificates through Octavia's
local_cert_manager). Between runs the load balancer is deleted (cascade) and the
hostnames are waited until no longer served. Needs root, HAProxy, curl, openssl and
.venv-octavia.

    .venv/bin/python bench/octavia_tls.py [--runs 5]

Last line, JSON: tls_first_https_p50_s, tls_first_https_max_s, runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

from controller_scale import percentile
from teapot_lb.lab.octavia import missing
from teapot_lb.lab.octavia_traffic import (
    API,
    WITHIN,
    World,
    https,
    tls_graph,
    traffic_world,
)
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import netns_available


def gone(w: World, lb_id: str) -> bool:
    return bool(w.conn.load_balancer.find_load_balancer(lb_id) is None and https(w, API) is None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    why = missing() or netns_available()
    if why is None and shutil.which("haproxy") is None:
        why = "haproxy is not installed"
    if why:
        print(json.dumps({"skipped": why}))
        return
    times = []
    with tempfile.TemporaryDirectory(prefix="octls-bench-") as work, traffic_world(Path(work)) as w:
        lbs = w.conn.load_balancer
        for i in range(args.runs):
            lb, took = tls_graph(w, f"bench-{i}")
            times.append(took)
            print(f"run {i + 1}: graph create -> first HTTPS answer {took:.3f} s", flush=True)
            lbs.delete_load_balancer(lb.id, cascade=True)
            wait_for(partial(gone, w, lb.id), timeout=WITHIN,
                     what="the load balancer gone and not served")  # fmt: skip
    figures = {
        "tls_first_https_p50_s": round(percentile(times, 0.5), 3),
        "tls_first_https_max_s": round(max(times), 3),
        "runs": len(times),
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
    p50, worst = figures["tls_first_https_p50_s"], figures["tls_first_https_max_s"]
    print(f"TERMINATED_HTTPS graph create -> first HTTPS answer p50: {p50} s (max {worst} s)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
