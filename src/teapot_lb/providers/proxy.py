"""The built-in provider `proxy`: the shared gateway serves the request's ports on its
addresses (TCP by HAProxy, UDP by nginx) and proxies to the tenant's nodes at the
nodePorts (docs/teapot.md, "Gateway mode").

The book assigns the addresses; the gateway's control plane
(:mod:`teapot_lb.gateway.translate.load_balancers`) turns the request into listeners. This
module says what can never be served (:meth:`ProxyProvider.refuse`, at vetting) and what
the request's `Programmed` condition is: served only once the gateway's translation of
this very request (its ports on its addresses) says so — the manager runs that control
beside it (`--gateway-address`) and tells this provider every translation
(:meth:`ProxyProvider.told`). Until then the request is handed to the gateway, not served.

Served is not yet reachable: the address must be routed to the gateway nodes. With
`--gateway-service` the manager's gateway control writes a Service per address that the
speakers announce (:mod:`teapot_lb.gateway.control.l7services`), and the request is
Programmed only once the manager has seen that Service for each address it is served on
(:meth:`ProxyProvider.copy_seen`); without, nothing in teapot-lb announces it, and the
`Programmed` message says so (the operator routes it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import replace
from types import MappingProxyType

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.translate import LoadBalancerResult, Translation
from teapot_lb.gateway.translate.load_balancers import port_refusals
from teapot_lb.model.tenancy import (
    PROXY_PROVIDER,
    REASON_NO_READY_BACKENDS,
    REASON_NOT_ANNOUNCED,
    REASON_PENDING,
    REASON_PROGRAMMED,
    Tenant,
    TenantLoadBalancer,
)
from teapot_lb.providers.base import LoadBalancerSpec, Phase, ProviderStatus

REASON_NOT_SERVED = "NotServed"

Copy = tuple[IPAddress, tuple[str, ...]]
"""What a Service announcing requests' address carries: the address, the request keys."""


def gateway_status(
    request: TenantLoadBalancer, result: LoadBalancerResult | None
) -> ProviderStatus:
    """`request`'s `Programmed` from the gateway's result for it (pure). A result of
    other ports or addresses than the request has now is not its word yet: pending."""
    if (
        result is None
        or result.request.spec.ports != request.spec.ports
        or _addresses(result.request) != _addresses(request)
    ):
        return ProviderStatus(
            Phase.PROVISIONING, REASON_PENDING, "handed to the shared gateway, not served yet"
        )
    served = ", ".join(result.served)
    if result.refusals:
        first = result.refusals[0]
        refused = "; ".join(str(r) for r in result.refusals)
        where = f"served: {served}" if served else "nothing of it is served"
        return ProviderStatus(Phase.ERROR, first.reason or REASON_NOT_SERVED,
                              f"the shared gateway refused {refused} ({where})")  # fmt: skip
    if not request.spec.ports:  # (an Octavia load balancer with L7 listeners only)
        ips = ", ".join(_addresses(request))
        return ProviderStatus(Phase.ACTIVE, REASON_PROGRAMMED, f"{ips} assigned; no ports")
    if not result.backends:
        return ProviderStatus(
            Phase.PROVISIONING,
            REASON_NO_READY_BACKENDS,
            f"{served} listened on by the shared gateway; no backend node (holding a ready "
            "endpoint, inside the Tenant's node networks) to send to: connections are closed",
        )
    return ProviderStatus(Phase.ACTIVE, REASON_PROGRAMMED, f"{served} served by the shared gateway")


def _addresses(request: TenantLoadBalancer) -> list[str]:
    return list(request.status.addresses) if request.status else []


def not_announced(status: ProviderStatus, request: TenantLoadBalancer) -> ProviderStatus:
    """`status` of a request served with nothing in teapot-lb announcing its addresses."""
    if status.phase is not Phase.ACTIVE or not request.spec.ports:
        return status
    ips = ", ".join(_addresses(request))
    return ProviderStatus(
        status.phase,
        status.reason,
        f"{status.message}; nothing in teapot-lb announces {ips} (the manager runs without "
        "--gateway-service): the operator routes it to the gateway nodes",
    )


def announced_status(
    status: ProviderStatus, result: LoadBalancerResult | None, carried: Collection[IPAddress]
) -> ProviderStatus:
    """`status` of a request whose addresses are announced where a Service carries them
    (`carried`): served on an address none carries is not Programmed yet."""
    if status.phase is not Phase.ACTIVE or result is None:
        return status
    missing = ", ".join(str(a) for a in result.addresses if a not in carried)
    if not missing:
        return status
    return ProviderStatus(
        Phase.PROVISIONING,
        REASON_NOT_ANNOUNCED,
        f"{status.message}; not announced yet: no Service announces {missing} (the gateway "
        "control writes a copy of --gateway-service's Service per address: is it there?)",
    )


class ProxyProvider:
    """`announced`: whether the manager's gateway control writes the Services that
    announce the requests' addresses (`--gateway-service`)."""

    name = PROXY_PROVIDER

    def __init__(self, *, announced: bool = False) -> None:
        self.announced = announced
        self._results: dict[str, LoadBalancerResult] = {}
        """The gateway's last result per request key (namespace/name)."""
        self._by_namespace: dict[str, set[str]] = {}
        self._copies: dict[str, Copy] = {}  # Service key -> what it carries
        self._carried: dict[str, Counter[IPAddress]] = {}  # request key -> its copies' IPs
        self.translating = False
        """Whether a gateway control has told this provider anything (a manager without
        `--gateway-address` runs none: whether the gateway serves a request is unknown)."""

    def refuse(self, request: TenantLoadBalancer, tenant: Tenant) -> list[str]:
        return [str(r) for r in port_refusals(request)]

    def told(self, translation: Translation) -> list[str]:
        """Take a translation of the gateway's control: the request keys whose result
        changed (their `Programmed` is decided again). Only the namespaces it decided
        again are read (the others' results are as they were)."""
        self.translating = True
        fresh: dict[str, dict[str, LoadBalancerResult]] = {ns: {} for ns in translation.changed}
        for ref, result in translation.load_balancers.items():
            namespace = ref.namespace or ""
            if namespace in fresh:
                fresh[namespace][f"{namespace}/{ref.name}"] = result
        changed: list[str] = []
        for namespace, results in fresh.items():
            for key in self._by_namespace.pop(namespace, set()) - results.keys():
                del self._results[key]
                changed.append(key)
            for key, result in results.items():
                if self._results.get(key) != result:
                    self._results[key] = result
                    changed.append(key)
            if results:
                self._by_namespace[namespace] = set(results)
        return sorted(changed)

    def copy_seen(self, service: str, copy: Copy | None) -> list[str]:
        """A Service announcing requests' address changed (None: gone, or no such copy
        now): the request keys whose `Programmed` is decided again."""
        before = self._copies.pop(service, None)
        if copy is not None:
            self._copies[service] = copy
        if before == copy:
            return []
        keys: set[str] = set()
        for entry, step in ((before, -1), (copy, 1)):
            if entry is None:
                continue
            ip, carried = entry
            for key in carried:
                counts = self._carried.setdefault(key, Counter())
                counts[ip] += step
                if counts[ip] <= 0:
                    del counts[ip]
                if not counts:
                    del self._carried[key]
                keys.add(key)
        return sorted(keys)

    def copies(self) -> Mapping[str, Copy]:
        """The Services announcing requests' addresses, by key, as last seen."""
        return MappingProxyType(self._copies)

    def status(self, key: str, request: TenantLoadBalancer) -> ProviderStatus:
        """The request's `Programmed` as the gateway's control last said it. Its words
        are the tenant's too (`tenant_message`): they name the request's own addresses and
        ports, the shared gateway and what the operator must do, nothing of the
        management cluster's objects nor of another tenant (a port the gateway refuses on
        the request's address is held by an older object of the same tenant: the address
        is in its allocation, which no other tenant's overlaps)."""
        result = self._results.get(key)
        status = gateway_status(request, result)
        if self.announced:
            status = announced_status(status, result, self._carried.get(key, Counter()))
        else:
            status = not_announced(status, request)
        message = status.message
        if not self.translating:
            message += (
                " (this manager runs no gateway control, --gateway-address: whether the"
                " gateway serves it is not known here)"
            )
        return replace(status, message=message, tenant_message=message)

    async def ensure(self, spec: LoadBalancerSpec) -> ProviderStatus:
        result = self._results.get(spec.key)
        if result is None:
            ips = ", ".join(str(ip) for ip in spec.addresses)
            return ProviderStatus(
                Phase.PROVISIONING,
                REASON_PENDING,
                f"{ips} assigned; handed to the shared gateway, not served yet",
            )
        return gateway_status(result.request, result)

    async def delete(self, key: str, uid: str) -> ProviderStatus | None:
        return None  # the gateway stops serving a request once it is gone or refused

    async def sweep(self, wanted: Mapping[str, str]) -> list[str]:
        return []


def load(config: Mapping[str, object]) -> ProxyProvider:
    return ProxyProvider()
