"""Routing precedence, asked of the routing table (the order the renderer emits)."""

from __future__ import annotations

import pytest

from teapot_lb.gateway import routing
from teapot_lb.gateway.config import (
    BackendRef,
    GatewayConfig,
    HeaderMatch,
    HTTPRoute,
    HTTPRule,
    PathMatch,
    PathType,
    QueryParamMatch,
    RouteMatch,
)
from teapot_lb.gateway.routing import Request

from .builders import (
    INGRESS_DOC_TABLE,
    E,
    IngressCase,
    P,
    backend,
    ingress,
    ingress_case_config,
    listener,
)

ENDPOINTS = {i: ("198.51.100.2", 8000 + i) for i in range(4)}


def _served(cfg: GatewayConfig, request: Request) -> str | None:
    entry = routing.winner(routing.table(cfg, "web"), request)
    if entry is None:
        return None
    return entry.rule.backends[0].backend


@pytest.mark.parametrize("case", INGRESS_DOC_TABLE, ids=lambda c: c.id)
def test_each_pathtype_case_of_the_ingress_docs(case: IngressCase) -> None:
    cfg = ingress_case_config(case, ENDPOINTS)
    expected = None if case.served_by is None else f"b{case.served_by}"
    assert _served(cfg, Request("docs.example", case.request)) == expected


def _cfg(*routes: HTTPRoute) -> GatewayConfig:
    names = {r.backend for route in routes for rule in route.rules for r in rule.backends}
    return GatewayConfig(
        listeners=(listener(),),
        backends=tuple(backend(n, ("198.51.100.2", 80)) for n in sorted(names)),
        http_routes=routes,
    )


def test_an_exact_host_beats_a_wildcard_and_does_not_fall_through_to_it() -> None:
    cfg = _cfg(
        ingress("exact", "a.foo.example", [(E, "/only", "exact")]),
        ingress("wild", "*.foo.example", [(P, "/", "wild")]),
        ingress("any", None, [(P, "/", "any")]),
    )
    assert _served(cfg, Request("a.foo.example", "/only")) == "exact"
    assert _served(cfg, Request("a.foo.example", "/other")) is None
    assert _served(cfg, Request("b.foo.example", "/x")) == "wild"
    assert _served(cfg, Request("x.b.foo.example", "/x")) == "any"  # Ingress: one label
    assert _served(cfg, Request("elsewhere.example", "/x")) == "any"


def _route(name: str, created: str, *rules: HTTPRule, hosts: tuple[str, ...] = ()) -> HTTPRoute:
    return HTTPRoute(
        listeners=("web",),
        hostnames=hosts,
        created=created,
        rules=rules,
        owner={"namespace": "ns", "name": name},
    )


def _rule(backend_name: str, **match: object) -> HTTPRule:
    return HTTPRule(
        matches=(RouteMatch.model_validate(match),), backends=(BackendRef(backend=backend_name),)
    )


def test_httproute_precedence_method_then_headers_then_query_then_age() -> None:
    cfg = _cfg(
        _route("young", "2026-02-01T00:00:00Z", _rule("young", path={"value": "/"})),
        _route(
            "old",
            "2026-01-01T00:00:00Z",
            _rule("q", path={"value": "/"}, query_params=[{"name": "a", "value": "1"}]),
            _rule("h", path={"value": "/"}, headers=[{"name": "X-A", "value": "1"}]),
            _rule(
                "hh",
                path={"value": "/"},
                headers=[{"name": "X-A", "value": "1"}, {"name": "X-B", "value": "2"}],
            ),
            _rule("m", path={"value": "/"}, method="POST"),
            _rule("old", path={"value": "/"}),
        ),
    )
    both = {"x-a": "1", "X-B": "2"}
    assert _served(cfg, Request("h", "/", "POST", both, {"a": "1"})) == "m"
    assert _served(cfg, Request("h", "/", "GET", both, {"a": "1"})) == "hh"
    assert _served(cfg, Request("h", "/", "GET", {"X-A": "1"}, {"a": "1"})) == "h"
    assert _served(cfg, Request("h", "/", "GET", {}, {"a": "1"})) == "q"
    assert _served(cfg, Request("h", "/", "GET")) == "old"  # older route wins the tie


def test_httproute_wildcard_covers_many_labels_and_exact_path_beats_prefix() -> None:
    cfg = _cfg(
        _route(
            "r",
            "",
            _rule("pre", path={"type": "Prefix", "value": "/a"}),
            _rule("ex", path={"type": "Exact", "value": "/a"}),
            hosts=("*.w.example",),
        ),
    )
    assert _served(cfg, Request("x.y.w.example", "/a")) == "ex"
    assert _served(cfg, Request("x.y.w.example", "/a/b")) == "pre"
    assert _served(cfg, Request("w.example", "/a")) is None


def test_header_names_are_case_insensitive_query_names_are_not_and_regex_matches() -> None:
    rule = HTTPRule(
        matches=(
            RouteMatch(
                path=PathMatch(type=PathType.REGULAR_EXPRESSION, value="/v[0-9]+/.*"),
                headers=(HeaderMatch(name="X-Env", value="prod"),),
                query_params=(QueryParamMatch(name="k", value="v"),),
            ),
        ),
        backends=(BackendRef(backend="b"),),
    )
    cfg = _cfg(_route("r", "", rule))
    assert _served(cfg, Request("h", "/v2/x", "GET", {"x-env": "prod"}, {"k": "v"})) == "b"
    assert _served(cfg, Request("h", "/v2/x", "GET", {"x-env": "prod"}, {"K": "v"})) is None
    assert _served(cfg, Request("h", "/vx/x", "GET", {"x-env": "prod"}, {"k": "v"})) is None
