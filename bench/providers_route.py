"""bench/providers.py's `route` provider: a tenant's Service served in route mode on the
product's path, as the lab's teapot route flow builds it (src/teapot_lb/lab/teapot_route.py,
root, namespaces, BIRD): the real `teapot-lb manager` and acme's `teapot-lb tenant-agent`
(standalone, on manifest directories), the standalone announcer on m1 announcing each
Programmed IP with one ADD-PATH path per tenant node to the router, a client behind the
router. Per run:

- create: acme's Service default/web written → the first answer through its IP from the
  client (`first_request_s`; kube-proxy's part, the IP on the nodes' lo, is done the moment
  the agent has the IP back, as the lab does);
- member change: node n2 removed from acme's cluster (its Node and endpoint) → 16 new
  connections in a row answered by n1 and n3 only (`moved_s`); n2 is added back before the
  next run's delete;
- delete: the Service deleted → the router's FIB without the IP and the client unanswered
  (`gone_s`).

Then the manager process's RSS (`manager_rss_mb`). The client is polled every 20 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller_scale import percentile
from teapot_lb.lab.client import Client
from teapot_lb.lab.manifests import write_docs
from teapot_lb.lab.octavia_ovn import rss_mb
from teapot_lb.lab.runner import LabOptions, missing_programs
from teapot_lb.lab.teapot import ACME_NODES, TeapotGroup, cluster_docs
from teapot_lb.lab.teapot_route import TeapotNetwork, announcer_docs, write_docs_in
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology, netns_available

WITHIN = 60.0
EVERY = 0.02
PORT = 80
MOVED_BURST = 16
KEPT = {n: a for n, a in ACME_NODES.items() if n != "n2"}


def route_missing(router: str = "bird") -> str | None:
    """Why this machine cannot run the route flow (None: it can)."""
    absent = missing_programs(LabOptions(modes=("bgp",), router=router))
    return netns_available() or (f"not installed: {', '.join(absent)}" if absent else None)


def until(check: Callable[[], object], what: str) -> float:
    """Seconds until `check()` is true."""
    started = time.monotonic()
    wait_for(check, timeout=WITHIN, what=f"route: {what}", every=EVERY)
    return time.monotonic() - started


def route_runs(count: int, work: Path, router: str = "bird") -> dict[str, Any]:
    """`count` create → member change → delete runs; p50 and max of each, the RSS."""
    figures: dict[str, list[float]] = {"first_request": [], "moved": [], "gone": []}
    group = TeapotGroup(work, lambda text: print(f"  {text}", flush=True))
    with Topology("provrt") as topo:
        net = TeapotNetwork(topo, work, router)
        client: Client | None = None
        try:
            net.build()
            client = Client(net.client.ns)
            group.start()
            announce = group.root / "announce"
            announce.mkdir(parents=True, exist_ok=True)
            write_docs(announce / "bgp.yaml", announcer_docs())
            daemon = net.start_router()
            group.adopt("announcer", net.start_announcer(announce))
            group.wait_started()
            until(lambda: "192.0.2.21" in daemon.established(), "BGP session with m1")
            for _ in range(count):
                one_run(group, net, client, figures)
            rss = rss_mb(group.procs[group.names.index("manager")].pid)
        finally:
            if client is not None:
                client.close()
            group.close()
            net.close()
    out: dict[str, Any] = {}
    for name, values in figures.items():
        out[f"{name}_p50_s"] = round(percentile(values, 0.5), 3)
        out[f"{name}_max_s"] = round(max(values), 3)
    return out | {"manager_rss_mb": rss, "runs": count}


def one_run(
    group: TeapotGroup, net: TeapotNetwork, client: Client, figures: dict[str, list[float]]
) -> None:
    started = time.monotonic()
    write_docs_in(group.acme, cluster_docs(ACME_NODES, with_service=True))
    until(lambda: group.service_ip("acme"), "IP back through the agent")
    ip = group.service_ip("acme")
    assert ip is not None
    net.bind(ip, ACME_NODES)
    until(lambda: client.get(ip, PORT).ok, f"answer on {ip}")
    figures["first_request"].append(time.monotonic() - started)
    until(lambda: net.hops(ip) == frozenset(ACME_NODES.values()), "route over n1..n3")

    write_docs_in(group.acme, cluster_docs(KEPT, with_service=True))
    moved = until(lambda: {a.node for a in client.burst(ip, PORT, MOVED_BURST)} <= set(KEPT),
                  "n1 and n3 only")  # fmt: skip
    figures["moved"].append(moved)
    write_docs_in(group.acme, cluster_docs(ACME_NODES, with_service=True))
    until(lambda: net.hops(ip) == frozenset(ACME_NODES.values()), "n2 back in the route")

    started = time.monotonic()
    write_docs_in(group.acme, cluster_docs(ACME_NODES, with_service=False))
    until(lambda: not net.hops(ip) and not client.get(ip, PORT).ok, "route withdrawn")
    figures["gone"].append(time.monotonic() - started)
    until(lambda: group.service_ip("acme") is None, "IP gone from the agent's status")
