"""The objects the gateway's vetting refused, by tenant (pure): what a Tenant's status
counts as REFUSED beside the refusals decided elsewhere (:mod:`teapot_lb.manager.kube`).

Kept per namespace and updated from what a translation decided again
(:attr:`~teapot_lb.gateway.translate.Translation.changed`), so that a change costs the
objects of the namespaces it touched, not every object of every tenant.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain

from teapot_lb.gateway.translate import Changed, ObjectResult
from teapot_lb.model.common import ObjectRef


def refused_of(results: Mapping[ObjectRef, ObjectResult]) -> dict[str, frozenset[str]]:
    """The refused objects of `results` by tenant, each as `Kind/namespace/name`."""
    out: dict[str, set[str]] = {}
    for ref, outcome in results.items():
        if not outcome.accepted:
            out.setdefault(outcome.tenant, set()).add(str(ref))
    return {tenant: frozenset(keys) for tenant, keys in out.items()}


class RefusedObjects:
    """The refused objects by tenant, as the translations taken so far leave them."""

    def __init__(self) -> None:
        self._spaces: dict[str, dict[str, frozenset[str]]] = {}
        """Per namespace: its refused objects by tenant."""
        self._where: dict[str, set[str]] = {}
        """Per tenant: the namespaces holding its refused objects."""
        self._of: dict[str, frozenset[str]] = {}

    def of(self, tenant: str) -> frozenset[str]:
        """A tenant's refused objects."""
        return self._of.get(tenant, frozenset())

    def by_tenant(self) -> dict[str, frozenset[str]]:
        """Every tenant's refused objects (tenants with none left out)."""
        return dict(self._of)

    def update(self, changed: Changed) -> set[str]:
        """Take what a translation decided again; the tenants whose refused objects changed."""
        touched: set[str] = set()
        for namespace, results in changed.items():
            before = self._spaces.pop(namespace, {})
            for tenant in before:
                self._where[tenant].discard(namespace)
            now = refused_of(results)
            if now:
                self._spaces[namespace] = now
            for tenant in now:
                self._where.setdefault(tenant, set()).add(namespace)
            touched |= before.keys() | now.keys()
        moved: set[str] = set()
        for tenant in touched:
            spaces = self._where.get(tenant) or set()
            keys = frozenset(chain.from_iterable(self._spaces[ns][tenant] for ns in spaces))
            if not spaces:
                self._where.pop(tenant, None)
            if keys != self.of(tenant):
                moved.add(tenant)
            if keys:
                self._of[tenant] = keys
            else:
                self._of.pop(tenant, None)
        return moved


__all__ = ["RefusedObjects", "refused_of"]
