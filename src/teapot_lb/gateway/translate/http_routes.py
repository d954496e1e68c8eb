"""An HTTPRoute → HTTP routes: matches, filters, weighted backends (an unresolved one
answered 500)."""

from __future__ import annotations

from collections.abc import Mapping

from teapot_lb.gateway.config import (
    BackendRef,
    HeaderMatch,
    HeaderModifier,
    HeaderValue,
    HTTPRoute,
    HTTPRule,
    PathMatch,
    PathType,
    QueryParamMatch,
    Redirect,
    Rewrite,
    RouteKind,
    RouteMatch,
    RouteSemantics,
)
from teapot_lb.model.gateway_api import (
    Gateway,
    HTTPPathModifier,
    HTTPRouteFilter,
    HTTPRouteMatch,
    HTTPRouteRule,
)
from teapot_lb.model.gateway_api import HTTPRoute as ApiHTTPRoute
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7vet import L7Refusal, L7Rule, unresolved_backend_refs

from .attach import attach
from .build import Build, config_name, created, route_owner
from .results import ObjectResult


def _modifier(flt: HTTPRouteFilter, attr: str) -> HeaderModifier | None:
    mod = getattr(flt, attr)
    if mod is None:
        return None
    return HeaderModifier(
        set=tuple(HeaderValue(name=h.name, value=h.value) for h in mod.set),
        add=tuple(HeaderValue(name=h.name, value=h.value) for h in mod.add),
        remove=tuple(mod.remove),
    )


def _match(match: HTTPRouteMatch) -> RouteMatch:
    path = match.path
    kind = PathType.EXACT if path is not None and path.type.value == "Exact" else PathType.PREFIX
    return RouteMatch(
        path=PathMatch(type=kind, value=path.value if path else "/"),
        headers=tuple(HeaderMatch(name=h.name, value=h.value) for h in match.headers),
        query_params=tuple(QueryParamMatch(name=q.name, value=q.value) for q in match.query_params),
        method=match.method,
    )


def _path_change(modifier: HTTPPathModifier | None) -> dict[str, str | None]:
    """An HTTPPathModifier as the config's fields (vetting has made sure the field of its
    type is set)."""
    if modifier is None:
        return {}
    if modifier.type == "ReplaceFullPath":
        return {"path": modifier.replace_full_path}
    return {"replace_prefix_match": modifier.replace_prefix_match}


def _served_rule(rule: HTTPRouteRule, backends: tuple[BackendRef, ...]) -> HTTPRule:
    """The rule with its filters (the served ones: vetting refused the others)."""
    request = response = None
    redirect = rewrite = None
    for flt in rule.filters:
        # (a filter's type says which of its fields is read: vetting refused the others)
        if flt.type == "RequestHeaderModifier":
            request = _modifier(flt, "request_header_modifier")
        if flt.type == "ResponseHeaderModifier":
            response = _modifier(flt, "response_header_modifier")
        r = flt.request_redirect if flt.type == "RequestRedirect" else None
        if r is not None:
            redirect = Redirect(
                scheme=r.scheme, hostname=r.hostname, port=r.port, status_code=r.status_code,
                **_path_change(r.path),
            )  # fmt: skip
        w = flt.url_rewrite if flt.type == "URLRewrite" else None
        if w is not None:
            rewrite = Rewrite(hostname=w.hostname, **_path_change(w.path))
    return HTTPRule(
        matches=tuple(_match(m) for m in rule.matches),
        backends=backends,
        request_headers=request,
        response_headers=response,
        redirect=redirect,
        rewrite=rewrite,
    )


def add_http_route(
    build: Build,
    route: ApiHTTPRoute,
    tenant: Tenant,
    gateways: Mapping[str, tuple[Gateway, ObjectResult]],
    result: ObjectResult,
) -> None:
    never = unresolved_backend_refs(route)
    for listeners, hosts, _gw in attach(build, route, gateways, result):
        rules: list[HTTPRule] = []
        for i, rule in enumerate(route.spec.rules):
            backends = []
            for j, ref in enumerate(rule.backend_refs):
                where = f"spec.rules[{i}].backendRefs[{j}]"
                why = never.get(where)
                if why is not None:  # never followed: no backend, its requests get 500
                    name = config_name("unresolved", ref.namespace or "", ref.kind, ref.name)
                else:
                    name = build.backend(route, tenant, ref.name, ref.port or 0, result)
                if why is None and name in build.missing:
                    why = L7Refusal(
                        L7Rule.BACKEND_NOT_FOUND,
                        where,
                        f"Service {ref.name} port {ref.port} does not exist (no EndpointSlice "
                        "synced, or no such port): its requests are answered 500",
                    )
                if why is not None and why not in result.unresolved:
                    result.unresolved.append(why)
                backends.append(BackendRef(backend=name, weight=ref.weight, missing=bool(why)))
            served = _served_rule(rule, tuple(backends))
            change = served.redirect or served.rewrite
            if change is not None and change.replace_prefix_match is not None:
                # Each PathPrefix match replaces its own prefix: one rule per match.
                rules += [served.model_copy(update={"matches": (m,)}) for m in served.matches]
            else:
                rules.append(served)
        build.http_routes.append(
            HTTPRoute(
                owner=route_owner(route, tenant, RouteKind.HTTP_ROUTE),
                listeners=listeners,
                hostnames=tuple(hosts),
                semantics=RouteSemantics.HTTP_ROUTE,
                created=created(route),
                rules=tuple(rules),
            )
        )


__all__ = ["add_http_route"]
