"""Route mode's wanted routes: a pure function of a vetted request and its IPs.

The management cluster's speakers announce each IP of a tenant's load balancer with the
tenant's nodes as next hops (a third-party next hop on the shared segment, RFC 4271
§5.1.3), one path per node through ADD-PATH (RFC 7911), so the router spreads traffic over
the nodes by ECMP. This module only says *which* routes are wanted; announcing them is the
BGP layer's job (see docs/teapot.md, "Hand-off to the BGP speaker").

Which nodes: with externalTrafficPolicy Local, the nodes holding ready endpoints; with
Cluster, every backend node, but only while some node holds a ready endpoint (kube-proxy
forwards from any node, and nothing is announced for a Service nobody serves).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import ip_network

from teapot_lb.addresses import IPAddress
from teapot_lb.model.service import ExternalTrafficPolicy
from teapot_lb.model.tenancy import TenantLoadBalancer, TenantMode


@dataclass(frozen=True, order=True)
class TenantRoute:
    """One prefix (a /32 or /128) to announce with these next hops, for one request."""

    prefix: str
    next_hops: tuple[IPAddress, ...]
    tenant: str
    request: str  # the TenantLoadBalancer's namespace/name


def next_hops(request: TenantLoadBalancer, version: int) -> tuple[IPAddress, ...]:
    """The backend addresses of one IP version that should receive the traffic, sorted."""
    backends = request.spec.backends
    if request.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL:
        chosen = [b for b in backends if b.ready]
    else:
        chosen = list(backends) if any(b.ready for b in backends) else []
    hops = {a for b in chosen for a in b.addresses if a.version == version}
    return tuple(sorted(hops, key=int))


def wanted_routes(
    tenant: str, request: TenantLoadBalancer, ips: Iterable[IPAddress]
) -> tuple[TenantRoute, ...]:
    """The routes a vetted request with these assigned IPs wants (none outside route mode,
    none for an IP without next hops)."""
    if request.spec.mode is not TenantMode.ROUTE:
        return ()
    key = f"{request.namespace}/{request.name}"
    out = []
    for ip in ips:
        hops = next_hops(request, ip.version)
        if hops:
            prefix = str(ip_network(ip))
            out.append(TenantRoute(prefix, hops, tenant, key))
    return tuple(out)


__all__ = ["TenantRoute", "next_hops", "wanted_routes"]
