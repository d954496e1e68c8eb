"""OVN mode against a real OVN: northd, ovs-vswitchd (userspace datapath), ovn-controller.

One OVN for the module (lab/ovnstack.py): a gateway router gr0 between the pods' switch
(backends be1, be2 on 198.51.100.0/24, HTTP on 8080) and the external switch (a client on
192.0.2.0/24). The writer programs it from cluster views; we look at what OVN made of it
with ovn-trace and with real TCP connections from the client's namespace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from needs import require_ovn
from ovn.builders import POOL, endpoints, ovn, view, web
from teapot_lb.lab.client import Client
from teapot_lb.lab.ovnstack import PODS_SWITCH, GatewayLab, OVNStack, gateway_lab
from teapot_lb.lab.processes import start_workload
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.ovn.desired import desired_state
from teapot_lb.ovn.nbdb import Connection
from teapot_lb.ovn.writer import NorthboundLoop

OWNER = "real"
VIP = "203.0.113.1"
ADV = ovn(gatewayRouters=[{"name": "gr0"}], logicalSwitches=[PODS_SWITCH])
BE1 = ("198.51.100.11", "n1", True)
BE2 = ("198.51.100.12", "n2", True)


@dataclass
class World:
    lab: GatewayLab
    loop: NorthboundLoop
    client: Client
    workloads: dict[str, subprocess.Popen[bytes]]

    def hold(self, *documents: dict[str, Any]) -> None:
        """The writer programs what the documents want; OVN has it in the flows."""
        generation = self.loop.want(desired_state(view(*documents), OWNER).state)
        wait_for(
            lambda: self.loop.stats.applied >= generation,
            timeout=20,
            what="the Northbound holding the desired state",
            detail=lambda: repr(self.loop.stats),
        )
        self.lab.stack.nbctl("--wait=hv", "--timeout=20", "sync")

    def trace(self, port: int = 80) -> str:
        mac = self.lab.client.mac("eth0")
        flow = (
            f'inport == "client" && eth.src == {mac} && eth.dst == 02:00:00:00:02:01 && '
            f"ip4.src == 192.0.2.10 && ip4.dst == {VIP} && ip.ttl == 64 && "
            f"tcp && tcp.dst == {port}"
        )
        return self.lab.stack.trace("ls-ext", flow)

    def answers(self, count: int, ip: str = VIP, port: int = 80) -> list[str | None]:
        return [a.node for a in self.client.burst(ip, port, count)]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    require_ovn()
    with tempfile.TemporaryDirectory(prefix="tlb-ovn-") as tmp, Topology("ovn") as topo:
        stack = OVNStack(Path(tmp), topo)
        try:
            stack.start()
            lab = gateway_lab(stack, backends=2)
            workloads = {
                name: start_workload(host, name, 8080) for name, (host, _) in lab.backends.items()
            }
            loop = NorthboundLoop(Connection(stack.nb_remote), OWNER)
            loop.start()
            client = Client(lab.client.ns)
            try:
                yield World(lab, loop, client, workloads)
            finally:
                client.close()
                loop.stop()
        finally:
            stack.close()


def ct_lb_action(trace: str) -> tuple[set[str], set[str]]:
    """The backends and the flags (`skip_snat`) of the ct_lb_mark action in a trace."""
    for line in trace.splitlines():
        line = line.strip()
        if line.startswith("ct_lb_mark(backends="):
            inside = line.removeprefix("ct_lb_mark(backends=").split(")")[0]
            backends, *flags = (part.strip() for part in inside.split(";"))
            return {b for b in backends.split(",") if b}, set(flags)
    return set(), set()


def ct_lb_backends(trace: str) -> set[str]:
    return ct_lb_action(trace)[0]


def test_ovn_trace_load_balances_to_exactly_the_ready_backends(world: World) -> None:
    world.hold(POOL, ADV, web(VIP), endpoints("web", BE1, BE2))
    assert ct_lb_backends(world.trace()) == {"198.51.100.11:8080", "198.51.100.12:8080"}
    world.hold(POOL, ADV, web(VIP), endpoints("web", BE1, ("198.51.100.12", "n2", False)))
    assert ct_lb_backends(world.trace()) == {"198.51.100.11:8080"}


def test_tcp_from_the_client_reaches_both_backends(world: World) -> None:
    world.hold(POOL, ADV, web(VIP), endpoints("web", BE1, BE2))
    seen: set[str | None] = set()

    def both() -> bool:
        seen.update(world.answers(4))
        return {"be1", "be2"} <= seen

    wait_for(both, timeout=20, what="answers from be1 and be2", detail=lambda: repr(seen))


def test_a_removed_endpoint_gets_no_new_connections(world: World) -> None:
    world.hold(POOL, ADV, web(VIP), endpoints("web", BE1, BE2))
    world.hold(POOL, ADV, web(VIP), endpoints("web", BE1))
    assert set(world.answers(20)) == {"be1"}


def test_local_policy_sends_the_routers_traffic_to_its_nodes_endpoints_only(
    world: World,
) -> None:
    local_adv = ovn(gatewayRouters=[{"name": "gr0", "node": "n2"}], logicalSwitches=[PODS_SWITCH])
    svc = web(VIP, externalTrafficPolicy="Local")
    world.hold(POOL, local_adv, svc, endpoints("web", BE1, BE2))
    assert ct_lb_action(world.trace()) == ({"198.51.100.12:8080"}, {"skip_snat"})
    assert set(world.answers(10)) == {"be2"}


def test_a_deleted_service_leaves_no_row_and_no_answer(world: World) -> None:
    world.hold(POOL, ADV, web(VIP), endpoints("web", BE1, BE2))
    world.hold(POOL, ADV)
    stack = world.lab.stack
    assert stack.nbctl("--bare", "--columns=name", "find", "load_balancer",
                       'external_ids:"lb.teapot.io/owner"=real').strip() == ""  # fmt: skip
    assert ct_lb_backends(world.trace()) == set()
    assert world.answers(2) == [None, None]


def test_a_foreign_load_balancer_on_the_router_keeps_working(world: World) -> None:
    stack = world.lab.stack
    stack.nbctl("lb-add", "neutron-lb", "203.0.113.99:80", "198.51.100.11:8080", "tcp")
    stack.nbctl("lr-lb-add", "gr0", "neutron-lb")
    world.hold(POOL, ADV, web(VIP), endpoints("web", BE1, BE2))
    world.hold(POOL, ADV)
    assert set(world.answers(3, "203.0.113.99")) == {"be1"}


def test_a_health_check_takes_a_dead_backend_out_and_brings_it_back(world: World) -> None:
    check = {"sourceIP": "198.51.100.254", "interval": 1, "timeout": 1,
             "successCount": 1, "failureCount": 1, "logicalPortFormat": "{name}"}  # fmt: skip
    checked = ovn(gatewayRouters=[{"name": "gr0"}], logicalSwitches=[PODS_SWITCH],
                  healthCheck=check)  # fmt: skip
    pods = {"n1": "be1", "n2": "be2"}.__getitem__
    world.hold(POOL, checked, web(VIP), endpoints("web", BE1, BE2, pod=pods))
    stack = world.lab.stack

    def monitors() -> dict[str, str]:
        out = stack.sbctl("--format=csv", "--data=bare", "--no-headings",
                          "--columns=ip,status", "list", "service_monitor")  # fmt: skip
        return dict(line.split(",", 1) for line in out.splitlines() if "," in line)

    wait_for(lambda: monitors() == {"198.51.100.11": "online", "198.51.100.12": "online"},
             timeout=20, what="both backends online", detail=lambda: repr(monitors()))  # fmt: skip
    be1 = world.workloads["be1"]
    os.killpg(be1.pid, signal.SIGKILL)
    be1.wait(5)
    wait_for(lambda: monitors().get("198.51.100.11") == "offline", timeout=20,
             what="be1 offline", detail=lambda: repr(monitors()))  # fmt: skip
    stack.nbctl("--wait=hv", "--timeout=20", "sync")
    assert ct_lb_backends(world.trace()) == {"198.51.100.12:8080"}
    assert set(world.answers(10)) == {"be2"}
    host = world.lab.backends["be1"][0]
    world.workloads["be1"] = start_workload(host, "be1", 8080)
    wait_for(lambda: monitors().get("198.51.100.11") == "online", timeout=20,
             what="be1 online again", detail=lambda: repr(monitors()))  # fmt: skip


def test_client_ip_affinity_keeps_the_client_on_one_backend(world: World) -> None:
    affinity = {"sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}  # fmt: skip
    world.hold(POOL, ADV, web(VIP, **affinity), endpoints("web", BE1, BE2))
    first = wait_for(lambda: world.client.get(VIP, 80).node, timeout=10, what="a first answer")
    assert world.answers(12) == [first] * 12
