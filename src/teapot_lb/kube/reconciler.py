"""The reconcile loop: informers enqueue keys, workers call ``reconcile(key)``.

The controller-runtime contract: ``reconcile`` is idempotent and level-triggered, reads
the informer caches (not the events), and returns a :class:`Result`. A raised
:class:`~.errors.KubeError` (or any exception) requeues the key with per-key exponential
backoff; success forgets the backoff. A key is never reconciled by two workers at once.

Keys are any hashable value: object keys (``namespace/name``) by default, or typed keys
(one dataclass per kind) when one loop serves several kinds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from .. import log
from .errors import KubeError
from .informer import EventType, Informer
from .pace import Pace
from .resources import KubeObject
from .workqueue import QueueShutDown, WorkQueue

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Result:
    """``requeue_after``: reconcile this key again after that many seconds."""

    requeue_after: float | None = None


Reconcile = Callable[[K], Awaitable[Result | None]]
KeyMapper = Callable[[EventType, str, KubeObject], Iterable[K]]


class ReconcileLoop(Generic[K]):
    def __init__(
        self,
        name: str,
        reconcile: Reconcile[K],
        *,
        workers: int = 4,
        queue: WorkQueue[K] | None = None,
        on_result: Callable[[K, float, BaseException | None], None] | None = None,
    ) -> None:
        """``on_result(key, seconds, error)`` is called after every reconcile (metrics)."""
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        # (not `queue or ...`: a queue with nothing in it yet is falsy, having a __len__)
        self.queue: WorkQueue[K] = queue if queue is not None else WorkQueue()
        self._on_result = on_result
        self._informers: list[Informer] = []
        self._log = log.get("kube.reconciler").bind(loop=name)

    def watch(self, informer: Informer, keys: KeyMapper[K] | None = None) -> None:
        """Enqueue keys for ``informer``'s events: the object's own key by default, or
        the keys ``keys(event, key, obj)`` maps it to (e.g. an EndpointSlice to its
        Service, a pool to every Service that uses it)."""
        self._informers.append(informer)

        def enqueue(type_: EventType, key: str, obj: KubeObject) -> None:
            for mapped in keys(type_, key, obj) if keys is not None else (cast(K, key),):
                self.queue.add(mapped)

        informer.add_handler(enqueue)

    async def _worker(self) -> None:
        # A reconcile that writes nothing never suspends, nor does `get` on a full queue:
        # a term's first pass over 100k Services would hold the loop (kube.pace).
        pace = Pace()
        while True:
            await pace.turn()
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            started = time.perf_counter()
            error: BaseException | None = None
            try:
                result = await self.reconcile(key)
            except KubeError as err:
                error = err
                delay = self.queue.add_rate_limited(key)
                self._log.warning(
                    "reconcile failed; retrying", key=str(key), error=str(err), retry_in=delay
                )
            except Exception as err:
                error = err
                delay = self.queue.add_rate_limited(key)
                self._log.exception("reconcile crashed; retrying", key=str(key), retry_in=delay)
            else:
                self.queue.forget(key)
                if result is not None and result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after)
            finally:
                self.queue.done(key)
            if self._on_result is not None:
                self._on_result(key, time.perf_counter() - started, error)

    async def work(self) -> None:
        """Run the workers (not the informers) until the queue is shut down and drained,
        or until cancelled; for a caller that runs the informers itself (a leader-elected
        controller keeps its caches warm while it does not lead)."""
        async with asyncio.TaskGroup() as group:
            for _ in range(self.workers):
                group.create_task(self._worker())

    async def run(self) -> None:
        """Run the informers and workers until cancelled. Workers start once every
        informer has synced, so reconcile never sees a half-filled cache."""
        informer_tasks = [asyncio.create_task(i.run()) for i in self._informers]
        worker_task: asyncio.Task[None] | None = None
        try:
            await asyncio.gather(*(i.wait_synced() for i in self._informers))
            self._log.info("caches synced", informers=len(self._informers))
            worker_task = asyncio.create_task(self.work())
            await asyncio.gather(*informer_tasks, worker_task)
        finally:
            self.queue.shut_down()
            tasks = [*informer_tasks, *([worker_task] if worker_task is not None else [])]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def enqueue_all(self, informer: Informer) -> None:
        """Queue every cached key (after a configuration change, for instance)."""
        for key in informer.list_keys():
            self.queue.add(cast(K, key))


__all__ = ["ReconcileLoop", "Result"]
