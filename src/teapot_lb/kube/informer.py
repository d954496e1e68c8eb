"""One small informer: a cache of one kind kept current by list + watch.

1. List, remember the list's resourceVersion, then watch from it with bookmarks (so
   the resourceVersion keeps moving even when nothing we select changes). The list comes
   in pages (500 objects, as client-go's pager asks), each handled before the next is
   fetched, so a 100k-object list is never held whole.
2. When the stream ends (server timeout, dropped connection) watch again from the last
   version seen; no events are lost because the server replays from that version.
3. When the server answers 410 Gone (that version left its history), list again and
   diff the new list against the cache: objects missing from it become DELETED events,
   so deletions that happened in the gap are not lost.
4. Other failures wait as :class:`~teapot_lb.kube.backoff.Retry` says (a 410 not at all,
   an unreachable server about a second at most) and forget their count on the next
   success, so the informer is back within about a second of the server answering.
5. :attr:`Informer.synced` says whether the cache is current: false from the first failed
   request (an outage, a refusal, a 410) until a list completes again. After such a
   failure the informer always re-lists rather than resuming its watch, so "synced again"
   means "one complete, fresh list". A stream that merely ended (timeout, a cut) is
   resumed from the last version at once and the cache stays synced while that works.
   Readers that need every kind to be current together (the speaker's plan, the
   controller's reconcile) watch this through :meth:`Informer.add_sync_handler`.

Handlers get ``(event_type, key, obj)`` and should only enqueue the key
(controllers are level-triggered and read the cache in ``reconcile``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Container, Iterable, Mapping

from .. import log
from .backoff import Backoff, Retry
from .client import LIST_PAGE, KubeClient
from .detach import detached
from .errors import Forbidden, Gone, KubeError, StreamCut
from .pace import Pace
from .resources import KubeObject, Resource, key_of, resource_version, split_key


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


Handler = Callable[[EventType, str, KubeObject], None]
SyncHandler = Callable[[bool], None]


def cache_diff(
    old: Mapping[str, KubeObject], new: Mapping[str, KubeObject]
) -> list[tuple[EventType, str, KubeObject]]:
    """The events that turn cache ``old`` into ``new`` (a fresh list), by key.

    An object whose resourceVersion did not change produces no event; one missing from
    ``new`` is DELETED with its last known state.
    """
    return version_diff({key: resource_version(obj) for key, obj in old.items()}, new, old)


def version_diff(
    old: Mapping[str, str],
    new: Mapping[str, KubeObject],
    last: Mapping[str, KubeObject] | None = None,
) -> list[tuple[EventType, str, KubeObject]]:
    """:func:`cache_diff` against the resourceVersions of the old cache; an object missing
    from ``new`` is DELETED with its last state from `last`, or else a stub that names it
    (namespace, name, last version)."""
    changes: list[tuple[EventType, str, KubeObject]] = []
    for key, obj in new.items():
        change = _change(old.get(key), obj)
        if change is not None:
            changes.append((change, key, obj))
    return changes + _deletions(old, new, last)


def _change(before: str | None, obj: KubeObject) -> EventType | None:
    """The event that brings a listed object into a cache that had version `before`."""
    if before is None:
        return EventType.ADDED
    if before != resource_version(obj):
        return EventType.MODIFIED
    return None


def _deletions(
    old: Mapping[str, str], listed: Container[str], last: Mapping[str, KubeObject] | None
) -> list[tuple[EventType, str, KubeObject]]:
    """DELETED for every key of `old` that the list did not have."""
    deleted: list[tuple[EventType, str, KubeObject]] = []
    for key, version in old.items():
        if key not in listed:
            gone = last.get(key) if last is not None else None
            deleted.append((EventType.DELETED, key, gone or _stub(key, version)))
    return deleted


def _stub(key: str, version: str) -> KubeObject:
    namespace, name = split_key(key)
    meta: dict[str, str] = {"name": name, "resourceVersion": version}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"metadata": meta}


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
        retry: Retry | None = None,
        keep_objects: bool = True,
        page_size: int = LIST_PAGE,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_s = watch_timeout_s
        # Objects per page of a list (0: the whole list in one answer).
        self.page_size = page_size
        # `backoff` (kept for callers that tune one sequence): the delays after
        # connection failures and 5xx.
        self.retry = retry or Retry(backoff)
        # Every object's resourceVersion (what a re-list diffs against), and, only when
        # `keep_objects`, the objects themselves (:meth:`get`). Readers that keep their own
        # typed copy (the controller's and the speaker's Store) pass keep_objects=False: a
        # second, raw copy of 100k Services costs hundreds of MB (issue 19).
        self._versions: dict[str, str] = {}
        self._cache: dict[str, KubeObject] | None = {} if keep_objects else None
        self._handlers: list[Handler] = []
        self._sync_handlers: list[SyncHandler] = []
        self._synced = asyncio.Event()
        self._current = False
        self._cut_before_event = False
        self.resource_version = ""
        # The refusal (403) of the last failed request, cleared by the next success.
        self.forbidden: str | None = None
        # The last failed request's error (any kind), cleared by the next complete list.
        self.last_error: str | None = None
        # Counters for tests and metrics.
        self.lists = 0
        self.watches = 0
        self.errors = 0
        self._log = log.get("kube.informer").bind(resource=str(resource))

    # --------------------------------------------------------------- reading

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def add_sync_handler(self, handler: SyncHandler) -> None:
        """`handler(synced)` whenever :attr:`synced` changes."""
        self._sync_handlers.append(handler)

    @property
    def has_synced(self) -> bool:
        """True once the first list is in the cache (and from then on)."""
        return self._synced.is_set()

    @property
    def synced(self) -> bool:
        """True while the cache is current: a list completed and no request has failed
        since (see the module's docstring)."""
        return self._current

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, key: str) -> KubeObject | None:
        return self._objects().get(key)

    def list_keys(self) -> list[str]:
        return list(self._versions)

    def list_objects(self) -> list[KubeObject]:
        return list(self._objects().values())

    def __len__(self) -> int:
        return len(self._versions)

    def _objects(self) -> dict[str, KubeObject]:
        if self._cache is None:
            raise TypeError(f"informer of {self.resource} keeps no objects (keep_objects=False)")
        return self._cache

    # --------------------------------------------------------------- running

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            verb = "list"
            try:
                if not self._current:
                    await self._relist()
                verb = "watch"
                await self._watch_once()
                # The stream ended (its timeout, or the server closed it): watch again
                # from the last version at once.
            except StreamCut as err:
                # The stream broke off: resume at once; if the server is gone, that
                # request fails and counts as the outage. Two cuts with no event between
                # count as a failure (no spinning on a server that cuts every stream).
                if self._cut_before_event:
                    await self._failed(verb, err)
                else:
                    self._cut_before_event = True
                    self._log.info("watch stream cut; resuming", error=str(err))
            except Exception as err:
                await self._failed(verb, err)

    async def _failed(self, verb: str, err: Exception) -> None:
        """Any failed request: the cache is no longer known to be current."""
        self._set_current(False)
        self.forbidden = self._refusal(verb, err) if isinstance(err, Forbidden) else None
        self.last_error = self.forbidden or f"{verb} failed: {err}"
        delay = self.retry.delay(err)
        if isinstance(err, Gone):
            self._log.info("watch expired, re-listing", rv=self.resource_version, wait=delay)
        elif isinstance(err, KubeError):
            self.errors += 1
            self._log.warning(
                "list/watch failed",
                verb=verb,
                error=self.forbidden or str(err),
                retry_in=round(delay, 2),
            )
        else:
            # Never let one bad response end the informer: the cache would go stale
            # silently. Log it loudly and start over from a list.
            self.errors += 1
            self._log.error("informer error", verb=verb, retry_in=round(delay, 2), exc_info=err)
        if delay > 0:
            await asyncio.sleep(delay)

    @property
    def where(self) -> str:
        """Where this informer lists: `namespace N` or `all namespaces`."""
        return f"namespace {self.namespace}" if self.namespace else "all namespaces"

    def _refusal(self, verb: str, err: Forbidden) -> str:
        return f"forbidden: {verb} {self.resource} in {self.where}: {err.message}"

    def _set_current(self, current: bool) -> None:
        if current == self._current:
            return
        self._current = current
        for handler in self._sync_handlers:
            try:
                handler(current)
            except Exception:
                self._log.exception("sync handler failed", synced=current)

    async def _relist(self) -> None:
        """List in pages and hand each page's changes out as it comes: neither a page's
        JSON nor the whole list is held past its dispatch (issue 19: 100k Services).

        The events are :func:`version_diff`'s for the whole list, in its order: ADDED and
        MODIFIED page by page, then DELETED for what no page had. The cache follows each
        event as a watch's does, so a list that fails part-way leaves it between the two
        states (and not :attr:`synced`); the next list goes on from there.
        """
        pages = self.client.list_pages(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self.page_size,
        )
        listed: set[str] = set()
        changes = 0
        pace = Pace()
        async with contextlib.aclosing(pages):
            async for page in pages:
                if page.first:
                    listed = set()  # the list started over (a continue token expired)
                self.resource_version = page.resource_version
                for raw in page.items:
                    obj = _trimmed(raw)
                    key = key_of(obj)
                    listed.add(key)
                    change = _change(self._versions.get(key), obj)
                    if change is None:
                        continue
                    # A copy: the version outlives the list's JSON and should not keep it.
                    self._versions[key] = detached(resource_version(obj))
                    if self._cache is not None:
                        self._cache[key] = obj
                    changes += 1
                    self._dispatch(change, key, obj)
                    await pace.turn()
                del page
        self.lists += 1
        for type_, key, obj in _deletions(self._versions, listed, self._cache):
            del self._versions[key]
            if self._cache is not None:
                self._cache.pop(key, None)
            changes += 1
            self._dispatch(type_, key, obj)
            await pace.turn()
        self.retry.listed()
        self.forbidden = None
        self.last_error = None
        if self.lists > 1:
            self._log.info("re-listed", objects=len(listed), changes=changes)
        self._synced.set()
        self._set_current(True)

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
            pace = Pace()
            async for event in stream:
                # Buffered events are read without a pause: handled paced (kube.pace).
                await pace.turn()
                self.retry.watched()
                self._cut_before_event = False
                rv = resource_version(event.object)
                if event.type == "BOOKMARK":
                    self.resource_version = rv or self.resource_version
                    continue
                key = key_of(event.object)
                if event.type in ("ADDED", "MODIFIED"):
                    obj = _trimmed(event.object)
                    self._versions[key] = detached(rv)
                    if self._cache is not None:
                        self._cache[key] = obj
                    self._dispatch(EventType(event.type), key, obj)
                elif event.type == "DELETED":
                    self._versions.pop(key, None)
                    if self._cache is not None:
                        self._cache.pop(key, None)
                    self._dispatch(EventType.DELETED, key, event.object)
                if rv:
                    self.resource_version = rv

    def _dispatch(self, type_: EventType, key: str, obj: KubeObject) -> None:
        for handler in self._handlers:
            try:
                handler(type_, key, obj)
            except Exception:
                self._log.exception("event handler failed", key=key, event_type=type_.value)


def unready(informers: Iterable[Informer], hint: str = "") -> list[str]:
    """Why these informers keep a component unready, each reason naming what was tried
    (the resource, where) and how it failed: refusals (RBAC) first, then caches never
    listed. `hint` (what the operator sets to change what is tried) ends each reason."""
    informers = list(informers)
    tail = f" ({hint})" if hint else ""
    reasons = [f"{i.forbidden}{tail}" for i in informers if i.forbidden]
    for i in informers:
        if not i.has_synced and not i.forbidden:
            why = f": {i.last_error}" if i.last_error else " yet"
            reasons.append(f"{i.resource} in {i.where} not synced{why}{tail}")
    return reasons


def _trimmed(obj: KubeObject) -> KubeObject:
    """Drop ``metadata.managedFields``: bookkeeping for server-side apply that no reader
    here needs and that can double the memory of a large cache."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj
