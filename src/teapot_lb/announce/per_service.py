"""A per-Service result kept between calls while its inputs stay the same (pure): the
Service (by a version token, :class:`Versions`), its EndpointSlices when it is `Local`
(only which nodes have a ready endpoint counts), the shared objects of the kinds a result
reads, and the options. When only Nodes changed, the caller says which Services they can
affect (:data:`Affected`). :class:`~teapot_lb.announce.cache.PlanCache` holds three."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from teapot_lb.announce.election import exclusion
from teapot_lb.cluster import ClusterView
from teapot_lb.cluster.changes import EVERY_KEY, ChangeLog
from teapot_lb.cluster.view import Assigned
from teapot_lb.kept import by_name
from teapot_lb.model import ExternalTrafficPolicy, Node, Service
from teapot_lb.model.common import LabelSelector, matches_any
from teapot_lb.model.kinds import Kind

_T = TypeVar("_T")
# Node names whose candidacy may have changed: (entering or changed, only leaving) → the
# Service keys to plan again, or None for every Service.
Affected = Callable[[set[str], set[str]], set[str] | None]


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


class _Version:
    """One Service value's token (its identity): holds the newest object of that value
    and what was assigned to it in this process (:attr:`ClusterView.assigned`), which
    keeps that value's identity unique while it is compared by it."""

    __slots__ = ("assigned", "service")

    def __init__(self, service: Service, assigned: Assigned | None) -> None:
        self.service = service
        self.assigned = assigned


class Versions:
    """A token per Service key that changes only when the Service's value does: an equal
    object put again keeps the token, so the equality test runs once per new object, not
    once per cache that holds the Service. (One object per Service: a pair of the Service
    and a token object weighed twice as much.)"""

    def __init__(self) -> None:
        self._seen: dict[str, _Version] = {}

    def of(self, key: str, svc: Service, assigned: Assigned | None) -> object:
        seen = self._seen.get(key)
        if seen is not None and _same(seen.service, svc) and _same(seen.assigned, assigned):
            seen.service, seen.assigned = svc, assigned
            return seen
        token = self._seen[key] = _Version(svc, assigned)
        return token

    def forget(self, key: str) -> None:
        self._seen.pop(key, None)

    def keep(self, keys: Mapping[str, object]) -> None:
        """Forget Services that are gone."""
        if len(self._seen) > len(keys) or any(k not in keys for k in self._seen):
            self._seen = {k: v for k, v in self._seen.items() if k in keys}


@dataclass(slots=True)
class _Entry(Generic[_T]):
    version: object
    slices: tuple[object, ...] | None
    ready: frozenset[str] | None
    result: _T


class PerService(Generic[_T]):
    """Results per Service key, valid while the Service, its EndpointSlices (when the
    Service is Local) and the shared inputs stay the same.

    When two calls' views come from the same Store, its change log names the Services and
    EndpointSlices that changed in between: only those are looked at (the others keep their
    result without a lookup), so one change costs one Service's work plus handing back the
    kept results.

    `reuse(old, new)`: a Service's result computed again, given its previous one (also
    when the previous is no longer valid: the options changed), may hand back parts of
    the previous that are equal, so that what other holders kept of it stays the one
    copy (None: the new result as computed)."""

    def __init__(
        self,
        versions: Versions,
        reuse: Callable[[_T, _T], _T] | None = None,
        empty: _T | None = None,
    ) -> None:
        self._versions = versions
        self._reuse = reuse
        # The result most Services have (`()`: no L2 IP, no VRRP instance): an entry with it
        # (not Local) is held as its version token alone, not as an _Entry (at 100k
        # Services, most of two tables).
        self._empty = empty
        self._scope: tuple[object, ...] | None = None
        self._live: frozenset[str] | None = None
        self._shared: tuple[tuple[tuple[str, object], ...], ...] | None = None
        self._nodes: dict[str, tuple[object, object]] = {}  # for _shared_of
        self._entries: dict[str, _Entry[_T] | object] = {}
        # The held keys in order, and their results in the same order.
        self._keys: list[str] = []
        self._results: list[_T] = []
        # The change log of the last call's view, and its mark.
        self._seen: tuple[ChangeLog, int] | None = None
        # What the last call changed: (key, old result, new result), None for none; or None
        # when it walked every Service (a consumer then starts again from the results).
        self.delta: list[tuple[str, _T | None, _T | None]] | None = None
        self.computed = 0
        # The keys the last call planned again only because other nodes came, went or
        # changed (their own inputs the same): a result may then start from its last one.
        self.by_other_nodes: set[str] = set()

    def _computed(
        self,
        key: str,
        svc: Service,
        version: object,
        slices: tuple[object, ...] | None,
        view: ClusterView,
        compute: Callable[[str, Service], _T],
        previous: _Entry[_T] | None,
    ) -> _Entry[_T]:
        self.computed += 1
        result = compute(key, svc)
        if previous is not None and self._reuse is not None:
            result = self._reuse(previous.result, result)
        return _Entry(version, slices, _ready(view, key, slices), result)

    def ready_of(self, key: str) -> frozenset[str] | None:
        """The nodes with a ready endpoint of a held Local Service (None: not Local, or not
        held)."""
        entry = self._held(key)
        return None if entry is None else entry.ready

    def _held(
        self, key: str, entries: dict[str, _Entry[_T] | object] | None = None
    ) -> _Entry[_T] | None:
        """The entry held for `key` (in `entries`, else the current table)."""
        held = (self._entries if entries is None else entries).get(key)
        if held is None or isinstance(held, _Entry):
            return held
        assert self._empty is not None  # (only then is a token held alone)
        return _Entry(held, None, None, self._empty)

    def _kept(self, entry: _Entry[_T]) -> _Entry[_T] | object:
        """What the table holds of `entry` (see `_empty`)."""
        empty = self._empty
        if empty is not None and entry.slices is None and entry.result == empty:
            return entry.version
        return entry

    def kept(self) -> Iterator[_T]:
        """The last call's results, in key order."""
        return iter(self._results)

    def items(self) -> Iterator[tuple[str, _T]]:
        """The last call's (key, result) pairs, in key order."""
        return zip(self._keys, self._results, strict=True)

    def held(self) -> list[str]:
        """The Service keys held (those of the last call)."""
        return sorted(self._entries)

    def results(
        self,
        view: ClusterView,
        scope: tuple[object, ...],
        kinds: tuple[Kind, ...],
        compute: Callable[[str, Service], _T],
        *,
        live: frozenset[str] | None = None,
        affected: Affected | None = None,
    ) -> Iterator[_T]:
        """Each Service's result in key order, computing only those that may have changed.

        `live`: the live speakers the results depend on (None: all assumed alive).
        `affected`: when only other nodes changed (their Node objects, or which are alive),
        the Services whose results that may change; without it such a change (as any
        change of a shared input) has every Service planned again."""
        forced: set[str] = set()
        self.by_other_nodes = set()
        touched = self._touched(view, scope, kinds, live, affected, forced)
        if touched is None:
            self.delta = None
            previous = self._entries
            if live != self._live:
                self._entries = {}  # every result may depend on who is alive
            self._walk(view, scope, kinds, compute, previous)
        else:
            self.delta = []
            self._update(view, touched, compute, forced)
        self._live = live
        self._seen = view.changes
        return iter(self._results)

    def _touched(
        self,
        view: ClusterView,
        scope: tuple[object, ...],
        kinds: tuple[Kind, ...],
        live: frozenset[str] | None,
        affected: Affected | None,
        forced: set[str],
    ) -> set[str] | None:
        """The Service keys whose inputs may have changed since the last call, or None when
        that is not known cheaply (or shared inputs changed): then every Service is walked.
        `forced`: filled with the keys to plan again although their own inputs are the
        same (other nodes changed)."""
        seen, now = self._seen, view.changes
        if seen is None or now is None or seen[0] is not now[0] or scope != self._scope:
            return None
        entering: set[str] = set()
        leaving: set[str] = set()
        if live != self._live:
            if affected is None or live is None or self._live is None:
                return None
            entering |= live - self._live
            leaving |= self._live - live
        changes = now[0].between(seen[1], now[1])
        if changes is None:
            return None
        touched: set[str] = set()
        shared_changed = False
        for change in changes:
            if change.kind is Kind.SERVICE or change.kind is Kind.ENDPOINT_SLICE:
                if change.key == EVERY_KEY:
                    return None
                if change.kind is Kind.SERVICE:
                    touched.add(change.key)
                else:
                    touched.update(change.services)
            elif change.kind in kinds:
                shared_changed = True
        if shared_changed:
            shared = _shared_of(view, kinds, self._nodes)
            if not _same_shared(self._shared, shared):
                nodes = (
                    None
                    if affected is None
                    else _nodes_only(self._shared, shared, kinds, _node_selectors(view, kinds))
                )
                if nodes is None:
                    return None
                entering |= nodes[0]
                leaving |= nodes[1]
        if entering or leaving:
            assert affected is not None
            more = affected(entering, leaving)
            if more is None:
                return None
            self.by_other_nodes = more - touched
            forced |= more
            touched |= more
        if shared_changed:
            self._shared = shared
        return touched

    def _walk(
        self,
        view: ClusterView,
        scope: tuple[object, ...],
        kinds: tuple[Kind, ...],
        compute: Callable[[str, Service], _T],
        previous: dict[str, _Entry[_T] | object],
    ) -> None:
        shared = _shared_of(view, kinds, self._nodes)
        if scope != self._scope or not _same_shared(self._shared, shared):
            self._entries = {}
        self._scope, self._shared = scope, shared
        services = view.services
        old = self._entries
        entries: dict[str, _Entry[_T] | object] = {}
        results: list[_T] = []
        keys = sorted(services)
        for key in keys:
            held = self._held(key, old)
            before = held if previous is old else self._held(key, previous)
            entry = self._entry(view, key, services[key], held, compute, before)
            entries[key] = self._kept(entry)
            results.append(entry.result)
        # Services that disappeared are dropped with the old table.
        self._entries = entries
        self._keys = keys
        self._results = results
        self._versions.keep(services)

    def _update(
        self,
        view: ClusterView,
        touched: set[str],
        compute: Callable[[str, Service], _T],
        forced: set[str],
    ) -> None:
        services = view.services
        delta = self.delta
        assert delta is not None
        for key in sorted(touched):
            at = bisect_left(self._keys, key)
            held = at < len(self._keys) and self._keys[at] == key
            svc = services.get(key)
            if svc is None:
                if held:
                    delta.append((key, self._results[at], None))
                    del self._keys[at], self._results[at], self._entries[key]
                self._versions.forget(key)
                continue
            kept = self._held(key)
            entry = self._entry(view, key, svc, None if key in forced else kept, compute, kept)
            self._entries[key] = self._kept(entry)
            if held:
                if self._results[at] is not entry.result:
                    delta.append((key, self._results[at], entry.result))
                self._results[at] = entry.result
            else:
                delta.append((key, None, entry.result))
                self._keys.insert(at, key)
                self._results.insert(at, entry.result)

    def _entry(
        self,
        view: ClusterView,
        key: str,
        svc: Service,
        entry: _Entry[_T] | None,
        compute: Callable[[str, Service], _T],
        previous: _Entry[_T] | None,
    ) -> _Entry[_T]:
        """`entry`: the Service's entry if still valid for the shared inputs; `previous`:
        its last entry, valid or not (for `reuse`)."""
        version = self._versions.of(key, svc, view.assigned.get(key))
        local = svc.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
        slices = tuple(view.slices_of(key)) if local else None
        if entry is None or entry.version is not version:
            return self._computed(key, svc, version, slices, view, compute, previous)
        if not _same_slices(entry.slices, slices):
            # Endpoints changed; the plan reads only which nodes have a ready one.
            ready = _ready(view, key, slices)
            if ready != entry.ready:
                return self._computed(key, svc, version, slices, view, compute, previous)
            entry.slices = slices
        return entry


def _shared_of(
    view: ClusterView, kinds: tuple[Kind, ...], nodes: dict[str, tuple[object, object]]
) -> tuple[tuple[tuple[str, object], ...], ...]:
    """What the decisions read of the objects of `kinds`, by kind and key. `nodes`: each
    Node's value kept (by the caller, between calls) while the view holds the same Node
    object (1,000 Nodes a step: their conditions walked once per Node object, and an
    unchanged one compared by identity)."""
    out = []
    for k in kinds:
        if k is Kind.NODE:
            values = by_name(view.of_kind(k), nodes, lambda node: _shared_value(Kind.NODE, node))
            out.append(tuple(sorted(values.items())))
        else:
            out.append(
                tuple((key, _shared_value(k, o)) for key, o in sorted(view.of_kind(k).items()))
            )
    return tuple(out)


def _same_shared(
    old: tuple[tuple[tuple[str, object], ...], ...] | None,
    new: tuple[tuple[tuple[str, object], ...], ...],
) -> bool:
    return old is not None and all(_same_items(o, n) for o, n in zip(old, new, strict=True))


def _nodes_only(
    old: tuple[tuple[tuple[str, object], ...], ...] | None,
    new: tuple[tuple[tuple[str, object], ...], ...],
    kinds: tuple[Kind, ...],
    selectors: list[Sequence[LabelSelector]],
) -> tuple[set[str], set[str]] | None:
    """When only Nodes differ between two sets of shared inputs: the names of the Nodes
    that appeared or changed in what decides their candidacy (`selectors` — the node
    selectors of the other shared objects — match them otherwise, or their exclusion
    differs), and of those that went; else None."""
    if old is None:
        return None
    changed: set[str] = set()
    gone: set[str] = set()
    for kind, o, n in zip(kinds, old, new, strict=True):
        if _same_items(o, n):
            continue
        if kind is not Kind.NODE:
            return None
        before, after = dict(o), dict(n)
        gone |= before.keys() - after.keys()
        changed |= {
            k
            for k, v in after.items()
            if k not in before
            or not (_same(before[k], v) or _same_candidacy(before[k], v, selectors))
        }
    return changed, gone


def _node_selectors(view: ClusterView, kinds: tuple[Kind, ...]) -> list[Sequence[LabelSelector]]:
    """The node selectors of the shared objects but Nodes (advertisements, BGP peers): with
    a Node's exclusion, all a decision reads of another Node's labels."""
    out: list[Sequence[LabelSelector]] = []
    for kind in kinds:
        if kind is not Kind.NODE:
            for obj in view.of_kind(kind).values():
                found = getattr(getattr(obj, "spec", None), "node_selectors", None)
                if isinstance(found, list):
                    out.append(found)
    return out


def _same_candidacy(
    before: object, after: object, selectors: list[Sequence[LabelSelector]]
) -> bool:
    """Two values of one Node (:func:`_shared_value`) that every selector matches alike
    and that exclude it for the same reason (or not at all): no plan can tell them apart
    (a label no advertisement selects by, a label value changed that no selector looks
    at)."""
    if not (isinstance(before, tuple) and isinstance(after, tuple)):
        return False
    (labels_a, unavailable_a), (labels_b, unavailable_b) = before, after
    a, b = dict(labels_a), dict(labels_b)
    return exclusion(a, unavailable_a) == exclusion(b, unavailable_b) and all(
        matches_any(s, a) == matches_any(s, b) for s in selectors
    )


def _ready(view: ClusterView, key: str, slices: tuple[object, ...] | None) -> frozenset[str] | None:
    return None if slices is None else frozenset(view.ready_endpoint_nodes(key))


def _same_slices(a: tuple[object, ...] | None, b: tuple[object, ...] | None) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
