"""What tests/octavia and bench/octavia*.py add to the Octavia stack
(:mod:`teapot_lb.lab.octavia`): the API modules' shared Tenants, route mode in the lab
(:func:`route_lab`), and the openstacksdk client they drive it with (:func:`connection`)."""

from __future__ import annotations

import contextlib
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from teapot_lb.lab.octavia import (
    OTHER_PROJECT,
    POOL_CIDR,
    PROJECT,
    TENANT_NS,
    Rest,
    Stack,
    config,
    running,
    tenant,
)
from teapot_lb.lab.wait import wait_for

# The stack test_octavia_api and test_octavia_tls_api share (conftest: api_stack).
TINY_PROJECT = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
TINY_NS = "tenant-tiny"
API_SWEEP_GRACE_S = 3.0  # the VIP orphan sweep's grace there (300 s by default)


def api_objects() -> list[dict[str, Any]]:
    """The Tenants of the API modules' shared stack: acme (project PROJECT, DNS domain
    acme.example, room for both modules' load balancers), bolt (project OTHER_PROJECT,
    Gateway only) and tiny (project TINY_PROJECT: one address, 203.0.113.8, one port)."""
    acme_cidrs = ["203.0.113.0/29", "203.0.113.16/28"]
    return [
        config("AddressPool", "octavia", {"addresses": ["203.0.113.0/27"], "autoAssign": False}),
        tenant("acme", TENANT_NS, PROJECT, acme_cidrs[0], dnsDomains=["acme.example"],
               allocations=[{"addressPool": "octavia", "cidrs": acme_cidrs}],
               quotas={"addresses": 24, "loadBalancers": 24, "ports": 48}),
        tenant("bolt", "tenant-bolt", OTHER_PROJECT, "203.0.113.12/30", modes=["Gateway"]),
        tenant("tiny", TINY_NS, TINY_PROJECT, "203.0.113.8/32",
               quotas={"addresses": 1, "loadBalancers": 4, "ports": 1}),
    ]  # fmt: skip


def api_sweep() -> dict[str, str]:
    """The driver options of the API modules' shared stack: a fast VIP orphan sweep."""
    return {"vip_orphan_grace": str(API_SWEEP_GRACE_S), "sweep_interval": "0.5"}


@contextlib.contextmanager
def route_lab(work: Path, name: str = "octr") -> Iterator[tuple[Any, Stack, Rest]]:
    """The stack in the lab's router namespace with route mode wired: the fake API server
    on the LAN address, a management speaker on host m1 (192.0.2.21) peering with BIRD 2
    in the router (ADD-PATH, kernel FIB), Tenant acme with nodes n1..n3 (192.0.2.8/29) as
    its node network. Needs root and BIRD (:mod:`teapot_lb.lab.peers`)."""
    from teapot_lb.lab.peers import DAEMONS, Neighbor
    from teapot_lb.lab.standalone_lab import ROUTER_LAN, ROUTER_LAN6, Lab
    from teapot_lb.netlab import Topology

    m1_address = "192.0.2.21"
    objects = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "m1"},
         "status": {"addresses": [{"type": "InternalIP", "address": m1_address}]}},
        config("AddressPool", "octavia", {"addresses": [POOL_CIDR]}),
        config("BGPPeer", "router", {"myASN": 64512, "peerASN": 64500,
                                     "peerAddress": ROUTER_LAN, "holdTime": "9s",
                                     "addPath": "send"}),
        config("BGPAdvertisement", "octavia", {"addressPools": ["octavia"]}),
        tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29", nodeNetworks=["192.0.2.8/29"]),
    ]  # fmt: skip
    with Topology(name) as topo:
        lab = Lab(topo, work)
        m1 = topo.add_host("m1")
        topo.connect(m1, lab.lan, addrs=[f"{m1_address}/24"])
        router = DAEMONS["bird"](
            lab.router,
            work / "bird",
            asn=64500,
            router_id=ROUTER_LAN,
            neighbors=[Neighbor(address=m1_address, asn=64512, hold_time=9, add_path="receive")],
            fib=True,
            local_addresses=[ROUTER_LAN, ROUTER_LAN6],
        )
        router.start()
        try:
            with running(work, host=lab.router, address=ROUTER_LAN, objects=objects) as (
                stack,
                rest,
            ):
                stack.procs["speaker"] = m1.popen(
                    [sys.executable, "-m", "teapot_lb.cli.speaker", "--node", "m1",
                     "--kubeconfig", str(stack.kubeconfig), "--modes", "bgp", "--tenancy",
                     "--state-dir", str(work / "state-m1"), "--metrics-address", ""],
                    stdout=stack.log("speaker"), stderr=stack.log("speaker"),
                )  # fmt: skip
                yield lab, stack, rest
        finally:
            router.stop()


class Calls:
    """A proxy whose method calls run through `run` (in the lab's namespace, made again
    when the stand-in database refused them); a generator's items are collected there."""

    def __init__(self, target: Any, run: Callable[[Callable[[], Any]], Any]) -> None:
        self._target = target
        self._run = run

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            def once() -> Any:
                result = attr(*args, **kwargs)
                return list(result) if isinstance(result, types.GeneratorType) else result

            return self._run(once)

        return call


# How often a call refused by the stand-in database is made again, and how many were.
_LOCKED_TRIES = 5
locked_retries = 0


def again_if_locked(call: Callable[[], Any]) -> Any:
    """`call()`, made again when Octavia answered 500 "database is locked": on the
    stand-in SQLite database a transaction that has read fails at once, rolled back, when
    another process (the driver agent writing a status or statistics) holds the write
    lock. Production databases wait instead; any other error is raised as it came."""
    import openstack.exceptions

    global locked_retries
    for attempt in range(_LOCKED_TRIES):
        try:
            return call()
        except openstack.exceptions.HttpException as err:
            locked = err.status_code == 500 and "database is locked" in str(err)
            if not locked or attempt == _LOCKED_TRIES - 1:
                raise
            locked_retries += 1
            time.sleep(0.05 * (attempt + 1))  # (the other writer's transaction is short)
    raise AssertionError("unreachable")


def connection(stack: Stack) -> Any:
    """An openstacksdk connection to the noauth Octavia API (its calls made in the
    stack's namespace, again when the stand-in database was locked)."""
    import openstack.connection  # the test client (dev dependency)

    conn = openstack.connection.Connection(
        auth_type="none",
        auth={"endpoint": stack.octavia_url},
        load_balancer_endpoint_override=stack.octavia_url,
    )
    if stack.host is None:
        return types.SimpleNamespace(load_balancer=Calls(conn.load_balancer, again_if_locked))
    # (the proxy's version discovery is a request too)
    proxy = stack.inside(lambda: conn.load_balancer)
    inside = stack.inside
    return types.SimpleNamespace(
        load_balancer=Calls(proxy, lambda call: inside(lambda: again_if_locked(call)))
    )


def active(conn: Any, lb_id: str, *, within: float = 20.0, every: float = 0.02) -> Any:
    """The load balancer once it is ACTIVE again (ERROR fails at once)."""

    def check() -> Any:
        lb = conn.load_balancer.get_load_balancer(lb_id)
        if lb.provisioning_status == "ERROR":
            raise AssertionError(f"load balancer {lb_id} in ERROR: {lb}")
        return lb if lb.provisioning_status == "ACTIVE" else None

    return wait_for(check, timeout=within, what=f"load balancer {lb_id} ACTIVE", every=every)


__all__ = [
    "API_SWEEP_GRACE_S",
    "TINY_NS",
    "TINY_PROJECT",
    "Calls",
    "active",
    "again_if_locked",
    "api_objects",
    "api_sweep",
    "connection",
    "route_lab",
]
