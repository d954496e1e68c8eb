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
        heapq.heappush(self._queue, (self.now + delay, next(self._order), fn, args))

    def run_until(self, end: float) -> None:
        queue, pop = self._queue, heapq.heappop
        events = 0
        while queue and queue[0][0] <= end:
            when, _, fn, args = pop(queue)
            self.now = when
            events += 1
            fn(*args)
        self.events += events
        self.now = max(self.now, end)


class CoreTimers(Generic[K]):
    """One core's ArmTimer/CancelTimer orders on a :class:`VirtualClock`; ``fire(timer)``
    when one expires.

    A timer re-armed to a later time keeps its queued entry and only moves its deadline on:
    when the entry comes due it queues itself again for the deadline (a silence timer,
    re-armed at every heartbeat, costs one event per timeout instead of one per heartbeat).
    Re-arming to an earlier time or cancelling leaves the old entry in the queue, void."""

    def __init__(self, clock: VirtualClock, fire: Callable[[K], None]) -> None:
        self._clock = clock
        self._fire = fire
        self._due: dict[K, list[Any]] = {}  # timer -> [deadline, token of its live entry]
        self._tokens = itertools.count()

    def apply(self, order: ArmTimer[K] | CancelTimer[K]) -> None:
        if isinstance(order, ArmTimer):
            timer = order.timer
            due = self._clock.now + order.seconds
            entry = self._due.get(timer)
            if entry is not None and entry[0] <= due:
                entry[0] = due  # its queued entry comes first and will wait on
                return
            token = next(self._tokens)
            self._due[timer] = [due, token]
            self._clock.at(due, self._expired, timer, token)
        else:
            self._due.pop(order.timer, None)

    def cancel(self, timers: Iterable[K] | None = None) -> None:
        for timer in list(self._due) if timers is None else list(timers):
            self._due.pop(timer, None)

    def _expired(self, timer: K, token: int) -> None:
        entry = self._due.get(timer)
        if entry is None or entry[1] != token:
            return  # re-armed earlier or cancelled since
        if entry[0] > self._clock.now:
            self._clock.at(entry[0], self._expired, timer, token)  # re-armed later since
            return
        del self._due[timer]
        self._fire(timer)
