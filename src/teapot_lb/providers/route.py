"""The built-in provider `route`: the management speakers announce the request's
addresses by BGP with the tenant's nodes as next hops (docs/teapot.md, "Route mode").

Its work is done elsewhere: the manager's book decides the routes and the `Programmed`
condition, the speakers announce them. This module gives it a name in the table and
says what it reports, so that a route request reads like any other provider's.
"""

from __future__ import annotations

from collections.abc import Mapping

from teapot_lb.model.tenancy import ROUTE_PROVIDER, Tenant, TenantLoadBalancer
from teapot_lb.providers.base import LoadBalancerSpec, Phase, ProviderStatus


class RouteProvider:
    name = ROUTE_PROVIDER

    def refuse(self, request: TenantLoadBalancer, tenant: Tenant) -> list[str]:
        return []  # every port and protocol: the tenant's kube-proxy takes the traffic

    async def ensure(self, spec: LoadBalancerSpec) -> ProviderStatus:
        ips = ", ".join(str(ip) for ip in spec.addresses)
        if not any(listener.members for listener in spec.listeners):
            return ProviderStatus(
                Phase.PROVISIONING,
                "NoReadyBackends",
                f"{ips} assigned; no backend node holds a ready endpoint, nothing is announced",
            )
        return ProviderStatus(
            Phase.ACTIVE, "Programmed", f"{ips} announced by the management speakers"
        )

    async def delete(self, key: str, uid: str) -> ProviderStatus | None:
        return None  # the book drops the routes with the request

    async def sweep(self, wanted: Mapping[str, str]) -> list[str]:
        return []  # nothing outside the book's state


def load(config: Mapping[str, object]) -> RouteProvider:
    return RouteProvider()
