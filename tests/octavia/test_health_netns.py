"""Health monitors that probe, and the provider agent keeping Octavia current, through
the real Octavia API (openstacksdk): an HTTP listener, a pool of 2 members with an HTTP
health monitor, served by the real `teapot-lb gateway` (HAProxy in a lab namespace, its
control plane reading the management API the driver writes); the teapot provider agent
runs in octavia-driver-agent and reads the gateway's `/gateway/backends`.

Stopping a member's server turns it ERROR and its pool and load balancer DEGRADED;
starting it again turns them ONLINE; requests show in the listener's statistics."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.lab import GATEWAY, GatewayLab, gateway_lab
from needs import require_binary, require_root
from teapot_lb.lab.wait import wait_for

from .stack import (
    PROJECT,
    TEAPOT,
    TENANT_NS,
    Stack,
    active,
    config,
    connection,
    free_port,
    missing,
    running,
    tenant,
)

pytestmark = [
    pytest.mark.root,
    pytest.mark.daemon,
    pytest.mark.skipif(bool(missing()), reason=missing() or ""),
    pytest.mark.filterwarnings("ignore::Warning:openstack"),
]

SUBNET = "11111111-2222-4333-8444-555555555555"
HOST = "www.acme.example"
MEMBERS = {"m1": "198.51.100.2", "m2": "198.51.100.3"}
PORT = 8080
WITHIN = 30.0


@dataclass
class World:
    lab: GatewayLab
    stack: Stack
    conn: Any
    servers: dict[str, subprocess.Popen[bytes]]
    lb_id: str = ""
    listener_id: str = ""
    pool_id: str = ""
    members: dict[str, str] | None = None  # name → member id

    def start(self, name: str) -> None:
        self.servers[name] = self.lab.start_backends(f"http:{name}:{MEMBERS[name]}:{PORT}")

    def stop(self, name: str) -> None:
        proc = self.servers.pop(name)
        proc.terminate()
        proc.wait(timeout=10)


def _objects() -> list[dict[str, Any]]:
    acme = tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29", dnsDomains=["acme.example"],
                  nodeNetworks=["198.51.100.0/24"])  # fmt: skip
    return [config("AddressPool", "octavia", {"addresses": ["203.0.113.0/28"]}), acme]


def _load_balancer(world: World) -> None:
    """An HTTP listener and an HTTP pool of 2 members with an HTTP monitor (delay 1 s,
    down after 1 failure, up after 1 pass) in one graph create, then a HOST_NAME policy
    sending to the pool (a graph create's policies reach the driver without their pool's
    id: Octavia assigns it after the call; and a policy created with its rules fails in
    Octavia 19 itself)."""
    lbs = world.conn.load_balancer
    monitor = {
        "type": "HTTP",
        "delay": 1,
        "timeout": 1,
        "max_retries": 1,
        "max_retries_down": 1,
        "url_path": "/",
        "expected_codes": "200",
    }
    members = [
        {"name": name, "address": address, "protocol_port": PORT}
        for name, address in MEMBERS.items()
    ]
    created = lbs.create_load_balancer(
        name="probed", vip_subnet_id=SUBNET, project_id=PROJECT, provider="teapot",
        pools=[{"name": "web", "protocol": "HTTP", "lb_algorithm": "ROUND_ROBIN",
                "members": members, "healthmonitor": monitor}],
        listeners=[{"name": "http", "protocol": "HTTP", "protocol_port": 80}],
    )  # fmt: skip
    lb = active(world.conn, created.id, within=WITHIN)
    world.lb_id, world.listener_id = lb.id, lb.listeners[0]["id"]
    world.pool_id = lb.pools[0]["id"]
    world.members = {m.name: m.id for m in lbs.members(world.pool_id)}
    policy = lbs.create_l7_policy(
        listener_id=world.listener_id, action="REDIRECT_TO_POOL", redirect_pool_id=world.pool_id,
        project_id=PROJECT,
    )  # fmt: skip
    active(world.conn, lb.id, within=WITHIN)
    lbs.create_l7_rule(policy.id, type="HOST_NAME", compare_type="EQUAL_TO", value=HOST,
                       project_id=PROJECT)  # fmt: skip
    active(world.conn, lb.id, within=WITHIN)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_root()
    require_binary("haproxy", "curl")
    work = tmp_path_factory.mktemp("ohealth")
    port = free_port()
    agent = {"gateway_status_urls": f"http://127.0.0.1:{port}", "status_interval": "0.3"}
    with (
        gateway_lab(work, "ohm") as lab,
        running(work, objects=_objects(), agent=agent) as (stack, _),
    ):
        stack.start(
            "gateway",
            [str(TEAPOT), "gateway", "--kubeconfig", str(stack.kubeconfig), "--address", GATEWAY,
             "--netns", lab.gateway.ns, "--state-dir", str(work / "gateway"),
             "--metrics-addr", f"127.0.0.1:{port}"],
        )  # fmt: skip
        found = World(lab, stack, connection(stack), {})
        try:
            for name in MEMBERS:
                found.start(name)
            _load_balancer(found)
            yield found
        finally:
            for proc in found.servers.values():
                proc.terminate()
                proc.wait(timeout=10)


def _statuses(world: World) -> dict[str, str]:
    lbs = world.conn.load_balancer
    assert world.members is not None
    out = {
        "lb": lbs.get_load_balancer(world.lb_id).operating_status,
        "listener": lbs.get_listener(world.listener_id).operating_status,
        "pool": lbs.get_pool(world.pool_id).operating_status,
    }
    for name, ident in world.members.items():
        out[name] = lbs.get_member(ident, world.pool_id).operating_status
    return out


def _until(world: World, wanted: dict[str, str], what: str) -> None:
    def check() -> bool:
        world.stack.alive()
        now = _statuses(world)
        return all(now[k] == v for k, v in wanted.items())

    wait_for(check, timeout=WITHIN, what=what, every=0.1,
             detail=lambda: f"{_statuses(world)}\n{world.stack.tail('driver-agent')}\n"
                            f"{world.stack.tail('gateway')}")  # fmt: skip


def test_probed_members_come_online_and_the_gateway_serves_them(world: World) -> None:
    everyone = {"lb": "ONLINE", "listener": "ONLINE", "pool": "ONLINE", "m1": "ONLINE",
                "m2": "ONLINE"}  # fmt: skip
    _until(world, everyone, "every object ONLINE through the provider agent")
    seen = wait_for(
        lambda: {world.lab.served_by("/", HOST) for _ in range(10)} >= set(MEMBERS) or None,
        timeout=WITHIN,
        what="both members served through the gateway",
    )
    assert seen


def test_listener_statistics_count_the_requests_and_their_bytes(world: World) -> None:
    lbs = world.conn.load_balancer
    before = lbs.get_listener_statistics(world.listener_id).total_connections
    n = 20
    codes = [world.lab.curl(f"http://{HOST}/stats/{i}", host=HOST).code for i in range(n)]
    assert codes == [200] * n

    def counted() -> Any:
        stats = lbs.get_listener_statistics(world.listener_id)
        return stats if stats.total_connections >= before + n else None

    stats = wait_for(
        counted, timeout=WITHIN, what=f"{n} more connections counted", every=0.1,
        detail=lambda: str(lbs.get_listener_statistics(world.listener_id)),
    )  # fmt: skip
    assert stats.bytes_in > 0 and stats.bytes_out > 0
    lb_stats = lbs.get_load_balancer_statistics(world.lb_id)
    assert lb_stats.total_connections >= stats.total_connections


def test_a_stopped_member_is_error_and_its_pool_and_lb_degraded_until_it_returns(
    world: World,
) -> None:
    _until(world, {"m1": "ONLINE", "m2": "ONLINE"}, "both members ONLINE")
    world.stop("m2")
    _until(world, {"m2": "ERROR", "m1": "ONLINE", "pool": "DEGRADED", "lb": "DEGRADED"},
           "m2 ERROR, its pool and load balancer DEGRADED")  # fmt: skip
    assert {world.lab.served_by("/", HOST) for _ in range(6)} == {"m1"}
    world.start("m2")
    _until(world, {"m2": "ONLINE", "pool": "ONLINE", "lb": "ONLINE", "listener": "ONLINE"},
           "m2 ONLINE again, the pool and load balancer ONLINE")  # fmt: skip
