"""Which chassis holds each gateway router's gateway port, and so which nodes may announce
the router's Service IPs by BGP (pure).

A pool selected by both an OVNAdvertisement and a BGPAdvertisement is announced by BGP only
from the nodes whose chassis currently holds the gateway port of one of the OVN
advertisement's gateway routers: the upstream's route then follows OVN's own gateway
failover. :class:`Gateways` is what the Southbound database says (read by
:mod:`teapot_lb.ovn.sbdb`); :func:`gateway_nodes` turns it into nodes with a reason, for the
planner (:mod:`teapot_lb.announce.plan`) and ``explain``.

A chassis is a node's when the chassis' ``hostname`` (what ovn-controller registers: the
host's name, or ``external_ids:hostname`` of its Open vSwitch) is the Node's name; a
gateway router with ``node`` set (ovn-kubernetes' ``GR_<node>``, bound to one chassis) is
that node's as soon as its gateway is bound.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from teapot_lb.model.ovn import OVNAdvertisement


@dataclass(frozen=True, order=True)
class GatewayPort:
    """A router's port that lives on one chassis: the chassis-redirect port ``cr-<lrp>`` of
    a distributed gateway port, or a port of a gateway router bound to a chassis
    (``l3gateway``). `chassis`: the Chassis name holding it, None while unbound."""

    router: str
    port: str
    chassis: str | None


@dataclass(frozen=True)
class Gateways:
    """The Southbound's gateway ports and chassis (name, hostname), hashable: a planner
    input compared between steps. `synced` is False until the Southbound has been read."""

    ports: tuple[GatewayPort, ...] = ()
    chassis: tuple[tuple[str, str], ...] = ()
    synced: bool = True

    def hostname(self, chassis: str) -> str | None:
        for name, host in self.chassis:
            if name == chassis:
                return host
        return None


NOT_READ = "OVN: the Southbound database has not been read yet"


@dataclass(frozen=True)
class GatewayNodes:
    """The nodes that may announce a pool's IPs, and why (one line for explain)."""

    nodes: frozenset[str]
    reason: str


def gateway_nodes(
    advertisements: Iterable[OVNAdvertisement], gateways: Gateways, nodes: Collection[str]
) -> GatewayNodes:
    """The nodes (of `nodes`) whose chassis holds the gateway port of one of the
    advertisements' gateway routers, with a reason naming router, port, chassis and node."""
    if not gateways.synced:
        return GatewayNodes(frozenset(), NOT_READ)
    found: set[str] = set()
    parts: list[str] = []
    routers = sorted({(r.name, r.node) for a in advertisements for r in a.spec.gateway_routers},
                     key=lambda r: (r[0], r[1] or ""))  # fmt: skip
    if not routers:
        return GatewayNodes(frozenset(), "OVN: the OVNAdvertisement names no gateway router")
    for router, router_node in routers:
        ports = [p for p in gateways.ports if p.router == router]
        bound = sorted({p.chassis for p in ports if p.chassis is not None})
        if not ports:
            parts.append(f"router {router} has no gateway port in the Southbound")
            continue
        if not bound:
            names = ", ".join(sorted({p.port for p in ports}))
            parts.append(f"router {router}: gateway port {names} bound to no chassis")
            continue
        for chassis in bound:
            port = ", ".join(sorted({p.port for p in ports if p.chassis == chassis}))
            host = gateways.hostname(chassis)
            node = router_node if router_node is not None else host
            where = f"router {router}: {port} on chassis {chassis}"
            if node is not None and node in nodes:
                found.add(node)
                parts.append(f"{where} (node {node})")
            else:
                parts.append(f"{where} (hostname {host or '?'}: no such node)")
    return GatewayNodes(frozenset(found), "OVN gateway: " + "; ".join(parts))
