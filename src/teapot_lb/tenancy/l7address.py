"""A tenant's dedicated gateway address (pure): which Ingresses and Gateways ask for one,
and which address each gets from its tenant's allocation.

On the shared addresses every tenant's hostnames meet, so nothing there may catch every
hostname. A dedicated address belongs to one tenant: its host-less Ingress rules,
`spec.defaultBackend` and hostname-less HTTPRoutes are served there as the specifications
say. An object asks for one by:

- a Gateway's `spec.addresses`: one entry of type `IPAddress`, with a value (that
  address) or without (any address of the tenant's allocation, Gateway API's "assign one");
- an Ingress's annotation `lb.teapot.io/dedicated-address`: `"true"` (any address of the
  allocation), an IP (that address), `"false"` (the shared addresses);
- the Tenant's default, `spec.gateway.dedicatedAddress: true`, for objects that say nothing.

"Any address" is the tenant's dedicated address when it already has one (the lowest held
by an older object), else the first free address of its allocation: one address per tenant
unless the tenant names more. Every address is counted in the tenant's `quotas.addresses`
together with those its TenantLoadBalancers hold. Objects are taken oldest first, so an
older object keeps its address.

What can go wrong has Gateway API's reasons (`GatewayConditionReason`): `UnsupportedAddress`
(a type other than IPAddress, more than one address, an annotation that is no IP: the
object is refused), `AddressNotUsable` (outside the tenant's allocation, a shared gateway
address, held by another tenant or by one of the tenant's TenantLoadBalancers) and
`AddressNotAssigned` (quota reached, no free address): the object is accepted but not
programmed, and served nowhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import ip_address

from teapot_lb.addresses import IPAddress
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.gateway_api import Gateway
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.tenancy.allocation import allocated_ranges, is_allocated
from teapot_lb.tenancy.vet import tenant_of

ANNOTATION_DEDICATED_ADDRESS = "lb.teapot.io/dedicated-address"
ADDRESS_TYPE = "IPAddress"

# Gateway API's reasons (Gateway conditions Accepted / Programmed).
UNSUPPORTED_ADDRESS = "UnsupportedAddress"
ADDRESS_NOT_USABLE = "AddressNotUsable"
ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"

# An allocation is searched this far for a free address ("any"): an IPv6 /64 is not walked.
_SEARCH_LIMIT = 65536


@dataclass(frozen=True)
class Wanted:
    """An object's request for a dedicated address: `ip` None is any of the allocation."""

    field: str
    ip: IPAddress | None = None


@dataclass(frozen=True)
class AddressRefusal:
    """Why an object has no dedicated address: a Gateway API reason, the field, the text."""

    reason: str
    field: str
    message: str


def wanted_address(obj: Ingress | Gateway, tenant: Tenant) -> Wanted | AddressRefusal | None:
    """What `obj` asks for (None: the shared addresses); an AddressRefusal with reason
    UnsupportedAddress when it asks in a way the gateway does not serve."""
    if isinstance(obj, Gateway):
        entries = obj.spec.addresses
        if not entries:
            return Wanted("spec.gateway.dedicatedAddress") if _default(tenant) else None
        if len(entries) > 1:
            return AddressRefusal(
                UNSUPPORTED_ADDRESS,
                "spec.addresses",
                f"{len(entries)} addresses: a Gateway gets one dedicated address",
            )
        entry = entries[0]
        kind = str(entry.get("type") or ADDRESS_TYPE)
        if kind != ADDRESS_TYPE:
            return AddressRefusal(
                UNSUPPORTED_ADDRESS,
                "spec.addresses[0].type",
                f"type {kind} is not served: only {ADDRESS_TYPE} (an address of the "
                f"allocation of Tenant {tenant.name}, or no value for any of them)",
            )
        value = entry.get("value")
        return (
            _parsed("spec.addresses[0].value", str(value)) if value else Wanted("spec.addresses[0]")
        )
    where = f"metadata.annotations[{ANNOTATION_DEDICATED_ADDRESS}]"
    text = obj.metadata.annotations.get(ANNOTATION_DEDICATED_ADDRESS)
    if text is None:
        return Wanted("spec.gateway.dedicatedAddress") if _default(tenant) else None
    text = text.strip()
    if text.lower() == "false":
        return None
    if text.lower() == "true":
        return Wanted(where)
    return _parsed(where, text)


def is_dedicated(obj: object, tenant: Tenant) -> bool:
    """Whether `obj` asks for a dedicated address (served or not, it is not on the shared
    addresses, so its host-less parts are no danger to other tenants)."""
    if not isinstance(obj, Ingress | Gateway):
        return False
    return isinstance(wanted_address(obj, tenant), Wanted)


def _default(tenant: Tenant) -> bool:
    return tenant.spec.gateway.dedicated_address


def _parsed(where: str, text: str) -> Wanted | AddressRefusal:
    try:
        return Wanted(where, ip_address(text))
    except ValueError:
        return AddressRefusal(
            UNSUPPORTED_ADDRESS,
            where,
            f"{text!r} is not an IP address ('true' for any address of the allocation, "
            "'false' for the shared addresses)",
        )


@dataclass(frozen=True)
class Dedicated:
    """The dedicated addresses decided: per object its address or why it has none."""

    addresses: Mapping[ObjectRef, IPAddress]
    refused: Mapping[ObjectRef, AddressRefusal]


def assign(
    wanted: Sequence[tuple[Ingress | Gateway, Tenant, Wanted]],
    pools: Mapping[str, AddressPool],
    held: Mapping[str, frozenset[IPAddress]],
    shared: Sequence[IPAddress],
) -> Dedicated:
    """Give each request its address, in the order given (oldest first).

    `pools`: the AddressPools by name; `held`: per Tenant name the addresses its
    TenantLoadBalancers hold (they count in its quota, and are not the gateway's);
    `shared`: the gateway's own addresses."""
    owner: dict[IPAddress, str] = {}  # dedicated address -> tenant
    addresses: dict[ObjectRef, IPAddress] = {}
    refused: dict[ObjectRef, AddressRefusal] = {}
    for obj, tenant, want in wanted:
        mine = held.get(tenant.name, frozenset())
        ip = want.ip
        if ip is None:
            ip = next((a for a, t in sorted(owner.items()) if t == tenant.name), None)
        if ip is None:
            taken = {*owner, *mine, *shared, *(a for ips in held.values() for a in ips)}
            ip = next((a for a in _candidates(tenant, pools) if a not in taken), None)
            if ip is None:
                refused[obj.ref] = AddressRefusal(
                    ADDRESS_NOT_ASSIGNED,
                    want.field,
                    f"no free address in the allocation of Tenant {tenant.name}",
                )
                continue
        why = _unusable(ip, tenant, pools, mine, shared, owner)
        if why is not None:
            refused[obj.ref] = AddressRefusal(ADDRESS_NOT_USABLE, want.field, why)
            continue
        limit = tenant.spec.quotas.addresses
        counted = {*mine, *(a for a, t in owner.items() if t == tenant.name)}
        if limit is not None and ip not in counted and len(counted) + 1 > limit:
            refused[obj.ref] = AddressRefusal(
                ADDRESS_NOT_ASSIGNED,
                want.field,
                f"quota of {limit} addresses of Tenant {tenant.name} reached ({len(counted)} "
                "held by its load balancers and older gateway objects, this one needs 1)",
            )
            continue
        owner[ip] = tenant.name
        addresses[obj.ref] = ip
    return Dedicated(addresses, refused)


def _unusable(
    ip: IPAddress,
    tenant: Tenant,
    pools: Mapping[str, AddressPool],
    mine: frozenset[IPAddress],
    shared: Sequence[IPAddress],
    owner: Mapping[IPAddress, str],
) -> str | None:
    if ip in shared:
        return f"{ip} is a shared address of the gateway, every tenant's"
    if owner.get(ip, tenant.name) != tenant.name:
        return f"{ip} is another tenant's dedicated gateway address"
    if not is_allocated(ip, tenant, pools):
        names = ", ".join(a.address_pool for a in tenant.spec.allocations) or "none"
        return f"{ip} is outside the allocation of Tenant {tenant.name} (AddressPools {names})"
    if ip in mine:
        return f"{ip} is held by a TenantLoadBalancer of Tenant {tenant.name}"
    return None


def held_addresses(
    tenants: Iterable[Tenant], requests: Iterable[TenantLoadBalancer]
) -> dict[str, frozenset[IPAddress]]:
    """Per Tenant name, the addresses its TenantLoadBalancers hold (their status)."""
    tenants = list(tenants)
    out: dict[str, set[IPAddress]] = {}
    for request in requests:
        owner = tenant_of(request.namespace, tenants)
        if not isinstance(owner, Tenant) or request.status is None:
            continue
        for text in request.status.addresses:
            with contextlib.suppress(ValueError):
                out.setdefault(owner.name, set()).add(ip_address(text))
    return {name: frozenset(ips) for name, ips in out.items()}


def _candidates(tenant: Tenant, pools: Mapping[str, AddressPool]) -> Iterator[IPAddress]:
    """The tenant's allocation in order, each address its pool may hand out."""
    for name, ranges in sorted(allocated_ranges(tenant, pools).items()):
        pool = pools[name]
        for rng in ranges:
            first = int(rng.first)
            for n in range(first, min(int(rng.last), first + _SEARCH_LIMIT - 1) + 1):
                ip = type(rng.first)(n)
                if pool.contains(ip):
                    yield ip


__all__ = [
    "ADDRESS_NOT_ASSIGNED",
    "ADDRESS_NOT_USABLE",
    "ANNOTATION_DEDICATED_ADDRESS",
    "UNSUPPORTED_ADDRESS",
    "AddressRefusal",
    "Dedicated",
    "Wanted",
    "assign",
    "held_addresses",
    "is_dedicated",
    "wanted_address",
]
