"""The speaker's informers: every kind of the registry into the node's Store.

Informers on Services, EndpointSlices, Nodes, Namespaces, the lb.teapot.io kinds and
Secrets (BGP passwords) put typed objects into the :class:`~teapot_lb.cluster.Store` and
only call `notify` — the speaker plans from the cache. What the speaker writes back is
:mod:`teapot_lb.speaker.kube_reporter`'s.

The speaker plans only from a view in which every kind is current. The informers fill a
staging store; the store the speaker reads follows it object by object while every
informer is synced, and is held as it was when one of them is not (an outage, a refusal,
a re-list after a 410): then the last consistent plan stays in force — nothing
withdrawn, nothing announced from a half-recovered view (a new Service next to a Node
whose exclusion label has not been re-read yet). When the last informer has re-listed,
the whole staging store is published at once and the speaker plans again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from teapot_lb import log
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.cluster.projection import Projection
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import NotFound
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.resources import KubeObject, key_of
from teapot_lb.model import parse_object
from teapot_lb.model.kinds import ONE_CLUSTER_KINDS, TENANCY_KINDS, KindInfo
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
        tenancy: bool = False,
        kinds: Sequence[KindInfo] | None = None,
        project: Projection | None = None,
    ) -> None:
        # `store` is what the speaker plans from: only ever a consistent view. `project`
        # cuts each object down as it comes in (the speaker's: only what it reads, see
        # teapot_lb.cluster.projection); `store` then gets the staged, projected objects.
        self.store = store
        self.staging = Store(project)
        self.notify = notify
        self.consistent = False
        self.held_since: float | None = None  # loop time the view was last held
        self.informers: dict[Kind, Informer] = {}
        self._log = log.get("speaker.kube")
        # The speaker watches every kind of one cluster; Teapot's management kinds only on a
        # management cluster (`--tenancy`: route mode, see teapot_lb.tenancy.programmed).
        # `kinds`: a component that reads fewer (the OVN writer) watches only those.
        self.kinds = kinds if kinds is not None else TENANCY_KINDS if tenancy else ONE_CLUSTER_KINDS
        for info in self.kinds:
            namespace = config_namespace if info.config else None
            # The Store keeps the typed objects; the informers only their versions.
            informer = Informer(
                client,
                info.resource,
                namespace=namespace,
                watch_timeout_s=watch_timeout_s,
                keep_objects=False,
            )
            informer.add_handler(self._handler(info.kind))
            informer.add_sync_handler(self._sync_changed)
            self.informers[info.kind] = informer

    def _handler(self, kind: Kind) -> Callable[[EventType, str, KubeObject], None]:
        def handle(event: EventType, key: str, obj: KubeObject) -> None:
            if event is EventType.DELETED:
                self.staging.delete(kind, key)
            else:
                put(self.staging, kind, key, obj)
            if not self.consistent:
                return
            staged = self.staging.get(kind, key)
            if staged is None:
                self.store.delete(kind, key)
            else:
                self.store.put(kind, key, staged)
            self.notify()

        return handle

    def _sync_changed(self, _synced: bool) -> None:
        synced = self.synced
        if synced == self.consistent:
            return
        self.consistent = synced
        if not synced:
            self.held_since = asyncio.get_running_loop().time()
            self._log.info(
                "view held: not every kind is current",
                waiting=[k.value for k, i in self.informers.items() if not i.synced],
            )
            return
        view = self.staging.view()
        for info in self.kinds:
            self.store.replace(info.kind, view.of_kind(info.kind))
        if self.held_since is not None:
            held = asyncio.get_running_loop().time() - self.held_since
            self._log.info("view current again: planning", held_s=round(held, 3))
        self.notify()

    @property
    def synced(self) -> bool:
        """Every informer's cache is current (a list completed since its last failure)."""
        return all(i.synced for i in self.informers.values())

    def readiness(self, hint: str = "") -> list[str]:
        """Why the component is not ready: kinds never listed, and refusals (RBAC), each
        naming where it looked (`hint`: what the operator sets to change that)."""
        return unready(self.informers.values(), hint)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for kind, informer in self.informers.items():
                group.create_task(informer.run(), name=f"informer-{kind.value}")


async def read_cluster(kubeconfig: str | None, *, tenancy: bool = False) -> ClusterView:
    """One consistent-enough read of every kind (for `explain`, `status`). With
    ``tenancy``, Teapot's management kinds too, where the cluster serves them (a cluster
    without their CRDs answers 404: read as none)."""
    store = Store()
    kinds = TENANCY_KINDS if tenancy else ONE_CLUSTER_KINDS
    async with await connect(kubeconfig) as client:
        for info in kinds:
            try:
                # Page by page: a page's JSON goes once its objects are in the store.
                async for page in client.list_pages(info.resource):
                    if page.first:  # (again, after an expired continue token: a new list)
                        store.replace(info.kind, {})
                    for obj in page.items:
                        put(store, info.kind, key_of(obj), obj)
            except NotFound:
                if info in ONE_CLUSTER_KINDS:
                    raise
    return store.view()
