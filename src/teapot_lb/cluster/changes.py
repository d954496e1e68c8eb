"""Which keys a Store changed, in order, so that a cache holding per-object results can
redo only those (pure bookkeeping; a view carries where the log stood when it was made)."""

from __future__ import annotations

from dataclasses import dataclass

from teapot_lb.model.kinds import Kind

# A whole kind replaced (a re-list): its keys are not listed, every object may differ.
EVERY_KEY = ""
# Entries kept; a reader further behind than this starts again from a full walk.
LIMIT = 4096


@dataclass(frozen=True)
class Change:
    kind: Kind
    key: str
    # For an EndpointSlice: the Service keys of the object before and after (what it touches).
    services: tuple[str, ...] = ()


class ChangeLog:
    """Changes numbered from 0; the oldest are dropped past :data:`LIMIT`."""

    def __init__(self) -> None:
        self._changes: list[Change] = []
        self._first = 0  # the number of _changes[0]

    @property
    def mark(self) -> int:
        """The number the next change gets."""
        return self._first + len(self._changes)

    def record(self, change: Change) -> None:
        self._changes.append(change)
        if len(self._changes) > 2 * LIMIT:
            del self._changes[:LIMIT]
            self._first += LIMIT

    def between(self, start: int, end: int) -> list[Change] | None:
        """The changes numbered start..end-1; None when some were dropped."""
        if start < self._first or end > self.mark or start > end:
            return None
        return self._changes[start - self._first : end - self._first]
