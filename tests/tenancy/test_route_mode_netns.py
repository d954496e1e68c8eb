"""Route mode end to end: the manager programs a tenant's request, a management speaker
(`teapot-lb speaker --tenancy`) announces it to the router (BIRD 2, then FRR 8) with one
ADD-PATH path per tenant node, and the router's kernel FIB has an ECMP route over the
tenant's nodes.

The lab's three nodes (n1..n3, 192.0.2.11-13, each serving its name on port 7000) are
the tenant's nodes; the management speakers are two other hosts, m1 and m2, on the same
segment, both peering with the router: it keeps a path while either announces it. The
fake API server and the manager run in the router's namespace; the test writes the
TenantLoadBalancer as the tenant's agent would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary, require_root
from speaker.test_speaker_netns import Cluster
from teapot_lb.lab.peers import DAEMONS, BgpDaemon, Neighbor, fib_next_hops
from teapot_lb.lab.standalone_lab import NODES, ROUTER_LAN, ROUTER_LAN6, Lab
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

from .builders import API, CONFIG_NS, tenant_body, tlb_body

API_PORT = 6443
M1 = "192.0.2.21"
M2 = "192.0.2.22"  # a second management speaker: the router keeps a path while either has it
NAMESPACE = "tenant-acme"
TENANT_NODES = frozenset(NODES.values())


def config(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": CONFIG_NS}
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def tenant_request(**changes: Any) -> dict[str, Any]:
    """acme's request for Service default/web: Local policy, n1..n3 ready unless changed."""
    body = tlb_body("acme", "web", externalTrafficPolicy="Local")
    for i, ready in changes.get("ready", {}).items():
        body["spec"]["backends"][i]["ready"] = ready
    return body


class Management(Cluster):
    """The management cluster's API, driven from the router's namespace."""

    def status(self) -> dict[str, Any]:
        got = json.loads(self.kubectl("get", "tenantloadbalancers", NAMESPACE, "web")) or {}
        return dict(got.get("status") or {})

    def log(self, name: str) -> Any:
        return (self.workdir / f"{name}.log").open("ab")


@pytest.fixture(scope="module", params=["bird", "frr"])
def management(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Management, BgpDaemon]]:
    """The lab, the API server, the manager and the speaker m1 peering with the router
    daemon (BIRD 2 or FRR 8, ADD-PATH receive, kernel FIB with ECMP)."""
    require_root()
    daemon = DAEMONS[request.param]
    require_binary(*daemon.binaries)
    workdir = tmp_path_factory.mktemp(f"route-mode-{request.param}")
    procs: list[subprocess.Popen[bytes]] = []
    with Topology(f"rt{request.param}") as topo:
        lab = Lab(topo, workdir)
        management_hosts = {"m1": M1, "m2": M2}
        for name, address in management_hosts.items():
            topo.connect(topo.add_host(name), lab.lan, addrs=[f"{address}/24"])
        mgmt = Management(lab, workdir)
        procs.append(
            lab.router.popen(
                [sys.executable, "-m", "teapot_lb.lab.fakeapi",
                 "--host", ROUTER_LAN, "--port", str(API_PORT),
                 "--kubeconfig", str(mgmt.kubeconfig)],
                stdout=subprocess.DEVNULL, stderr=mgmt.log("api"),
            )
        )  # fmt: skip
        wait_for(lambda: mgmt.kubeconfig.exists(), timeout=20, what="the API server")
        nodes = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"addresses": [{"type": "InternalIP", "address": address}]},
            }
            for name, address in management_hosts.items()
        ]
        mgmt.apply(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                for n in (CONFIG_NS, NAMESPACE)
            ]
        )
        mgmt.apply(nodes)
        mgmt.apply(nodes, "status")
        mgmt.apply(
            [
                config("AddressPool", "tenants", {"addresses": ["203.0.113.0/28"]}),
                config(
                    "BGPPeer",
                    "router",
                    {
                        "myASN": 64512,
                        "peerASN": 64500,
                        "peerAddress": ROUTER_LAN,
                        "holdTime": "9s",
                        "addPath": "send",
                    },
                ),
                config("BGPAdvertisement", "tenants", {"addressPools": ["tenants"]}),
                tenant_body(
                    "acme",
                    allocations=[{"addressPool": "tenants", "cidrs": ["203.0.113.0/29"]}],
                    nodeNetworks=["192.0.2.8/29"],  # n1..n3, not the management host
                ),
            ]
        )
        router = daemon(
            lab.router,
            workdir / request.param,
            asn=64500,
            router_id=ROUTER_LAN,
            neighbors=[
                Neighbor(address=a, asn=64512, hold_time=9, add_path="receive")
                for a in management_hosts.values()
            ],
            fib=True,
            local_addresses=[ROUTER_LAN, ROUTER_LAN6],
        )
        router.start()
        teapot = str(Path(sys.executable).parent / "teapot-lb")
        procs.append(
            lab.router.popen(
                [teapot, "manager", "--kubeconfig", str(mgmt.kubeconfig), "--no-leader-elect",
                 "--metrics-addr", "", "--webhook-addr", ""],
                stdout=mgmt.log("manager"), stderr=mgmt.log("manager"),
            )
        )  # fmt: skip
        for name in management_hosts:
            log = "speaker" if name == "m1" else f"speaker-{name}"
            procs.append(
                topo.hosts[name].popen(
                    [sys.executable, "-m", "teapot_lb.cli.speaker", "--node", name,
                     "--kubeconfig", str(mgmt.kubeconfig), "--modes", "bgp", "--tenancy",
                     "--state-dir", str(workdir / f"state-{name}"), "--metrics-address", ""],
                    stdout=mgmt.log(log), stderr=mgmt.log(log),
                )
            )  # fmt: skip
        try:
            yield mgmt, router
        finally:
            for proc in reversed(procs):
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)
            router.stop()


def test_the_router_fib_has_ecmp_over_the_tenants_ready_nodes_and_follows_changes(
    management: tuple[Management, BgpDaemon],
) -> None:
    mgmt, _ = management
    router = mgmt.lab.router
    mgmt.apply([tenant_request()])
    status = wait_for(
        lambda: (s := mgmt.status()).get("nextHops") and s,
        timeout=20,
        what="the manager programs the request",
    )
    [ip] = status["addresses"]
    prefix = f"{ip}/32"
    assert frozenset(status["nextHops"]) == TENANT_NODES

    def hops() -> frozenset[str] | None:
        return fib_next_hops(router, prefix)

    wait_for(lambda: hops() == TENANT_NODES, timeout=30, what="ECMP over n1..n3 in BIRD's FIB",
             detail=lambda: f"FIB: {hops()}")  # fmt: skip
    mgmt.lab.bind_service_ip(ip)  # kube-proxy's part on the tenant's nodes
    assert wait_for(lambda: mgmt.lab.who(ip), timeout=10, what="client reaches the IP") in NODES

    mgmt.apply([tenant_request(ready={1: False})])  # n2's endpoint is no longer ready
    rest = TENANT_NODES - {NODES["n2"]}
    wait_for(lambda: hops() == rest, timeout=20, what="n2's path withdrawn",
             detail=lambda: f"FIB: {hops()}")  # fmt: skip

    steer = tenant_request()
    steer["spec"]["backends"][0]["addresses"] = [M1]  # the management host: not the tenant's
    mgmt.apply([steer])
    wait_for(lambda: hops() is None, timeout=20, what="the refused request withdrawn",
             detail=lambda: f"FIB: {hops()}, status: {mgmt.status()}")  # fmt: skip

    mgmt.apply([tenant_request()])
    wait_for(lambda: hops() == TENANT_NODES, timeout=20, what="the paths back")

    mgmt.kubectl("delete", "tenantloadbalancers", NAMESPACE, "web")
    wait_for(lambda: hops() is None, timeout=20, what="the route withdrawn",
             detail=lambda: f"FIB: {hops()}")  # fmt: skip
