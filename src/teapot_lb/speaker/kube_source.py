"""The speaker's informers: every kind of the registry into the node's Store.

Informers on Services, EndpointSlices, Nodes, Namespaces, the lb.teapot.io kinds and
Secrets (BGP passwords) put typed objects into the :class:`~teapot_lb.cluster.Store` and
only call `notify` — the speaker plans from the cache. What the speaker writes back is
:mod:`teapot_lb.speaker.kube_reporter`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from teapot_lb import log
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.resources import KubeObject, key_of
from teapot_lb.model import parse_object
from teapot_lb.model.kinds import KINDS
from teapot_lb.model.manifest import secret_data as decode_secret


def secret_data(obj: KubeObject) -> dict[str, bytes]:
    return decode_secret(obj)[0]


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
