"""The one place that talks to ``kubernetes_asyncio``.

:func:`connect` builds an API client from a kubeconfig or the in-cluster service
account; :class:`KubeClient` offers the verbs teapot-lb needs on any :class:`Resource`,
moving plain JSON dicts. It calls the real typed API classes (``CoreV1Api``,
``DiscoveryV1Api``, ``CoordinationV1Api``, ``NetworkingV1Api`` and
``CustomObjectsApi``) with ``_preload_content=False`` so objects are not converted to
generated models and back, and maps errors to :mod:`teapot_lb.kube.errors`.

Patches are always sent as ``application/merge-patch+json`` (RFC 7386) or
``application/json-patch+json`` (RFC 6902), which every API server accepts for every
kind, built-in or custom.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from .errors import Gone, KubeError, StreamCut, Unreachable, status_error
from .resources import KubeObject, Resource

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

JsonPatch = list[dict[str, Any]]  # RFC 6902 operations

_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

_API_CLASSES: dict[str, Any] = {
    "": k8s.CoreV1Api,
    "discovery.k8s.io": k8s.DiscoveryV1Api,
    "coordination.k8s.io": k8s.CoordinationV1Api,
    "networking.k8s.io": k8s.NetworkingV1Api,
}


# Objects per page of a list: client-go's pager asks for 500 at a time.
LIST_PAGE = 500


@dataclass(frozen=True)
class ObjectList:
    """A list, or one page of a paged list (:meth:`KubeClient.list_pages`).

    ``resource_version`` is the list's: every page of one list is read from the snapshot
    of its first page and carries that version. ``first`` is false for the pages after
    the first; a page with ``first`` true after others starts the list over (a new
    snapshot), and whoever collects the pages drops what the earlier ones brought.
    """

    items: list[KubeObject]
    resource_version: str
    first: bool = True


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: KubeObject


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


async def connect(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    user_agent: str = "teapot-lb",
    request_timeout_s: float = 30.0,
) -> KubeClient:
    """A client from ``kubeconfig``; without one, the in-cluster service account when
    running in a pod, else ``$KUBECONFIG`` / ``~/.kube/config``."""
    configuration = k8s.Configuration()
    namespace = "default"
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        namespace = _pod_namespace() or namespace
    else:
        loader = await k8s_config.load_kube_config(
            config_file=str(kubeconfig) if kubeconfig is not None else None,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
        context_node = loader.current_context or {}
        with contextlib.suppress(KeyError, TypeError, AttributeError):
            namespace = context_node["context"].get("namespace") or namespace
    api_client = k8s.ApiClient(configuration)
    api_client.user_agent = user_agent
    _skip_environment_lookups(api_client)
    return KubeClient(api_client, request_timeout_s=request_timeout_s, namespace=namespace)


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def _skip_environment_lookups(api_client: Any) -> None:
    """Stop aiohttp from reading proxy settings and ~/.netrc on every request.

    kubernetes_asyncio opens its session with ``trust_env=True``, which costs two thread
    hops per request; measured, that was half of the controller's CPU at 10k Services.
    When no proxy variable is set there is nothing to find, so the lookups are switched
    off; with a proxy configured the behaviour is left as it is.
    """
    if any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARIABLES):
        return
    session = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False


def _pod_namespace() -> str:
    try:
        return Path(_SERVICE_ACCOUNT_NAMESPACE).read_text().strip()
    except OSError:
        return ""


class KubeClient:
    """Verbs on any :class:`Resource`; objects in and out are JSON dicts."""

    def __init__(
        self, api_client: Any, *, request_timeout_s: float = 30.0, namespace: str = "default"
    ) -> None:
        self._api = api_client
        # The kubeconfig context's namespace, or the pod's own namespace in a cluster.
        self.namespace = namespace
        self.request_timeout_s = request_timeout_s
        self._typed: dict[str, Any] = {}
        self._custom = k8s.CustomObjectsApi(api_client)

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --------------------------------------------------------------- dispatch

    def _typed_api(self, res: Resource) -> Any:
        api = self._typed.get(res.group)
        if api is None:
            api = _API_CLASSES[res.group](self._api)
            self._typed[res.group] = api
        return api

    def _positional(
        self, res: Resource, verb: str, namespace: str | None, name: str | None, suffix: str
    ) -> tuple[Callable[..., Awaitable[Any]], tuple[str, ...]]:
        """The bound client method and its positional arguments (without the body).

        Typed APIs take ``(name, namespace)``; custom objects take
        ``(group, version, [namespace,] plural, name)``.
        """
        if res.namespaced and namespace is None and verb != "list":
            raise ValueError(f"{res} is namespaced: a namespace is required to {verb}")
        named: tuple[str, ...] = (name,) if name is not None else ()
        if res.custom:
            verb = "get" if verb == "read" else verb
            if res.namespaced and namespace is not None:
                fn = getattr(self._custom, f"{verb}_namespaced_custom_object{suffix}")
                return fn, (res.group, res.version, namespace, res.plural, *named)
            fn = getattr(self._custom, f"{verb}_cluster_custom_object{suffix}")
            return fn, (res.group, res.version, res.plural, *named)
        api, kind = self._typed_api(res), _snake(res.kind)
        if not res.namespaced:
            return getattr(api, f"{verb}_{kind}{suffix}"), named
        if namespace is None:
            return getattr(api, f"list_{kind}_for_all_namespaces"), ()
        return getattr(api, f"{verb}_namespaced_{kind}{suffix}"), (*named, namespace)

    async def _call(
        self,
        res: Resource,
        verb: str,
        namespace: str | None,
        *,
        name: str | None = None,
        payload: Any = None,
        suffix: str = "",
        **kwargs: Any,
    ) -> Any:
        fn, args = self._positional(res, verb, namespace, name, suffix)
        if payload is not None:
            args = (*args, payload)
        kwargs["_preload_content"] = False
        kwargs.setdefault("_request_timeout", self.request_timeout_s)
        try:
            return await fn(*args, **kwargs)
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise Unreachable(f"{verb} {res}: {err!r}") from err

    async def _json(self, response: Any, what: str) -> Any:
        try:
            async with response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise Unreachable(f"{what}: {err!r}") from err
        if not 200 <= status < 300:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            _raise_status(status, body, what, retry_after)
        return json.loads(raw) if raw else None

    # ------------------------------------------------------------------ verbs

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = LIST_PAGE,
    ) -> ObjectList:
        """Every object, read in pages of ``limit`` (:meth:`list_pages`) and collected."""
        items: list[KubeObject] = []
        version = ""
        pages = self.list_pages(
            res,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
        )
        async with contextlib.aclosing(pages):
            async for page in pages:
                if page.first:
                    items = []
                items += page.items
                version = page.resource_version
        return ObjectList(items, version)

    async def list_pages(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = LIST_PAGE,
    ) -> AsyncGenerator[ObjectList, None]:
        """The list as pages of at most ``limit`` objects (``limit`` 0: one whole list),
        each fetched when the one before has been taken, so a reader that handles a page
        before asking for the next never holds more than one page's JSON (issue 19).

        Every page comes from the snapshot of the first (the server's ``continue`` token
        names it) and carries its resourceVersion. When the token has expired (410
        Expired: the snapshot left etcd's history, about five minutes after the first
        page), the list starts over, paged, from a new snapshot (a page with ``first``
        true). client-go's pager reads one whole list at once instead, which always
        completes but holds every object together, which paging is here to avoid; a
        second expiry in one list does the same, so a list too slow for its snapshot
        still completes.
        """
        selectors = _selectors(label_selector, field_selector)
        token = ""
        expired = 0
        while True:
            kwargs = dict(selectors)
            if limit and expired < 2:
                kwargs["limit"] = limit
            if token:
                kwargs["_continue"] = token
            try:
                resp = await self._call(res, "list", namespace, **kwargs)
                data = await self._json(resp, f"list {res}")
            except Gone:
                if not token:
                    raise
                expired += 1
                token = ""
                continue
            meta = data.get("metadata") or {}
            page = ObjectList(
                [_with_kind(res, item) for item in data.get("items") or []],
                str(meta.get("resourceVersion", "")),
                first=not token,
            )
            token = str(meta.get("continue") or "")
            del data, meta  # the page's raw JSON goes before the reader takes the page
            yield page
            del page
            if not token:
                return

    async def watch(
        self,
        res: Resource,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_s: float = 300.0,
        bookmarks: bool = True,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after ``resource_version`` until the server ends the stream.

        Raises :class:`~teapot_lb.kube.errors.Gone` when the version is too old. The
        client gives up reading after ``timeout_s`` plus a grace period of silence.
        """
        kwargs = _selectors(label_selector, field_selector)
        kwargs.update(
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=bookmarks,
            timeout_seconds=max(1, int(timeout_s)),
        )
        timeout = aiohttp.ClientTimeout(
            sock_connect=self.request_timeout_s, sock_read=timeout_s + 30
        )
        resp = await self._call(res, "list", namespace, _request_timeout=timeout, **kwargs)
        try:
            if not 200 <= resp.status < 300:
                await self._json(resp, f"watch {res}")
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, TimeoutError, OSError) as err:
                    raise StreamCut(f"watch {res}: {err!r}") from err
                if not line:
                    return
                try:
                    event = json.loads(line)
                    obj = event.get("object") or {}
                except (ValueError, AttributeError) as err:
                    raise KubeError(f"watch {res}: malformed event {line[:200]!r}") from err
                if event.get("type") == "ERROR":
                    _raise_status(int(obj.get("code") or 500), obj, f"watch {res}")
                yield WatchEvent(str(event.get("type")), _with_kind(res, obj))
        finally:
            resp.release()

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> KubeObject:
        resp = await self._call(res, "read", namespace, name=name)
        return _with_kind(res, await self._json(resp, f"get {res} {name}"))

    async def create(self, res: Resource, obj: KubeObject) -> KubeObject:
        namespace = obj.get("metadata", {}).get("namespace") if res.namespaced else None
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        resp = await self._call(res, "create", namespace, payload=body)
        return _with_kind(res, await self._json(resp, f"create {res}"))

    async def replace(self, res: Resource, obj: KubeObject, *, status: bool = False) -> KubeObject:
        """PUT the object (or its status); 409 :class:`Conflict` if its resourceVersion is
        stale."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") if res.namespaced else None
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        resp = await self._call(
            res, "replace", namespace, name=meta["name"], payload=body, suffix=_status(status)
        )
        return _with_kind(res, await self._json(resp, f"replace {res} {meta['name']}"))

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: KubeObject | JsonPatch,
        *,
        namespace: str | None = None,
        status: bool = False,
    ) -> KubeObject:
        """A merge patch (dict) or JSON patch (list of operations)."""
        content_type = JSON_PATCH if isinstance(patch, list) else MERGE_PATCH
        resp = await self._call(
            res,
            "patch",
            namespace,
            name=name,
            payload=patch,
            suffix=_status(status),
            _content_type=content_type,
        )
        return _with_kind(res, await self._json(resp, f"patch {res} {name}"))

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> KubeObject:
        """Delete (with optional preconditions); returns what the server returned."""
        preconditions: dict[str, str] = {}
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        if uid:
            preconditions["uid"] = uid
        kwargs: dict[str, Any] = {}
        if preconditions:
            kwargs["body"] = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": preconditions,
            }
        resp = await self._call(res, "delete", namespace, name=name, **kwargs)
        result: KubeObject = await self._json(resp, f"delete {res} {name}")
        return result


def _status(status: bool) -> str:
    return "_status" if status else ""


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if label_selector:
        kwargs["label_selector"] = label_selector
    if field_selector:
        kwargs["field_selector"] = field_selector
    return kwargs


def _with_kind(res: Resource, obj: Any) -> KubeObject:
    """List items of built-in kinds come without kind/apiVersion; make objects
    self-describing so they can be referenced (Events, owner references)."""
    if not isinstance(obj, dict):
        raise KubeError(f"unexpected response for {res}: {obj!r}")
    if "kind" not in obj or "apiVersion" not in obj:
        obj = {"apiVersion": res.api_version, "kind": res.kind, **obj}
    result: KubeObject = obj
    return result


def _raise_status(code: int, body: Any, what: str, retry_after: str | None = None) -> None:
    if isinstance(body, dict) and body.get("kind") == "Status":
        details = body.get("details")
        seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        raise status_error(
            code,
            str(body.get("reason", "")),
            str(body.get("message", what)),
            retry_after_s=_seconds(retry_after if seconds is None else seconds),
        )
    raise status_error(code, "", f"{what}: HTTP {code}", retry_after_s=_seconds(retry_after))


def _seconds(value: object) -> float | None:
    """Retry-After as seconds (the HTTP-date form is not used by API servers: None)."""
    try:
        seconds = float(str(value))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


__all__ = ["Gone", "KubeClient", "ObjectList", "WatchEvent", "connect"]
