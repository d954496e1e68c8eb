"""Incremental planning: per-Service plan results kept between calls (pure).

:func:`~teapot_lb.announce.plan.plan` and
:func:`~teapot_lb.announce.plan.l2_election_orders` decide per Service; with a
:class:`PlanCache` a Service is decided again only when its inputs may have changed: the
Service itself, its EndpointSlices (when it is `Local`), or any object of the kinds every
decision reads (:data:`PLAN_KINDS`, from the kind registry), or the node and options. The
result is exactly the uncached one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from teapot_lb.announce.election import exclusion, scored_as
from teapot_lb.cluster import ClusterView
from teapot_lb.cluster.changes import EVERY_KEY, ChangeLog
from teapot_lb.cluster.view import Assigned
from teapot_lb.kept import by_name
from teapot_lb.model import ExternalTrafficPolicy, Node, Service
from teapot_lb.model.common import LabelSelector, matches_any
from teapot_lb.model.kinds import KINDS, Kind

if TYPE_CHECKING:
    from teapot_lb.announce.plan import (
        Announcement,
        Decision,
        Mode,
        SharedCandidates,
        VIPMembership,
    )

_T = TypeVar("_T")
# One election a Service's plan ran: the IP (as election.suffix hashes it), the nodes it
# chose (the L2 owner, or the maxNodesPerIP set), and the score a node entering the
# candidates must beat to change that (None: any newcomer changes it).
Election = tuple[bytes, tuple[str, ...], bytes | None]
# Node names whose candidacy may have changed: (entering or changed, only leaving) → the
# Service keys to plan again, or None for every Service.
Affected = Callable[[set[str], set[str]], set[str] | None]

# What a per-Service decision reads besides the Service and its EndpointSlices: when any of
# these (or the node, or the options) differs from the previous call, everything is planned
# again. The kind registry says which kinds the planner reads (`planned`); Namespaces and
# Secrets are not read by it.
PLAN_KINDS = tuple(info.kind for info in KINDS if info.planned)
L2_KINDS = (Kind.NODE, Kind.ADDRESS_POOL, Kind.L2_ADVERTISEMENT)
VIP_KINDS = (Kind.NODE, Kind.ADDRESS_POOL, Kind.VIP_ADVERTISEMENT)


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


class _Versions:
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


class _PerService(Generic[_T]):
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
        versions: _Versions,
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


# A Service's announcements (each once: a tuple, a fraction of a small frozenset's size)
# and its decisions.
_PlanResult = tuple[tuple["Announcement", ...], tuple["Decision", ...]]


def _same_announcements(old: _PlanResult, new: _PlanResult) -> _PlanResult:
    """A Service planned again announces, most often, what it did (a BGP session came up:
    every Service is planned again, its routes are the same): keep the announcements made
    before, which the backends' tables hold, rather than a second equal copy of each
    (~190 bytes a BGP route)."""
    return (old[0], new[1]) if old[0] == new[0] else new


@dataclass(frozen=True)
class PlanDelta:
    """What one plan changed in the announcements of the plan before it (from the same
    cache): the backends apply this instead of comparing every announcement."""

    added: frozenset[Announcement]
    removed: frozenset[Announcement]

    def of_mode(self, mode: Mode) -> tuple[list[Announcement], list[Announcement]]:
        """The added and the removed announcements of one mode."""
        return [a for a in self.added if a.mode is mode], [
            a for a in self.removed if a.mode is mode
        ]


class PlanTotals:
    """The union of the kept per-Service plans, changed by what each call changed: the
    announcements (counted, as two Services may announce the same), per mode, and each
    Service's decisions (with the keys that have some, in key order: a new Service costs
    an insertion into that list, not a new table of every Service)."""

    def __init__(self) -> None:
        self.counts: dict[Announcement, int] = {}
        self.by_mode: dict[Mode, set[Announcement]] = {}
        self.by_service: dict[str, tuple[Decision, ...]] = {}
        # The keys that have decisions, in key order, and their decisions in the same order
        # (what a plan hands out is built from these two lists at C speed).
        self._order: list[str] = []
        self._decisions: list[tuple[Decision, ...]] = []
        # The Services whose results changed since the last take_changed(); None: unknown
        # (a rebuild), every Service may have.
        self._changed: set[str] | None = None
        # The announcements that appeared and disappeared since the last take_delta() (an
        # announcement that went and came back is in neither); None: unknown (a rebuild).
        self._added: set[Announcement] | None = None
        self._removed: set[Announcement] = set()

    def take_delta(self) -> PlanDelta | None:
        """What changed in the announcements since the previous call, or None when that is
        not known (a rebuild: compare everything)."""
        added, removed = self._added, self._removed
        self._added, self._removed = set(), set()
        return None if added is None else PlanDelta(frozenset(added), frozenset(removed))

    def take_changed(self) -> frozenset[str] | None:
        """The Service keys whose decisions may have changed since the previous call (for
        one consumer: the node's reporting), or None when that is not known (a rebuild)."""
        changed, self._changed = self._changed, set()
        return None if changed is None else frozenset(changed)

    def rebuild(self, results: Iterator[_PlanResult]) -> None:
        self._changed = None
        self._added = None
        self.counts, self.by_mode, self.by_service = {}, {}, {}
        for anns, decs in results:
            self._count(anns, 1)
            if decs:
                self.by_service[decs[0].service] = decs
        self._order = list(self.by_service)  # the results come in key order
        self._decisions = list(self.by_service.values())

    def apply(self, delta: list[tuple[str, _PlanResult | None, _PlanResult | None]]) -> None:
        """Apply one call's changes."""
        by_service, order, in_order = self.by_service, self._order, self._decisions
        if self._changed is not None:
            self._changed.update(key for key, _, _ in delta)
        for key, old, new in delta:
            if old is not None:
                self._count(old[0], -1)
            decs: tuple[Decision, ...] = ()
            if new is not None:
                self._count(new[0], 1)
                decs = new[1]
            at = bisect_left(order, key)
            held = at < len(order) and order[at] == key
            if not decs:
                if held:
                    del by_service[key], order[at], in_order[at]
                continue
            if held:
                in_order[at] = decs
            else:
                order.insert(at, key)
                in_order.insert(at, decs)
            by_service[key] = decs

    def ordered(self) -> Mapping[str, tuple[Decision, ...]]:
        """Each Service's decisions, in key order: a view of the kept ones (no copy), which
        the next change of these totals changes too."""
        return _InKeyOrder(self._order, self.by_service)

    def decisions(self) -> Sequence[Decision]:
        """Every Service's decisions, one after the other in key order (a view, as
        :meth:`ordered`)."""
        return _Chained(self._decisions)

    def _count(self, anns: tuple[Announcement, ...], step: int) -> None:
        counts, added, removed = self.counts, self._added, self._removed
        for a in anns:
            n = counts.get(a, 0) + step
            if n:
                counts[a] = n
            else:
                del counts[a]
            if n == 0:
                self.by_mode[a.mode].discard(a)
                if added is not None:
                    if a in added:
                        added.discard(a)
                    else:
                        removed.add(a)
            elif n == 1 and step == 1:
                self.by_mode.setdefault(a.mode, set()).add(a)
                if added is not None:
                    if a in removed:
                        removed.discard(a)
                    else:
                        added.add(a)


class _InKeyOrder(Mapping[str, "tuple[Decision, ...]"]):
    """A read-only view of a dict, iterated in the order of a kept key list."""

    def __init__(self, order: list[str], values: dict[str, tuple[Decision, ...]]) -> None:
        self._order, self._values = order, values

    def __getitem__(self, key: str) -> tuple[Decision, ...]:
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


class _Chained(Sequence["Decision"]):
    """A read-only view of a list of tuples as one sequence (equal to any sequence of the
    same items, a tuple included)."""

    def __init__(self, parts: list[tuple[Decision, ...]]) -> None:
        self._parts = parts

    def __iter__(self) -> Iterator[Decision]:
        return chain.from_iterable(self._parts)

    def __len__(self) -> int:
        return sum(map(len, self._parts))

    def __getitem__(self, index: int | slice) -> Any:
        return tuple(self)[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(tuple(self))


class NodeDependencies:
    """What each kept Service plan read of the other nodes, so that a node coming, going or
    changing replans only the Services whose decisions it can change: those that ran an
    election the node was chosen in (found by node: each chosen node indexes the Services
    that chose it), or would now win (rendezvous hashing: one hash per election decides
    it), and those that list every candidate (VRRP)."""

    def __init__(self) -> None:
        self._elections: dict[str, list[Election]] = {}
        self._every: set[str] = set()
        self._chosen: dict[str, set[str]] = {}  # node name → keys whose elections chose it
        # The nodes that entered (or changed) at the last :meth:`affected`.
        self.entering: frozenset[str] = frozenset()

    def chosen_before(self, key: str) -> dict[bytes, tuple[str, ...]] | None:
        """What each of the Service's elections chose when it was last planned, by the IP's
        :func:`~teapot_lb.announce.election.suffix` (None: none, or an IP elected twice,
        under two advertisements)."""
        elections = self._elections.get(key)
        if not elections:
            return None
        out = {ip: chosen for ip, chosen, _ in elections}
        return out if len(out) == len(elections) else None

    def note(self, key: str, elections: list[Election], every: bool) -> None:
        self._unindex(key)
        if elections:
            self._elections[key] = elections
            for _, chosen, _ in elections:
                for name in chosen:
                    self._chosen.setdefault(name, set()).add(key)
        if every:
            self._every.add(key)
        else:
            self._every.discard(key)

    def forget(self, key: str) -> None:
        self._unindex(key)
        self._every.discard(key)

    def _unindex(self, key: str) -> None:
        for _, chosen, _ in self._elections.pop(key, ()):
            for name in chosen:
                keys = self._chosen.get(name)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._chosen[name]

    def affected(self, entering: set[str], leaving: set[str]) -> set[str]:
        """The Services whose elections `entering` nodes (or nodes that changed: they may
        enter) and `leaving` nodes can change."""
        self.entering = frozenset(entering)
        out = set(self._every)
        for node in entering | leaving:
            out.update(self._chosen.get(node, ()))
        # Nodes only leaving change only the elections that chose them (no hash); each
        # entering one, those whose chosen it now beats: one hash per election (its name
        # encoded once).
        for entering_node in entering:
            name = entering_node.encode()
            for key, elections in self._elections.items():
                for ip, _, to_beat in elections:
                    if to_beat is None or scored_as(name, ip) < to_beat:
                        out.add(key)
                        break
        return out


class OrdersTable:
    """Every L2 IP of the cluster → the candidates of the Service that holds it, changed
    one Service's entries at a time (a new L2 Service costs its own IPs, not a new table).

    An IP several Services share (``allow-shared-ip``) has the candidates of the greatest
    key, as a walk of the Services in key order leaves them; the others are kept aside so
    that deleting that Service hands the IP to the next."""

    __slots__ = ("_holder", "_shared", "candidates")

    def __init__(self) -> None:
        self.candidates: dict[str, Sequence[str] | SharedCandidates] = {}
        self._holder: dict[str, str] = {}  # IP -> the key whose candidates are in `candidates`
        self._shared: dict[str, dict[str, Sequence[str] | SharedCandidates]] = {}

    def replace(
        self,
        key: str,
        old: Sequence[tuple[str, Sequence[str] | SharedCandidates]] | None,
        new: Sequence[tuple[str, Sequence[str] | SharedCandidates]] | None,
    ) -> None:
        """Service `key`'s entries were `old` and are now `new` (None: none)."""
        for ip, _ in old or ():
            self._drop(key, ip)
        for ip, nodes in new or ():
            self._put(key, ip, nodes)

    def _put(self, key: str, ip: str, nodes: Sequence[str] | SharedCandidates) -> None:
        held = self._shared.get(ip)
        holder = self._holder.get(ip)
        if held is None and holder is not None and holder != key:
            held = self._shared[ip] = {holder: self.candidates[ip]}
        if held is None:
            self._holder[ip] = key
            self.candidates[ip] = nodes
        else:
            held[key] = nodes
            self._settle(ip, held)

    def _drop(self, key: str, ip: str) -> None:
        held = self._shared.get(ip)
        if held is not None:
            held.pop(key, None)
            self._settle(ip, held)
        elif self._holder.get(ip) == key:
            del self._holder[ip], self.candidates[ip]

    def _settle(self, ip: str, held: dict[str, Sequence[str] | SharedCandidates]) -> None:
        if len(held) <= 1:
            del self._shared[ip]
        if not held:
            del self._holder[ip], self.candidates[ip]
            return
        key = max(held)
        self._holder[ip] = key
        self.candidates[ip] = held[key]


class PlanCache:
    """Per-Service results kept between calls of :func:`plan` and :func:`l2_election_orders`
    for one node, so that one changed Service costs one Service's planning.

    Pass the same instance with every call (``plan(view, node, options, cache=c)``); the
    result is exactly the uncached one. `computed`: how many Services were (re)planned.
    """

    def __init__(self) -> None:
        versions = _Versions()
        self.plans: _PerService[_PlanResult] = _PerService(versions, _same_announcements)
        self.orders: _PerService[tuple[tuple[str, Sequence[str] | SharedCandidates], ...]] = (
            _PerService(versions, empty=())
        )
        # The Services whose L2 candidates are their own (Local): a Node change replans them.
        self.orders_local: set[str] = set()
        self.totals = PlanTotals()
        # Each Node's own exclusion (why it may announce nothing), by name, while the view
        # holds the same Node object.
        self.exclusions: dict[str, tuple[Node, str | None]] = {}
        # Every L2 IP → its candidates, as the last call of l2_election_orders left them.
        self.orders_table = OrdersTable()
        self.dependencies = NodeDependencies()
        # Every Service's VRRP instances on every node (vip_memberships), those that have
        # some (by key), and the Services with an IP in a pool a VIPAdvertisement selects.
        self.vip: _PerService[tuple[VIPMembership, ...]] = _PerService(versions, empty=())
        self.vip_table: dict[str, tuple[VIPMembership, ...]] = {}
        self.vip_selected: set[str] = set()
        # Route mode's announcements in the last plan (not per Service: see plan()).
        self.tenant_announcements: frozenset[Announcement] = frozenset()

    @property
    def computed(self) -> int:
        return self.plans.computed

    @property
    def orders_computed(self) -> int:
        return self.orders.computed
