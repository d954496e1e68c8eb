"""OVN mode with BGP: the route to a Service IP follows the active gateway chassis.

The three-chassis harness of test_ovn_failover.py (distributed router lr0, gateway port on
chassis-1 > chassis-2; chassis registered with hostnames node-1..3). Each gateway chassis'
namespace runs `teapot-lb run --modes bgp --ovn-sb ...` as node-1 / node-2, with an
address on the external network (a plain veth, not through OVS: the session outlives
the chassis' OVS) and forwarding to the gateway port for the Service IP, as a node
forwards what it attracts. The upstream is BIRD 2 in the client's namespace, installing
what it learns in the client's FIB.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from needs import require_binary, require_ovn
from ovn.builders import POOL, endpoints, ovn, view, web
from teapot_lb.lab.client import Client
from teapot_lb.lab.ovnstack import (
    EXTERNAL_GW,
    HA_GATEWAYS,
    PODS_SWITCH,
    GatewayLab,
    OVNStack,
    ha_gateway_lab,
)
from teapot_lb.lab.peers import Bird, Neighbor, fib_next_hops
from teapot_lb.lab.processes import log_tail, read_status, start_workload
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.ovn.desired import desired_state
from teapot_lb.ovn.gateways import Gateways
from teapot_lb.ovn.nbdb import Connection
from teapot_lb.ovn.sbdb import SouthboundWatch
from teapot_lb.ovn.writer import NorthboundLoop

VIP = "203.0.113.1"
UPSTREAM = "192.0.2.10"  # the client's address: BIRD runs there
NODE_ADDRESS = {"node-1": "192.0.2.21", "node-2": "192.0.2.22"}
NS, API = "lb-system", "lb.teapot.io/v1alpha1"


def _ours(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": NS},
            "spec": spec}  # fmt: skip


def manifests() -> list[dict[str, Any]]:
    """What the speakers read: the pool selected by both an OVN and a BGP advertisement."""
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
         "status": {"addresses": [{"type": "InternalIP", "address": address}]}}
        for name, address in NODE_ADDRESS.items()
    ]  # fmt: skip
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default",
                     "annotations": {"lb.teapot.io/ips": VIP}},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "p80", "port": 80}]},
    }  # fmt: skip
    return [
        _ours("AddressPool", "public", {"addresses": ["203.0.113.0/28"]}),
        _ours("BGPPeer", "upstream", {"myASN": 64512, "peerASN": 64500,
                                      "peerAddress": UPSTREAM, "holdTime": "9s"}),
        _ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
        _ours("OVNAdvertisement", "ovn", {"addressPools": ["public"],
                                          "gatewayRouters": [{"name": "lr0"}]}),
        *nodes,
        service,
    ]  # fmt: skip


@dataclass
class World:
    lab: GatewayLab
    client: Client
    bird: Bird
    workdir: Path

    def next_hops(self) -> frozenset[str] | None:
        return fib_next_hops(self.lab.client, f"{VIP}/32")

    def reason(self, node: str) -> str:
        """Why `node` does or does not announce the VIP (its status.json)."""
        decisions = read_status(self.workdir / "state" / node).get("decisions", [])
        return " | ".join(d["reason"] for d in decisions if d["mode"] == "bgp")


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    require_ovn()
    require_binary(*Bird.binaries)
    with tempfile.TemporaryDirectory(prefix="tlb-ovn-bgp-") as tmp, Topology("ovnbgp") as topo:
        workdir = Path(tmp)
        stack = OVNStack(workdir / "ovn", topo, chassis=3)
        procs: list[subprocess.Popen[bytes]] = []
        bird: Bird | None = None
        loop: NorthboundLoop | None = None
        client: Client | None = None
        try:
            stack.start()
            for name in stack.chassis:  # chassis-N registers as host node-N
                node = name.replace("chassis", "node")
                stack.vsctl("set", "open_vswitch", ".", f"external_ids:hostname={node}",
                            chassis=name)  # fmt: skip
            lab = ha_gateway_lab(stack)
            wait_for(lambda: "node-3" in stack.sbctl("--columns=hostname", "list", "chassis"),
                     timeout=20, what="chassis hostnames in the Southbound")  # fmt: skip
            for name, (host, _) in lab.backends.items():
                start_workload(host, name, 8080)
            adv = ovn(gatewayRouters=[{"name": "lr0"}], logicalSwitches=[PODS_SWITCH])
            be = (("198.51.100.11", "n1", True), ("198.51.100.12", "n2", True))
            loop = NorthboundLoop(Connection(stack.nb_remote), "bgp")
            loop.start()
            state = desired_state(view(POOL, adv, web(VIP), endpoints("web", *be)), "bgp").state
            generation = loop.want(state)
            wait_for(lambda: loop is not None and loop.stats.applied >= generation,
                     timeout=20, what="rows programmed")  # fmt: skip
            stack.nbctl("--wait=hv", "--timeout=20", "sync")
            (workdir / "manifests").mkdir()
            (workdir / "manifests" / "all.yaml").write_text(yaml.safe_dump_all(manifests()))
            extnet = topo.hosts["extnet"]
            for chassis, (node, address) in zip(HA_GATEWAYS, NODE_ADDRESS.items(), strict=True):
                hv = stack.chassis[chassis].host
                topo.connect(hv, extnet, ifname="up0", addrs=[f"{address}/24"])
                hv.run("ethtool", "-K", "up0", "tx", "off")
                hv.sysctl("net.ipv4.ip_forward", "1")
                for scope in ("all", "up0"):  # route through us, no redirect to the gateway
                    hv.sysctl(f"net.ipv4.conf.{scope}.send_redirects", "0")
                hv.ip("route", "add", f"{VIP}/32", "via", EXTERNAL_GW, "dev", "up0")
                log = (workdir / f"{node}.log").open("ab")
                procs.append(hv.popen(
                    [sys.executable, "-m", "teapot_lb.cli.run",
                     "--manifests", str(workdir / "manifests"), "--node", node,
                     "--state-dir", str(workdir / "state" / node), "--modes", "bgp",
                     "--ovn-sb", stack.sb_remote],
                    stdout=log, stderr=log,
                ))  # fmt: skip
            bird = Bird(
                lab.client,
                workdir / "bird",
                asn=64500,
                router_id=UPSTREAM,
                neighbors=[Neighbor(address=a, asn=64512) for a in NODE_ADDRESS.values()],
                fib=True,
            )
            bird.start()
            for address in NODE_ADDRESS.values():
                bird.wait_established(address)
            client = Client(lab.client.ns)
            yield World(lab, client, bird, workdir)
        finally:
            if client is not None:
                client.close()
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)
            if bird is not None:
                bird.stop()
            if loop is not None:
                loop.stop()
            stack.close()


def test_the_route_follows_the_active_gateway_chassis_and_reaches_the_service(
    world: World,
) -> None:
    logs = lambda: "\n".join(log_tail(world.workdir / f"{n}.log") for n in NODE_ADDRESS)  # noqa: E731
    wait_for(lambda: world.next_hops() == {NODE_ADDRESS["node-1"]}, timeout=30,
             what="the route via node-1 (chassis-1 holds lr0's gateway port)",
             detail=logs)  # fmt: skip
    seen: set[str | None] = set()

    def both() -> bool:
        seen.update(a.node for a in world.client.burst(VIP, 80, 4))
        return {"be1", "be2"} <= seen

    wait_for(both, timeout=20, what="both backends through the route via node-1")
    # node-2's session is up: it is the gateway, not a session, that keeps its route out.
    assert world.bird.session_state(NODE_ADDRESS["node-2"]) == "established"
    assert "not the active OVN gateway chassis' node" in world.reason("node-2")
    assert "on chassis chassis-1 (node node-1)" in world.reason("node-2")
    claimed: list[float] = []  # when the Southbound said chassis-2 holds the port

    def on_change(gateways: Gateways) -> None:
        if any(p.chassis == "chassis-2" for p in gateways.ports):
            claimed.append(time.monotonic())

    watch = SouthboundWatch(Connection(world.lab.stack.sb_remote), on_change)
    watch.start()
    wait_for(lambda: watch.latest.synced, timeout=10, what="the test's own Southbound watch")
    killed = time.monotonic()
    world.lab.stack.stop_chassis("chassis-1")
    wait_for(lambda: world.next_hops() == {NODE_ADDRESS["node-2"]}, timeout=30,
             what="the route via node-2 once chassis-2 holds the port", detail=logs)  # fmt: skip
    moved = time.monotonic()
    watch.stop()
    assert world.lab.active_gateway() == "chassis-2"
    # node-1's speaker and session live on: it withdrew because the port moved.
    assert world.bird.session_state(NODE_ADDRESS["node-1"]) == "established"
    assert "on chassis chassis-2 (node node-2)" in world.reason("node-1")
    wait_for(lambda: world.client.get(VIP, 80).node, timeout=20, every=0.05,
             what="the Service reachable through the route via node-2")  # fmt: skip
    print(
        f"chassis-1 killed -> the upstream's FIB via node-2: {moved - killed:.2f} s "
        f"(of which the Southbound binding moved -> FIB: {moved - claimed[0]:.3f} s)"
    )
