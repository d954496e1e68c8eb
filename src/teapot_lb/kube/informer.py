"""One small informer: a cache of one kind kept current by list + watch.

1. List, remember the list's resourceVersion, then watch from it with bookmarks (so
   the resourceVersion keeps moving even when nothing we select changes).
2. When the stream ends (server timeout, dropped connection) watch again from the last
   version seen; no events are lost because the server replays from that version.
3. When the server answers 410 Gone (that version left its history), list again and
   diff the new list against the cache: objects missing from it become DELETED events,
   so deletions that happened in the gap are not lost.
4. Errors (500s, refused connections) back off exponentially with jitter.

Handlers get ``(event_type, key, obj)`` and should only enqueue the key
(controllers are level-triggered and read the cache in ``reconcile``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Mapping

from .. import log
from .backoff import Backoff
from .client import KubeClient
from .errors import Gone, KubeError
from .resources import KubeObject, Resource, key_of, resource_version


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


Handler = Callable[[EventType, str, KubeObject], None]


def cache_diff(
    old: Mapping[str, KubeObject], new: Mapping[str, KubeObject]
) -> list[tuple[EventType, str, KubeObject]]:
    """The events that turn cache ``old`` into ``new`` (a fresh list), by key.

    An object whose resourceVersion did not change produces no event; one missing from
    ``new`` is DELETED with its last known state.
    """
    changes: list[tuple[EventType, str, KubeObject]] = []
    for key, obj in new.items():
        before = old.get(key)
        if before is None:
            changes.append((EventType.ADDED, key, obj))
        elif resource_version(before) != resource_version(obj):
            changes.append((EventType.MODIFIED, key, obj))
    changes.extend((EventType.DELETED, key, obj) for key, obj in old.items() if key not in new)
    return changes


class Informer:
    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout_s: float = 300.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_s = watch_timeout_s
        self.backoff = backoff or Backoff(0.2, 30.0)
        self._cache: dict[str, KubeObject] = {}
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        self.resource_version = ""
        # Counters for tests and metrics.
        self.lists = 0
        self.watches = 0
        self.errors = 0
        self._log = log.get("kube.informer").bind(resource=str(resource))

    # --------------------------------------------------------------- reading

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    @property
    def has_synced(self) -> bool:
        """True once the first list is in the cache."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, key: str) -> KubeObject | None:
        return self._cache.get(key)

    def list_keys(self) -> list[str]:
        return list(self._cache)

    def list_objects(self) -> list[KubeObject]:
        return list(self._cache.values())

    def __len__(self) -> int:
        return len(self._cache)

    # --------------------------------------------------------------- running

    async def run(self) -> None:
        """List and watch until cancelled."""
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch_once()
            except Gone:
                # Our version left the server's history: start over from a list. A second
                # Gone right after a list (a very busy server) waits a little first.
                self._log.info("watch expired, re-listing", rv=self.resource_version)
                if self.backoff.failures:
                    await asyncio.sleep(self.backoff.next())
                else:
                    self.backoff.failures += 1
                need_list = True
            except KubeError as err:
                self.errors += 1
                delay = self.backoff.next()
                self._log.warning("list/watch failed", error=str(err), retry_in=round(delay, 2))
                await asyncio.sleep(delay)
            except Exception:
                # Never let one bad response end the informer: the cache would go stale
                # silently. Log it loudly and start over from a list.
                self.errors += 1
                delay = self.backoff.next()
                self._log.exception("informer error", retry_in=round(delay, 2))
                need_list = True
                await asyncio.sleep(delay)

    async def _relist(self) -> None:
        listed = await self.client.list(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        self.lists += 1
        fresh = {key_of(obj): _trimmed(obj) for obj in listed.items}
        changes = cache_diff(self._cache, fresh)
        self._cache = fresh
        self.resource_version = listed.resource_version
        for type_, key, obj in changes:
            self._dispatch(type_, key, obj)
        self.backoff.reset()
        self._synced.set()

    async def _watch_once(self) -> None:
        self.watches += 1
        stream = self.client.watch(
            self.resource,
            resource_version=self.resource_version,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_s=self.watch_timeout_s,
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                rv = resource_version(event.object)
                if event.type == "BOOKMARK":
                    self.resource_version = rv or self.resource_version
                    continue
                key = key_of(event.object)
                if event.type in ("ADDED", "MODIFIED"):
                    obj = _trimmed(event.object)
                    self._cache[key] = obj
                    self._dispatch(EventType(event.type), key, obj)
                elif event.type == "DELETED":
                    self._cache.pop(key, None)
                    self._dispatch(EventType.DELETED, key, event.object)
                if rv:
                    self.resource_version = rv
                self.backoff.reset()

    def _dispatch(self, type_: EventType, key: str, obj: KubeObject) -> None:
        for handler in self._handlers:
            try:
                handler(type_, key, obj)
            except Exception:
                self._log.exception("event handler failed", key=key, event_type=type_.value)


def _trimmed(obj: KubeObject) -> KubeObject:
    """Drop ``metadata.managedFields``: bookkeeping for server-side apply that no reader
    here needs and that can double the memory of a large cache."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj
