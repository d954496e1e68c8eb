"""A deduplicating work queue of keys (the shape of client-go's workqueue).

Keys are any hashable value: object keys (``namespace/name``) or typed keys per kind.

- A key is queued at most once, however often it is added.
- A key being processed is never handed to a second worker; if it is added meanwhile
  it is queued again when the first worker calls :meth:`WorkQueue.done`.
- :meth:`WorkQueue.add_rate_limited` requeues with a per-key exponential delay
  (``base * 2**failures``, capped), reset by :meth:`WorkQueue.forget` after a success.
- With a ``group`` (a key's tenant, say), the queued keys are taken one group at a time
  in turn, each group's in the order they came: a group that queues 10,000 keys delays
  another group's next key by one key, not by 10,000. Without one, first in, first out.
  ``on_deferred(group)`` is called when a group's oldest key waits while a younger key
  of another group is taken (the work fairness put off), ``on_coalesced(group)`` when an
  add finds its key already queued (a change folded into the reconcile already due).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
OnGroup = Callable[[Hashable], None]


class QueueShutDown(Exception):
    """:meth:`WorkQueue.get` after :meth:`WorkQueue.shut_down` with nothing left."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        base_delay_s: float = 0.05,
        max_delay_s: float = 60.0,
        group: Callable[[K], Hashable] | None = None,
        on_deferred: OnGroup | None = None,
        on_coalesced: OnGroup | None = None,
    ) -> None:
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._group = group
        self._on_deferred = on_deferred
        self._on_coalesced = on_coalesced
        # Per group, its queued keys with their arrival numbers; the groups holding keys
        # in turn; the groups' oldest keys by arrival (stale entries skipped) to tell
        # whose key fairness put off.
        self._queues: dict[Hashable, deque[tuple[int, K]]] = {}
        self._turns: deque[Hashable] = deque()
        self._oldest: list[tuple[int, int]] = []
        self._group_ids: dict[Hashable, int] = {}
        self._id_groups: dict[int, Hashable] = {}
        self._arrivals = itertools.count()
        self._queued = 0
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._wakeup = asyncio.Event()
        self._shut_down = False

    def __len__(self) -> int:
        return self._queued

    @property
    def pending(self) -> int:
        """Queued, processing or waiting on a delay."""
        return len(self._dirty | self._processing | set(self._timers))

    def add(self, key: K) -> None:
        if self._shut_down:
            return
        if key in self._dirty:
            if self._on_coalesced is not None:
                self._on_coalesced(self._group_of(key))
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # re-queued by done()
        self._push(key)

    def _group_of(self, key: K) -> Hashable:
        return None if self._group is None else self._group(key)

    def _push(self, key: K) -> None:
        group = self._group_of(key)
        arrival = next(self._arrivals)
        queue = self._queues.get(group)
        if queue is None:
            queue = self._queues[group] = deque()
            self._turns.append(group)
            self._mark_oldest(group, arrival)
        queue.append((arrival, key))
        self._queued += 1
        self._wakeup.set()

    def _mark_oldest(self, group: Hashable, arrival: int) -> None:
        if self._on_deferred is None:
            return
        ident = self._group_ids.get(group)
        if ident is None:
            ident = self._group_ids[group] = len(self._group_ids)
            self._id_groups[ident] = group
        heapq.heappush(self._oldest, (arrival, ident))

    def _pop(self) -> K:
        group = self._turns.popleft()
        queue = self._queues[group]
        arrival, key = queue.popleft()
        self._queued -= 1
        if queue:
            self._turns.append(group)
            self._mark_oldest(group, queue[0][0])
        else:
            del self._queues[group]
        if self._on_deferred is not None:
            self._tell_deferred(arrival)
        return key

    def _tell_deferred(self, taken: int) -> None:
        """The group whose oldest key came before the one just taken waits a turn."""
        oldest = self._oldest
        while oldest:
            arrival, ident = oldest[0]
            queue = self._queues.get(self._id_groups[ident])
            if queue is None or queue[0][0] != arrival:
                heapq.heappop(oldest)  # taken since
                continue
            if arrival < taken and self._on_deferred is not None:
                self._on_deferred(self._id_groups[ident])
            return

    def add_after(self, key: K, delay_s: float) -> None:
        """Add ``key`` after ``delay_s``; an earlier pending delay for the key wins."""
        if self._shut_down:
            return
        if delay_s <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay_s
        existing = self._timers.get(key)
        if existing is not None:
            if existing.when() <= when:
                return
            existing.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> float:
        """Requeue after this key's backoff delay; returns the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self.max_delay_s, self.base_delay_s * float(2**failures))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key; the caller must call :meth:`done` with it when finished."""
        while not self._queued:
            if self._shut_down:
                raise QueueShutDown
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._pop()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._push(key)

    def shut_down(self) -> None:
        """Stop accepting keys; waiting workers get :class:`QueueShutDown` once drained."""
        self._shut_down = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._wakeup.set()
