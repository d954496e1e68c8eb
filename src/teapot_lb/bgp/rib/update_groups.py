"""Update groups: peers that were sent the same routes and export them the same way get
the same UPDATEs, computed once (what FRR calls update groups; RFC 4271 §9.2 leaves how an
Adj-RIB-Out is kept to the implementation).

Each :class:`~.adj_out.AdjRibOut` carries a *lineage*: a token that stands for what it
has sent. Two with the same lineage have sent the same; with the same desired routes
(the same table, unchanged since: any :meth:`~.adj_out.AdjRibOut.set_desired` clears the
memo), the same export context and an export filter that lets everything out, their next
UPDATEs are the same. The first of them to flush computes them and records them here with
the changes to its sent table; the others take both (a cost that follows the change, not
the table) and the new lineage. A relay exporting to eight routers diffs once, not eight
times.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from ..attributes import RouteAttributes
from ..wire import Family


class Share:
    """Whether a sent table recorded in a flush may be held by another peer of the group:
    taken by one, or still in the memo where one may take it. The peer that computed it
    copies it before changing it only then: a lone peer (the usual relay) whose desired
    routes changed since (the memo cleared) changes its own table in place."""

    __slots__ = ("open", "taken")

    def __init__(self, taken: bool = False) -> None:
        self.taken = taken
        self.open = True

    @property
    def held(self) -> bool:
        return self.taken or self.open


TAKEN = Share(taken=True)
"""The share of a table a peer took from another: always copied before a change."""


@dataclass(frozen=True, slots=True)
class FamilyFlush:
    """What one flush did to one family's sent table: ``withdrawn`` keys removed and
    ``changed`` paths set, the sent table ``before`` becoming ``after`` (a peer that held
    the same ``before`` takes ``after`` itself); or, for a flush of the whole table
    (``withdrawn`` None), the sent table became ``whole``. The tables are shared, never
    changed in place once recorded (:meth:`~.adj_out.AdjRibOut._own` copies first): a
    group of eight routers keeps one sent table, not eight."""

    family: Family
    withdrawn: tuple[bytes, ...] | None
    changed: tuple[tuple[bytes, RouteAttributes], ...] = ()
    whole: dict[bytes, RouteAttributes] | None = None
    before: dict[bytes, RouteAttributes] | None = None
    after: dict[bytes, RouteAttributes] | None = None
    share: Share = field(default_factory=Share)
    """Set taken by a peer that takes ``after`` or ``whole`` as its own table."""


@dataclass(frozen=True, slots=True)
class Flushed:
    """One flush of one group: the lineage after it, the sent tables' changes, the
    UPDATEs."""

    lineage: object
    families: tuple[FamilyFlush, ...]
    messages: tuple[bytes, ...]


class ExportMemo:
    """The flushes of one speaker's peers since the desired routes last changed."""

    def __init__(self) -> None:
        self._flushed: dict[Hashable, Flushed] = {}
        self.shared = 0
        """Flushes a peer took from another rather than computed (for tests and the log)."""

    def changed(self) -> None:
        """The desired routes changed: no recorded flush applies any more (nor can its
        tables be taken)."""
        for flushed in self._flushed.values():
            for done in flushed.families:
                done.share.open = False
        self._flushed.clear()

    def get(self, key: Hashable) -> Flushed | None:
        return self._flushed.get(key)

    def put(self, key: Hashable, flushed: Flushed) -> None:
        self._flushed[key] = flushed


EMPTY_LINEAGE = object()
"""The lineage of an Adj-RIB-Out that has sent nothing."""

__all__ = ["EMPTY_LINEAGE", "TAKEN", "ExportMemo", "FamilyFlush", "Flushed", "Share"]
