"""An Ingress → HTTP routes on the shared listeners (or its dedicated address's)."""

from __future__ import annotations

from teapot_lb.gateway.config import (
    BackendRef,
    HTTPRoute,
    HTTPRule,
    PathMatch,
    PathType,
    Protocol,
    RouteKind,
    RouteMatch,
    RouteSemantics,
)
from teapot_lb.model.ingress import Ingress, IngressServiceBackend
from teapot_lb.model.ingress import PathType as IngressPathType
from teapot_lb.model.tenancy import Tenant

from .build import Build, created, route_owner
from .results import ObjectResult


def add_ingress(build: Build, obj: Ingress, tenant: Tenant, result: ObjectResult) -> None:
    """An Ingress's rules as HTTP routes (one per host; HTTPS too for a host its `tls`
    names with a synced Secret)."""
    tls_hosts: dict[str, str] = {}
    for tls in obj.spec.tls:
        if tls.secret_name is None:
            continue
        cert = build.certificate(obj, tls.secret_name, tls.hosts, result.notes)
        if cert is None:
            result.notes.append(f"Secret {tls.secret_name} is not synced: HTTPS not served")
            continue
        tls_hosts.update((h, cert) for h in tls.hosts)
    http = build.shared(Protocol.HTTP, result)
    # On a dedicated address (the tenant's own) the defaultBackend takes every request no
    # rule matches, the rules' hosts included (Ingress: "requests that don't match any
    # rule"), and the rules without host are served for every host, over HTTPS too.
    default = _ingress_default(build, obj, tenant, result) if result.address else ()
    hostless: list[HTTPRule] = []
    for rule in obj.spec.rules:
        if rule.http is None or not (rule.host or result.address):
            continue  # (a rule without host is left out: ObjectResult.dropped)
        rules: list[HTTPRule] = []
        for path in rule.http.paths:
            service = path.backend.service
            if service is None:
                continue
            backend = build.backend(obj, tenant, service.name, _port(service), result)
            kind = PathType.EXACT if path.path_type is IngressPathType.EXACT else PathType.PREFIX
            rules.append(
                HTTPRule(
                    matches=(RouteMatch(path=PathMatch(type=kind, value=path.path or "/")),),
                    backends=(BackendRef(backend=backend),),
                )
            )
        if not rule.host:
            hostless += rules
            continue
        listeners = http
        if rule.host in tls_hosts:
            listeners = http + build.shared(Protocol.HTTPS, result)
        build.http_routes.append(
            HTTPRoute(
                owner=route_owner(obj, tenant, RouteKind.INGRESS),
                listeners=listeners,
                hostnames=(rule.host,),
                semantics=RouteSemantics.INGRESS,
                created=created(obj),
                rules=(*rules, *default),
            )
        )
    if hostless or default:
        build.http_routes.append(
            HTTPRoute(
                owner=route_owner(obj, tenant, RouteKind.INGRESS),
                listeners=http + build.shared(Protocol.HTTPS, result),
                hostnames=(),
                semantics=RouteSemantics.INGRESS,
                created=created(obj),
                rules=(*hostless, *default),
            )
        )


def _port(service: IngressServiceBackend) -> int | str:
    return service.port.number if service.port.number else service.port.name or ""


def _ingress_default(
    build: Build, obj: Ingress, tenant: Tenant, result: ObjectResult
) -> tuple[HTTPRule, ...]:
    """The defaultBackend as a rule that matches every path (Prefix `/`, the least
    specific match: every rule of the Ingress goes first)."""
    service = obj.spec.default_backend.service if obj.spec.default_backend else None
    if service is None:
        return ()
    backend = build.backend(obj, tenant, service.name, _port(service), result)
    return (
        HTTPRule(
            matches=(RouteMatch(path=PathMatch(type=PathType.PREFIX, value="/")),),
            backends=(BackendRef(backend=backend),),
        ),
    )


__all__ = ["add_ingress"]
