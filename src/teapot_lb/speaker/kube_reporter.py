"""What the speaker writes to Kubernetes: per-node annotations and Events on the Services.

The per-node annotation `announce.lb.teapot.io/<node>` on each Service (a merge patch of
this node's key only, so speakers never conflict) and the Events `NodeAnnouncing` /
`AnnounceFailed`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from teapot_lb import log
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import KubeError, NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.resources import SERVICES, KubeObject, split_key
from teapot_lb.model import ObjectMeta
from teapot_lb.speaker.node import StepResult
from teapot_lb.speaker.report import ServiceEvent, annotation_key, summary

COMPONENT = "teapot-lb-speaker"


class KubeReporter:
    """Writes this node's annotation on the Services it announces (or stopped announcing)
    and records the Events of each step.

    Writing never delays announcing: a step only hands its result over; a worker task
    applies the newest announcement state (intermediate ones are skipped) and sends the
    Events in order (at most `max_pending_events` wait; older ones are dropped and
    counted).
    """

    def __init__(self, client: KubeClient, node: str, *, max_pending_events: int = 1000) -> None:
        self.client = client
        self.node = node
        self.key = annotation_key(node)
        self.recorder = EventRecorder(client, COMPONENT, instance=node)
        self.events_dropped = 0
        self._written: dict[str, str] = {}
        self._latest: StepResult | None = None
        # Services whose annotation may be out of date: the changes of every result handed
        # over (a skipped intermediate result's too), and writes that failed. None: all.
        self._dirty: set[str] | None = None
        self._events: deque[tuple[ServiceEvent, KubeObject]] = deque(maxlen=max_pending_events)
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._log = log.get("speaker.kube").bind(node=node)

    async def __call__(self, result: StepResult) -> None:
        self._latest = result
        if result.changed is None:
            self._dirty = None
        elif self._dirty is not None:
            self._dirty |= result.changed
        for ev in result.events:
            svc = result.view.services.get(ev.service)
            if svc is None:
                continue
            if len(self._events) == self._events.maxlen:
                self.events_dropped += 1
            self._events.append((ev, _involved(svc.metadata)))
        self._idle.clear()
        self._wake.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name="reporter")

    async def flush(self) -> None:
        """Wait until everything handed over so far is written (for tests and shutdown)."""
        await self._idle.wait()

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker

    async def _work(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            result, self._latest = self._latest, None
            if result is not None:
                await self._annotate(result)
            while self._events:
                ev, involved = self._events.popleft()
                await self.recorder.record(
                    involved, "Warning" if ev.warning else "Normal", ev.reason, ev.message
                )
            if not self._wake.is_set():
                self._idle.set()

    async def _annotate(self, result: StepResult) -> None:
        """Write what changed (each step's `changed`), not every Service: one change at
        10k Services costs one comparison, not 10k summaries."""
        dirty, self._dirty = self._dirty, set()
        if dirty is None:
            dirty = set(result.announcing) | set(self._written)
        for key in sorted(dirty):
            items = result.announcing.get(key)
            value = summary(items) if items is not None else None
            if self._written.get(key) == value:
                continue
            if value is None and key not in result.view.services:
                self._written.pop(key, None)
                continue
            namespace, name = split_key(key)
            try:
                await self.client.patch(
                    SERVICES,
                    name,
                    {"metadata": {"annotations": {self.key: value}}},
                    namespace=namespace,
                )
            except NotFound:
                pass
            except KubeError as err:
                self._log.warning("annotation write failed", service=key, error=str(err))
                self._dirty.add(key)  # tried again with the next step
                continue
            if value is None:
                self._written.pop(key, None)
            else:
                self._written[key] = value


def _involved(meta: ObjectMeta) -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": meta.namespace, "name": meta.name, "uid": meta.uid or ""},
    }
