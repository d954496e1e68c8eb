"""Gateway API HTTPRoute and Ingress behaviours, from the tenant's objects through the
translation to real HAProxy: redirects and rewrites of the path (the spec's
HTTPPathModifier table), the Host rewrite, a backendRef that does not resolve (500, also
for its weighted share), an Ingress Service that does not exist (503), an Ingress rule
without host left out while the others are served, and the status that says so; then the
core behaviours: matching, precedence across routes, hostnames met with listeners, Ingress
wildcards, weights, header modifiers, the parts of a redirect.

Written from the Gateway API v1 specification; each test names the upstream conformance
test (kubernetes-sigs/gateway-api, conformance/tests) whose behaviour it checks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from teapot_lb.gateway.config import GatewayConfig, problems
from teapot_lb.gateway.control.l7status import route_status
from teapot_lb.gateway.haproxy import HAProxy
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.lab.gateway_lab import GATEWAY, GatewayLab, Response, gateway_lab
from teapot_lb.tenancy.l7vet import L7Object, L7World

from .control.builders import (
    backend,
    gateway,
    http_route,
    ingress,
    listener,
    mirrored_slice,
    tenant,
)

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

WEB, CANARY = "198.51.100.2", "198.51.100.3"
NODES = {"nodeNetworks": ["198.51.100.0/24"]}

# Gateway API HTTPPathModifier, ReplacePrefixMatch: (request, prefix match, replacement,
# the path that results), the specification's own table.
PREFIX_TABLE = [
    ("/foo/bar", "/foo", "/xyz", "/xyz/bar"),
    ("/foo/bar", "/foo", "/xyz/", "/xyz/bar"),
    ("/foo/bar", "/foo/", "/xyz", "/xyz/bar"),
    ("/foo/bar", "/foo/", "/xyz/", "/xyz/bar"),
    ("/foo", "/foo", "/xyz", "/xyz"),
    ("/foo/", "/foo", "/xyz", "/xyz/"),
    ("/foo/bar", "/foo", "", "/bar"),
    ("/foo/", "/foo", "", "/"),
    ("/foo", "/foo", "", "/"),
    ("/foo/", "/foo", "/", "/"),
    ("/foo", "/foo", "/", "/"),
]


# --- builders of HTTPRoute parts (Gateway API's own shapes) ----------------------------


def _prefix(value: str, **more: Any) -> dict[str, Any]:
    return {"path": {"type": "PathPrefix", "value": value}, **more}


def _exact(value: str) -> dict[str, Any]:
    return {"path": {"type": "Exact", "value": value}}


def _to(service: str, weight: int = 1, port: int = 80) -> dict[str, Any]:
    return {"name": service, "port": port, "weight": weight}


def _rule(*matches: dict[str, Any], to: list[dict[str, Any]] | None = None,
          filters: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    rule: dict[str, Any] = {"matches": list(matches)} if matches else {}
    if filters:
        rule["filters"] = filters
    if to:
        rule["backendRefs"] = to
    return rule


def _redirect(**fields: Any) -> dict[str, Any]:
    return {"type": "RequestRedirect", "requestRedirect": fields}


def _rewrite(**fields: Any) -> dict[str, Any]:
    return {"type": "URLRewrite", "urlRewrite": fields}


def _replace_prefix(value: str) -> dict[str, Any]:
    return {"type": "ReplacePrefixMatch", "replacePrefixMatch": value}


def _replace_full(value: str) -> dict[str, Any]:
    return {"type": "ReplaceFullPath", "replaceFullPath": value}


def _route(name: str, host: str, age: int, *rules: dict[str, Any], parent: str = "gw") -> L7Object:
    return http_route("acme", name, [host], age=age, gateway_name=parent, rules=list(rules))


def _prefix_route(n: int, prefix: str, replacement: str, kind: str) -> L7Object:
    change = {"path": _replace_prefix(replacement)}
    if kind == "rewrite":
        rule = _rule(_prefix(prefix), filters=[_rewrite(**change)], to=[_to("web")])
    else:
        rule = _rule(_prefix(prefix), filters=[_redirect(**change)])
    return _route(f"{kind}{n}", f"{kind}{n}.acme.example", n, rule)


def _routes() -> list[L7Object]:
    replacement = _replace_prefix("/replacement-prefix")
    redirect_path = _route(
        "redirect-path", "redirect.acme.example", 1,
        _rule(_prefix("/original-prefix"), filters=[_redirect(path=replacement)]),
        _rule(_prefix("/full"),
              filters=[_redirect(path=_replace_full("/full-path-replacement"))]),
        _rule(_prefix("/path-and-host"),
              filters=[_redirect(hostname="example.org", path=replacement)]),
        _rule(_prefix("/path-and-status"), filters=[_redirect(statusCode=301, path=replacement)]),
        _rule(_prefix("/scheme-and-port"), filters=[_redirect(scheme="https", port=8443)]),
    )  # fmt: skip
    set_header = {
        "type": "RequestHeaderModifier",
        "requestHeaderModifier": {"set": [{"name": "X-Header-Set", "value": "set-overwrites"}]},
    }
    rewrite_path = _route(
        "rewrite-path", "rewrite.acme.example", 2,
        # One PathPrefix match per ReplacePrefixMatch rule (the CRD's own rule).
        _rule(_prefix("/prefix/one"), filters=[_rewrite(path=_replace_prefix("/one"))],
              to=[_to("web")]),
        _rule(_prefix("/prefix/two"), filters=[_rewrite(path=_replace_prefix("/one"))],
              to=[_to("web")]),
        _rule(_prefix("/strip-prefix"), filters=[_rewrite(path=_replace_prefix("/"))],
              to=[_to("web")]),
        _rule(_prefix("/full/one"), filters=[_rewrite(path=_replace_full("/one")), set_header],
              to=[_to("web")]),
        _rule(_prefix("/host"), filters=[_rewrite(hostname="one.example.org")], to=[_to("web")]),
    )  # fmt: skip
    missing = _route(
        "missing", "missing.acme.example", 3,
        _rule(to=[_to("nonexistent")]),
        _rule(_prefix("/split"), to=[_to("web"), _to("nonexistent")]),
        _rule(_prefix("/no-port"), to=[_to("web", port=81)]),
        _rule(_prefix("/other-namespace"), to=[_to("web") | {"namespace": "kube-system"}]),
        _rule(_prefix("/other-kind"), to=[_to("web") | {"group": "x.example", "kind": "Web"}]),
    )  # fmt: skip
    mixed = ingress(
        "acme", "mixed", "www.acme.example", age=4,
        paths=[{"path": "/", "pathType": "Prefix", "backend": backend("web")}],
        defaultBackend=backend("canary"),
    )  # fmt: skip
    no_service = ingress(
        "acme", "no-service", "gone.acme.example", age=5,
        paths=[{"path": "/", "pathType": "Prefix", "backend": backend("nonexistent")}],
    )  # fmt: skip
    wildcard = ingress(
        "acme", "wildcard", "*.shop.example", age=6,
        paths=[{"path": "/", "pathType": "Prefix", "backend": backend("canary")}],
    )  # fmt: skip
    table = [
        _prefix_route(10 + n, prefix, replacement, kind)
        for kind in ("rewrite", "redirect")
        for n, (_request, prefix, replacement, _result) in enumerate(PREFIX_TABLE)
    ]
    return [
        redirect_path, rewrite_path, missing, mixed, no_service, wildcard, *table, *_core_routes()
    ]  # fmt: skip


def _core_routes() -> list[L7Object]:
    """Routes for the core behaviours: matching, precedence across rules and routes,
    hostnames met with listeners, weights, header modifiers, redirects' parts."""
    version_two = {"headers": [{"name": "version", "value": "two"}]}
    matching = _route(
        "matching", "match.acme.example", 40,
        _rule(_exact("/"), to=[_to("web")]),
        _rule(_prefix("/v2"), version_two, to=[_to("canary")]),
        _rule(_exact("/exact"), to=[_to("canary")]),
    )  # fmt: skip
    across_a = _route("across-a", "across.acme.example", 41, _rule(_prefix("/a"), to=[_to("web")]))
    gold = {"headers": [{"name": "X-Tier", "value": "gold"}]}
    across_b = _route(
        "across-b", "across.acme.example", 42,
        _rule(_prefix("/a", **gold), to=[_to("canary")]),
        _rule(_prefix("/a/b"), to=[_to("canary")]),
        _rule(_prefix("/a"), to=[_to("canary")]),
    )  # fmt: skip
    weights = _route(
        "weights", "weights.acme.example", 43,
        _rule(to=[_to("web", 3), _to("canary", 1)]),
        _rule(_prefix("/zero"), to=[_to("web", 0), _to("canary", 1)]),
        _rule(_prefix("/none")),
    )  # fmt: skip
    modifiers = [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-Set", "value": "new"}],
            "add": [{"name": "X-Add", "value": "added"}],
            "remove": ["X-Remove"]}},
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
            "set": [{"name": "Content-Type", "value": "text/teapot"}],
            "add": [{"name": "X-Answer", "value": "added"}],
            "remove": ["X-Unwanted"]}},
    ]  # fmt: skip
    headers = _route("headers", "headers.acme.example", 44,
                     _rule(filters=modifiers, to=[_to("web")]))  # fmt: skip
    redirects = _route(
        "redirects", "redirects.acme.example", 45,
        _rule(_prefix("/hostname-redirect"), filters=[_redirect(hostname="example.org")]),
        _rule(_prefix("/host-and-status"),
              filters=[_redirect(hostname="example.org", statusCode=301)]),
        _rule(_prefix("/port"), filters=[_redirect(port=8083)]),
        _rule(_prefix("/scheme"), filters=[_redirect(scheme="https")]),
        _rule(_prefix("/https-443"), filters=[_redirect(scheme="https", port=443)]),
        _rule(_prefix("/status-307"), filters=[_redirect(statusCode=307)]),
    )  # fmt: skip

    # Hostnames met with the listeners of Gateway "hosts" (very.acme.example,
    # *.wild.acme.example, *.other.acme.example).
    def on_hosts(name: str, age: int, hostnames: list[str], path: str, to: str) -> L7Object:
        return http_route("acme", name, hostnames, age=age, gateway_name="hosts",
                          rules=[_rule(_prefix(path), to=[_to(to)])])  # fmt: skip

    wild = ["wild.acme.example", "foo.wild.acme.example", "foo.bar.wild.acme.example"]
    intersections = [
        on_hosts("specific", 50, ["non.acme.example", "very.acme.example"], "/s1", "web"),
        on_hosts("under-wildcard", 51, wild, "/s2", "canary"),
        on_hosts("wildcard-over-specific", 52, ["*.acme.example"], "/s3", "web"),
        on_hosts("disjoint", 53, ["nope.acme.example", "wild.acme.example"], "/s5", "web"),
    ]
    return [matching, across_a, across_b, weights, headers, redirects, *intersections]


def _translation() -> Translation:
    gw = gateway("acme", "gw", [listener("http", "HTTP", 80, hostname="*.acme.example")])
    slices = [
        mirrored_slice("acme", "web", [WEB], port=8080),
        mirrored_slice("acme", "canary", [CANARY], port=8080),
    ]
    hosts = gateway("acme", "hosts", [
        listener("l1", "HTTP", 80, hostname="very.acme.example"),
        listener("l2", "HTTP", 80, hostname="*.wild.acme.example"),
        listener("l3", "HTTP", 80, hostname="*.other.acme.example"),
    ])  # fmt: skip
    world = L7World([tenant("acme", **NODES), tenant("bolt")], [gw, hosts, *_routes()], {})
    return translate(world, slices, [ip_address(GATEWAY)])


@dataclass
class World:
    lab: GatewayLab
    haproxy: HAProxy
    translation: Translation

    def get(self, host: str, path: str, *args: str) -> Response:
        return self.lab.curl(f"http://{host}{path}", "-D", "-", *args, host=host)

    def seen(self, host: str, path: str) -> dict[str, Any]:
        """What the echo backend received for a request to host+path."""
        r = self.lab.curl(f"http://{host}{path}", host=host)
        assert r.code == 200, (host, path, r)
        return r.json()


def _location(r: Response) -> str:
    lines = [x for x in r.body.splitlines() if x.lower().startswith("location:")]
    assert lines, r.body
    return lines[0].split(":", 1)[1].strip()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl")
    with gateway_lab(tmp_path_factory.mktemp("gwconf"), "gwconf") as lab:
        lab.start_backends(f"http:web:{WEB}:8080", f"http:canary:{CANARY}:8080")
        yield lab


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(lab: GatewayLab) -> AsyncIterator[World]:
    translation = _translation()
    config: GatewayConfig = translation.config
    assert problems(config) == []
    haproxy = HAProxy(lab.work / "haproxy", wrap=lab.gateway.exec_argv([]))
    applied = await haproxy.apply(config)
    assert applied.error is None, applied.error
    yield World(lab, haproxy, translation)
    await haproxy.stop()


async def test_a_redirect_replaces_the_prefix_or_the_full_path(world: World) -> None:
    """Mirrors HTTPRouteRedirectPath (and HTTPRouteRedirectHostAndStatus)."""
    host = "redirect.acme.example"
    cases = [
        ("/original-prefix/lemon", 302, "http://redirect.acme.example/replacement-prefix/lemon"),
        ("/full/path/original", 302, "http://redirect.acme.example/full-path-replacement"),
        ("/path-and-host", 302, "http://example.org/replacement-prefix"),
        ("/path-and-status", 301, "http://redirect.acme.example/replacement-prefix"),
        ("/original-prefix/a?q=1", 302, "http://redirect.acme.example/replacement-prefix/a?q=1"),
        ("/full/x?q=1", 302, "http://redirect.acme.example/full-path-replacement?q=1"),
    ]
    got = []
    for path, *_expected in cases:
        r = world.get(host, path)
        got.append((path, r.code, _location(r)))
    assert got == cases


async def test_a_redirect_to_another_scheme_and_port_writes_the_port(world: World) -> None:
    """Mirrors HTTPRouteRedirectPortAndScheme: a port that is not the scheme's own is
    written; the path and query are the request's."""
    r = world.get("redirect.acme.example", "/scheme-and-port/x?y=1")
    assert (r.code, _location(r)) == (
        302,
        "https://redirect.acme.example:8443/scheme-and-port/x?y=1",
    )


@pytest.mark.parametrize(("row", "case"), list(enumerate(PREFIX_TABLE)), ids=str)
async def test_replace_prefix_match_follows_the_specifications_table(
    world: World, row: int, case: tuple[str, str, str, str]
) -> None:
    """Mirrors HTTPRouteRewritePath and HTTPRouteRedirectPath on every row of the
    HTTPPathModifier table: the backend gets, and the Location names, the same path."""
    request, _prefix, _replacement, expected = case
    n = 10 + row
    seen = world.seen(f"rewrite{n}.acme.example", request)
    assert seen["path"] == expected
    redirect = world.get(f"redirect{n}.acme.example", request)
    assert _location(redirect) == f"http://redirect{n}.acme.example{expected}"


async def test_a_rewrite_changes_what_the_backend_receives(world: World) -> None:
    """Mirrors HTTPRouteRewritePath and HTTPRouteRewriteHost: prefix replaced by path
    element (each of the rule's matches its own), stripped to '/', the full path replaced
    with the query kept, the header modifier applied too, the Host rewritten."""
    host = "rewrite.acme.example"
    assert world.seen(host, "/prefix/one/two")["path"] == "/one/two"
    assert world.seen(host, "/prefix/two/three")["path"] == "/one/three"
    assert world.seen(host, "/strip-prefix/three")["path"] == "/three"
    assert world.seen(host, "/strip-prefix")["path"] == "/"
    full = world.seen(host, "/full/one/two?x=1")
    assert full["path"] == "/one?x=1"
    assert full["headers"]["x-header-set"] == "set-overwrites"
    rewritten = world.seen(host, "/host/a")
    assert (rewritten["path"], rewritten["headers"]["host"]) == ("/host/a", "one.example.org")


async def test_a_backend_ref_that_does_not_exist_is_answered_500(world: World) -> None:
    """Mirrors HTTPRouteInvalidNonExistentBackendRef: 500 for the requests it would get,
    and ResolvedRefs=False, BackendNotFound (the route stays Accepted); the other
    references that do not resolve are named too."""
    host = "missing.acme.example"
    assert world.get(host, "/").code == 500
    assert world.get(host, "/no-port").code == 500  # a Service without that port
    # Mirrors HTTPRouteInvalidCrossNamespaceBackendRef and -BackendRefUnknownKind: never
    # followed (no ReferenceGrant here; only Services), answered 500 all the same.
    assert world.get(host, "/other-namespace").code == 500
    assert world.get(host, "/other-kind").code == 500
    codes = {world.get(host, "/split").code for _ in range(40)}
    assert codes == {200, 500}  # only the missing backend's share fails
    result = next(r for r in world.translation.results.values() if r.obj.name.endswith("missing"))
    (parent,) = route_status(result, "2026-12-06T00:00:00Z")["parents"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in parent["conditions"]}
    assert conditions == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", "BackendNotFound"),
    }
    assert [(r.rule.value, r.field) for r in result.unresolved] == [
        ("BackendNotFound", "spec.rules[0].backendRefs[0]"),
        ("BackendNotFound", "spec.rules[1].backendRefs[1]"),
        ("BackendNotFound", "spec.rules[2].backendRefs[0]"),
        ("RefNotPermitted", "spec.rules[3].backendRefs[0].namespace"),
        ("InvalidKind", "spec.rules[4].backendRefs[0]"),
    ]


async def test_an_ingress_service_that_does_not_exist_is_answered_503(world: World) -> None:
    """Ingress (not Gateway API): as ingress-nginx, a Service that does not exist is a
    backend without endpoints: 503."""
    assert world.get("gone.acme.example", "/").code == 503


async def test_an_ingress_rule_without_host_is_left_out_and_the_others_served(
    world: World,
) -> None:
    """Issue 34, 7(a): the Ingress's hosted rule is served, its defaultBackend (every
    hostname) is not, and the result says which part was left out and why."""
    assert world.seen("www.acme.example", "/x")["name"] == "web"
    assert world.get("elsewhere.acme.example", "/").code == 404
    result = next(r for r in world.translation.results.values() if r.obj.name.endswith("mixed"))
    assert result.accepted
    assert [(r.rule.value, r.field) for r in result.dropped] == [
        ("HostnameNotAllowed", "spec.defaultBackend")
    ]


def _name(r: Response) -> str | int:
    return str(r.json()["name"]) if r.code == 200 else r.code


async def test_matches_of_a_rule_are_ored_and_exact_paths_are_exact(world: World) -> None:
    """Mirrors HTTPRouteMatching and HTTPRouteExactPathMatching."""
    host = "match.acme.example"
    cases = [
        ("/", (), "web"),
        ("/v2", (), "canary"),
        ("/v2/example", (), "canary"),
        ("/v2example", (), 404),  # by path element
        ("/x", ("-H", "Version: two"), "canary"),  # the header match (names: any case)
        ("/x", ("-H", "version: TWO"), 404),  # values: exact
        ("/x", (), 404),
        ("/exact", (), "canary"),
        ("/exact/", (), 404),
    ]
    got = [
        (path, args, _name(world.lab.curl(f"http://{host}{path}", *args, host=host)))
        for path, args, _ in cases
    ]
    assert got == cases


async def test_precedence_across_routes_of_one_hostname(world: World) -> None:
    """Mirrors HTTPRouteMatchingAcrossRoutes and HTTPRoutePathMatchOrder: the longer
    prefix first, then more header matches, then the older route."""
    host = "across.acme.example"

    def to(path: str, *args: str) -> str | int:
        return _name(world.lab.curl(f"http://{host}{path}", *args, host=host))

    assert to("/a/b/c") == "canary"  # the longer prefix (the newer route's)
    assert to("/a/x", "-H", "X-Tier: gold") == "canary"  # a header match beats none
    assert to("/a/x") == "web"  # same match: the older route
    assert to("/ab") == 404  # prefixes match by path element


async def test_a_route_serves_only_where_its_hostnames_meet_a_listeners(world: World) -> None:
    """Mirrors HTTPRouteHostnameIntersection and HTTPRouteListenerHostnameMatching."""

    def to(host: str, path: str) -> str | int:
        return _name(world.lab.curl(f"http://{host}{path}", host=host))

    assert to("very.acme.example", "/s1") == "web"
    assert to("non.acme.example", "/s1") == 404  # no listener's hostname
    assert to("foo.wild.acme.example", "/s2") == "canary"
    assert to("foo.bar.wild.acme.example", "/s2") == "canary"
    assert to("wild.acme.example", "/s2") == 404  # *.wild.acme.example is not its apex
    assert to("very.acme.example", "/s3") == "web"  # *.acme.example meets very.acme.example
    assert to("x.other.acme.example", "/s3") == "web"  # and the listener's wildcard
    disjoint = next(
        r for r in world.translation.results.values() if r.obj.name.endswith("disjoint")
    )
    (parent,) = disjoint.parents
    (accepted,) = [c for c in parent.conditions if c.type == "Accepted"]
    assert (accepted.status, accepted.reason) == (False, "NoMatchingListenerHostname")


async def test_weights_split_traffic_and_a_rule_without_backends_is_500(world: World) -> None:
    """Mirrors HTTPRouteWeight and HTTPRouteOmittedBackendRefs: 3:1 within five standard
    deviations over 200 requests; weight 0 gets nothing; no backendRefs is a 500."""
    host = "weights.acme.example"
    names = [_name(world.lab.curl(f"http://{host}/", host=host)) for _ in range(200)]
    assert set(names) == {"web", "canary"}
    assert 120 <= names.count("web") <= 180
    zero = {_name(world.lab.curl(f"http://{host}/zero", host=host)) for _ in range(20)}
    assert zero == {"canary"}
    assert world.get(host, "/none").code == 500


async def test_header_modifiers_set_add_and_remove(world: World) -> None:
    """Mirrors HTTPRouteRequestHeaderModifier and HTTPRouteResponseHeaderModifier."""
    host = "headers.acme.example"
    r = world.get(host, "/", "-H", "X-Set: old", "-H", "X-Add: original", "-H", "X-Remove: x")
    assert r.code == 200
    body = r.body.split("\n\n", 1)[1]
    seen = Response(200, body).json()
    lines = [tuple(x) for x in seen["header_list"]]
    assert ("x-set", "new") in lines and ("x-set", "old") not in lines
    assert ("x-add", "original") in lines and ("x-add", "added") in lines
    assert not [x for x in lines if x[0] == "x-remove"]
    head = r.body.split("\n\n", 1)[0].lower()
    assert "content-type: text/teapot" in head and "application/json" not in head
    assert "x-answer: added" in head


async def test_redirects_change_host_port_scheme_and_status(world: World) -> None:
    """Mirrors HTTPRouteRedirectHostAndStatus, HTTPRouteRedirectPort,
    HTTPRouteRedirectScheme and HTTPRoute307Redirect."""
    host = "redirects.acme.example"
    got = {}
    for path in ("/hostname-redirect", "/host-and-status", "/port", "/scheme", "/https-443",
                 "/status-307"):  # fmt: skip
        r = world.get(host, path)
        got[path] = (r.code, _location(r))
    assert got == {
        "/hostname-redirect": (302, "http://example.org/hostname-redirect"),
        "/host-and-status": (301, "http://example.org/host-and-status"),
        "/port": (302, "http://redirects.acme.example:8083/port"),
        "/scheme": (302, "https://redirects.acme.example/scheme"),
        "/https-443": (302, "https://redirects.acme.example/https-443"),
        "/status-307": (307, "http://redirects.acme.example/status-307"),
    }


async def test_an_ingress_wildcard_host_covers_exactly_one_label(world: World) -> None:
    """The Kubernetes Ingress documentation's hostname table: `*.foo.com` matches
    `bar.foo.com`, not `baz.bar.foo.com` nor `foo.com`; hosts compare in any case."""
    got = {
        host: _name(world.lab.curl(f"http://{host}/", host=host))
        for host in ("bar.shop.example", "BAR.Shop.example", "baz.bar.shop.example", "shop.example")
    }
    assert got == {
        "bar.shop.example": "canary",
        "BAR.Shop.example": "canary",
        "baz.bar.shop.example": 404,
        "shop.example": 404,
    }
