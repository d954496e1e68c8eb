"""The manager's verdict on a TenantNodes (pure): which published addresses are refused
(:func:`~.nodes.refused`), as its status (``Accepted``, ``refused``) for the tenant to
see; the relay applies the same rule itself and never registers them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from teapot_lb.model import dump
from teapot_lb.model.tenancy import Tenant, TenantNodes, TenantNodesStatus
from teapot_lb.tenancy.book import condition
from teapot_lb.tenancy.nodes import RefusedAddress, refused

REASON_NO_TENANT = "NoTenant"


def tenant_nodes_status(
    tenant: Tenant | None, nodes: TenantNodes, now: datetime
) -> tuple[dict[str, Any], list[RefusedAddress]]:
    """The TenantNodes' desired status (``Accepted``, the refused count) and the addresses
    refused: outside the Tenant's node networks, or every one when its namespace belongs to
    no Tenant."""
    if tenant is None:
        gone = [
            RefusedAddress(
                node.name,
                address,
                REASON_NO_TENANT,
                f"namespace {nodes.namespace!r} belongs to no Tenant: no node of it is registered",
            )
            for node in nodes.spec.nodes
            for address in node.addresses
        ]
    else:
        gone = refused(tenant, nodes.spec.nodes)
    count = sum(len(n.addresses) for n in nodes.spec.nodes)
    if gone:
        reason = gone[0].reason
        message = "; ".join(r.message for r in gone[:20])
        if len(gone) > 20:
            message += f"; and {len(gone) - 20} more"
    else:
        reason = "Accepted"
        message = f"{count} addresses of {len(nodes.spec.nodes)} nodes registered"
    old = nodes.status.conditions if nodes.status else []
    accepted = condition("Accepted", not gone, reason, message, old, now, nodes.metadata.generation)
    status = TenantNodesStatus(refused=len(gone), conditions=[accepted])
    return dump(status), gone


__all__ = ["REASON_NO_TENANT", "tenant_nodes_status"]
