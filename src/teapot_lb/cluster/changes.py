"""Which keys a Store changed, in order, so that a cache holding per-object results can
redo only those (pure bookkeeping; a view carries where the log stood when it was made)."""

from __future__ import annotations

import threading
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
    """Changes numbered from 0; the oldest are dropped past :data:`LIMIT`.

    Recorded on the event loop and read by the speaker's planning thread: dropping the
    oldest and moving the first number happen under a lock, as does a read."""

    def __init__(self) -> None:
        self._changes: list[Change] = []
        self._first = 0  # the number of _changes[0]
        self._lock = threading.Lock()

    @property
    def mark(self) -> int:
        """The number the next change gets."""
        with self._lock:
            return self._first + len(self._changes)

    def record(self, change: Change) -> None:
        with self._lock:
            self._changes.append(change)
            if len(self._changes) > 2 * LIMIT:
                del self._changes[:LIMIT]
                self._first += LIMIT

    def between(self, start: int, end: int) -> list[Change] | None:
        """The changes numbered start..end-1; None when some were dropped."""
        with self._lock:
            first = self._first
            if start < first or end > first + len(self._changes) or start > end:
                return None
            return self._changes[start - first : end - first]
