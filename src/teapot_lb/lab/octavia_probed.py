"""An L7 load balancer probed end to end, for tests/octavia/test_health_netns.py and
bench/octavia_health.py: a gateway lab (:mod:`teapot_lb.lab.gateway_lab`) with each
member's HTTP server in a process of its own, the Octavia stack
(:mod:`teapot_lb.lab.octavia`) with the teapot provider agent enabled, the real
`teapot-lb gateway` (HAProxy in the lab's gateway namespace, its control plane reading the
management API the driver writes), and, through the Octavia API, an HTTP listener whose
HOST_NAME policy sends to a pool of 2 members with an HTTP monitor (delay 1 s, down after
1 failure, up after 1 pass). The agent finds the gateway as in production, by its
Service's EndpointSlice in the management cluster (``[teapot] gateway_service``). Needs
root and HAProxy."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teapot_lb.lab.gateway_lab import GATEWAY, GatewayLab, gateway_lab
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.octavia import (
    CONFIG_NS,
    PROJECT,
    TEAPOT,
    TENANT_NS,
    Stack,
    config,
    running,
    tenant,
)
from teapot_lb.lab.octavia_stack import active, connection
from teapot_lb.lab.wait import wait_for

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


GATEWAY_SERVICE = "teapot-lb-gateway"


def gateway_slice(address: str) -> dict[str, Any]:
    """The EndpointSlice of the gateway's Service: one ready gateway pod at `address`."""
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{GATEWAY_SERVICE}-1", "namespace": CONFIG_NS,
                     "labels": {"kubernetes.io/service-name": GATEWAY_SERVICE}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
    }  # fmt: skip


def objects() -> list[dict[str, Any]]:
    acme = tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29", dnsDomains=["acme.example"],
                  nodeNetworks=["198.51.100.0/24"])  # fmt: skip
    return [
        config("AddressPool", "octavia", {"addresses": ["203.0.113.0/28"]}),
        acme,
        gateway_slice("127.0.0.1"),
    ]


def load_balancer(world: World) -> None:
    """An HTTP listener and an HTTP pool of 2 members with an HTTP monitor (delay 1 s,
    down after 1 failure, up after 1 pass) in one graph create, then a HOST_NAME policy
    sending to the pool, made after the graph create (a policy created with its rules
    fails in Octavia 19 itself; graph-created policies: test_octavia_api)."""
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


@contextlib.contextmanager
def probed(work: Path, label: str = "ohm", interval: float = 0.3) -> Iterator[World]:
    """The whole world in `work`; the agent's round every `interval` seconds."""
    port = free_port()
    agent = {"gateway_service": f"{CONFIG_NS}/{GATEWAY_SERVICE}",
             "gateway_status_port": str(port), "status_interval": str(interval)}  # fmt: skip
    with (
        gateway_lab(work, label) as lab,
        running(work, objects=objects(), agent=agent) as (stack, _),
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
            load_balancer(found)
            yield found
        finally:
            for proc in found.servers.values():
                proc.terminate()
                proc.wait(timeout=10)


def statuses(world: World) -> dict[str, str]:
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


def until(world: World, wanted: dict[str, str], what: str) -> None:
    def check() -> bool:
        world.stack.alive()
        now = statuses(world)
        return all(now[k] == v for k, v in wanted.items())

    wait_for(check, timeout=WITHIN, what=what, every=0.1,
             detail=lambda: f"{statuses(world)}\n{world.stack.tail('driver-agent')}\n"
                            f"{world.stack.tail('gateway')}")  # fmt: skip
