"""The fake API server's storage: objects, one global resourceVersion, watch history.

Stored objects are never mutated in place: every write builds a new dict. That lets the
history and the watchers share references without copying.
"""

from __future__ import annotations

import asyncio
import copy
import re
import secrets
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .kinds import Kind

Obj = dict[str, Any]


class ApiError(Exception):
    """An error the server answers with a ``Status`` body."""

    def __init__(
        self, code: int, reason: str, message: str, *, kind: Kind | None = None, name: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.kind = kind
        self.name = name

    def status(self) -> Obj:
        details: Obj = {}
        if self.name:
            details["name"] = self.name
        if self.kind is not None:
            details["group"] = self.kind.group
            details["kind"] = self.kind.plural
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            body["details"] = details
        return body


def not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{kind.resource} "{name}" not found', kind=kind, name=name)


def conflict(kind: Kind, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {kind.resource} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        kind=kind,
        name=name,
    )


def invalid(kind: Kind, name: str, message: str) -> ApiError:
    return ApiError(
        422, "Invalid", f'{kind.kind} "{name}" is invalid: {message}', kind=kind, name=name
    )


_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _apply_defaults(kind: Kind, obj: Obj) -> None:
    """The defaulting a real server does on create, for the fields our code reads."""
    if kind.group == "" and kind.plural == "namespaces":
        obj.setdefault("status", {}).setdefault("phase", "Active")
    if kind.group == "" and kind.plural == "services":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
        if spec["type"] == "ExternalName":
            return
        # The fake cluster is dual-stack (IPv4 primary); cluster IPs are not allocated.
        policy = spec.setdefault("ipFamilyPolicy", "SingleStack")
        families = list(spec.get("ipFamilies") or ["IPv4"])
        if policy in ("PreferDualStack", "RequireDualStack") and len(families) == 1:
            families.append("IPv6" if families[0] == "IPv4" else "IPv4")
        spec["ipFamilies"] = families
        if spec["type"] in ("LoadBalancer", "NodePort"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    kind: Kind
    type: str  # ADDED / MODIFIED / DELETED
    obj: Obj
    old: Obj | None  # the previous state (for selector transitions)


@dataclass(eq=False)
class Watcher:
    kind: Kind
    namespace: str | None
    queue: asyncio.Queue[WatchEvent | None] = field(default_factory=asyncio.Queue)


def _key(kind: Kind, namespace: str | None, name: str) -> tuple[str, str, str]:
    return (kind.resource, namespace or "", name)


class _Objects:
    """Objects indexed by resource, then (namespace, name)."""

    def __init__(self) -> None:
        self._by_resource: dict[str, dict[tuple[str, str], Obj]] = {}

    def get(self, key: tuple[str, str, str]) -> Obj | None:
        return self._by_resource.get(key[0], {}).get(key[1:])

    def __contains__(self, key: tuple[str, str, str]) -> bool:
        return key[1:] in self._by_resource.get(key[0], {})

    def __setitem__(self, key: tuple[str, str, str], obj: Obj) -> None:
        self._by_resource.setdefault(key[0], {})[key[1:]] = obj

    def __delitem__(self, key: tuple[str, str, str]) -> None:
        del self._by_resource[key[0]][key[1:]]

    def of(self, resource: str) -> dict[tuple[str, str], Obj]:
        return self._by_resource.get(resource, {})

    def items(self) -> list[tuple[tuple[str, str, str], Obj]]:
        return [
            ((res, ns, name), obj)
            for res, objs in self._by_resource.items()
            for (ns, name), obj in objs.items()
        ]


class Store:
    def __init__(self, kinds: dict[str, Kind], history_size: int = 1000) -> None:
        # Shared with the server, keyed by Kind.resource; register_kind adds rows.
        self.kinds = kinds
        self.rv = 1
        self.objects = _Objects()
        self.history: deque[WatchEvent] = deque()
        self.history_size = history_size
        # Watches from a resourceVersion below this get 410 Gone.
        self.compacted_rv = 1
        self.watchers: set[Watcher] = set()

    # ---------------------------------------------------------------- events

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _emit(self, kind: Kind, type_: str, obj: Obj, old: Obj | None) -> None:
        event = WatchEvent(int(obj["metadata"]["resourceVersion"]), kind, type_, obj, old)
        self.history.append(event)
        while len(self.history) > self.history_size:
            dropped = self.history.popleft()
            self.compacted_rv = dropped.rv
        ns = obj["metadata"].get("namespace")
        for w in self.watchers:
            if w.kind is kind and (w.namespace is None or w.namespace == ns):
                w.queue.put_nowait(event)

    def compact(self) -> None:
        """Forget all history: watches from any earlier resourceVersion get 410 Gone."""
        self.history.clear()
        self.compacted_rv = self.rv

    def drop_watches(self) -> None:
        for w in self.watchers:
            w.queue.put_nowait(None)

    def open_watch(
        self, kind: Kind, namespace: str | None, since: int | None
    ) -> tuple[Watcher, list[WatchEvent]]:
        """Register a watcher and return the events it must replay first.

        ``since=None`` means "start with the current state" (synthetic ADDED events).
        Raises 410 Gone when the history no longer reaches back to ``since``.
        """
        if since is None:
            replay = [
                WatchEvent(int(o["metadata"]["resourceVersion"]), kind, "ADDED", o, None)
                for o in self.iter_objects(kind, namespace)
            ]
        else:
            if since < self.compacted_rv:
                raise ApiError(
                    410,
                    "Expired",
                    f"too old resource version: {since} ({self.compacted_rv})",
                )
            replay = [
                e
                for e in self.history
                if e.rv > since
                and e.kind is kind
                and (namespace is None or e.obj["metadata"].get("namespace") == namespace)
            ]
        watcher = Watcher(kind, namespace)
        self.watchers.add(watcher)
        return watcher, replay

    def close_watch(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    # ------------------------------------------------------------------ reads

    def iter_objects(self, kind: Kind, namespace: str | None) -> Iterable[Obj]:
        objs = self.objects.of(kind.resource)
        for ns, name in sorted(objs):
            if namespace is None or ns == namespace:
                yield objs[(ns, name)]

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self.objects.get(_key(kind, namespace, name))
        if obj is None:
            raise not_found(kind, name)
        return obj

    def find(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get(_key(kind, namespace, name))

    # ----------------------------------------------------------------- writes

    def create(self, kind: Kind, namespace: str | None, body: Obj, *, raw: bool = False) -> Obj:
        """Create; ``raw`` keeps the body's status (seeding helpers), as no HTTP client can."""
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was not an object")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            else:
                raise invalid(kind, "", "metadata.name: Required value: name or generateName")
        name = meta["name"]
        if not _NAME_RE.match(name) or len(name) > 253:
            raise invalid(
                kind,
                name,
                "metadata.name: Invalid value: a lowercase RFC 1123 subdomain must consist of "
                "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
        if kind.namespaced:
            if not namespace:
                raise ApiError(400, "BadRequest", "a namespace is required for a namespaced kind")
            if meta.get("namespace", namespace) != namespace:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace "
                    "sent on the request",
                )
            meta["namespace"] = namespace
            if not raw and kind.resource != "namespaces":
                ns_kind = self._namespace_kind
                if ns_kind is not None and self.find(ns_kind, None, namespace) is None:
                    raise ApiError(
                        404,
                        "NotFound",
                        f'namespaces "{namespace}" not found',
                        kind=ns_kind,
                        name=namespace,
                    )
        else:
            meta.pop("namespace", None)
        key = _key(kind, namespace if kind.namespaced else None, name)
        if key in self.objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{kind.resource} "{name}" already exists',
                kind=kind,
                name=name,
            )
        obj["apiVersion"] = kind.api_version
        obj["kind"] = kind.kind
        if kind.has_status and not raw:
            obj.pop("status", None)
        _apply_defaults(kind, obj)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        meta.pop("deletionTimestamp", None)
        meta["resourceVersion"] = str(self._next_rv())
        self.objects[key] = obj
        self._emit(kind, "ADDED", obj, None)
        return obj

    @property
    def _namespace_kind(self) -> Kind | None:
        return self.kinds.get("namespaces")

    def _spec_changed(self, kind: Kind, old: Obj, new: Obj) -> bool:
        ignore = {"metadata", "status"} if kind.has_status else {"metadata"}
        ignore |= {"apiVersion", "kind"}
        return {k: v for k, v in old.items() if k not in ignore} != {
            k: v for k, v in new.items() if k not in ignore
        }

    def update(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
        require_rv: bool | None = None,
    ) -> Obj:
        """PUT semantics (also the second half of PATCH, with the patched object as body)."""
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was not an object")
        old = self.get(kind, namespace, name)
        meta_in = body.get("metadata") or {}
        if meta_in.get("name", name) != name:
            raise ApiError(
                400,
                "BadRequest",
                "the name of the object does not match the name on the URL",
            )
        if kind.namespaced and meta_in.get("namespace", namespace) != namespace:
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        rv_in = meta_in.get("resourceVersion")
        if rv_in:
            if rv_in != old["metadata"]["resourceVersion"]:
                raise conflict(kind, name)
        elif require_rv if require_rv is not None else kind.custom:
            raise invalid(
                kind,
                name,
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            )

        if subresource == "status":
            # The status strategy keeps everything but status from the stored object.
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            else:
                new.pop("status", None)
        else:
            new = copy.deepcopy(body)
            if kind.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            meta = new.setdefault("metadata", {})
            # Server-owned metadata cannot be changed by a client.
            for owned in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
                if owned in old["metadata"]:
                    meta[owned] = old["metadata"][owned]
                else:
                    meta.pop(owned, None)
            meta["name"] = name
            if kind.namespaced:
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            if old["metadata"].get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(
                    old["metadata"].get("finalizers") or []
                )
                if added:
                    raise invalid(
                        kind,
                        name,
                        "metadata.finalizers: Forbidden: no new finalizers can be added if "
                        "the object is being deleted",
                    )
            if not meta.get("finalizers"):
                meta.pop("finalizers", None)
            if self._spec_changed(kind, old, new):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        new["apiVersion"] = kind.api_version
        new["kind"] = kind.kind
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old  # a no-op write does not bump the resourceVersion
        new["metadata"]["resourceVersion"] = str(self._next_rv())
        key = _key(kind, namespace, name)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.objects[key]
            self._emit(kind, "DELETED", new, old)
            return new
        self.objects[key] = new
        self._emit(kind, "MODIFIED", new, old)
        return new

    def delete(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        *,
        precondition_rv: str | None = None,
        precondition_uid: str | None = None,
    ) -> Obj:
        old = self.get(kind, namespace, name)
        if precondition_rv and precondition_rv != old["metadata"]["resourceVersion"]:
            raise conflict(kind, name)
        if precondition_uid and precondition_uid != old["metadata"]["uid"]:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {precondition_uid}, "
                f"UID in object meta: {old['metadata']['uid']}",
                kind=kind,
                name=name,
            )
        key = _key(kind, namespace, name)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self.objects[key] = new
            self._emit(kind, "MODIFIED", new, old)
            return new
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        del self.objects[key]
        self._emit(kind, "DELETED", gone, old)
        return gone

    def remove_all(self, match: Callable[[Obj], bool]) -> None:
        """Testing aid: delete matching objects (with DELETED events), ignoring finalizers."""
        for key, obj in self.objects.items():
            if match(obj):
                del self.objects[key]
                gone = copy.deepcopy(obj)
                gone["metadata"]["resourceVersion"] = str(self._next_rv())
                kind = self.kinds[key[0]]
                self._emit(kind, "DELETED", gone, obj)
