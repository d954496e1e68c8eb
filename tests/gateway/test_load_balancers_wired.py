"""Gateway-mode TenantLoadBalancers served by the real `teapot-lb gateway` process (issue
38): the process reads the requests (as the manager left them: addresses in their status)
from a management API and drives HAProxy (TCP) and nginx (UDP) in a lab namespace; a
client reaches the tenant's nodes at their nodePorts through the request's address; a
backend change moves the traffic over the runtime API (no reload); a younger request on
the same address and port is not served (the older keeps it); deleting the request stops
the serving.

    client 192.0.2.20 ── lan ── gateway 192.0.2.10 (shared), 192.0.2.33 (acme's request)
                                nodes: n-a 198.51.100.2, n-b 198.51.100.3 (nodePorts)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from teapot_lb.gateway import nginx
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.gateway_lab import GatewayLab, gateway_lab, metric, ready, start_gateway
from teapot_lb.lab.wait import wait_for, wait_for_async
from tenancy.builders import CONFIG_NS, pool_body, tenant_body, tlb_body

from .test_wired import stop_gateway

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

VIP = "192.0.2.33"
NODE_A, NODE_B = "198.51.100.2", "198.51.100.3"
NS = "tenant-acme"
WITHIN = 20.0
STREAM_MODULE = Path(nginx.STREAM_MODULE).exists()


def the_tenant() -> dict[str, Any]:
    return tenant_body(
        "acme", modes=["Gateway"], nodeNetworks=["198.51.100.0/29"],
        allocations=[{"addressPool": "gw", "cidrs": ["192.0.2.32/29"]}],
    )  # fmt: skip


def request(name: str, *nodes: str, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    """acme's Gateway-mode request `name` (80/TCP at nodePort 30080, 53/UDP at 30053) to
    `nodes`, holding the VIP (as the manager assigns it)."""
    body = tlb_body(
        "acme", name, mode="Gateway",
        ports=[{"name": "web", "protocol": "TCP", "port": 80, "nodePort": 30080},
               {"name": "dns", "protocol": "UDP", "port": 53, "nodePort": 30053}],
        backends=[{"node": f"n{i}", "addresses": [ip], "ready": True}
                  for i, ip in enumerate(nodes)],
    )  # fmt: skip
    body["metadata"]["creationTimestamp"] = created
    body["status"] = {"addresses": [VIP], "addressPool": "gw"}
    return body


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "nginx")
    with gateway_lab(tmp_path_factory.mktemp("gwlb"), "gwlb") as lab:
        lab.gateway.add_address("eth0", f"{VIP}/32")
        nodes = (f"tcp:n-a:{NODE_A}:30080", f"tcp:n-b:{NODE_B}:30080", f"udp:n-a:{NODE_A}:30053")
        with lab.serving(*nodes):
            yield lab


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def management(lab: GatewayLab) -> AsyncIterator[tuple[FakeApiServer, int]]:
    """The management API with acme, its pool and one request; the gateway process
    reading it (with its metrics port)."""
    api = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NS))
    await api.start()
    api.seed(pool_body("gw", ["192.0.2.32/28"]))
    api.seed(the_tenant())
    api.seed(request("web", NODE_A))
    config = api.write_kubeconfig(lab.work / "admin")
    proc, port = start_gateway(lab, ["--kubeconfig", str(config)], "lb")
    try:
        await wait_for_async(lambda: ready(port), within=WITHIN, what="the gateway ready")
        yield api, port
    finally:
        await asyncio.to_thread(stop_gateway, lab, proc, "lb")
        await api.stop()


def answer(lab: GatewayLab, port: int, udp: bool = False) -> str:
    return lab.tcp_exchange(VIP, port, "hello", udp)


async def answered(lab: GatewayLab, want: str, port: int = 80, udp: bool = False) -> None:
    """Wait (off the loop, which serves the management API) for the VIP's answer at `port`
    to be `want` ('': none, the connection refused)."""
    await asyncio.to_thread(
        wait_for, lambda: answer(lab, port, udp) == want, timeout=WITHIN,
        what=f"{VIP}:{port} answering {want!r}",
    )  # fmt: skip


async def served_by(lab: GatewayLab, name: str, port: int = 80, udp: bool = False) -> None:
    await answered(lab, f"{name} hello", port, udp)


async def test_a_tcp_port_reaches_the_node_at_its_node_port(
    lab: GatewayLab, management: tuple[FakeApiServer, int]
) -> None:
    await served_by(lab, "n-a")


async def test_a_udp_port_is_served_by_nginx(
    lab: GatewayLab, management: tuple[FakeApiServer, int]
) -> None:
    if not STREAM_MODULE:
        pytest.skip("nginx's stream module is not installed (scripts/setup.sh installs it)")
    await served_by(lab, "n-a", port=53, udp=True)


async def test_a_backend_change_moves_the_traffic_without_a_reload(
    lab: GatewayLab, management: tuple[FakeApiServer, int]
) -> None:
    api, port = management
    await served_by(lab, "n-a")
    reloads = metric(port, "teapot_lb_gateway_reloads_total")
    actions = metric(port, "teapot_lb_gateway_runtime_actions_total") or 0.0
    api.put(request("web", NODE_B))
    await served_by(lab, "n-b")
    assert metric(port, "teapot_lb_gateway_reloads_total") == reloads
    assert (metric(port, "teapot_lb_gateway_runtime_actions_total") or 0.0) > actions
    api.put(request("web", NODE_A))
    await served_by(lab, "n-a")


async def test_a_younger_request_on_the_same_address_and_port_is_not_served(
    lab: GatewayLab, management: tuple[FakeApiServer, int]
) -> None:
    api, _ = management
    api.seed(request("thief", NODE_B, created="2026-01-02T00:00:00Z"))
    try:
        for _ in range(10):  # the older request keeps 192.0.2.33:80
            assert await asyncio.to_thread(answer, lab, 80) == "n-a hello"
            await asyncio.sleep(0.1)
    finally:
        api.delete("tenantloadbalancers", "thief", NS)
    await served_by(lab, "n-a")


async def test_deleting_the_request_stops_the_serving(
    lab: GatewayLab, management: tuple[FakeApiServer, int]
) -> None:
    api, _ = management
    await served_by(lab, "n-a")
    api.delete("tenantloadbalancers", "web", NS)
    await answered(lab, "")  # the listener gone: connection refused
