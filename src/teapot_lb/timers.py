"""The one timer style of the sans-I/O cores (BGP, L2 announcements and claims, membership).

A core never reads the clock and never sleeps: it returns :class:`ArmTimer` (start, or
restart, the timer named ``timer`` to expire ``seconds`` from now) and
:class:`CancelTimer` orders among its other outputs, and is told ``timer_expired(timer)``
when one expires. Timer names are whatever the core likes (an enum, a tuple), so several
timers of one kind can run at once (one per connection, one per address).

:class:`LoopTimers` carries the orders out on the running asyncio loop, for the adapters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class ArmTimer(Generic[K]):
    """(Re)start ``timer``: it expires ``seconds`` from now, replacing a running one."""

    timer: K
    seconds: float


@dataclass(frozen=True, slots=True)
class CancelTimer(Generic[K]):
    """Stop ``timer`` if it runs."""

    timer: K


class LoopTimers(Generic[K]):
    """Runs a core's timer orders on the asyncio loop; ``fire(timer)`` on expiry."""

    def __init__(self, fire: Callable[[K], None]) -> None:
        self._fire = fire
        self._handles: dict[K, asyncio.TimerHandle] = {}

    def apply(self, order: ArmTimer[K] | CancelTimer[K]) -> None:
        old = self._handles.pop(order.timer, None)
        if old is not None:
            old.cancel()
        if isinstance(order, ArmTimer):
            loop = asyncio.get_running_loop()
            self._handles[order.timer] = loop.call_later(order.seconds, self._expired, order.timer)

    def cancel(self, timers: Iterable[K] | None = None) -> None:
        """Stop these timers (default: all)."""
        for timer in list(self._handles) if timers is None else list(timers):
            handle = self._handles.pop(timer, None)
            if handle is not None:
                handle.cancel()

    def running(self) -> list[K]:
        return list(self._handles)

    def _expired(self, timer: K) -> None:
        self._handles.pop(timer, None)
        self._fire(timer)
