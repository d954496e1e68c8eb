"""Vetting one gateway object against the world: its tenant and mode, its size and
annotations, its hostnames (:mod:`.hostnames`), its kind's own rules (:mod:`.listeners`,
:mod:`.routes`), and what it would take from another tenant (hostnames, exclusive ports) or
beyond its quota. A hostname already served for another tenant is refused to the newcomer
(the older object by creationTimestamp, then name, keeps it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from teapot_lb.model.common import ObjectRef, creation_order, dump
from teapot_lb.model.gateway_api import Gateway, HTTPRoute
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.problem import Problem
from teapot_lb.model.tenancy import Tenant, TenantMode
from teapot_lb.tenancy.l7address import AddressRefusal, Wanted, is_dedicated, wanted_address
from teapot_lb.tenancy.l7vet.hostnames import hostname_refusal
from teapot_lb.tenancy.l7vet.listeners import ingress_refusals, listener_refusals
from teapot_lb.tenancy.l7vet.refusal import L7Refusal, L7Rule
from teapot_lb.tenancy.l7vet.routes import route_refusals
from teapot_lb.tenancy.l7vet.world import (
    L7Object,
    L7World,
    claimed_hostnames,
    exclusive_ports,
    older_elsewhere,
    served_here,
    source_of,
)
from teapot_lb.tenancy.refusal import Refusal
from teapot_lb.tenancy.vet import tenant_of

# Limits on what one object may ask of the shared gateway.
MAX_OBJECT_BYTES = 64 * 1024
MAX_HOSTNAMES = 32
MAX_RULES = 64
MAX_PATHS = 128
MAX_LISTENERS = 32


_SNIPPET_PREFIXES = ("haproxy.org/", "haproxy.com/", "haproxy-ingress.github.io/")


def _annotation_refusals(obj: L7Object) -> list[L7Refusal]:
    out = []
    for key in sorted(obj.metadata.annotations):
        lowered = key.lower()
        if "snippet" in lowered or lowered.startswith(_SNIPPET_PREFIXES):
            out.append(
                L7Refusal(
                    L7Rule.SNIPPET_NOT_ALLOWED,
                    f"metadata.annotations[{key}]",
                    "annotations carrying proxy configuration are not served; the gateway "
                    "renders its configuration from the spec only",
                )
            )
    return out


def _size_refusals(obj: L7Object) -> list[L7Refusal]:
    out = []
    size = len(json.dumps(dump(obj), separators=(",", ":")))
    if size > MAX_OBJECT_BYTES:
        out.append(
            L7Refusal(
                L7Rule.OVERSIZED,
                "",
                f"the object is {size} bytes; the gateway serves at most {MAX_OBJECT_BYTES}",
            )
        )
    counts: list[tuple[str, int, int]] = [("hostnames", len(claimed_hostnames(obj)), MAX_HOSTNAMES)]
    if isinstance(obj, Ingress):
        counts.append(("spec.rules", len(obj.spec.rules), MAX_RULES))
        counts.append(("paths", len(obj.backends()), MAX_PATHS))
    elif isinstance(obj, Gateway):
        counts.append(("spec.listeners", len(obj.spec.listeners), MAX_LISTENERS))
    else:
        counts.append(("spec.rules", len(obj.spec.rules), MAX_RULES))
        if isinstance(obj, HTTPRoute):
            matches = sum(len(r.matches) for r in obj.spec.rules)
            counts.append(("matches", matches, MAX_PATHS))
    for what, count, limit in counts:
        if count > limit:
            out.append(
                L7Refusal(L7Rule.OVERSIZED, what, f"{count} {what} in one object; at most {limit}")
            )
    return out


def _tenant_of_object(obj: L7Object, tenants: Sequence[Tenant]) -> Tenant | L7Refusal:
    owner = tenant_of(obj.metadata.namespace or "default", tenants)
    if isinstance(owner, Refusal):
        return L7Refusal(L7Rule(owner.rule.value), owner.field, owner.message)
    return owner


def _theft_refusals(obj: L7Object, tenant: Tenant, world: L7World) -> list[L7Refusal]:
    """Hostnames (and exclusive ports) served for another tenant by an older object."""
    mine = creation_order(obj)
    namespace = tenant.spec.namespace
    claims = world.claims
    out = []
    for where, host in claimed_hostnames(obj):
        # A name outside the tenant's domains is refused as such: whether another tenant
        # serves it is none of this tenant's business.
        if (
            host
            and older_elsewhere(claims.hosts.get(host, []), mine, namespace)
            and hostname_refusal(host, tenant, where) is None
        ):
            out.append(
                L7Refusal(
                    L7Rule.HOSTNAME_TAKEN,
                    where,
                    f"{host} is already served by the gateway for another tenant "
                    "(the first object to name a hostname keeps it)",
                )
            )
    if isinstance(obj, Gateway):
        exclusive = exclusive_ports(obj)
        for i, listener in enumerate(obj.spec.listeners):
            key = (listener.port, listener.protocol)
            if key in exclusive and older_elsewhere(claims.ports.get(key, []), mine, namespace):
                out.append(
                    L7Refusal(
                        L7Rule.PORT_TAKEN,
                        f"spec.listeners[{i}].port",
                        f"port {listener.port}/{listener.protocol} of the shared gateway is "
                        "another tenant's",
                    )
                )
    return out


def _quota_refusals(obj: Gateway, tenant: Tenant, world: L7World) -> list[L7Refusal]:
    limit = tenant.spec.quotas.ports
    if limit is None:
        return []
    mine = creation_order(obj)
    held: set[tuple[int, str]] = set()
    for other in world.objects:
        if (
            isinstance(other, Gateway)
            and other.ref != obj.ref
            and other.metadata.namespace == tenant.spec.namespace
            and served_here(other)
            and creation_order(other) < mine
        ):
            held.update(exclusive_ports(other))
    out = []
    count = len(held)
    for i, listener in enumerate(obj.spec.listeners):
        key = (listener.port, listener.protocol)
        if key not in exclusive_ports(obj) or key in held:
            continue
        held.add(key)
        count += 1
        if count > limit:
            out.append(
                L7Refusal(
                    L7Rule.QUOTA_EXCEEDED,
                    f"spec.listeners[{i}].port",
                    f"quota of {limit} ports of Tenant {tenant.name} reached "
                    f"({limit} held by older Gateways or listeners)",
                )
            )
    return out


def vet_object(obj: L7Object, world: L7World) -> list[L7Refusal]:
    """Every rule `obj` breaks (empty: the gateway may serve it). Objects outside every
    tenant's namespace and Ingresses or Gateways of other classes are not the gateway's
    and are never refused here."""
    if not served_here(obj):
        return []
    owner = _tenant_of_object(obj, world.tenants)
    if isinstance(owner, L7Refusal):
        if owner.rule is L7Rule.NO_TENANT:
            return []
        return [owner]
    tenant = owner
    out: list[L7Refusal] = []
    if TenantMode.GATEWAY not in tenant.spec.modes:
        out.append(
            L7Refusal(
                L7Rule.MODE_NOT_ALLOWED,
                "",
                f"Tenant {tenant.name} may not use the shared gateway (mode Gateway)",
            )
        )
    out += _size_refusals(obj)
    if any(r.rule is L7Rule.OVERSIZED for r in out):
        return out  # nothing more is read of an oversized object
    out += _annotation_refusals(obj)
    hostless = set(_hostless_parts(obj))
    dedicated = False
    if isinstance(obj, Ingress | Gateway):
        want = wanted_address(obj, tenant)
        if isinstance(want, AddressRefusal):
            out.append(L7Refusal(L7Rule.UNSUPPORTED_ADDRESS, want.field, want.message))
        dedicated = isinstance(want, Wanted)
    for where, host in claimed_hostnames(obj):
        if where in hostless or (dedicated and not host):
            continue  # left out, the rest served (unserved_parts); or its own address
        bad = hostname_refusal(host, tenant, where)
        out += [bad] if bad else []
    source = source_of(obj)
    if isinstance(obj, Ingress):
        out += ingress_refusals(obj, world, source)
    elif isinstance(obj, Gateway):
        out += listener_refusals(obj, world, source)
        out += _quota_refusals(obj, tenant, world)
    else:
        out += route_refusals(obj)
    out += _theft_refusals(obj, tenant, world)
    return out


def _hostless_parts(obj: L7Object) -> list[str]:
    """The fields of an Ingress's parts without a host (rules, the defaultBackend) when it
    has rules with one too: those are served and these left out. (An Ingress with no host
    at all serves nothing on the shared addresses: it is refused as a whole.)"""
    if not isinstance(obj, Ingress):
        return []
    rules = [(f"spec.rules[{i}].host", r.host) for i, r in enumerate(obj.spec.rules)]
    if not any(host for _, host in rules):
        return []
    out = [where for where, host in rules if not host]
    return out + (["spec.defaultBackend"] if obj.spec.default_backend is not None else [])


def unserved_parts(obj: L7Object, world: L7World) -> list[L7Refusal]:
    """The parts of an object the gateway leaves out while it serves the rest: an
    Ingress's rules without host and its defaultBackend, which on the shared addresses
    would catch every hostname (status, an Event and `gateway --check` say so)."""
    owner = _tenant_of_object(obj, world.tenants)
    if not served_here(obj) or isinstance(owner, L7Refusal) or is_dedicated(obj, owner):
        return []
    return [
        L7Refusal(
            L7Rule.HOSTNAME_NOT_ALLOWED,
            where,
            "without a host it would catch every hostname of the shared gateway: not "
            f"served (the Ingress's rules with a host are); name a host within the DNS "
            f"domains of Tenant {owner.name}",
        )
        for where in _hostless_parts(obj)
    ]


def vet_all(world: L7World) -> dict[ObjectRef, list[L7Refusal]]:
    """Every object of the world vetted (empty lists for the admitted)."""
    return {obj.ref: vet_object(obj, world) for obj in world.objects}


def problems_of(obj: L7Object, refusals: Iterable[L7Refusal]) -> list[Problem]:
    return [r.problem(obj.ref) for r in refusals]
