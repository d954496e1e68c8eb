"""Adj-RIB-In (RFC 4271 §3.2): what one peer sent and its import filter accepted, and
why the rest was rejected."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ..attributes import ReceivedPath
from ..policy import ACCEPT_ALL, Filter, Judged, Rejected
from ..wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    Family,
    Prefix,
)
from ..wire.family import family_of
from ..wire.nlri import PATH_ID_LENGTH, decode_nlri, decode_path
from .compiled import encode_prefix

# ---------------------------------------------------------------------------- Adj-RIB-In

_FAMILIES = (IPV4_UNICAST, IPV6_UNICAST)


class AdjRibIn:
    """Routes received from one peer that its import filter accepted, by NLRI encoding per
    family; graceful-restart stale marks (RFC 4724); why each filtered route was rejected."""

    def __init__(self, import_filter: Filter = ACCEPT_ALL) -> None:
        self.import_filter = import_filter
        # Families received with Path Identifiers (RFC 7911): their keys start with one.
        self.add_path: frozenset[Family] = frozenset()
        self.tables: dict[Family, dict[bytes, ReceivedPath]] = {f: {} for f in _FAMILIES}
        self.stale_marks: dict[Family, set[bytes]] = {f: set() for f in _FAMILIES}
        # Like BIRD's "import keep filtered", but only the reason is kept, not the route.
        self.filtered: dict[Family, dict[bytes, Rejected]] = {f: {} for f in _FAMILIES}
        self.rejections: Counter[str] = Counter()  # routes rejected, by reason (metrics)

    def __len__(self) -> int:
        return sum(len(t) for t in self.tables.values())

    # -- objects, on demand -------------------------------------------------------------------

    @property
    def routes(self) -> dict[Prefix, ReceivedPath]:
        """Every route with its prefix decoded (O(n): for explain, tools and tests); of a
        prefix received with several paths (ADD-PATH), the one with the lowest Path
        Identifier (all of them: :attr:`paths`)."""
        out: dict[Prefix, ReceivedPath] = {}
        for family, table in self.tables.items():
            items: Iterable[tuple[bytes, ReceivedPath]] = table.items()
            if family in self.add_path:
                items = sorted(items, key=lambda kv: kv[0][:PATH_ID_LENGTH], reverse=True)
            encs, paths = zip(*items, strict=True) if table else ((), ())
            decoded = decode_nlri(encs, family.afi, family in self.add_path)
            out.update(zip(decoded, paths, strict=True))
        return out

    @property
    def paths(self) -> list[tuple[Prefix, int | None, ReceivedPath]]:
        """Every path: prefix, Path Identifier (None without ADD-PATH), path (O(n))."""
        out: list[tuple[Prefix, int | None, ReceivedPath]] = []
        for family, table in self.tables.items():
            for enc, path in table.items():
                if family in self.add_path:
                    pid, prefix = decode_path(enc, family.afi)
                    out.append((prefix, pid, path))
                else:
                    out.append((decode_nlri((enc,), family.afi, False)[0], None, path))
        return out

    @property
    def stale(self) -> set[Prefix]:
        return {
            p
            for f, marks in self.stale_marks.items()
            for p in decode_nlri(marks, f.afi, f in self.add_path)
        }

    def _keys(self, table: Mapping[bytes, object], prefix: Prefix) -> list[bytes]:
        """The keys of ``prefix`` in one of the family tables (each path's under ADD-PATH)."""
        family = family_of(prefix)
        enc = encode_prefix(prefix)
        if family in self.add_path:
            return sorted(k for k in table if k[PATH_ID_LENGTH:] == enc)
        return [enc] if enc in table else []

    def get(self, prefix: Prefix) -> ReceivedPath | None:
        table = self.tables[family_of(prefix)]
        keys = self._keys(table, prefix)
        return table[keys[0]] if keys else None

    def why_not(self, prefix: Prefix) -> Rejected | None:
        """Why the import filter rejected ``prefix`` (None: it did not, or never saw it)."""
        table = self.filtered[family_of(prefix)]
        keys = self._keys(table, prefix)
        return table[keys[0]] if keys else None

    # -- the receive path ----------------------------------------------------------------------

    def learn(
        self, family: Family, encodings: Iterable[bytes], path: ReceivedPath
    ) -> Judged[ReceivedPath]:
        """Prefixes announced with ``path``, through the import filter. A rejected prefix
        replaces (removes) any earlier path for it, as the new announcement does."""
        table = self.tables[family]
        stale = self.stale_marks[family]
        filtered = self.filtered[family]
        judged = self.import_filter.judge_batch(
            family, encodings, path, add_path=family in self.add_path
        )
        for accepted_path, encs in judged.accepted:
            if len(judged.accepted) == 1 and not judged.rejected:
                table.update(dict.fromkeys(encs, accepted_path))
            else:
                for enc in encs:
                    table[enc] = accepted_path
            if stale:
                stale.difference_update(encs)
            if filtered:
                for enc in encs:
                    filtered.pop(enc, None)
        for why, encs in judged.rejected:
            for enc in encs:
                table.pop(enc, None)
            filtered.update(dict.fromkeys(encs, why))
            if stale:
                stale.difference_update(encs)
            self.rejections[why.reason] += len(encs)
        return judged

    def withdraw(self, family: Family, encodings: Sequence[bytes]) -> list[bytes]:
        """Remove prefixes; returns those that were present."""
        table = self.tables[family]
        filtered = self.filtered[family]
        gone = [enc for enc in encodings if table.pop(enc, None) is not None]
        if filtered:
            for enc in encodings:
                filtered.pop(enc, None)
        stale = self.stale_marks[family]
        if stale:
            stale.difference_update(gone)
        return gone

    # -- graceful restart ----------------------------------------------------------------------

    def mark_stale(self, family: Family | None = None) -> int:
        """Keep routes but mark them stale (peer restarting); returns how many are stale."""
        for f in _FAMILIES if family is None else (family,):
            self.stale_marks[f].update(self.tables[f])
        return sum(len(m) for m in self.stale_marks.values())

    def sweep_stale(self, family: Family | None = None) -> dict[Family, list[bytes]]:
        """Drop stale routes not refreshed (End-of-RIB received or restart timer expired)."""
        out: dict[Family, list[bytes]] = {}
        for f in _FAMILIES if family is None else (family,):
            marks = self.stale_marks[f]
            if marks:
                table = self.tables[f]
                for enc in marks:
                    table.pop(enc, None)
                out[f] = list(marks)
                marks.clear()
        return out

    def clear(self, family: Family | None = None) -> dict[Family, list[bytes]]:
        """Drop every route (of ``family``); returns what was dropped."""
        families = _FAMILIES if family is None else (family,)
        out = {f: list(self.tables[f]) for f in families if self.tables[f]}
        for f in families:
            self.tables[f].clear()
            self.stale_marks[f].clear()
            self.filtered[f].clear()
        return out


def decode_encodings(encs: Iterable[bytes], family: Family, add_path: bool = False) -> list[Prefix]:
    """Prefixes back from NLRI encodings (tests and diagnostics)."""
    return list(decode_nlri(encs, family.afi, add_path))
