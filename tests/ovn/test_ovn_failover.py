"""Gateway-chassis failover under OVN mode: a real three-chassis OVN (lab/ovnstack.py).

Distributed router lr0, its external port on chassis-1 (priority 20) and chassis-2 (10),
the external network a bridge both reach through a localnet port, the client on it, the
backends on chassis-3. The writer programs the Service on lr0; chassis-1 is killed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from needs import require_ovn
from ovn.builders import POOL, endpoints, ovn, view, web
from teapot_lb.lab.client import Client
from teapot_lb.lab.ovnstack import (
    PODS_SWITCH,
    GatewayLab,
    OVNStack,
    ha_gateway_lab,
)
from teapot_lb.lab.processes import start_workload
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.ovn.desired import desired_state
from teapot_lb.ovn.nbdb import Connection
from teapot_lb.ovn.writer import NorthboundLoop

VIP = "203.0.113.1"


@pytest.fixture(scope="module")
def ha() -> Iterator[tuple[GatewayLab, Client, NorthboundLoop]]:
    require_ovn()
    with tempfile.TemporaryDirectory(prefix="tlb-ovn-ha-") as tmp, Topology("ovnha") as topo:
        stack = OVNStack(Path(tmp), topo, chassis=3)
        try:
            stack.start()
            lab = ha_gateway_lab(stack)
            for name, (host, _) in lab.backends.items():
                start_workload(host, name, 8080)
            loop = NorthboundLoop(Connection(stack.nb_remote), "ha")
            loop.start()
            client = Client(lab.client.ns)
            try:
                yield lab, client, loop
            finally:
                client.close()
                loop.stop()
        finally:
            stack.close()


def test_killing_the_active_gateway_chassis_moves_the_service_without_a_write(
    ha: tuple[GatewayLab, Client, NorthboundLoop],
) -> None:
    lab, client, loop = ha
    stack = lab.stack
    adv = ovn(gatewayRouters=[{"name": "lr0"}], logicalSwitches=[PODS_SWITCH])
    be = (("198.51.100.11", "n1", True), ("198.51.100.12", "n2", True))
    generation = loop.want(desired_state(view(POOL, adv, web(VIP), endpoints("web", *be)),
                                         "ha").state)  # fmt: skip
    wait_for(lambda: loop.stats.applied >= generation, timeout=20, what="rows programmed")
    stack.nbctl("--wait=hv", "--timeout=20", "sync")
    seen: set[str | None] = set()

    def both() -> bool:
        seen.update(a.node for a in client.burst(VIP, 80, 4))
        return {"be1", "be2"} <= seen

    wait_for(both, timeout=20, what="both backends through chassis-1's gateway port")
    written = loop.stats.transactions
    stack.stop_chassis("chassis-1")
    wait_for(lambda: client.get(VIP, 80).node, timeout=30, every=0.05,
             what="the Service reachable again through chassis-2")  # fmt: skip
    assert lab.active_gateway() == "chassis-2"
    assert loop.stats.transactions == written  # OVN moved it; our rows did not change
