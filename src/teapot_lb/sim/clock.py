"""Virtual time: a queue of callbacks by due time, and the timer orders of one core on it."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

from teapot_lb.timers import ArmTimer, CancelTimer

K = TypeVar("K", bound=Hashable)


class VirtualClock:
    """Runs callbacks in due-time order (ties in the order they were scheduled)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = itertools.count()
        self.events = 0  # callbacks run so far

    def at(self, when: float, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._queue, (when, next(self._order), fn, args))

    def after(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        self.at(self.now + delay, fn, *args)

    def run_until(self, end: float) -> None:
        queue = self._queue
        while queue and queue[0][0] <= end:
            when, _, fn, args = heapq.heappop(queue)
            self.now = when
            self.events += 1
            fn(*args)
        self.now = max(self.now, end)


class CoreTimers(Generic[K]):
    """One core's ArmTimer/CancelTimer orders on a :class:`VirtualClock`; ``fire(timer)``
    when one expires. Re-arming or cancelling leaves the old entry in the queue, void."""

    def __init__(self, clock: VirtualClock, fire: Callable[[K], None]) -> None:
        self._clock = clock
        self._fire = fire
        self._due: dict[K, int] = {}  # timer -> token of its live entry
        self._tokens = itertools.count()

    def apply(self, order: ArmTimer[K] | CancelTimer[K]) -> None:
        if isinstance(order, ArmTimer):
            token = next(self._tokens)
            self._due[order.timer] = token
            self._clock.after(order.seconds, self._expired, order.timer, token)
        else:
            self._due.pop(order.timer, None)

    def cancel(self, timers: Iterable[K] | None = None) -> None:
        for timer in list(self._due) if timers is None else list(timers):
            self._due.pop(timer, None)

    def _expired(self, timer: K, token: int) -> None:
        if self._due.get(timer) != token:
            return  # re-armed or cancelled since
        del self._due[timer]
        self._fire(timer)
