"""Incremental planning: per-Service plan results kept between calls (pure).

:func:`~teapot_lb.announce.plan.plan` and
:func:`~teapot_lb.announce.plan.l2_election_orders` decide per Service; with a
:class:`PlanCache` a Service is decided again only when its inputs may have changed: the
Service itself, its EndpointSlices (when it is `Local`), or any object of the kinds every
decision reads (:data:`PLAN_KINDS`, from the kind registry), or the node and options. The
result is exactly the uncached one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from teapot_lb.cluster import ClusterView
from teapot_lb.model import ExternalTrafficPolicy, Node, Service
from teapot_lb.model.kinds import KINDS, Kind

if TYPE_CHECKING:
    from teapot_lb.announce.plan import Announcement, Decision

_T = TypeVar("_T")

# What a per-Service decision reads besides the Service and its EndpointSlices: when any of
# these (or the node, or the options) differs from the previous call, everything is planned
# again. The kind registry says which kinds the planner reads (`planned`); Namespaces and
# Secrets are not read by it.
PLAN_KINDS = tuple(info.kind for info in KINDS if info.planned)
L2_KINDS = (Kind.NODE, Kind.ADDRESS_POOL, Kind.L2_ADVERTISEMENT)


def _shared_value(kind: Kind, obj: object) -> object:
    """What the planner reads of a shared object. Nodes change often (status, resourceVersion)
    without changing what the planner reads of them: their labels and network condition."""
    if kind is Kind.NODE and isinstance(obj, Node):
        return (tuple(sorted(obj.labels.items())), obj.network_unavailable)
    return obj


def _same(a: object, b: object) -> bool:
    # Objects are immutable in practice (the Store replaces, never edits): identity is the
    # fast answer; equality catches an equal object put again (a re-list, a reload).
    return a is b or a == b


def _same_items(old: tuple[tuple[str, object], ...], new: tuple[tuple[str, object], ...]) -> bool:
    return len(old) == len(new) and all(
        ok == nk and _same(ov, nv) for (ok, ov), (nk, nv) in zip(old, new, strict=True)
    )


class _Versions:
    """A token per Service key that changes only when the Service's value does: an equal
    object put again keeps the token, so the equality test runs once per new object, not
    once per cache that holds the Service."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Service, object]] = {}

    def of(self, key: str, svc: Service) -> object:
        seen = self._seen.get(key)
        token = seen[1] if seen is not None and _same(seen[0], svc) else object()
        self._seen[key] = (svc, token)  # holding the object keeps its identity unique
        return token

    def keep(self, keys: Mapping[str, object]) -> None:
        """Forget Services that are gone."""
        if len(self._seen) > len(keys) or any(k not in keys for k in self._seen):
            self._seen = {k: v for k, v in self._seen.items() if k in keys}


@dataclass
class _Entry(Generic[_T]):
    version: object
    slices: tuple[object, ...] | None
    ready: frozenset[str] | None
    result: _T


class _PerService(Generic[_T]):
    """Results per Service key, valid while the Service, its EndpointSlices (when the
    Service is Local) and the shared inputs stay the same."""

    def __init__(self, versions: _Versions) -> None:
        self._versions = versions
        self._scope: tuple[object, ...] | None = None
        self._shared: tuple[tuple[tuple[str, object], ...], ...] | None = None
        self._entries: dict[str, _Entry[_T]] = {}
        self.computed = 0

    def _computed(
        self,
        key: str,
        svc: Service,
        version: object,
        slices: tuple[object, ...] | None,
        view: ClusterView,
        compute: Callable[[str, Service], _T],
    ) -> _Entry[_T]:
        self.computed += 1
        return _Entry(version, slices, _ready(view, key, slices), compute(key, svc))

    def held(self) -> list[str]:
        """The Service keys held (those of the last call)."""
        return sorted(self._entries)

    def results(
        self,
        view: ClusterView,
        scope: tuple[object, ...],
        kinds: tuple[Kind, ...],
        compute: Callable[[str, Service], _T],
    ) -> Iterator[_T]:
        """Each Service's result in key order, computing only those that may have changed."""
        shared = tuple(
            tuple((key, _shared_value(k, obj)) for key, obj in sorted(view.of_kind(k).items()))
            for k in kinds
        )
        if (
            scope != self._scope
            or self._shared is None
            or not all(_same_items(o, n) for o, n in zip(self._shared, shared, strict=True))
        ):
            self._entries = {}
        self._scope, self._shared = scope, shared
        services = view.services
        old = self._entries
        entries: dict[str, _Entry[_T]] = {}
        for key in sorted(services):
            svc = services[key]
            version = self._versions.of(key, svc)
            local = svc.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
            slices = tuple(view.slices_of(key)) if local else None
            entry = old.get(key)
            if entry is None or entry.version is not version:
                entry = self._computed(key, svc, version, slices, view, compute)
            elif not _same_slices(entry.slices, slices):
                # Endpoints changed; the plan reads only which nodes have a ready one.
                ready = _ready(view, key, slices)
                if ready != entry.ready:
                    entry = self._computed(key, svc, version, slices, view, compute)
                else:
                    entry.slices = slices
            entries[key] = entry
            yield entry.result
        # Services that disappeared are dropped with the old table.
        self._entries = entries
        self._versions.keep(services)


def _ready(view: ClusterView, key: str, slices: tuple[object, ...] | None) -> frozenset[str] | None:
    return None if slices is None else frozenset(view.ready_endpoint_nodes(key))


def _same_slices(a: tuple[object, ...] | None, b: tuple[object, ...] | None) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))


class PlanCache:
    """Per-Service results kept between calls of :func:`plan` and :func:`l2_election_orders`
    for one node, so that one changed Service costs one Service's planning.

    Pass the same instance with every call (``plan(view, node, options, cache=c)``); the
    result is exactly the uncached one. `computed`: how many Services were (re)planned.
    """

    def __init__(self) -> None:
        versions = _Versions()
        self.plans: _PerService[tuple[frozenset[Announcement], tuple[Decision, ...]]] = _PerService(
            versions
        )
        self.orders: _PerService[tuple[tuple[str, tuple[str, ...]], ...]] = _PerService(versions)

    @property
    def computed(self) -> int:
        return self.plans.computed

    @property
    def orders_computed(self) -> int:
        return self.orders.computed
