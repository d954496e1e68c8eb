"""Issue 38: a tenant's load balancer built by the octavia provider, on the product's path:
the manager (`KubeManager`, in-process, on the in-repo fake API server) with the provider
built from its config file as `teapot-lb manager --provider octavia=FILE` builds it, against
the real Octavia with the real ovn-octavia-provider on a real OVN (lab/octavia_ovn.py), as
root. Per run (`--runs`, 5 by default, 20 in the issue):

- create: a TenantLoadBalancer (TCP 80 → m1 and m2 at 8080) created → Programmed True
  (`programmed_s`) and → the first answer through its VIP from a client behind the
  Neutron router (`first_request_s`);
- member change: m1 removed from the request → 8 new connections in a row answered by
  m2 only (`moved_s`);
- delete: the request deleted → no Octavia load balancer tagged with its uid and no
  Northbound Load_Balancer row (`gone_s`).

Then the manager's RSS (the bench's own process: the manager runs in it, with the fake API
server and the client's thread; `manager_rss_mb`). The client is polled every 50 ms. Route
and proxy are not timed here, nor side by side (bench/tenancy.py times a Service to its IP
through the route path, bench/gateway.py the proxy's changes to traffic).

    .venv/bin/python bench/providers.py [--runs 5]

Last line, JSON: programmed_p50_s, programmed_max_s, first_request_p50_s,
first_request_max_s, moved_p50_s, moved_max_s, gone_p50_s, gone_max_s, manager_rss_mb,
runs, load_before and load_after (1-minute load average).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controller_scale import percentile
from octavia_ovn_stack import arguments, stack_up
from teapot_lb.cli.manager import external_providers
from teapot_lb.controller.kube_runner import running as component
from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.client import Client
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.neutron_nets import host_port, routed
from teapot_lb.lab.neutron_server import NOAUTH_PROJECT
from teapot_lb.lab.octavia_ovn import OctaviaOVN, rss_mb
from teapot_lb.lab.octavia_stack import connection
from teapot_lb.lab.ovnstack import OVNStack
from teapot_lb.lab.processes import start_workload
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.providers.base import owner_tag

WITHIN = 120.0
EVERY = 0.05
NS, CONFIG_NS, API = "tenant-acme", "teapot-lb-system", "lb.teapot.io/v1alpha1"
VIPS = "198.51.100.96/28"
MEMBERS = {"m1": "198.51.100.41", "m2": "198.51.100.42"}


async def until(check: Callable[[], object], what: str) -> float:
    """Seconds until `check()` is true (run in a thread: the manager's loop goes on)."""
    started = time.monotonic()
    while not await asyncio.to_thread(check):
        if time.monotonic() - started > WITHIN:
            raise TimeoutError(f"no {what} within {WITHIN:g} s")
        await asyncio.sleep(EVERY)
    return time.monotonic() - started


def objects() -> list[dict[str, Any]]:
    """The AddressPool and the Tenant acme (providers: octavia) the manager reads."""
    pool = {"apiVersion": API, "kind": "AddressPool",
            "metadata": {"name": "octavia-vips", "namespace": CONFIG_NS},
            "spec": {"addresses": [VIPS], "autoAssign": False}}  # fmt: skip
    tenant = {"apiVersion": API, "kind": "Tenant", "metadata": {"name": "acme"},
              "spec": {"namespace": NS, "modes": ["Route"], "asn": 64516,
                       "allocations": [{"addressPool": "octavia-vips", "cidrs": [VIPS]}],
                       "quotas": {"addresses": 4, "loadBalancers": 4, "ports": 4},
                       "nodeNetworks": ["198.51.100.32/28"], "providers": ["octavia"],
                       "defaultProvider": "octavia"}}  # fmt: skip
    return [pool, tenant]


def request(name: str, *nodes: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TenantLoadBalancer",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"source": {"cluster": "c1", "namespace": "default", "name": name,
                                "uid": f"uid-{name}"},
                     "ports": [{"protocol": "TCP", "port": 80, "nodePort": 8080}],
                     "backends": [{"node": n, "addresses": [MEMBERS[n]], "ready": True}
                                  for n in nodes]}}  # fmt: skip


async def runs(stack: OctaviaOVN, ovn: OVNStack, work: Path, count: int) -> dict[str, Any]:
    neutron = stack.neutron
    members, clients = routed(neutron, "bench")
    workloads = [start_workload(host_port(neutron, ovn, n, members, a), n, 8080)
                 for n, a in MEMBERS.items()]  # fmt: skip
    client = Client(host_port(neutron, ovn, "bc1", clients, "192.0.2.41").ns)
    conn = connection(stack.stack).load_balancer
    config = work / "octavia.yaml"
    config.write_text(yaml.safe_dump({
        "auth": {"type": "noauth", "endpoint": stack.octavia_url}, "provider": "ovn",
        "vipSubnet": members["id"], "tenants": {"acme": {"project": NOAUTH_PROJECT}},
        "healthMonitor": {"enabled": False},
    }))  # fmt: skip
    api = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NS))
    await api.start()
    figures: dict[str, list[float]] = {k: [] for k in ("programmed", "first", "moved", "gone")}
    try:
        api.add_token("fake-token")  # (the token write_kubeconfig writes)
        api.write_kubeconfig(work / "management")
        for body in objects():
            api.seed(body)
        assert api.kubeconfig_path is not None
        providers = external_providers((f"octavia={config}",))
        async with await connect(api.kubeconfig_path, request_timeout_s=5.0) as admin:
            settings = ManagerConfig(
                config_namespace=CONFIG_NS,
                providers=providers,
                provider_retry_base_s=0.2,
                provider_retry_cap_s=2.0,
            )
            async with component(KubeManager(admin, settings, watch_timeout_s=30)):
                for i in range(count):
                    await one_run(api, admin, client, conn, ovn, f"web{i}", figures)
                rss = rss_mb(os.getpid())
    finally:
        await api.stop()
        client.close()
        for workload in workloads:
            workload.terminate()
            workload.wait(10)
    out: dict[str, Any] = {}
    for name, values in figures.items():
        label = "first_request" if name == "first" else name
        out[f"{label}_p50_s"] = round(percentile(values, 0.5), 3)
        out[f"{label}_max_s"] = round(max(values), 3)
    out["manager_rss_mb"] = rss
    return out


async def one_run(
    api: FakeApiServer, admin: Any, client: Client, conn: Any, ovn: OVNStack, name: str,
    figures: dict[str, list[float]],
) -> None:  # fmt: skip
    def obj() -> dict[str, Any]:
        return api.get("tenantloadbalancers", name, NS) or {}

    def programmed() -> bool:
        conditions = obj().get("status", {}).get("conditions") or []
        return any(c["type"] == "Programmed" and c["status"] == "True" for c in conditions)

    started = time.monotonic()
    created = await admin.create(TENANT_LOAD_BALANCERS, request(name, "m1", "m2"))
    uid = created["metadata"]["uid"]
    vip = ""

    def answered() -> bool:
        nonlocal vip
        addresses = obj().get("status", {}).get("addresses") or []
        if addresses:
            vip = addresses[0]
            return client.get(vip, 80).node is not None
        return False

    await until(programmed, "Programmed")
    figures["programmed"].append(time.monotonic() - started)
    await until(answered, "answer on the VIP")
    figures["first"].append(time.monotonic() - started)
    body = await admin.get(TENANT_LOAD_BALANCERS, name, NS)
    body["spec"]["backends"] = request(name, "m2")["spec"]["backends"]
    await admin.replace(TENANT_LOAD_BALANCERS, body)
    figures["moved"].append(
        await until(lambda: {a.node for a in client.burst(vip, 80, 8)} == {"m2"}, "m2 only")
    )
    lb_ids = [lb.id for lb in conn.load_balancers(tags=owner_tag(uid))]
    await admin.delete(TENANT_LOAD_BALANCERS, name, NS)

    def gone() -> bool:
        if list(conn.load_balancers(tags=owner_tag(uid))):
            return False
        return not any(
            ovn.nbctl("--bare", "--columns=_uuid", "find", "load_balancer", f"name={i}").strip()
            for i in lb_ids
        )

    figures["gone"].append(await until(gone, "load balancer and row gone"))


def main() -> None:
    args = arguments(__doc__)
    if args is None:
        return
    load = os.getloadavg()[0]
    with stack_up(args.workdir, "provb") as (ovn, stack, _, work):
        figures = asyncio.run(runs(stack, ovn, work, args.runs))
    print(f"octavia-ovn through the manager, {args.runs} runs (p50 / max, s):")
    for part in ("programmed", "first_request", "moved", "gone"):
        print(f"  {part:<14} {figures[f'{part}_p50_s']:7.3f} {figures[f'{part}_max_s']:7.3f}")
    print(f"  manager RSS    {figures['manager_rss_mb']:.1f} MB")
    figures |= {"runs": args.runs, "load_before": round(load, 2),
                "load_after": round(os.getloadavg()[0], 2)}  # fmt: skip
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
