"""A tenant's objects vetted (refusals, parts left out, the dedicated address asked
for), in the order they are taken."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from teapot_lb.model.gateway_api import Gateway
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7address import Wanted, wanted_address
from teapot_lb.tenancy.l7vet import L7Object, L7Refusal, L7World, unserved_parts, vet_object


@dataclass(frozen=True)
class Vetted:
    """One object of a tenant as vetting left it: its refusals, the parts left out (when
    accepted) and the dedicated address it asks for (None: the shared ones)."""

    obj: L7Object
    owner: Tenant
    refusals: tuple[L7Refusal, ...]
    dropped: tuple[L7Refusal, ...]
    want: Wanted | None

    @property
    def order(self) -> ObjectOrder:
        return object_order(self.obj)


ObjectOrder = tuple[int, str, str, str, str]


def object_order(obj: L7Object) -> ObjectOrder:
    """The order objects are taken in: Gateways before routes, then oldest first
    (creationTimestamp, namespace, name, kind)."""
    return (0 if isinstance(obj, Gateway) else 1, *_order(obj), obj.kind)


def vet_tenant(objects: Iterable[L7Object], owner: Tenant, world: L7World) -> tuple[Vetted, ...]:
    """The tenant's served objects (in :func:`object_order`) vetted against `world` (every
    object that can take one of their hostnames or ports: all of them, or a part that
    holds those)."""
    out = []
    for obj in objects:
        refusals = tuple(vet_object(obj, world))
        dropped = () if refusals else tuple(unserved_parts(obj, world))
        want = wanted_address(obj, owner) if isinstance(obj, Ingress | Gateway) else None
        out.append(
            Vetted(obj, owner, refusals, dropped, want if isinstance(want, Wanted) else None)
        )
    return tuple(out)


def dedicated_wanted(
    vetted: Iterable[Vetted],
) -> list[tuple[Ingress | Gateway, Tenant, Wanted]]:
    """What :func:`~teapot_lb.tenancy.l7address.assign` takes: the accepted objects asking
    for a dedicated address, oldest first."""
    wanted = sorted((v for v in vetted if v.want is not None and not v.refusals), key=_vet_order)
    return [(v.obj, v.owner, v.want) for v in wanted if isinstance(v.obj, Ingress | Gateway)
            and v.want is not None]  # fmt: skip


def _vet_order(v: Vetted) -> ObjectOrder:
    return v.order


def _order(obj: L7Object) -> tuple[str, str, str]:
    created = obj.metadata.creation_timestamp
    return (created.isoformat() if created else "~", obj.metadata.namespace or "", obj.name)


__all__ = ["ObjectOrder", "Vetted", "dedicated_wanted", "object_order", "vet_tenant"]
