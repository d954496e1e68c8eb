"""Create → reachable with many Services present (issue 37, goal 5): the lab, timed.

Usage (as root, BIRD 2 installed): ``.venv/bin/python bench/reachable.py [--present 10000]
[--added 100]``

The lab of ``teapot-lb lab`` (``teapot_lb.lab.network.LabNetwork``: a BIRD router with
``merge paths on`` into its kernel FIB and BFD, a client behind it, three nodes each running
``teapot-lb run --modes bgp`` as an operator would, each with the lab's HTTP workload) on a
copy of ``examples/lab`` with two more IPv6 pools on the lab's BGPAdvertisement. First
``--present`` Services (files of 1,000, each asking for its own IP) are written and the run
waits until the router's FIB holds all of them; then ``--added`` new Services are created one
at a time, each written to a hidden file and renamed into the manifest directory (what a
controller's status write is to the speaker), after a random pause of up to 0.2 s. Before
the rename the Service's IP is bound on the nodes (kube-proxy's part); from the rename, the
client sends a request every 5 ms until one is answered. Measured per new Service: rename →
its route in the router's FIB (a first next hop), and rename → the client's first answered
request (reachable): the FIB looked at every 5 ms (one ``ip`` call, a few ms), then a
request every 5 ms. ``--present 0`` gives the same figures on an empty lab.

Addresses: the lab's (192.0.2.0/24, 198.51.100.0/24, 2001:db8::/32); the pools are
2001:db8:4000::/112 (present) and 2001:db8:5000::/120 (added). Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from teapot_lb import log
from teapot_lb.lab.client import Client, request
from teapot_lb.lab.lan import service_doc
from teapot_lb.lab.manifests import SERVICE_PORT, layout, read_dir
from teapot_lb.lab.measure import Attempt
from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.router import fib_next_hops
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology, netns_available

ROOT = Path(__file__).resolve().parents[1]
PRESENT_POOL, ADDED_POOL = "bench-present", "bench-added"
POOLS = {PRESENT_POOL: "2001:db8:4000::/112", ADDED_POOL: "2001:db8:5000::/120"}


def present_ip(i: int) -> str:
    return f"2001:db8:4000::{i + 1:x}"


def added_ip(i: int) -> str:
    return f"2001:db8:5000::{i + 1:x}"


def lab_config(source: Path) -> list[dict[str, Any]]:
    """examples/lab's config with the bench's two pools on its BGPAdvertisement."""
    docs = [d for d in yaml.safe_load_all(source.read_text()) if d]
    namespace = docs[0]["metadata"]["namespace"]
    for name, cidr in POOLS.items():
        docs.append({
            "apiVersion": "lb.teapot.io/v1alpha1", "kind": "AddressPool",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"addresses": [cidr], "autoAssign": False},
        })  # fmt: skip
    for doc in docs:
        if doc["kind"] == "BGPAdvertisement":
            doc["spec"]["addressPools"] += list(POOLS)
    return docs


def bird_routes6(net: LabNetwork) -> int:
    """The IPv6 routes BIRD put into the router's kernel FIB."""
    return len(json.loads(net.router.ip("-6", "-j", "route", "show", "proto", "bird") or "[]"))


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_s": round(statistics.median(ordered), 4),
        "p99_s": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 4),
        "max_s": round(ordered[-1], 4),
    }


def answered(client: Client, ip: str) -> bool:
    """One request, its connect given 20 ms (the lab's round trip is well under 1 ms; a
    router without the route may stay silent: ICMPv6 errors are rate-limited)."""
    attempt = client.submit(request(ip, SERVICE_PORT, connect_timeout=0.02)).result(timeout=5)
    return isinstance(attempt, Attempt) and attempt.ok


def reached(net: LabNetwork, client: Client, ip: str, t0: float) -> tuple[float, float]:
    """Seconds from ``t0`` until the router's FIB holds ``ip``, then until a request to it
    is answered (each looked at every 5 ms)."""
    fib = reach = None
    while fib is None or reach is None:
        if fib is None:
            if fib_next_hops(net.router, f"{ip}/128"):
                fib = time.monotonic() - t0
        elif answered(client, ip):
            reach = time.monotonic() - t0
        if time.monotonic() - t0 > 120:
            raise TimeoutError(f"{ip}: in the FIB after {fib} s, answered after {reach} s")
        time.sleep(0.005)
    return fib, reach


def run(present: int, added: int, verbose: bool = False) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="teapot-bench-reachable-"))
    manifests = work / "manifests"
    manifests.mkdir()
    shutil.copyfile(ROOT / "examples" / "lab" / "nodes.yaml", manifests / "nodes.yaml")
    config = lab_config(ROOT / "examples" / "lab" / "config.yaml")
    (manifests / "config.yaml").write_text(yaml.safe_dump_all(config))
    lay = layout(read_dir(manifests), nodes=None)
    for start in range(0, present, 1000):
        docs = [
            service_doc(f"present-{i:05d}", present_ip(i))
            for i in range(start, min(present, start + 1000))
        ]
        (manifests / f"present-{start // 1000:03d}.yaml").write_text(yaml.safe_dump_all(docs))
    client: Client | None = None
    try:
        with Topology("reach") as topo:
            net = LabNetwork(topo, lay, work, manifests, router="bird", modes=("bgp",),
                             poll_interval=None)  # fmt: skip
            net.build()
            router = net.start_router()
            hops = {n.address for n in net.nodes.values()}
            started = time.monotonic()
            for name in net.nodes:
                net.start_speaker(name)
            wait_for(lambda: router.established() >= hops, timeout=120, every=0.2,
                     what="BGP sessions")  # fmt: skip
            sessions_s = time.monotonic() - started
            wait_for(lambda: bird_routes6(net) >= present, timeout=900, every=1.0,
                     what=f"{present} routes in the router's FIB",
                     detail=lambda: f"{bird_routes6(net)} routes")  # fmt: skip
            start_s = time.monotonic() - started
            print(f"start → BGP sessions up {sessions_s:.1f} s, → {present} Services in the "
                  f"router's FIB {start_s:.1f} s")  # fmt: skip
            client = Client(net.client.ns)
            rng = random.Random(1)
            fib: list[float] = []
            reach: list[float] = []
            for i in range(added):
                name, ip = f"added-{i:03d}", added_ip(i)
                net.bind(ip)
                tmp = manifests / f".{name}.yaml.tmp"
                tmp.write_text(yaml.safe_dump(service_doc(name, ip)))
                time.sleep(rng.uniform(0, 0.2))  # no change right after the last reload
                t0 = time.monotonic()
                tmp.rename(manifests / f"{name}.yaml")
                in_fib, answered = reached(net, client, ip, t0)
                if verbose:
                    print(f"  {name} {ip}: FIB {in_fib * 1000:.0f} ms, answered "
                          f"{answered * 1000:.0f} ms")  # fmt: skip
                fib.append(in_fib)
                reach.append(answered)
            for name in net.nodes:
                net.stop_speaker(name)
    finally:
        if client is not None:
            client.close()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "present": present,
        "added": added,
        "start_to_sessions_s": round(sessions_s, 1),
        "start_to_present_in_fib_s": round(start_s, 1),
        "create_to_reachable": stats(reach),
        "create_to_fib": stats(fib),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--present", type=int, default=10000, help="Services already announced")
    parser.add_argument("--added", type=int, default=100, help="new Services timed")
    parser.add_argument("--verbose", action="store_true", help="print every new Service's times")
    args = parser.parse_args()
    reason = netns_available() or (None if shutil.which("bird") else "BIRD is not installed")
    if reason:
        sys.exit(f"bench/reachable.py: {reason}")
    if not 0 <= args.present <= 65000 or not 1 <= args.added <= 250:
        parser.error("--present must be 0-65000 and --added 1-250 (the pools' sizes)")
    log.configure("warning", json=False)
    result = run(args.present, args.added, args.verbose)
    r = result["create_to_reachable"]
    print(f"{args.added} new Services with {args.present} present: create → reachable "
          f"p50 {r['p50_s'] * 1000:.0f} ms, p99 {r['p99_s'] * 1000:.0f} ms, "
          f"max {r['max_s'] * 1000:.0f} ms (goal: p99 ≤ 100 ms)")  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
