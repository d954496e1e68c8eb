"""Builders for relay tests: the tenancy builders' two tenants (acme, bolt) with ASNs of
their own, their policies, and received paths."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from tests.tenancy.builders import TENANTS, pools, tenant

from teapot_lb.bgp.attributes import ReceivedPath
from teapot_lb.bgp.wire import AsPath, Attribute, Communities, MultiExitDisc, Origin, OriginCode
from teapot_lb.bgp.wire.aspath import Segment, SegmentType
from teapot_lb.model.tenancy import Tenant
from teapot_lb.relay.policy import RelayOptions, TenantPolicy, protected_addresses, tenant_policy

ASN = {"acme": 64601, "bolt": 64602}
# The registered nodes (spec.nodes): each tenant's node IPs, the first with an IPv6 address.
NODE6 = {"acme": "2001:db8:a::11", "bolt": "2001:db8:b::71"}
ROUTER4, ROUTER6 = "192.0.2.1", "2001:db8:a::1"
OPTIONS = RelayOptions(
    protected=protected_addresses([ROUTER4, ROUTER6, "192.0.2.60/30"]),
    communities=frozenset({(64601 << 16) | 100}),
)


def nodes(name: str) -> list[dict[str, Any]]:
    """``spec.nodes`` of the tenant's nodes n0, n1, ... (n0 dual-stack)."""
    ips = TENANTS[name]["node_ips"]
    return [
        {"name": f"n{i}", "addresses": [ip, NODE6[name]] if i == 0 else [ip]}
        for i, ip in enumerate(ips)
    ]


def relay_tenant(name: str, **spec: Any) -> Tenant:
    return tenant(name, **{"asn": ASN[name], "nodes": nodes(name), **spec})


def policies(options: RelayOptions = OPTIONS, **tenants: Tenant) -> dict[str, TenantPolicy]:
    chosen = tenants or {n: relay_tenant(n) for n in ASN}
    return {n: tenant_policy(t, pools(), options) for n, t in chosen.items()}


def path(
    next_hop: str,
    *asns: int,
    sets: tuple[int, ...] = (),
    communities: tuple[int, ...] = (),
    confed: tuple[SegmentType, tuple[int, ...]] | None = None,
) -> ReceivedPath:
    """A received path: ``asns`` as a sequence, ``sets`` as an AS_SET after it, ``confed``
    (a confederation segment's type and ASNs) before it."""
    segs = [Segment(confed[0], confed[1])] if confed else []
    if asns:
        segs.append(Segment(SegmentType.AS_SEQUENCE, asns))
    if sets:
        segs.append(Segment(SegmentType.AS_SET, sets))
    attrs: list[Attribute] = [Origin(OriginCode.IGP), AsPath(tuple(segs)), MultiExitDisc(5)]
    if communities:
        attrs.append(Communities(communities))
    return ReceivedPath(ip_address(next_hop), tuple(attrs))
