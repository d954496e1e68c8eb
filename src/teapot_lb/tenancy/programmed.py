"""Route mode in the speaker: the tenant routes a management speaker announces (pure).

The manager writes its decision into each TenantLoadBalancer's status (the assigned
`addresses`, the `nextHops`, the `Programmed` condition); only the manager may write that
status (RBAC: the tenant's agent writes the spec). The speaker reads the requests from its
view and announces every address of a Programmed route-mode request with one path per next
hop of the address's family (see :func:`teapot_lb.announce.plan.plan`).

The speaker checks the status once more against the Tenant, as the last line before the
network: an address outside the tenant's allocation or a next hop outside its node
networks is not announced, whoever wrote it (a status written by hand, a manager bug).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import ip_address, ip_network

from teapot_lb.addresses import AddressRange, IPAddress, IPNetwork
from teapot_lb.cluster import ClusterView
from teapot_lb.model.common import ConditionStatus
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import (
    PROGRAMMED,
    ROUTE_PROVIDER,
    Tenant,
    TenantLoadBalancer,
    TenantMode,
)
from teapot_lb.tenancy.allocation import allocated_ranges
from teapot_lb.tenancy.routes import TenantRoute
from teapot_lb.tenancy.vet import tenant_of


def is_programmed(request: TenantLoadBalancer) -> bool:
    """The manager vetted the request and assigned its addresses (condition Programmed)."""
    status = request.status
    if status is None:
        return False
    return any(c.type == PROGRAMMED and c.status is ConditionStatus.TRUE for c in status.conditions)


def _addresses(texts: list[str]) -> list[IPAddress]:
    out = []
    for text in texts:
        try:
            out.append(ip_address(text))
        except ValueError:
            continue  # the CRD's schema keeps these out; nothing to announce either way
    return out


@dataclass(frozen=True)
class TenantBounds:
    """What a tenant's routes must stay inside: its allocation and its node networks."""

    name: str
    ranges: tuple[tuple[AddressRange, AddressPool], ...]
    networks: tuple[IPNetwork, ...]

    @classmethod
    def of(cls, tenant: Tenant, pools: Mapping[str, AddressPool]) -> TenantBounds:
        """`pools` by name (as the Tenant's allocations name them)."""
        allocated = allocated_ranges(tenant, pools)
        ranges = tuple((r, pools[name]) for name, rs in allocated.items() for r in rs)
        return cls(tenant.name, ranges, tuple(tenant.node_networks()))

    def allocates(self, ip: IPAddress) -> bool:
        # as allocation.is_allocated: inside a given range, and its pool may hand it out
        return any(ip in r and pool.contains(ip) for r, pool in self.ranges)

    def holds_node(self, ip: IPAddress) -> bool:
        return any(ip in n for n in self.networks)


def request_routes(
    key: str, request: TenantLoadBalancer, bounds: TenantBounds
) -> tuple[TenantRoute, ...]:
    """The routes of one request from its status: one per assigned address inside the
    tenant's allocation, with the next hops of its family inside its node networks."""
    status = request.status
    if status is None or request.spec.mode is not TenantMode.ROUTE or not is_programmed(request):
        return ()
    if request.spec.provider not in (None, ROUTE_PROVIDER):
        return ()  # built by another provider (a Tenant's defaultProvider: no next hops)
    hops = [h for h in _addresses(status.next_hops) if bounds.holds_node(h)]
    out = []
    for ip in _addresses(status.addresses):
        if not bounds.allocates(ip):
            continue
        same_family = tuple(sorted({h for h in hops if h.version == ip.version}, key=int))
        if same_family:
            out.append(TenantRoute(str(ip_network(ip)), same_family, bounds.name, key))
    return tuple(out)


def programmed_routes(view: ClusterView) -> tuple[TenantRoute, ...]:
    """Every tenant route the management speakers announce, by request key."""
    tenants = list(view.tenants.values())
    pools = {p.name: p for p in view.pools.values()}  # the view keys them namespace/name
    bounds: dict[str, TenantBounds] = {}  # each tenant's once per call
    out: list[TenantRoute] = []
    for key in sorted(view.tenant_load_balancers):
        request = view.tenant_load_balancers[key]
        if not is_programmed(request):
            continue
        tenant = tenant_of(request.namespace, tenants)
        if not isinstance(tenant, Tenant):
            continue
        if tenant.name not in bounds:
            bounds[tenant.name] = TenantBounds.of(tenant, pools)
        out.extend(request_routes(key, request, bounds[tenant.name]))
    return tuple(out)


__all__ = ["TenantBounds", "is_programmed", "programmed_routes", "request_routes"]
