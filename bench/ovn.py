"""Benchmark OVN mode: Service → reachable through OVN, 10k Services into the Northbound.

Usage: ``.venv/bin/python bench/ovn.py [--services 10000] [--samples 20] [--skip-traffic]``

Every figure times the product's path: objects go into the writer's ``Store`` (as the
informers or the manifest reader put them), ``OVNWriter.reconcile()`` computes the desired
rows (``ovn.desired``) and hands them to ``NorthboundLoop``, whose thread diffs them
against its IDL copy of the Northbound and commits the difference (``ovs`` IDL). Only the
writer's 10 ms debounce is skipped (``reconcile()`` is called where ``notify()`` would be).

Part 1 (no root): a Northbound ovsdb-server alone (``lab.ovnstack.OVNDatabases``).
N Services (IPv6: 2001:db8:1::/112, each with 2 ready endpoints and an OVNAdvertisement
with one gateway router and one switch) put into the Store at once: time until the
Northbound holds them all (``program_s``: desired state + diff + transaction + the IDL
seeing its own commit), the transactions it took, the process's RSS after it
(``rss_mb``: Store, IDL copy and desired state together); then one Service's endpoints
changed at that size (``one_change_s``: the writer recomputes and diffs everything).

Part 2 (root and OVN binaries; skipped with the reason otherwise): the real OVN of the
tests (northd, ovs-vswitchd userspace, ovn-controller; a gateway router, two backends, a
client in namespaces). ``create_to_reach``: a new Service (VIP 203.0.113.x) put into the
Store → the first successful TCP connection from the client through the gateway router
(the client retries every 5 ms with a 20 ms connect timeout: a resolution of
~25 ms, since a VIP OVN does not know yet drops the SYN). ``endpoint_change``: the
Service's only endpoint moved from be1 to be2 → the first new connection answered by
be2. p50/p95/max over ``--samples``.

Last line, JSON: ``create_to_reach_p50_s``, ``program_10k_s`` (``program_s`` of N, named
for the issue's goal at N = 10,000), ``rss_mb``, ``endpoint_change_p50_s``, plus
``services``, ``transactions``, ``desired_s``, ``one_change_s``, ``create_to_reach`` and
``endpoint_change`` ({p50, p95, max, n}), or ``traffic_skipped`` with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import tempfile
import time
from ipaddress import IPv6Address
from pathlib import Path
from typing import Any

from teapot_lb import log
from teapot_lb.cluster import Store
from teapot_lb.lab.client import Client, request
from teapot_lb.lab.ovnstack import (
    DATABASE_BINARIES,
    PODS_SWITCH,
    OVNDatabases,
    OVNStack,
    gateway_lab,
    missing,
)
from teapot_lb.lab.processes import start_workload
from teapot_lb.lab.wait import wait_for
from teapot_lb.model import parse_object
from teapot_lb.netlab import Topology, netns_available
from teapot_lb.ovn.desired import desired_state
from teapot_lb.ovn.nbdb import Connection
from teapot_lb.ovn.writer import NorthboundLoop, OVNWriter

NS = "lb-system"
API = "lb.teapot.io/v1alpha1"
OWNER = "bench"


def put(store: Store, doc: dict[str, Any]) -> None:
    obj, problems = parse_object(doc)
    assert obj is not None and not problems, problems
    store.put_object(obj)


def config(store: Store, pool: list[str], router: str, switch: str) -> None:
    meta = {"name": "pool", "namespace": NS}
    put(store, {"apiVersion": API, "kind": "AddressPool", "metadata": meta,
                "spec": {"addresses": pool}})  # fmt: skip
    spec = {"addressPools": ["pool"], "gatewayRouters": [{"name": router}],
            "logicalSwitches": [switch]}  # fmt: skip
    put(store, {"apiVersion": API, "kind": "OVNAdvertisement",
                "metadata": {"name": "ovn", "namespace": NS}, "spec": spec})  # fmt: skip


def service(store: Store, name: str, ip: str) -> None:
    put(store, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ip}]}},
    })  # fmt: skip


def endpoints(store: Store, name: str, addresses: list[str], family: str = "IPv4") -> None:
    put(store, {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{name}-a", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": name}},
        "addressType": family,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
    })  # fmt: skip


def held(loop: NorthboundLoop, generation: int, timeout: float) -> None:
    wait_for(
        lambda: loop.stats.applied >= generation,
        timeout=timeout,
        every=0.001,
        what="the Northbound holding the desired state",
        detail=lambda: repr(loop.stats),
    )


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summary(values: list[float]) -> dict[str, float | int]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 4), "p95": round(p95, 4),
            "max": round(ordered[-1], 4), "n": len(ordered)}  # fmt: skip


def program(count: int) -> dict[str, Any]:
    """Part 1: `count` Services into a Northbound of its own."""
    with (
        tempfile.TemporaryDirectory(prefix="tlb-ovn-bench-") as tmp,
        OVNDatabases(Path(tmp), southbound=False) as dbs,
    ):
        dbs.nbctl("lr-add", "gr0")
        dbs.nbctl("ls-add", "ls0")
        store = Store()
        config(store, ["2001:db8:1::/112"], "gr0", "ls0")
        base = IPv6Address("2001:db8:1::1")
        backend = IPv6Address("2001:db8:2::1")
        for i in range(count):
            name = f"svc-{i}"
            service(store, name, str(base + i))
            b = [str(backend + 2 * i), str(backend + 2 * i + 1)]
            endpoints(store, name, b, family="IPv6")
        loop = NorthboundLoop(Connection(dbs.nb_remote), OWNER)
        loop.start()
        writer = OVNWriter(store, loop, OWNER)
        try:
            started = time.perf_counter()
            desired_state(store.view(), OWNER)
            desired_s = time.perf_counter() - started
            started = time.perf_counter()
            held(loop, writer.reconcile(), timeout=600)
            program_s = time.perf_counter() - started
            transactions = loop.stats.transactions
            memory = rss_mb()
            endpoints(store, "svc-0", [str(backend + 2 * count)], family="IPv6")
            started = time.perf_counter()
            held(loop, writer.reconcile(), timeout=120)
            one_change_s = time.perf_counter() - started
        finally:
            loop.stop()
    return {
        "services": count,
        "desired_s": round(desired_s, 3),
        "program_s": round(program_s, 3),
        "transactions": transactions,
        "rss_mb": round(memory, 1),
        "one_change_s": round(one_change_s, 3),
    }


async def _first_answer(ip: str, want: str | None, deadline_s: float) -> float:
    """Seconds until a request to ip:80 is answered (by `want`, if given)."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        attempt = await request(ip, 80, connect_timeout=0.02)
        if attempt.node is not None and (want is None or attempt.node == want):
            return time.monotonic() - started
        await asyncio.sleep(0.005)
    raise TimeoutError(f"no answer from {want or 'any backend'} at {ip} in {deadline_s} s")


def traffic(samples: int) -> dict[str, Any]:
    """Part 2: create → reachable and endpoint change → traffic, through a real OVN."""
    with tempfile.TemporaryDirectory(prefix="tlb-ovn-bench-") as tmp, Topology("ovnb") as topo:
        stack = OVNStack(Path(tmp), topo)
        try:
            stack.start()
            lab = gateway_lab(stack, backends=2)
            for name, (host, _) in lab.backends.items():
                start_workload(host, name, 8080)
            store = Store()
            config(store, ["203.0.113.0/24"], lab.router, PODS_SWITCH)
            loop = NorthboundLoop(Connection(stack.nb_remote), OWNER)
            loop.start()
            writer = OVNWriter(store, loop, OWNER)
            client = Client(lab.client.ns)
            be1, be2 = lab.backends["be1"][1], lab.backends["be2"][1]
            create: list[float] = []
            change: list[float] = []
            try:
                for i in range(samples):
                    name, ip = f"web-{i}", f"203.0.113.{10 + i}"
                    started = time.monotonic()
                    endpoints(store, name, [be1])
                    service(store, name, ip)
                    writer.reconcile()
                    client.submit(_first_answer(ip, None, 20)).result(timeout=30)
                    create.append(time.monotonic() - started)
                for i in range(samples):
                    name, ip = f"web-{i}", f"203.0.113.{10 + i}"
                    started = time.monotonic()
                    endpoints(store, name, [be2])
                    writer.reconcile()
                    client.submit(_first_answer(ip, "be2", 20)).result(timeout=30)
                    change.append(time.monotonic() - started)
            finally:
                client.close()
                loop.stop()
        finally:
            stack.close()
    return {"create_to_reach": summary(create), "endpoint_change": summary(change)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--skip-traffic", action="store_true")
    args = parser.parse_args()
    log.configure("warning")
    reason = missing(DATABASE_BINARIES)
    if reason:
        raise SystemExit(f"bench/ovn.py: {reason}")
    out: dict[str, Any] = {}
    part1 = program(args.services)
    print(
        f"{args.services} Services → Northbound: desired state {part1['desired_s']} s, "
        f"programmed in {part1['program_s']} s ({part1['transactions']} transaction(s)), "
        f"RSS {part1['rss_mb']} MB; one endpoint change then {part1['one_change_s']} s"
    )
    out.update(part1)
    out["program_10k_s"] = part1["program_s"]
    skip = "--skip-traffic" if args.skip_traffic else (netns_available() or missing())
    if skip:
        print(f"traffic skipped: {skip}")
        out["traffic_skipped"] = skip
        out["create_to_reach_p50_s"] = out["endpoint_change_p50_s"] = None
    else:
        part2 = traffic(args.samples)
        labels = {
            "create_to_reach": "Service created → reachable",
            "endpoint_change": "endpoint moved → new backend answers",
        }
        for key, label in labels.items():
            s = part2[key]
            print(f"{label}: p50 {s['p50']} s, p95 {s['p95']} s, max {s['max']} s (n={s['n']})")
            out[key] = s
            out[f"{key}_p50_s"] = s["p50"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
