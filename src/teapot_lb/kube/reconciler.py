"""The reconcile loop: informers enqueue keys, workers call ``reconcile(key)``.

The controller-runtime contract: ``reconcile`` is idempotent and level-triggered, reads
the informer caches (not the events), and returns a :class:`Result`. A raised
:class:`~.errors.KubeError` (or any exception) requeues the key with per-key exponential
backoff; success forgets the backoff. A key is never reconciled by two workers at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from .. import log
from .informer import EventType, Informer
from .resources import KubeObject
from .workqueue import QueueShutDown, WorkQueue


@dataclass(frozen=True)
class Result:
    """``requeue_after``: reconcile this key again after that many seconds."""

    requeue_after: float | None = None


Reconcile = Callable[[str], Awaitable[Result | None]]
KeyMapper = Callable[[EventType, str, KubeObject], Iterable[str]]


class ReconcileLoop:
    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        *,
        workers: int = 4,
        queue: WorkQueue | None = None,
        on_result: Callable[[str, float, BaseException | None], None] | None = None,
    ) -> None:
        """``on_result(key, seconds, error)`` is called after every reconcile (metrics)."""
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.queue = queue or WorkQueue()
        self._on_result = on_result
        self._informers: list[Informer] = []
        self._log = log.get("kube.reconciler").bind(loop=name)

    def watch(self, informer: Informer, keys: KeyMapper | None = None) -> None:
        """Enqueue keys for ``informer``'s events: the object's own key by default, or
        the keys ``keys(event, key, obj)`` maps it to (e.g. an EndpointSlice to its
        Service, a pool to every Service that uses it)."""
        self._informers.append(informer)

        def enqueue(type_: EventType, key: str, obj: KubeObject) -> None:
            for mapped in keys(type_, key, obj) if keys is not None else (key,):
                self.queue.add(mapped)

        informer.add_handler(enqueue)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            started = time.perf_counter()
            error: BaseException | None = None
            try:
                result = await self.reconcile(key)
            except Exception as err:
                error = err
                delay = self.queue.add_rate_limited(key)
                self._log.warning(
                    "reconcile failed", key=key, error=str(err), retry_in=round(delay, 3)
                )
            else:
                self.queue.forget(key)
                if result is not None and result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after)
            finally:
                self.queue.done(key)
            if self._on_result is not None:
                self._on_result(key, time.perf_counter() - started, error)

    async def run(self) -> None:
        """Run the informers and workers until cancelled. Workers start once every
        informer has synced, so reconcile never sees a half-filled cache."""
        informer_tasks = [asyncio.create_task(i.run()) for i in self._informers]
        worker_tasks: list[asyncio.Task[None]] = []
        try:
            await asyncio.gather(*(i.wait_synced() for i in self._informers))
            self._log.info("caches synced", informers=len(self._informers))
            worker_tasks = [asyncio.create_task(self._worker()) for _ in range(self.workers)]
            await asyncio.gather(*informer_tasks, *worker_tasks)
        finally:
            self.queue.shut_down()
            for task in (*informer_tasks, *worker_tasks):
                task.cancel()
            await asyncio.gather(*informer_tasks, *worker_tasks, return_exceptions=True)

    def enqueue_all(self, informer: Informer) -> None:
        """Queue every cached key (after a configuration change, for instance)."""
        for key in informer.list_keys():
            self.queue.add(key)


__all__ = ["ReconcileLoop", "Result"]
