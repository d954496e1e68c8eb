"""The built-in provider `proxy`: the shared gateway (HAProxy) serves the request's
addresses and proxies to the tenant's nodes (docs/teapot.md, "Gateway mode").

As `route`, its work is done elsewhere (the book assigns the addresses, the gateway
serves them); this module names it in the table and says what it reports.
"""

from __future__ import annotations

from collections.abc import Mapping

from teapot_lb.model.tenancy import PROXY_PROVIDER, Tenant, TenantLoadBalancer
from teapot_lb.providers.base import LoadBalancerSpec, Phase, ProviderStatus


class ProxyProvider:
    name = PROXY_PROVIDER

    def refuse(self, request: TenantLoadBalancer, tenant: Tenant) -> list[str]:
        return []  # what the gateway cannot serve is refused by its own vetting (l7vet)

    async def ensure(self, spec: LoadBalancerSpec) -> ProviderStatus:
        ips = ", ".join(str(ip) for ip in spec.addresses)
        return ProviderStatus(Phase.ACTIVE, "Programmed", f"{ips} served by the shared gateway")

    async def delete(self, key: str, uid: str) -> ProviderStatus | None:
        return None

    async def sweep(self, wanted: Mapping[str, str]) -> list[str]:
        return []


def load(config: Mapping[str, object]) -> ProxyProvider:
    return ProxyProvider()
