"""Vetting a tenant's load-balancer request (pure): may this tenant have this?

The same rules run in the admission webhook (through the shared validation), at every
reconcile of the manager (a request written while the webhook was down is still refused)
and in standalone mode. Each refusal is typed: the rule broken, the field of the request,
and a message naming the tenant and what it may use instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from teapot_lb.model.common import ObjectRef
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import PROVIDER_OF_MODE, Tenant, TenantLoadBalancer
from teapot_lb.tenancy.allocation import addresses_needed, is_allocated
from teapot_lb.tenancy.refusal import Refusal


class Rule(StrEnum):
    """The rule a refused request broke; the value is the condition's and Event's reason."""

    NO_TENANT = "NoTenant"  # no Tenant owns the request's namespace
    AMBIGUOUS_TENANT = "AmbiguousTenant"  # more than one Tenant names the namespace
    MODE_NOT_ALLOWED = "ModeNotAllowed"  # the Tenant does not allow the request's mode
    ADDRESS_NOT_ALLOCATED = "AddressNotAllocated"  # a requested IP outside the allocation
    BACKEND_NOT_ALLOWED = "BackendNotAllowed"  # a backend outside the tenant's node networks
    QUOTA_EXCEEDED = "QuotaExceeded"  # addresses, load balancers or ports over quota
    INVALID_REQUEST = "InvalidRequest"  # the request contradicts itself
    PROVIDER_NOT_ALLOWED = "ProviderNotAllowed"  # the Tenant does not list the provider
    PROVIDER_UNAVAILABLE = "ProviderUnavailable"  # this manager does not run the provider
    PROVIDER_REFUSED = "ProviderRefused"  # the provider cannot build what the request asks


@dataclass(frozen=True)
class Usage:
    """What a tenant holds (or a request would add): distinct IPs, load balancers, ports."""

    addresses: int = 0
    load_balancers: int = 0
    ports: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.addresses + other.addresses,
            self.load_balancers + other.load_balancers,
            self.ports + other.ports,
        )


def tenant_of(namespace: str, tenants: Iterable[Tenant]) -> Tenant | Refusal[Rule]:
    """The one Tenant whose namespace this is, or why there is not exactly one."""
    return _one_owner(namespace, [t for t in tenants if t.spec.namespace == namespace])


class NamespaceOwners:
    """The Tenants by the namespace they name, kept as Tenants change: :func:`tenant_of`
    by a lookup, not a walk of every Tenant (the manager asks it for every request)."""

    def __init__(self, tenants: Iterable[Tenant] = ()) -> None:
        self._namespace: dict[str, str] = {}  # Tenant name -> its namespace
        self._owners: dict[str, dict[str, Tenant]] = {}  # namespace -> name -> Tenant
        for tenant in tenants:
            self.put(tenant)

    def put(self, tenant: Tenant) -> None:
        """`tenant` is new or changed (its namespace may be another now)."""
        self.drop(tenant.name)
        self._namespace[tenant.name] = tenant.spec.namespace
        self._owners.setdefault(tenant.spec.namespace, {})[tenant.name] = tenant

    def drop(self, name: str) -> None:
        """Tenant `name` is gone."""
        namespace = self._namespace.pop(name, None)
        if namespace is None:
            return
        owners = self._owners[namespace]
        del owners[name]
        if not owners:
            del self._owners[namespace]

    def names(self, namespace: str) -> list[str]:
        """Every Tenant naming `namespace` (one, unless it is refused as ambiguous)."""
        return sorted(self._owners.get(namespace, ()))

    def of(self, namespace: str) -> Tenant | Refusal[Rule]:
        """As :func:`tenant_of` over the Tenants held."""
        return _one_owner(namespace, list(self._owners.get(namespace, {}).values()))


def _one_owner(namespace: str, claiming: list[Tenant]) -> Tenant | Refusal[Rule]:
    owners = sorted(claiming, key=lambda t: t.name)
    if not owners:
        return Refusal(
            Rule.NO_TENANT,
            "metadata.namespace",
            f"namespace {namespace!r} belongs to no Tenant; requests are only served in a "
            "tenant's namespace",
        )
    if len(owners) > 1:
        names = ", ".join(t.name for t in owners)
        return Refusal(
            Rule.AMBIGUOUS_TENANT,
            "metadata.namespace",
            f"namespace {namespace!r} is claimed by Tenants {names}; the operator must give "
            "it to one",
        )
    return owners[0]


def needs(request: TenantLoadBalancer, *, shares: bool) -> Usage:
    """What the request adds to its tenant's usage (`shares`: its IPs are held already by
    another request of the tenant under the same sharing key)."""
    return Usage(0 if shares else addresses_needed(request), 1, len(request.spec.ports))


def vet(
    request: TenantLoadBalancer,
    tenant: Tenant,
    pools: Mapping[str, AddressPool],
    others: Usage = Usage(),
    *,
    shares: bool = False,
) -> list[Refusal[Rule]]:
    """Every rule `request` breaks as a request of `tenant` (empty: accepted).

    `others` is what the tenant's other admitted requests hold; `shares` says the request
    would share IPs the tenant holds already (they then do not count again).
    """
    spec = request.spec
    out: list[Refusal[Rule]] = []
    name = tenant.name
    if spec.mode not in tenant.spec.modes:
        allowed = ", ".join(m.value for m in tenant.spec.modes) or "none"
        out.append(
            Refusal(
                Rule.MODE_NOT_ALLOWED,
                "spec.mode",
                f"Tenant {name} may not use mode {spec.mode.value} (allowed: {allowed})",
            )
        )
    out += _provider_refusals(request, tenant)
    out += _self_contradictions(request)
    for i, ip in enumerate(spec.requested_ips):
        if not is_allocated(ip, tenant, pools):
            out.append(
                Refusal(
                    Rule.ADDRESS_NOT_ALLOCATED,
                    f"spec.requestedIPs[{i}]",
                    f"{ip} is not allocated to Tenant {name}",
                )
            )
    networks = tenant.node_networks()
    for i, backend in enumerate(spec.backends):
        for j, address in enumerate(backend.addresses):
            if not any(address in net for net in networks):
                out.append(
                    Refusal(
                        Rule.BACKEND_NOT_ALLOWED,
                        f"spec.backends[{i}].addresses[{j}]",
                        f"node {backend.node} address {address} is outside the node networks "
                        f"of Tenant {name} ({', '.join(tenant.spec.node_networks) or 'none'})",
                    )
                )
    out += _quota_refusals(tenant, others, needs(request, shares=shares))
    return out


def _provider_refusals(request: TenantLoadBalancer, tenant: Tenant) -> list[Refusal[Rule]]:
    spec = tenant.spec
    if not (request.spec.provider or spec.default_provider or spec.providers):
        return []  # the provider of the request's mode, among those of the Tenant's modes
    provider = tenant.provider_for(request)
    allowed = spec.allowed_providers()
    if provider in allowed:
        mode = next((m for m, p in PROVIDER_OF_MODE.items() if p == provider), None)
        if mode is None or mode is request.spec.mode:
            return []
        return [
            Refusal(
                Rule.INVALID_REQUEST,
                "spec.mode",
                f"provider {provider} serves mode {mode.value}, not {request.spec.mode.value}",
            )
        ]
    field = "spec.provider" if request.spec.provider else "spec.mode"
    listed = ", ".join(allowed) or "none"
    return [
        Refusal(
            Rule.PROVIDER_NOT_ALLOWED,
            field,
            f"Tenant {tenant.name} may not use provider {provider} (allowed: {listed})",
        )
    ]


def _self_contradictions(request: TenantLoadBalancer) -> list[Refusal[Rule]]:
    spec = request.spec
    out: list[Refusal[Rule]] = []
    families = request.families()
    seen: set[int] = set()
    for i, ip in enumerate(spec.requested_ips):
        if ip.version in seen:
            out.append(
                Refusal(
                    Rule.INVALID_REQUEST,
                    f"spec.requestedIPs[{i}]",
                    f"a second IPv{ip.version} address ({ip}); at most one per family",
                )
            )
        seen.add(ip.version)
        if all(f.version != ip.version for f in families):
            out.append(
                Refusal(
                    Rule.INVALID_REQUEST,
                    f"spec.requestedIPs[{i}]",
                    f"{ip} is not of the request's families "
                    f"({', '.join(f.value for f in families)})",
                )
            )
    ports: set[tuple[str, int]] = set()
    for i, port in enumerate(spec.ports):
        pair = (port.protocol.value, port.port)
        if pair in ports:
            out.append(
                Refusal(
                    Rule.INVALID_REQUEST,
                    f"spec.ports[{i}]",
                    f"port {port.port}/{port.protocol.value} is listed twice",
                )
            )
        ports.add(pair)
    return out


_QUOTAS = (
    ("addresses", "addresses"),
    ("load_balancers", "load balancers"),
    ("ports", "ports"),
)


def _quota_refusals(tenant: Tenant, others: Usage, wanted: Usage) -> list[Refusal[Rule]]:
    out: list[Refusal[Rule]] = []
    quotas = tenant.spec.quotas
    for attr, words in _QUOTAS:
        limit: int | None = getattr(quotas, attr)
        held, more = getattr(others, attr), getattr(wanted, attr)
        if limit is not None and more and held + more > limit:
            field = {"addresses": "spec.ipFamilies", "ports": "spec.ports"}.get(attr, "spec")
            out.append(
                Refusal(
                    Rule.QUOTA_EXCEEDED,
                    field,
                    f"quota of {limit} {words} of Tenant {tenant.name} reached "
                    f"({held} held, this request needs {more})",
                )
            )
    return out


def vet_all(
    requests: Iterable[TenantLoadBalancer],
    tenants: Iterable[Tenant],
    pools: Mapping[str, AddressPool],
) -> dict[ObjectRef, list[Refusal[Rule]]]:
    """Every request vetted in the order given, quotas filled first come, first served
    (for `validate`, the webhook and standalone mode, which have no allocator state)."""
    owners = NamespaceOwners(tenants)
    used: dict[str, Usage] = {}
    keys: dict[str, set[str]] = {}
    out: dict[ObjectRef, list[Refusal[Rule]]] = {}
    for request in requests:
        owner = owners.of(request.namespace)
        if isinstance(owner, Refusal):
            out[request.ref] = [owner]
            continue
        key = request.spec.sharing_key
        shares = key is not None and key in keys.get(owner.name, set())
        others = used.get(owner.name, Usage())
        refusals = vet(request, owner, pools, others, shares=shares)
        out[request.ref] = refusals
        if not refusals:
            used[owner.name] = others + needs(request, shares=shares)
            if key is not None:
                keys.setdefault(owner.name, set()).add(key)
    return out


__all__ = ["NamespaceOwners", "Refusal", "Rule", "Usage", "needs", "tenant_of", "vet", "vet_all"]
