"""A tenant's slice of the AddressPools, as the IPAM sees it (pure).

A Tenant's `allocations` name AddressPools and, optionally, parts of them. The manager
keeps one :class:`~teapot_lb.ipam.Allocator` per tenant over these slices, so a tenant can
only ever be given, or share, addresses of its own allocation.
"""

from __future__ import annotations

from collections.abc import Mapping

from teapot_lb import ipam
from teapot_lb.addresses import AddressRange, IPAddress, parse_address_entry
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer


def _intersection(a: AddressRange, b: AddressRange) -> AddressRange | None:
    if a.version != b.version:
        return None
    first, last = max(int(a.first), int(b.first)), min(int(a.last), int(b.last))
    if first > last:
        return None
    cls = type(a.first)
    return AddressRange(cls(first), cls(last))


def allocated_ranges(
    tenant: Tenant, pools: Mapping[str, AddressPool]
) -> dict[str, tuple[AddressRange, ...]]:
    """Per AddressPool name: the ranges of it given to `tenant` (unknown pools left out)."""
    out: dict[str, tuple[AddressRange, ...]] = {}
    for entry in tenant.spec.allocations:
        pool = pools.get(entry.address_pool)
        if pool is None:
            continue
        ranges = pool.address_ranges()
        if entry.cidrs:
            parts = [parse_address_entry(text) for text in entry.cidrs]
            ranges = [r for p in parts for q in ranges if (r := _intersection(p, q)) is not None]
        out[entry.address_pool] = (*out.get(entry.address_pool, ()), *ranges)
    return out


def tenant_pools(tenant: Tenant, pools: Mapping[str, AddressPool]) -> list[ipam.Pool]:
    """The IPAM pools of one tenant: its slice of each pool, under the pool's name."""
    out = []
    for name, ranges in sorted(allocated_ranges(tenant, pools).items()):
        pool = pools[name]
        scope = pool.spec.service_allocation
        out.append(
            ipam.Pool(
                name=name,
                ranges=ranges,
                avoid_buggy_ips=pool.spec.avoid_buggy_ips,
                priority=scope.priority if scope else None,
            )
        )
    return out


def is_allocated(ip: IPAddress, tenant: Tenant, pools: Mapping[str, AddressPool]) -> bool:
    """Whether `ip` lies in the tenant's allocation (and its pool may hand it out)."""
    for name, ranges in allocated_ranges(tenant, pools).items():
        if any(ip in r for r in ranges) and pools[name].contains(ip):
            return True
    return False


def request_of(request: TenantLoadBalancer) -> ipam.ServiceRequest:
    """What the IPAM needs to know of a tenant's request (keyed by namespace/name)."""
    spec = request.spec
    families = request.families()
    return ipam.ServiceRequest(
        namespace=request.namespace,
        name=request.name,
        ip_family_policy=spec.ip_family_policy,
        ip_families=tuple(spec.ip_families) or families[:1],
        requested_ips=tuple(spec.requested_ips),
        sharing_key=spec.sharing_key,
        ports=frozenset((str(p.protocol), p.port) for p in spec.ports),
        external_traffic_policy=ipam.TrafficPolicy(spec.external_traffic_policy.value),
    )


def addresses_needed(request: TenantLoadBalancer) -> int:
    """How many IPs the request holds once assigned."""
    return len(request.spec.requested_ips) or len(request.families())


__all__ = [
    "addresses_needed",
    "allocated_ranges",
    "is_allocated",
    "request_of",
    "tenant_pools",
]
