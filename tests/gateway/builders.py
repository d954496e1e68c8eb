"""Builders for gateway configs in tests: a listener, backends, Ingress-like routes, and the
Kubernetes Ingress documentation's pathType table as data (used by the unit tests, which
ask the routing table, and by the end-to-end tests, which ask real HAProxy)."""

from __future__ import annotations

from dataclasses import dataclass

from teapot_lb.gateway.config import (
    Backend,
    BackendRef,
    Endpoint,
    GatewayConfig,
    HTTPRoute,
    HTTPRule,
    Listener,
    Owner,
    PathMatch,
    PathType,
    Protocol,
    RouteKind,
    RouteMatch,
    RouteSemantics,
)

GATEWAY_IP = "192.0.2.10"


def listener(
    name: str = "web",
    port: int = 80,
    protocol: Protocol = Protocol.HTTP,
    address: str = GATEWAY_IP,
    **kw: object,
) -> Listener:
    return Listener.model_validate(
        {"name": name, "address": address, "port": port, "protocol": protocol, **kw}
    )


def backend(name: str, *endpoints: tuple[str, int], **kw: object) -> Backend:
    eps = tuple(Endpoint(address=a, port=p) for a, p in endpoints)
    return Backend.model_validate({"name": name, "endpoints": eps, **kw})


def ingress(
    name: str,
    host: str | None,
    paths: list[tuple[PathType, str, str]],
    listeners: tuple[str, ...] = ("web",),
    tenant: str = "t1",
    created: str = "",
) -> HTTPRoute:
    """An Ingress rule: host, and (pathType, path, backend) per path."""
    return HTTPRoute(
        owner=Owner(tenant=tenant, kind=RouteKind.INGRESS, namespace="ns", name=name),
        listeners=listeners,
        hostnames=(host,) if host else (),
        semantics=RouteSemantics.INGRESS,
        created=created,
        rules=tuple(
            HTTPRule(
                matches=(RouteMatch(path=PathMatch(type=t, value=v)),),
                backends=(BackendRef(backend=b),),
            )
            for t, v, b in paths
        ),
    )


@dataclass(frozen=True)
class IngressCase:
    """One row of the Ingress docs' table: the paths of one Ingress (backend i serves path
    i), a request path, and which path serves it (None: no match, 404)."""

    paths: tuple[tuple[PathType, str], ...]
    request: str
    served_by: int | None

    @property
    def id(self) -> str:
        spec = ",".join(f"{t.value}:{v}" for t, v in self.paths)
        return f"{spec} <- {self.request}"


P, E = PathType.PREFIX, PathType.EXACT
INGRESS_DOC_TABLE = [
    IngressCase(((P, "/"),), "/anything/at/all", 0),
    IngressCase(((E, "/foo"),), "/foo", 0),
    IngressCase(((E, "/foo"),), "/bar", None),
    IngressCase(((E, "/foo"),), "/foo/", None),
    IngressCase(((E, "/foo/"),), "/foo", None),
    IngressCase(((P, "/foo"),), "/foo", 0),
    IngressCase(((P, "/foo"),), "/foo/", 0),
    IngressCase(((P, "/foo/"),), "/foo", 0),
    IngressCase(((P, "/foo/"),), "/foo/", 0),
    IngressCase(((P, "/aaa/bb"),), "/aaa/bbb", None),
    IngressCase(((P, "/aaa/bbb"),), "/aaa/bbb", 0),
    IngressCase(((P, "/aaa/bbb/"),), "/aaa/bbb", 0),
    IngressCase(((P, "/aaa/bbb"),), "/aaa/bbb/", 0),
    IngressCase(((P, "/aaa/bbb"),), "/aaa/bbb/ccc", 0),
    IngressCase(((P, "/aaa/bbb"),), "/aaa/bbbxyz", None),
    IngressCase(((P, "/"), (P, "/aaa")), "/aaa/ccc", 1),
    IngressCase(((P, "/"), (P, "/aaa"), (P, "/aaa/bbb")), "/aaa/bbb", 2),
    IngressCase(((P, "/"), (P, "/aaa"), (P, "/aaa/bbb")), "/ccc", 0),
    IngressCase(((P, "/aaa"),), "/ccc", None),
    IngressCase(((P, "/foo"), (E, "/foo")), "/foo", 1),
]


def ingress_case_config(
    case: IngressCase, backend_of: dict[int, tuple[str, int]], host: str = "docs.example"
) -> GatewayConfig:
    """One Ingress with the case's paths, path i to backend `b<i>` (endpoint from
    `backend_of`), on an HTTP listener."""
    return GatewayConfig(
        listeners=(listener(),),
        backends=tuple(backend(f"b{i}", backend_of[i]) for i in range(len(case.paths))),
        http_routes=(
            ingress("docs", host, [(t, v, f"b{i}") for i, (t, v) in enumerate(case.paths)]),
        ),
    )
