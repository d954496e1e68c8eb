"""Bounded holds of the event loop: long synchronous work hands the loop its turn.

The Lease is renewed on the same loop as the work. A stretch of synchronous work that
never awaits (an informer's list or watch burst of 100k objects, a reconcile loop working
through a queue whose reconciles write nothing, so never suspend) holds the loop, and
the renewals with it, for as long as it lasts: at 100k Services long enough to pass the
renew deadline (issue 19). Such loops call :meth:`Pace.turn` after each item.
"""

from __future__ import annotations

import asyncio
import time

# Short: a renewal is a GET and a PUT, and each step of each waits out one hold.
HOLD_LOOP_AT_MOST_S = 0.005


class Pace:
    """Hands the loop its turn once the synchronous work since the last turn reached
    `hold_s` (one clock read per item; a turn costs more)."""

    def __init__(self, hold_s: float = HOLD_LOOP_AT_MOST_S) -> None:
        self.hold_s = hold_s
        self._since = time.perf_counter()

    async def turn(self) -> None:
        if time.perf_counter() - self._since >= self.hold_s:
            await asyncio.sleep(0)
            self._since = time.perf_counter()


__all__ = ["HOLD_LOOP_AT_MOST_S", "Pace"]
