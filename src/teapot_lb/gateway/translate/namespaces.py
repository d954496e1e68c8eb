"""The inputs by tenant namespace: whose namespace it is, its objects, slices and Secrets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7vet import L7Object, L7World, served_here
from teapot_lb.tenancy.vet import tenant_of

from .vetting import object_order


def tenant_namespaces(tenants: Sequence[Tenant]) -> dict[str, Tenant | None]:
    """Per tenant namespace its one Tenant (None: claimed by several, nobody's objects)."""
    out: dict[str, Tenant | None] = {}
    for t in tenants:
        owner = tenant_of(t.spec.namespace, tenants)
        out[t.spec.namespace] = owner if isinstance(owner, Tenant) else None
    return out


def by_namespace(
    world: L7World, slices: Iterable[KubeObject], *, ordered: bool = True
) -> dict[str, tuple[list[L7Object], list[KubeObject], dict[str, Mapping[str, bytes]]]]:
    """Each namespace's served objects (in :func:`~.vetting.object_order`, or as given), slices and
    Secrets."""
    out: dict[str, tuple[list[L7Object], list[KubeObject], dict[str, Mapping[str, bytes]]]] = {}

    def of(namespace: str) -> tuple[list[L7Object], list[KubeObject], dict[str, Any]]:
        return out.setdefault(namespace, ([], [], {}))

    for obj in world.objects:
        if served_here(obj):
            of(obj.metadata.namespace or "")[0].append(obj)
    for eps in slices:
        of(eps.get("metadata", {}).get("namespace") or "")[1].append(eps)
    for key, data in (world.secrets or {}).items():
        of(key.partition("/")[0])[2][key] = data
    for objects, _, _ in out.values() if ordered else ():
        objects.sort(key=object_order)
    return out


__all__ = ["by_namespace", "tenant_namespaces"]
