"""A deduplicating work queue of keys (the shape of client-go's workqueue).

Keys are any hashable value: object keys (``namespace/name``) or typed keys per kind.

- A key is queued at most once, however often it is added.
- A key being processed is never handed to a second worker; if it is added meanwhile
  it is queued again when the first worker calls :meth:`WorkQueue.done`.
- :meth:`WorkQueue.add_rate_limited` requeues with a per-key exponential delay
  (``base * 2**failures``, capped), reset by :meth:`WorkQueue.forget` after a success.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):
    """:meth:`WorkQueue.get` after :meth:`WorkQueue.shut_down` with nothing left."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay_s: float = 0.05, max_delay_s: float = 60.0) -> None:
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._wakeup = asyncio.Event()
        self._shut_down = False

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def pending(self) -> int:
        """Queued, processing or waiting on a delay."""
        return len(self._dirty | self._processing | set(self._timers))

    def add(self, key: K) -> None:
        if self._shut_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # re-queued by done()
        self._queue.append(key)
        self._wakeup.set()

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
        while not self._queue:
            if self._shut_down:
                raise QueueShutDown
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wakeup.set()

    def shut_down(self) -> None:
        """Stop accepting keys; waiting workers get :class:`QueueShutDown` once drained."""
        self._shut_down = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._wakeup.set()
