"""A tenant's registered nodes (pure): the only addresses the BGP relay takes the tenant's
sessions and next hops from.

Two sources, one rule: the operator's ``Tenant.spec.nodes`` (standalone mode), and the
``TenantNodes`` each tenant agent publishes in the tenant's management namespace (its
cluster's Nodes and their InternalIPs). An address counts only inside the Tenant's
``nodeNetworks`` (the outer bound); one outside is refused with a reason, which the
manager writes on the TenantNodes and counts, and the relay never registers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from teapot_lb.addresses import IPAddress
from teapot_lb.kube.resources import TENANT_NODES
from teapot_lb.model.service import Node
from teapot_lb.model.tenancy import Tenant, TenantNode, TenantNodes
from teapot_lb.tenancy.request import LABEL_CLUSTER

REASON_OUTSIDE = "AddressOutsideNodeNetworks"


@dataclass(frozen=True)
class RefusedAddress:
    """A published address that is not registered, and why (for the TenantNodes' status)."""

    node: str
    address: IPAddress
    reason: str
    message: str


def published(tenant: Tenant, objects: Iterable[TenantNodes]) -> list[TenantNodes]:
    """The TenantNodes in the tenant's namespace, by name."""
    mine = (o for o in objects if o.namespace == tenant.spec.namespace)
    return sorted(mine, key=lambda o: o.name)


def refused(tenant: Tenant, nodes: Iterable[TenantNode]) -> list[RefusedAddress]:
    """The addresses outside the Tenant's node networks."""
    networks = tenant.node_networks()
    inside = ", ".join(tenant.spec.node_networks) or "none"
    return [
        RefusedAddress(
            node.name,
            address,
            REASON_OUTSIDE,
            f"{address} of node {node.name} is outside the nodeNetworks of Tenant"
            f" {tenant.name} ({inside}): the relay takes no session and no next hop from it",
        )
        for node in nodes
        for address in node.addresses
        if not any(address in net for net in networks)
    ]


def registered_nodes(tenant: Tenant, objects: Iterable[TenantNodes] = ()) -> dict[IPAddress, str]:
    """Every registered address of the tenant, to its node's name (``cluster/node`` for a
    published one): ``spec.nodes`` and the TenantNodes of its namespace, inside its node
    networks only."""
    sources: list[tuple[str, list[TenantNode]]] = [("", tenant.spec.nodes)]
    sources += [(f"{o.spec.cluster}/", o.spec.nodes) for o in published(tenant, objects)]
    networks = tenant.node_networks()
    out: dict[IPAddress, str] = {}
    for prefix, nodes in sources:
        for node in nodes:
            for address in node.addresses:
                if any(address in net for net in networks):
                    out.setdefault(address, prefix + node.name)
    return out


def desired_tenant_nodes(nodes: Mapping[str, Node], cluster: str, namespace: str) -> dict[str, Any]:
    """The TenantNodes a tenant agent publishes for its cluster's Nodes (InternalIPs; a
    Node without one is left out: nothing could reach it)."""
    entries = [
        {"name": node.name, "addresses": [str(a) for a in addresses]}
        for node in sorted(nodes.values(), key=lambda n: n.name)
        if (addresses := node.addresses())
    ]
    return {
        "apiVersion": TENANT_NODES.api_version,
        "kind": TENANT_NODES.kind,
        "metadata": {"name": cluster, "namespace": namespace, "labels": {LABEL_CLUSTER: cluster}},
        "spec": {"cluster": cluster, "nodes": entries},
    }


__all__ = [
    "REASON_OUTSIDE",
    "RefusedAddress",
    "desired_tenant_nodes",
    "published",
    "refused",
    "registered_nodes",
]
