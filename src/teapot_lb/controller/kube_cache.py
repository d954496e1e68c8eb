"""The controller's informers and the cache they fill (ingestion only; nothing is written).

Informers on Services, Namespaces and the lb.teapot.io kinds (those the kind registry marks
`controller`) keep, per object, the typed model of its newest version (the informers'
events plus the controller's own writes, :meth:`ControllerCache.write_through`) in the
:class:`~teapot_lb.cluster.Store`, and nothing else: no raw JSON (issue 19: at 100k Services
the JSON doubled the cache). What a write needs of the object (its version, its identity
for Events) is read from the model (:meth:`ControllerCache.reference`). An object that does
not parse is left out of the store, only its version kept (an AddressPool is kept as an
:class:`UnparsedPool`, so its status can say why). Every change is handed to
`on_change(kind, key)`, which only enqueues keys.

:attr:`ControllerCache.synced` is true only while every informer is current (a list
completed since its last failed request); the reconcile loop does not act on the cache
while it is false (after an outage, until every kind has been listed again), so no IP is
assigned or released from a half-recovered view. `on_synced` is called when it becomes
true again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from teapot_lb import log
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.cluster.view import Stored
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM
from teapot_lb.controller.pools import UnparsedPool
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import KubeError
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.resources import SERVICES, KubeObject, key_of, resource_version
from teapot_lb.model import AddressPoolStatus, ObjectMeta, ObjectRef, parse_object
from teapot_lb.model.kinds import KINDS, REGISTRY

# What the controller watches, from the kind registry.
WATCHED = tuple(info for info in KINDS if info.controller)


class ControllerCache:
    def __init__(
        self,
        client: KubeClient,
        metrics: ControllerMetrics,
        *,
        config_namespace: str | None = None,
        on_change: Callable[[Kind, str], None] = lambda kind, key: None,
        on_synced: Callable[[], None] = lambda: None,
        watch_timeout_s: float = 300.0,
        max_backoff_s: float = 1.0,
    ) -> None:
        self.client = client
        self.metrics = metrics
        self.on_change = on_change
        self.on_synced = on_synced
        self.store = Store()
        self.unparsed_pools: dict[str, UnparsedPool] = {}
        self.informers: dict[Kind, Informer] = {}
        # The resourceVersion of each object that did not parse (those that did: the
        # store's model has it).
        self._unparsed: dict[Kind, dict[str, str]] = {info.kind: {} for info in WATCHED}
        self._log = log.get("controller")
        for info in WATCHED:
            informer = Informer(
                client,
                info.resource,
                namespace=config_namespace if info.config else None,
                watch_timeout_s=watch_timeout_s,
                backoff=Backoff(min(0.1, max_backoff_s), max_backoff_s),
                keep_objects=False,
            )
            informer.add_handler(self._handler(info.kind))
            informer.add_sync_handler(self._sync_changed)
            self.informers[info.kind] = informer

    @property
    def synced(self) -> bool:
        """Every informer is current (see the module's docstring)."""
        return all(informer.synced for informer in self.informers.values())

    def _sync_changed(self, synced: bool) -> None:
        if synced and self.synced:
            self.on_synced()

    def readiness(self) -> list[str]:
        """Why the controller is not ready: kinds never listed, and refusals (RBAC)."""
        return unready(self.informers.values())

    async def wait_synced(self) -> None:
        for informer in self.informers.values():
            await informer.wait_synced()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for informer in self.informers.values():
                group.create_task(informer.run())

    def live_view(self) -> ClusterView:
        """The store as it is now, read through (see :func:`live_view`)."""
        return live_view(self.store)

    def reference(self, kind: Kind, key: str) -> KubeObject | None:
        """What a write is based on: the newest cached version of a parsed object, as
        the JSON of its identity (apiVersion, kind, name, namespace, uid, resourceVersion:
        what a status patch and an Event need), or None when it is not cached."""
        obj = self.store.get(kind, key)
        if not isinstance(obj, BaseModel):
            return None
        meta = obj.metadata
        fields = {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid}
        fields["resourceVersion"] = meta.resource_version
        return {
            "apiVersion": obj.api_version,
            "kind": obj.kind,
            "metadata": {k: v for k, v in fields.items() if v is not None},
        }

    def version(self, kind: Kind, key: str) -> str | None:
        """The resourceVersion of the newest cached version, or None when not cached."""
        obj = self.store.get(kind, key)
        if isinstance(obj, BaseModel):
            return obj.metadata.resource_version or ""
        return self._unparsed[kind].get(key)

    def _handler(self, kind: Kind) -> Callable[[EventType, str, KubeObject], None]:
        def handle(event: EventType, key: str, obj: KubeObject) -> None:
            if event is EventType.DELETED:
                self._unparsed[kind].pop(key, None)
                self.store.delete(kind, key)
                if kind is Kind.ADDRESS_POOL:
                    self.unparsed_pools.pop(key, None)
            else:
                current = self.version(kind, key)
                if current is not None and not newer_version(resource_version(obj), current):
                    return  # this version (or a newer one, our own write) is cached already
                self._put(kind, key, obj)
            self.on_change(kind, key)

        return handle

    def write_through(self, kind: Kind, key: str, based_on: KubeObject, obj: KubeObject) -> None:
        """Put what a write returned into the cache, unless the informer brought something
        newer meanwhile, so the next reconcile sees our own write and does not repeat it."""
        version = resource_version(based_on)
        before = self.store.get(kind, key)
        if not version or self.version(kind, key) != version:
            return
        self._put(kind, key, obj)
        after = self.store.get(kind, key)
        if isinstance(before, BaseModel) and isinstance(after, BaseModel):
            # Compared as the models (what a reconcile can read), field by field: the raw
            # JSON is not kept, and dumping both models cost more than the reconcile.
            others = changed_by_others(before, after)
        else:
            others = True
        if others:
            # The write landed on a version someone else had changed meanwhile (a patch
            # of the spec between our read and our write). The informer's event for
            # that change is now older than the cache and brings nothing: reconcile
            # here, or the change would never be acted on.
            self.on_change(kind, key)

    async def catch_up_services(self) -> None:
        """Read every Service once more (before the allocator is rebuilt on taking the
        lease), so that IPs the previous leader wrote just before it stopped are known even
        if our watch has not delivered them yet (otherwise such an IP could be handed out
        twice)."""
        while True:
            try:
                # Page by page (100k Services are not held at once): taking only what is
                # newer than the cache, a page read twice (a retry, a list started over)
                # changes nothing.
                async for page in self.client.list_pages(SERVICES):
                    for obj in page.items:
                        key = key_of(obj)
                        current = self.version(Kind.SERVICE, key)
                        if current is None or newer_version(resource_version(obj), current):
                            self._put(Kind.SERVICE, key, obj)
                return
            except KubeError as err:
                self.metrics.api_error("list services", err)
                await asyncio.sleep(1.0)

    def _put(self, kind: Kind, key: str, obj: KubeObject) -> None:
        parsed, problems = parse_object(obj)
        if parsed is not None and not problems:
            self._unparsed[kind].pop(key, None)
            self.store.put(kind, key, parsed)
            if kind is Kind.ADDRESS_POOL:
                self.unparsed_pools.pop(key, None)
            return
        self.store.delete(kind, key)
        self._unparsed[kind][key] = resource_version(obj)
        meta = obj.get("metadata") or {}
        self._log.warning(
            "object does not parse; ignored",
            kind=kind.value,
            key=key,
            problems=[str(p) for p in problems],
        )
        if kind is Kind.ADDRESS_POOL:
            try:
                conditions = tuple(
                    AddressPoolStatus.model_validate(obj.get("status") or {}).conditions
                )
            except ValidationError:
                conditions = ()
            self.unparsed_pools[key] = UnparsedPool(
                ObjectRef(kind.value, meta.get("namespace"), str(meta.get("name", key))),
                tuple(problems),
                conditions,
                meta.get("generation"),
            )


def live_view(store: Store) -> ClusterView:
    """A view that reads `store` as it is now, for a reconcile that uses it at once
    (before its first await). Unlike :meth:`Store.view`, it copies nothing: a snapshot
    of every Service after each Service change made the cost of a change grow with
    the number of Services (issue 19)."""
    # Each kind holds only its model (the store checks), as in Store.view.
    fields: dict[str, Any] = {
        REGISTRY[info.kind].view_field: _LiveKind(store, info.kind) for info in KINDS
    }
    return ClusterView(**fields)


class _LiveKind(Mapping[str, Stored]):
    """The store's objects of one kind, read through (lookups cost O(1); iterating
    lists the keys, in order)."""

    def __init__(self, store: Store, kind: Kind) -> None:
        self._store = store
        self._kind = kind

    def __getitem__(self, key: str) -> Stored:
        obj = self._store.get(self._kind, key)
        if obj is None:
            raise KeyError(key)
        return obj

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.keys(self._kind))

    def __len__(self) -> int:
        return len(self._store.keys(self._kind))


def newer(obj: KubeObject, than: KubeObject) -> bool:
    """Whether `obj` is a newer version than `than` (see :func:`newer_version`)."""
    return newer_version(resource_version(obj), resource_version(than))


def newer_version(a: str, b: str) -> bool:
    """Whether resourceVersion `a` is newer than `b`. Resource versions are opaque, but
    API servers in practice serve etcd revisions (integers); when they are not integers,
    any other version counts as newer."""
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return a != b or not a


def changed_by_others(before: BaseModel, after: BaseModel) -> bool:
    """Whether ``after`` (what our status or annotation write returned, parsed) differs from
    ``before`` (what the write was based on) in more than the writer touches: the status,
    the resourceVersion, and our own annotation. Field by field, stopping at the first
    difference; parts the cache shares between the two are equal by identity at once."""
    if type(before) is not type(after):
        return True
    for name in type(before).model_fields:
        if name in ("status", "metadata"):
            continue
        if getattr(before, name) != getattr(after, name):
            return True
    old, new = getattr(before, "metadata", None), getattr(after, "metadata", None)
    if not isinstance(old, ObjectMeta) or not isinstance(new, ObjectMeta):
        return old != new
    for name in ObjectMeta.model_fields:
        if name in ("resource_version", "annotations"):
            continue
        if getattr(old, name) != getattr(new, name):
            return True
    return _others(old.annotations) != _others(new.annotations)


def _others(annotations: dict[str, str]) -> dict[str, str]:
    """The annotations but the one the controller writes."""
    if ANNOTATION_ALLOCATED_FROM not in annotations:
        return annotations
    return {k: v for k, v in annotations.items() if k != ANNOTATION_ALLOCATED_FROM}
