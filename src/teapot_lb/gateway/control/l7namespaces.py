"""An informer's objects by namespace, kept from its events, each read once per version:
what the gateway's control plane feeds its :class:`~teapot_lb.gateway.translation_cache.
TranslationCache` with, so that a change costs its namespace's objects, not every one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.resources import KubeObject

T = TypeVar("T")


class ByNamespace(Generic[T]):
    """The keys of `informer` per namespace and, per key, `read(object)` of its current
    version (None: not usable, left out). `changed` collects the namespaces of every
    event (whoever reads it takes and clears it); several indexes may share one set."""

    def __init__(
        self,
        informer: Informer,
        read: Callable[[KubeObject], T | None],
        changed: set[str],
    ) -> None:
        self.informer = informer
        self.read = read
        self.changed = changed
        self.keys: dict[str, set[str]] = {}
        self._read: dict[str, tuple[KubeObject, T | None]] = {}
        informer.add_handler(self._event)

    def _event(self, event: EventType, key: str, obj: KubeObject) -> None:
        namespace = key.partition("/")[0] if "/" in key else ""
        keys = self.keys.setdefault(namespace, set())
        if event is EventType.DELETED:
            keys.discard(key)
            self._read.pop(key, None)
            if not keys:
                del self.keys[namespace]
        else:
            keys.add(key)
        self.changed.add(namespace)

    def items(self, namespace: str) -> Iterator[tuple[str, T]]:
        """(key, what was read) of the namespace's usable objects, by key."""
        for key in sorted(self.keys.get(namespace, ())):
            raw = self.informer.get(key)
            if raw is None:
                continue
            kept = self._read.get(key)
            if kept is None or kept[0] is not raw:
                kept = (raw, self.read(raw))
                self._read[key] = kept
            if kept[1] is not None:
                yield key, kept[1]

    def of(self, namespace: str) -> list[T]:
        return [value for _, value in self.items(namespace)]

    def every(self) -> list[T]:
        return [value for namespace in list(self.keys) for value in self.of(namespace)]


__all__ = ["ByNamespace"]
