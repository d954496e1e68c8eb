"""The union of a node's kept per-Service plans (pure): :class:`PlanTotals` changes by
what each call changed and hands out views, not copies; :class:`PlanDelta` is what one plan
changed in the one before it (the backends apply it instead of comparing everything)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teapot_lb.announce.announcement import Announcement, Decision, Mode

# A Service's announcements (each once: a tuple, a fraction of a small frozenset's size)
# and its decisions.
PlanResult = tuple[tuple["Announcement", ...], tuple["Decision", ...]]


def same_announcements(old: PlanResult, new: PlanResult) -> PlanResult:
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

    def rebuild(self, results: Iterator[PlanResult]) -> None:
        self._changed = None
        self._added = None
        self.counts, self.by_mode, self.by_service = {}, {}, {}
        for anns, decs in results:
            self._count(anns, 1)
            if decs:
                self.by_service[decs[0].service] = decs
        self._order = list(self.by_service)  # the results come in key order
        self._decisions = list(self.by_service.values())

    def apply(self, delta: list[tuple[str, PlanResult | None, PlanResult | None]]) -> None:
        """Apply one call's changes."""
        by_service, order, in_order = self.by_service, self._order, self._decisions
        if self._changed is not None:
            self._changed.update(key for key, _, _ in delta)
        for key, old, new in delta:
            decs: tuple[Decision, ...] = ()
            if old is not None and new is not None and old[0] is new[0]:
                decs = new[1]  # its words changed, not its routes (a BGP session)
            else:
                if old is not None:
                    self._count(old[0], -1)
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
