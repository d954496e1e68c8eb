"""The speaker against Kubernetes: informers fill the Store; reports go to the Services.

Informers on Services, EndpointSlices, Nodes, Namespaces, the lb.teapot.io kinds and
Secrets (BGP passwords) put typed objects into the :class:`~teapot_lb.cluster.Store` and
only call `notify` — the speaker plans from the cache. Reports: the per-node annotation
`announce.lb.teapot.io/<node>` on each Service (a merge patch of this node's key only,
so speakers never conflict) and the Events `NodeAnnouncing` / `AnnounceFailed`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from teapot_lb import log
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import KubeError, NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.resources import SERVICES, KubeObject, key_of, split_key
from teapot_lb.model import ObjectMeta, parse_object
from teapot_lb.model.kinds import KINDS
from teapot_lb.speaker.node import StepResult
from teapot_lb.speaker.report import ServiceEvent, annotation_key, summary

COMPONENT = "teapot-lb-speaker"


def secret_data(obj: KubeObject) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for k, v in (obj.get("data") or {}).items():
        try:
            out[str(k)] = base64.b64decode(str(v), validate=True)
        except (binascii.Error, ValueError):
            continue
    for k, v in (obj.get("stringData") or {}).items():
        out[str(k)] = str(v).encode()
    return out


def put(store: Store, kind: Kind, key: str, obj: KubeObject) -> bool:
    """Put one API object into the store; False (and it is dropped) if it does not parse."""
    if kind is Kind.SECRET:
        store.put(kind, key, secret_data(obj))
        return True
    parsed, problems = parse_object(obj, ignore_unknown_kinds=True)
    if parsed is None or problems:
        store.delete(kind, key)
        log.get("speaker.kube").warning(
            "object does not parse; ignored", kind=kind.value, key=key, problems=len(problems)
        )
        return False
    store.put(kind, key, parsed)
    return True


class KubeSource:
    def __init__(
        self,
        client: KubeClient,
        store: Store,
        notify: Callable[[], None],
        *,
        config_namespace: str | None = None,
        watch_timeout_s: float = 300.0,
    ) -> None:
        self.store = store
        self.informers: dict[Kind, Informer] = {}
        # The speaker watches every kind of the registry.
        for info in KINDS:
            namespace = config_namespace if info.config else None
            informer = Informer(
                client, info.resource, namespace=namespace, watch_timeout_s=watch_timeout_s
            )
            informer.add_handler(self._handler(info.kind, notify))
            self.informers[info.kind] = informer

    def _handler(
        self, kind: Kind, notify: Callable[[], None]
    ) -> Callable[[EventType, str, KubeObject], None]:
        def handle(event: EventType, key: str, obj: KubeObject) -> None:
            if event is EventType.DELETED:
                self.store.delete(kind, key)
            else:
                put(self.store, kind, key, obj)
            notify()

        return handle

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self.informers.values())

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for kind, informer in self.informers.items():
                group.create_task(informer.run(), name=f"informer-{kind.value}")


async def read_cluster(kubeconfig: str | None) -> ClusterView:
    """One consistent-enough read of every kind (for `explain`)."""
    store = Store()
    async with await connect(kubeconfig) as client:
        for info in KINDS:
            listed = await client.list(info.resource)
            for obj in listed.items:
                put(store, info.kind, key_of(obj), obj)
    return store.view()


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
        self._events: deque[tuple[ServiceEvent, KubeObject]] = deque(maxlen=max_pending_events)
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._log = log.get("speaker.kube").bind(node=node)

    async def __call__(self, result: StepResult) -> None:
        self._latest = result
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
        want = {k: summary(v) for k, v in result.announcing.items()}
        for key in sorted(set(want) | set(self._written)):
            value = want.get(key)
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


def read_annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {
        k: str(v)
        for k, v in (meta.get("annotations") or {}).items()
        if str(k).startswith("announce.lb.teapot.io/")
    }
