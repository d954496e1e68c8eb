"""bench/providers.py's `proxy` provider: a Gateway-mode TenantLoadBalancer served by the
shared gateway on the product's path, as root in namespaces: the manager (`KubeManager`,
in-process, on the in-repo fake API server) with the gateway's control plane beside it as
`teapot-lb manager --gateway-address` runs it (statuses, the proxy provider's word), and
the real `teapot-lb gateway` process (cluster source, HAProxy in the gateway's namespace)
reading the same API. The tenant's nodes n-a and n-b (each its own namespace) answer
HTTP at the nodePort with their name; a client on the LAN asks the request's address.

    client 192.0.2.20 ── lan ── gateway 192.0.2.10, 198.51.100.1, the pool 192.0.2.32/29
                                n-a 198.51.100.2, n-b 198.51.100.3 (nodePort 30080)

Per run:

- create: a request (80/TCP → nodePort 30080, backend n-a) created → Programmed True
  (`programmed_s`: the manager assigned the address, its gateway control translated the
  request, the proxy provider said served) and → the first answer through its address
  (`first_request_s`; the gateway process's translation and HAProxy's reload);
- member change: the backend n-a replaced by n-b → 8 new connections in a row answered
  by n-b only (`moved_s`; over HAProxy's runtime API, no reload);
- delete: the request deleted → the connection refused (`gone_s`).

Then the manager's RSS (the bench's own process: the manager, its gateway control, the fake
API server and the client's thread; `manager_rss_mb`) and the gateway process's
(`gateway_rss_mb`, HAProxy not counted). The client is polled every 20 ms.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from controller_scale import percentile
from teapot_lb.controller.kube_runner import running as component
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.client import Client
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.gateway_lab import CLIENT, GATEWAY, GatewayLab, ready, start_gateway
from teapot_lb.lab.measure import Attempt
from teapot_lb.lab.octavia_ovn import rss_mb
from teapot_lb.lab.processes import start_workload
from teapot_lb.lab.wait import wait_for
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.netlab import Topology, netns_available

WITHIN = 60.0
EVERY = 0.02
MOVED_BURST = 8
NS, CONFIG_NS, API = "tenant-acme", "teapot-lb-system", "lb.teapot.io/v1alpha1"
POOL = "192.0.2.32/29"
NODES = {"n-a": "198.51.100.2", "n-b": "198.51.100.3"}
NODE_PORT = 30080


def proxy_missing() -> str | None:
    """Why this machine cannot run the proxy flow (None: it can)."""
    return netns_available() or (None if shutil.which("haproxy") else "haproxy not installed")


async def until(check: Callable[[], object], what: str) -> float:
    """Seconds until `check()` is true (polled in a thread: the manager's loop goes on)."""
    started = time.monotonic()
    await asyncio.to_thread(wait_for, check, timeout=WITHIN, what=f"proxy: {what}", every=EVERY)
    return time.monotonic() - started


def objects() -> list[dict[str, Any]]:
    """The AddressPool and the Tenant acme (mode Gateway: provider proxy by default)."""
    pool = {"apiVersion": API, "kind": "AddressPool",
            "metadata": {"name": "gw", "namespace": CONFIG_NS},
            "spec": {"addresses": [POOL], "autoAssign": False}}  # fmt: skip
    tenant = {"apiVersion": API, "kind": "Tenant", "metadata": {"name": "acme"},
              "spec": {"namespace": NS, "modes": ["Gateway"],
                       "allocations": [{"addressPool": "gw", "cidrs": [POOL]}],
                       "quotas": {"addresses": 4, "loadBalancers": 4, "ports": 4},
                       "nodeNetworks": ["198.51.100.0/29"]}}  # fmt: skip
    return [pool, tenant]


def request(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TenantLoadBalancer",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"source": {"cluster": "c1", "namespace": "default", "name": name,
                                "uid": f"uid-{name}"},
                     "mode": "Gateway",
                     "ports": [{"protocol": "TCP", "port": 80, "nodePort": NODE_PORT}],
                     "backends": [{"node": node, "addresses": [NODES[node]],
                                   "ready": True}]}}  # fmt: skip


def proxy_runs(count: int, work: Path) -> dict[str, Any]:
    """`count` create → member change → delete runs; p50 and max of each, the RSS."""
    with Topology("provpx") as topo:
        lan = topo.add_switch("lan")
        gateway, client = topo.add_host("gw"), topo.add_host("client")
        vips = [f"192.0.2.{i}/32" for i in range(32, 40)]
        topo.connect(gateway, lan, addrs=[f"{GATEWAY}/24", "198.51.100.1/24", *vips])
        topo.connect(client, lan, addrs=[f"{CLIENT}/24"])
        workloads = []
        for name, address in NODES.items():
            host = topo.add_host(name)
            topo.connect(host, lan, addrs=[f"{address}/24"])
            workloads.append(start_workload(host, name, NODE_PORT))
        lab = GatewayLab(topo, gateway, client, host, work)
        try:
            return asyncio.run(_runs(lab, count))
        finally:
            for workload in workloads:
                workload.terminate()
                workload.wait(10)


async def _runs(lab: GatewayLab, count: int) -> dict[str, Any]:
    api = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NS))
    await api.start()
    client = Client(lab.client.ns)
    figures: dict[str, list[float]] = {k: [] for k in ("programmed", "first", "moved", "gone")}
    proc = None
    try:
        api.add_token("fake-token")
        config = api.write_kubeconfig(lab.work / "management")
        for body in objects():
            api.seed(body)
        proc, port = start_gateway(lab, ["--kubeconfig", str(config)], "gateway")
        async with await connect(config, request_timeout_s=5.0) as admin:
            manager = KubeManager(admin, ManagerConfig(config_namespace=CONFIG_NS),
                                  watch_timeout_s=30)  # fmt: skip
            control = GatewayControl(
                admin, [ip_address(GATEWAY)], statuses=lambda: manager.is_leader,
                on_translation=manager.gateway_translated, config_namespace=CONFIG_NS,
                watch_timeout_s=30,
            )  # fmt: skip
            async with component(manager), component(control):
                await until(lambda: ready(port), "gateway ready")
                for i in range(count):
                    await one_run(api, admin, client, f"web{i}", figures)
                rss = rss_mb(os.getpid())
                gateway_rss = rss_mb(proc.pid)
    finally:
        client.close()
        if proc is not None:
            proc.terminate()
            proc.wait(15)
        await api.stop()
    out: dict[str, Any] = {}
    for name, values in figures.items():
        label = "first_request" if name == "first" else name
        out[f"{label}_p50_s"] = round(percentile(values, 0.5), 3)
        out[f"{label}_max_s"] = round(max(values), 3)
    return out | {"manager_rss_mb": rss, "gateway_rss_mb": gateway_rss, "completed": count}


def is_programmed(request: dict[str, Any]) -> bool:
    """Whether a TenantLoadBalancer (as the API serves it) has `Programmed` True."""
    conditions = request.get("status", {}).get("conditions") or []
    return any(c["type"] == "Programmed" and c["status"] == "True" for c in conditions)


def first_address(request: dict[str, Any]) -> str:
    """The first address in a TenantLoadBalancer's status ('' before it has one)."""
    addresses = request.get("status", {}).get("addresses") or []
    return str(addresses[0]) if addresses else ""


def refused(attempt: Attempt) -> bool:
    """The connection refused (asyncio says ECONNREFUSED as "Connect call failed"), not
    timed out: nothing listens on the address and port any more."""
    return (attempt.error or "").startswith("Connect call failed")


async def one_run(
    api: FakeApiServer, admin: Any, client: Client, name: str, figures: dict[str, list[float]]
) -> None:
    def obj() -> dict[str, Any]:
        return api.get("tenantloadbalancers", name, NS) or {}

    vip = ""

    def answered() -> bool:
        nonlocal vip
        vip = first_address(obj())
        return bool(vip) and client.get(vip, 80).node == "n-a"

    started = time.monotonic()
    await admin.create(TENANT_LOAD_BALANCERS, request(name, "n-a"))
    await until(lambda: is_programmed(obj()), "Programmed")
    figures["programmed"].append(time.monotonic() - started)
    await until(answered, "answer on the address")
    figures["first"].append(time.monotonic() - started)

    body = await admin.get(TENANT_LOAD_BALANCERS, name, NS)
    body["spec"]["backends"] = request(name, "n-b")["spec"]["backends"]
    await admin.replace(TENANT_LOAD_BALANCERS, body)
    moved = await until(
        lambda: {a.node for a in client.burst(vip, 80, MOVED_BURST)} == {"n-b"}, "n-b only"
    )
    figures["moved"].append(moved)

    await admin.delete(TENANT_LOAD_BALANCERS, name, NS)
    gone = await until(lambda: refused(client.get(vip, 80)), "connection refused")
    figures["gone"].append(gone)
    print(f"  {name} {vip}: programmed {figures['programmed'][-1]:.3f} first "
          f"{figures['first'][-1]:.3f} moved {moved:.3f} gone {gone:.3f}", flush=True)  # fmt: skip


__all__ = ["proxy_missing", "proxy_runs"]
