"""Kubernetes Events (core/v1) with reasons, aggregated like kubectl shows them.

The same (object, type, reason, message) recorded again bumps ``count`` and
``lastTimestamp`` on the existing Event instead of creating another. Recording is
best-effort: a failure is logged and never propagates into the reconcile that reported.
"""

from __future__ import annotations

import enum
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from .. import log
from .client import KubeClient
from .errors import KubeError, NotFound
from .resources import EVENTS, KubeObject


class EventKind(enum.StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    first: str


def _timestamp(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        component: str,
        *,
        instance: str = "",
        cache_size: int = 4096,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self.cache_size = cache_size
        self._clock = clock
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._log = log.get("kube.events")

    async def record(
        self, involved: KubeObject, kind: EventKind | str, reason: str, message: str
    ) -> bool:
        """Record an Event about ``involved`` (a full object with kind/apiVersion/metadata).

        Returns False (and logs) when the API refused or was unreachable.
        """
        kind = EventKind(kind)
        meta = involved.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        ref = {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        if meta.get("namespace"):
            ref["namespace"] = meta["namespace"]
        key = (ref["kind"], namespace, ref["name"], ref["uid"], kind.value, reason, message)
        now = self._clock()
        try:
            seen = self._seen.get(key)
            if seen is not None:
                try:
                    await self.client.patch(
                        EVENTS,
                        seen.name,
                        {"count": seen.count + 1, "lastTimestamp": _timestamp(now)},
                        namespace=seen.namespace,
                    )
                    seen.count += 1
                    self._seen.move_to_end(key)
                    return True
                except NotFound:
                    del self._seen[key]  # expired on the server: start a new one
            name = f"{ref['name']}.{int(now * 1e9):x}{secrets.token_hex(2)}"
            body: KubeObject = {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref,
                "reason": reason,
                "message": message,
                "type": kind.value,
                "count": 1,
                "firstTimestamp": _timestamp(now),
                "lastTimestamp": _timestamp(now),
                "eventTime": None,
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "reportingInstance": self.instance,
            }
            if self.instance:
                body["source"]["host"] = self.instance
            await self.client.create(EVENTS, body)
            self._seen[key] = _Seen(name, namespace, 1, _timestamp(now))
            while len(self._seen) > self.cache_size:
                self._seen.popitem(last=False)
            return True
        except KubeError as err:
            self._log.warning(
                "could not record event", reason=reason, object=ref["name"], error=str(err)
            )
            return False


__all__ = ["EventKind", "EventRecorder"]
