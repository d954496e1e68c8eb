"""A fake Kubernetes API server: real HTTP and the real REST + watch protocol.

It serves the kinds in :mod:`teapot_lb.lab.fakeapi.kinds` to the real ``kubernetes_asyncio`` client
(or anything else that speaks the API), with the semantics our controllers depend on:

- one global, monotonically increasing ``resourceVersion``; ``uid``, ``generation``
  (bumped when anything but metadata/status changes), ``creationTimestamp``;
- create / get / list / update (PUT) / patch / delete, with ``Status`` error bodies:
  404 NotFound, 409 AlreadyExists, 409 Conflict on a stale ``resourceVersion`` (PUT, and
  PATCH whose result carries another ``metadata.resourceVersion``), 422 Invalid, 400;
- the ``/status`` subresource: writes there change only ``status``; writes to the main
  resource leave ``status`` alone (for kinds with the subresource); create drops status;
- merge patch, JSON patch, and strategic merge patch applied as a merge patch (see
  :mod:`teapot_lb.lab.fakeapi.patch` for the one difference that has);
- label selectors (``=, ==, !=, in, notin, exists, !exists``) and field selectors (only
  the field labels the real server supports for the kind; others get 400);
- finalizers: delete sets ``deletionTimestamp`` while finalizers remain; removing the
  last one deletes the object;
- watch (``?watch=1``) from a ``resourceVersion`` with a bounded event history: a
  too-old version gets ``{"type":"ERROR","object":<Status 410>}`` on the stream, as the
  real server does; ``allowWatchBookmarks`` gives periodic BOOKMARK events;
  ``timeoutSeconds`` ends the stream; a watch without ``resourceVersion`` (or ``0``)
  starts with synthetic ADDED events for the current state;
- paged lists (``limit``/``continue``) as the real server serves them from etcd: items in
  key order (namespace, name), at most ``limit`` a page; while more remain, the page's
  ``metadata.continue`` token and ``remainingItemCount`` (not with a selector, where the
  real server cannot count them); every page of one list from the snapshot of the first,
  at its ``resourceVersion``, whatever changed meanwhile. The snapshots are kept per
  token, the newest ``continue_tokens`` of them; a token past that (or forgotten by
  :meth:`Faults.compact` or :meth:`Faults.expire_continue_next`) gets 410 ``Expired``, as
  a token whose snapshot etcd compacted does; a token that is not one gets 400.

Authorization (a small subset, off by default): :meth:`FakeApiServer.add_token` maps a
bearer token to the namespaces it may use (or to everything); once any token is added,
an unknown or missing token gets 401, and a namespace-restricted token gets 403 Forbidden
for any other namespace and for cluster-wide or cluster-scoped requests (as a Role
bound in one namespace would). Not modelled: the rest of RBAC (verbs, resources),
admission, server-side apply, dry run, namespace
cascade deletion, deleteCollection, managedFields, and the "inconsistent continue" token
a real 410 Expired carries.

Faults (:class:`Faults`) let tests drop all watches, fail or delay requests, inject
conflicts and compact the history.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from .kinds import BUILTIN_KINDS, Kind
from .patch import PatchError, json_patch, merge_patch
from .selectors import SelectorError, field_matcher, label_matcher
from .store import ApiError, Obj, Store, Watcher, WatchEvent, not_found

_REASONS = {
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

RequestPredicate = Callable[[str, str], bool]  # (method, path) -> applies?


def request_matcher(
    method: str | None = None, path_contains: str | None = None
) -> RequestPredicate:
    def match(m: str, path: str) -> bool:
        return (method is None or m == method.upper()) and (
            path_contains is None or path_contains in path
        )

    return match


@dataclass
class _Failure:
    code: int
    remaining: int | None  # requests left, or None for "until `until`"
    until: float | None
    match: RequestPredicate


@dataclass
class _Delay:
    seconds: float
    until: float | None
    remaining: int | None
    match: RequestPredicate


class Faults:
    """The fault switch. Every knob takes an optional ``method`` / ``path_contains`` filter."""

    def __init__(self, server: FakeApiServer) -> None:
        self._server = server
        self._failures: list[_Failure] = []
        self._delays: list[_Delay] = []
        self._expiries = 0

    def fail_next(
        self,
        count: int,
        *,
        code: int = 500,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Answer the next ``count`` matching requests with ``code`` (500 by default)."""
        self._failures.append(_Failure(code, count, None, request_matcher(method, path_contains)))

    def fail_for(
        self,
        seconds: float,
        *,
        code: int = 500,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Answer every matching request with ``code`` for ``seconds``."""
        self._failures.append(
            _Failure(code, None, time.monotonic() + seconds, request_matcher(method, path_contains))
        )

    def conflict_next(
        self, count: int, *, method: str | None = None, path_contains: str | None = None
    ) -> None:
        """409 Conflict for the next ``count`` matching requests (writes, usually)."""
        self.fail_next(count, code=409, method=method, path_contains=path_contains)

    def delay(
        self,
        seconds: float,
        *,
        count: int | None = None,
        duration: float | None = None,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Delay matching requests by ``seconds`` (the next ``count``, or for ``duration``)."""
        until = time.monotonic() + duration if duration is not None else None
        self._delays.append(_Delay(seconds, until, count, request_matcher(method, path_contains)))

    def expire_continue_next(self, count: int = 1) -> None:
        """The next ``count`` list requests with a ``continue`` token get 410 Expired, as
        when etcd compacted their snapshot between two pages."""
        self._expiries += count

    def drop_watches(self, *, abrupt: bool = False) -> int:
        """End every open watch stream now; returns how many were open.

        ``abrupt`` closes the TCP connection instead of ending the response cleanly.
        """
        return self._server.drop_watches(abrupt=abrupt)

    def compact(self, *, drop_watches: bool = False) -> None:
        """Forget the event history: a watch from any current resourceVersion gets 410."""
        self._server.store.compact()
        self._server.forget_continues()
        if drop_watches:
            self._server.drop_watches()

    def clear(self) -> None:
        self._failures.clear()
        self._delays.clear()
        self._expiries = 0

    def _take_expiry(self) -> bool:
        if self._expiries <= 0:
            return False
        self._expiries -= 1
        return True

    def _take_failure(self, method: str, path: str) -> int | None:
        now = time.monotonic()
        self._failures = [
            f
            for f in self._failures
            if (f.remaining is None or f.remaining > 0) and (f.until is None or f.until > now)
        ]
        for f in self._failures:
            if f.match(method, path):
                if f.remaining is not None:
                    f.remaining -= 1
                return f.code
        return None

    def _take_delay(self, method: str, path: str) -> float:
        now = time.monotonic()
        self._delays = [
            d
            for d in self._delays
            if (d.remaining is None or d.remaining > 0) and (d.until is None or d.until > now)
        ]
        for d in self._delays:
            if d.match(method, path):
                if d.remaining is not None:
                    d.remaining -= 1
                return d.seconds
        return 0.0


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: str
    status: int
    user_agent: str


@dataclass(frozen=True)
class _Target:
    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass(frozen=True)
class _Snapshot:
    """What the pages after one of a list still have to serve: the objects (the store
    replaces an object on every write and never changes one in place, so holding them is
    holding their state then) at the list's resourceVersion."""

    resource_version: int
    items: list[Obj]


# The real server's continue token: base64 of this JSON, with the list's revision and the
# key after which the next page starts (k8s.io/apiserver storage.EncodeContinue).
_CONTINUE_VERSION = "meta.k8s.io/v1"

_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list."
)


def _continue_token(resource_version: int, last_key: str) -> str:
    body = {"v": _CONTINUE_VERSION, "rv": resource_version, "start": last_key + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()


def _check_continue_token(token: str) -> None:
    """400 for what is not a continue token at all (as the real server answers)."""
    try:
        body = json.loads(base64.urlsafe_b64decode(token.encode()))
        valid = body.get("v") == _CONTINUE_VERSION and int(body["rv"]) > 0
    except (ValueError, TypeError, KeyError, AttributeError):
        valid = False
    if not valid:
        raise ApiError(400, "BadRequest", "continue key is not valid: incorrect encoded start")


def _json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _error_response(err: ApiError) -> web.Response:
    return _json_response(err.status(), err.code)


class FakeApiServer:
    def __init__(
        self,
        *,
        history_size: int = 1000,
        bookmark_interval: float = 1.0,
        default_watch_timeout: float = 1800.0,
        continue_tokens: int = 256,
        kinds: Iterable[Kind] = BUILTIN_KINDS,
        seed_namespaces: Iterable[str] = ("default", "kube-system", "kube-node-lease"),
    ) -> None:
        self._kinds: dict[str, Kind] = {}
        self._by_path: dict[tuple[str, str, str], Kind] = {}
        self.store = Store(self._kinds, history_size)
        for k in kinds:
            self.register_kind(k)
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self.faults = Faults(self)
        # Paged lists: the snapshot behind each live continue token (and the query it
        # belongs to), oldest first; the newest `continue_tokens` are kept.
        self._continues: OrderedDict[tuple[str, ...], _Snapshot] = OrderedDict()
        self.continue_tokens = continue_tokens
        self.requests: deque[RequestRecord] = deque(maxlen=200_000)
        self._watch_requests: dict[Watcher, web.Request] = {}
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.kubeconfig_path: Path | None = None
        # Bearer token -> namespaces it may use (None: every namespace and cluster scope).
        self.tokens: dict[str, frozenset[str] | None] = {}
        for ns in seed_namespaces:
            self.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # ----------------------------------------------------------------- kinds

    def register_kind(self, kind: Kind) -> None:
        self._kinds[kind.resource] = kind
        self._by_path[(kind.group, kind.version, kind.plural)] = kind

    def kind(self, resource: str) -> Kind:
        """Look a kind up by ``plural[.group]`` (``services``, ``leases``, ``addresspools``)."""
        if resource in self._kinds:
            return self._kinds[resource]
        matches = [k for k in self._kinds.values() if k.plural == resource]
        if len(matches) != 1:
            raise KeyError(f"unknown or ambiguous resource {resource!r}")
        return matches[0]

    def kind_of(self, obj: Obj) -> Kind:
        api_version, kind_name = obj.get("apiVersion", ""), obj.get("kind", "")
        for k in self._kinds.values():
            if k.api_version == api_version and k.kind == kind_name:
                return k
        raise KeyError(f"unknown kind {api_version}/{kind_name}")

    # -------------------------------------------------- helpers bypassing HTTP

    def seed(self, obj: Obj) -> Obj:
        """Create an object directly (keeps its status; no namespace check); returns it."""
        kind = self.kind_of(obj)
        ns = obj.get("metadata", {}).get("namespace") if kind.namespaced else None
        if kind.namespaced and not ns:
            ns = "default"
        return self.store.create(kind, ns, obj, raw=True)

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        kind = self.kind(resource)
        return self.store.find(kind, namespace if kind.namespaced else None, name)

    def list(self, resource: str, namespace: str | None = None) -> list[Obj]:
        return list(self.store.iter_objects(self.kind(resource), namespace))

    def put(self, obj: Obj) -> Obj:
        """Replace an object directly, status included (no resourceVersion check)."""
        kind = self.kind_of(obj)
        meta = obj.get("metadata", {})
        ns = meta.get("namespace") if kind.namespaced else None
        body = dict(obj)
        body["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
        self.store.update(kind, ns, meta["name"], body, require_rv=False)
        return self.store.update(
            kind, ns, meta["name"], body, subresource="status", require_rv=False
        )

    def delete(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        """Delete as a client would (finalizers respected)."""
        kind = self.kind(resource)
        return self.store.delete(kind, namespace if kind.namespaced else None, name)

    def remove(self, resource: str, name: str, namespace: str | None = None) -> None:
        """Delete at once, ignoring finalizers."""
        kind = self.kind(resource)
        ns = namespace if kind.namespaced else None
        self.store.remove_all(
            lambda o: (
                o.get("kind") == kind.kind
                and o.get("apiVersion") == kind.api_version
                and o["metadata"]["name"] == name
                and o["metadata"].get("namespace") == ns
            )
        )

    @property
    def open_watches(self) -> int:
        return len(self.store.watchers)

    def count_requests(self, method: str | None = None, path_contains: str | None = None) -> int:
        match = request_matcher(method, path_contains)
        return sum(1 for r in self.requests if match(r.method, r.path))

    def forget_continues(self) -> None:
        """Every continue token expires (410 Expired from now on)."""
        self._continues.clear()

    def drop_watches(self, *, abrupt: bool = False) -> int:
        count = len(self.store.watchers)
        if abrupt:
            for request in list(self._watch_requests.values()):
                if request.transport is not None:
                    request.transport.close()
        self.store.drop_watches()
        return count

    # --------------------------------------------------------------- authorization

    def add_token(self, token: str, namespaces: Iterable[str] | None = None) -> None:
        """Allow `token` (in every namespace, or only in `namespaces`); once a token is
        added, requests without a known token are refused."""
        self.tokens[token] = None if namespaces is None else frozenset(namespaces)

    def _authorize(self, request: web.Request, target: _Target) -> None:
        if not self.tokens:
            return
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip()
        if token not in self.tokens:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        allowed = self.tokens[token]
        if allowed is None or target.namespace in allowed:
            return
        where = (
            f'in the namespace "{target.namespace}"' if target.namespace else "at the cluster scope"
        )
        raise ApiError(
            403,
            "Forbidden",
            f"{target.kind.resource} is forbidden: token {token[:12]!r} cannot "
            f"{request.method.lower()} {target.kind.resource} {where}",
        )

    # ---------------------------------------------------------------- routing

    def _parse(self, path: str) -> _Target:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3 or (len(rest) == 3 and rest[2] != "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        kind = self._by_path.get((group, version, rest[0]))
        if kind is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub == "status" and not kind.has_status:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if name is not None and kind.namespaced and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not kind.namespaced and namespace is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _Target(kind, namespace, name, sub)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        method, path = request.method, request.path
        delay = self.faults._take_delay(method, path)
        if delay:
            await asyncio.sleep(delay)
        code = self.faults._take_failure(method, path)
        if code is not None:
            reason = _REASONS.get(code, "InternalError")
            response: web.StreamResponse = _error_response(
                ApiError(code, reason, f"injected fault: {reason}")
            )
        else:
            try:
                response = await handler(request)
            except ApiError as err:
                response = _error_response(err)
        self.requests.append(
            RequestRecord(
                method,
                path,
                request.query_string,
                response.status,
                request.headers.get("User-Agent", ""),
            )
        )
        return response

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if request.path == "/version":
            return _json_response({"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake"})
        target = self._parse(request.path)
        self._authorize(request, target)
        method = request.method
        kind, ns, name = target.kind, target.namespace, target.name
        if name is None:
            if method == "GET":
                if request.query.get("watch") in ("1", "true", "True"):
                    return await self._watch(request, target)
                return self._list(request, target)
            if method == "POST":
                body = await self._body(request)
                return _json_response(self.store.create(kind, ns, body), 201)
            raise ApiError(405, "MethodNotAllowed", f"method {method} not allowed")
        if method == "GET":
            return _json_response(self.store.get(kind, ns, name))
        if method == "PUT":
            body = await self._body(request)
            return _json_response(
                self.store.update(kind, ns, name, body, subresource=target.subresource)
            )
        if method == "PATCH":
            return _json_response(await self._patch(request, target))
        if method == "DELETE" and target.subresource is None:
            body = await self._body(request, required=False) or {}
            pre = body.get("preconditions") or {}
            return _json_response(
                self.store.delete(
                    kind,
                    ns,
                    name,
                    precondition_rv=pre.get("resourceVersion"),
                    precondition_uid=pre.get("uid"),
                )
            )
        raise ApiError(405, "MethodNotAllowed", f"method {method} not allowed")

    async def _body(self, request: web.Request, *, required: bool = True) -> Any:
        raw = await request.read()
        if not raw:
            if required:
                raise ApiError(400, "BadRequest", "the request body is empty")
            return None
        try:
            return json.loads(raw)
        except ValueError as err:
            raise ApiError(400, "BadRequest", f"invalid JSON in the request body: {err}") from err

    async def _patch(self, request: web.Request, target: _Target) -> Obj:
        assert target.name is not None
        content_type = request.content_type
        body = await self._body(request)
        current = self.store.get(target.kind, target.namespace, target.name)
        try:
            if content_type in (
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ):
                if not isinstance(body, dict):
                    raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
                patched = merge_patch(current, body)
            elif content_type == "application/json-patch+json":
                if not isinstance(body, list):
                    raise ApiError(
                        400,
                        "BadRequest",
                        "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
                    )
                patched = json_patch(current, body)
            else:
                raise ApiError(
                    415, "UnsupportedMediaType", f"the media type {content_type!r} is not supported"
                )
        except PatchError as err:
            raise ApiError(422, "Invalid", str(err), kind=target.kind, name=target.name) from err
        if not patched.get("metadata", {}).get("resourceVersion"):
            patched.setdefault("metadata", {}).pop("resourceVersion", None)
        return self.store.update(
            target.kind,
            target.namespace,
            target.name,
            patched,
            subresource=target.subresource,
            require_rv=False,
        )

    def _matcher(self, request: web.Request, kind: Kind) -> Callable[[Obj], bool]:
        try:
            labels = label_matcher(request.query.get("labelSelector"))
            fields = field_matcher(request.query.get("fieldSelector"), kind.selectable_fields)
        except SelectorError as err:
            raise ApiError(400, "BadRequest", str(err)) from err
        return lambda obj: labels(obj) and fields(obj)

    def _list(self, request: web.Request, target: _Target) -> web.Response:
        kind = target.kind
        limit = _limit(request.query.get("limit"))
        token = request.query.get("continue", "")
        # A token is good only for the query it came from (the real server asks the same
        # of its clients; here it also finds the snapshot).
        query = (
            kind.resource,
            target.namespace or "",
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
        )
        if token:
            _check_continue_token(token)
            snapshot = self._continues.get((token, *query))
            if snapshot is None or self.faults._take_expiry():
                raise ApiError(410, "Expired", _EXPIRED)
        else:
            match = self._matcher(request, kind)
            items = []
            for obj in self.store.iter_objects(kind, target.namespace):  # in key order
                if match(obj):
                    if not kind.custom:
                        # A real server leaves kind/apiVersion out of built-in list items.
                        obj = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                    items.append(obj)
            snapshot = _Snapshot(self.store.rv, items)
        meta: dict[str, Any] = {"resourceVersion": str(snapshot.resource_version)}
        page = snapshot.items
        if limit and len(page) > limit:
            page, rest = page[:limit], page[limit:]
            last = page[-1]["metadata"]
            next_token = _continue_token(
                snapshot.resource_version, f"{last.get('namespace', '')}/{last['name']}"
            )
            meta["continue"] = next_token
            if not (query[2] or query[3]):
                meta["remainingItemCount"] = len(rest)
            self._continues[(next_token, *query)] = _Snapshot(snapshot.resource_version, rest)
            self._continues.move_to_end((next_token, *query))
            while len(self._continues) > self.continue_tokens:
                self._continues.popitem(last=False)
        return _json_response(
            {
                "kind": kind.list_kind,
                "apiVersion": kind.api_version,
                "metadata": meta,
                "items": page,
            }
        )

    async def _watch(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind = target.kind
        match = self._matcher(request, kind)
        rv_text = request.query.get("resourceVersion", "")
        try:
            since = int(rv_text) if rv_text not in ("", "0") else None
        except ValueError as err:
            raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_text!r}") from err
        bookmarks = request.query.get("allowWatchBookmarks") in ("1", "true", "True")
        timeout = float(request.query.get("timeoutSeconds") or self.default_watch_timeout)

        response = web.StreamResponse(status=200)
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        await response.prepare(request)

        async def send(type_: str, obj: Obj) -> None:
            line = json.dumps({"type": type_, "object": obj}, separators=(",", ":"))
            await response.write(line.encode() + b"\n")

        try:
            watcher, replay = self.store.open_watch(kind, target.namespace, since)
        except ApiError as err:
            await send("ERROR", err.status())
            await response.write_eof()
            return response
        self._watch_requests[watcher] = request
        try:
            for event in replay:
                out = _filtered(event, match)
                if out is not None:
                    await send(*out)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            next_bookmark = loop.time() + self.bookmark_interval
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                wait = deadline - now
                if bookmarks:
                    if now >= next_bookmark:
                        await send(
                            "BOOKMARK",
                            {
                                "kind": kind.kind,
                                "apiVersion": kind.api_version,
                                "metadata": {"resourceVersion": str(self.store.rv)},
                            },
                        )
                        next_bookmark = now + self.bookmark_interval
                    wait = min(wait, next_bookmark - now)
                try:
                    # Wake at least every second to notice a client that went away.
                    item = await asyncio.wait_for(watcher.queue.get(), timeout=min(wait, 1.0))
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    continue
                if item is None:
                    break
                out = _filtered(item, match)
                if out is not None:
                    await send(*out)
        except (ConnectionResetError, RuntimeError):
            pass  # the client went away (or we dropped it abruptly)
        finally:
            self.store.close_watch(watcher)
            self._watch_requests.pop(watcher, None)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    # ------------------------------------------------------------ lifecycle

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self._runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server: Any = site._server
        actual_port = server.sockets[0].getsockname()[1]
        self.url = f"http://{host}:{actual_port}"
        return self.url

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def configuration(self) -> Any:
        """A ``kubernetes_asyncio.client.Configuration`` for this server."""
        from kubernetes_asyncio.client import Configuration

        cfg = Configuration(host=self.url)
        cfg.api_key = {"authorization": "fake-token"}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        return cfg

    def write_kubeconfig(
        self, path: Path, namespace: str = "default", token: str = "fake-token"
    ) -> Path:
        """A kubeconfig pointing at this server (plain HTTP, a bearer token)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
        if token == "fake-token":
            self.kubeconfig_path = path
        return path


def _limit(text: str | None) -> int:
    """The ``limit`` query parameter (0: no limit; the real server ignores a negative one)."""
    if not text:
        return 0
    try:
        return max(0, int(text))
    except ValueError as err:
        raise ApiError(400, "BadRequest", f"invalid limit {text!r}") from err


def _filtered(event: WatchEvent, match: Callable[[Obj], bool]) -> tuple[str, Obj] | None:
    """The event a selector-filtered watch sees (objects moving in/out become ADDED/DELETED)."""
    if event.type == "ADDED":
        return ("ADDED", event.obj) if match(event.obj) else None
    if event.type == "DELETED":
        return ("DELETED", event.obj) if match(event.old or event.obj) else None
    was = event.old is not None and match(event.old)
    now = match(event.obj)
    if was and now:
        return ("MODIFIED", event.obj)
    if now:
        return ("ADDED", event.obj)
    if was:
        return ("DELETED", event.obj)
    return None


__all__ = ["ApiError", "FakeApiServer", "Faults", "RequestRecord", "not_found"]


async def _main() -> None:
    parser = argparse.ArgumentParser(description="Run the fake Kubernetes API server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig here")
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--bookmark-interval", type=float, default=5.0)
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN[=NS,NS...]",
        help="turn authorization on: allow TOKEN (in these namespaces only); repeatable",
    )
    args = parser.parse_args()
    server = FakeApiServer(history_size=args.history, bookmark_interval=args.bookmark_interval)
    for entry in args.token:
        token, sep, namespaces = entry.partition("=")
        server.add_token(token, namespaces.split(",") if sep else None)
    url = await server.start(args.host, args.port)
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    print(url, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    asyncio.run(_main())
