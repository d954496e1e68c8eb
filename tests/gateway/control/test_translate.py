"""Translation of vetted objects into the data plane's GatewayConfig: Ingress precedence
and HTTPRoute matches (asked of the data plane's own routing table), backends from the
mirrored EndpointSlices, refused objects left out, and each object's result."""

from __future__ import annotations

from ipaddress import ip_address
from pathlib import Path
from typing import Any

from teapot_lb.gateway import routing
from teapot_lb.gateway.config import GatewayConfig, Protocol, problems
from teapot_lb.gateway.routing import Request
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.model.common import ObjectRef
from teapot_lb.tenancy.l7vet import L7Object, L7Rule, L7World

from .builders import (
    backend,
    gateway,
    http_route,
    ingress,
    listener,
    make_certificate,
    mirrored_slice,
    route,
    secret_key,
    tenant,
)

GATEWAY = ip_address("203.0.113.10")
SERVICES = {"web": "192.0.2.11", "api": "192.0.2.12", "v2": "192.0.2.13", "canary": "192.0.2.14"}


def slices(**extra: Any) -> list[dict[str, Any]]:
    out = [mirrored_slice("acme", svc, [ip]) for svc, ip in SERVICES.items()]
    return out + list(extra.values())


def run(
    *objects: L7Object,
    tenant_spec: dict[str, Any] | None = None,
    raw: list[dict[str, Any]] | None = None,
) -> Translation:
    tenants = [tenant("acme", **(tenant_spec or {})), tenant("bolt")]
    result = translate(
        L7World(tenants, list(objects), {}), raw if raw is not None else slices(), [GATEWAY]
    )
    assert problems(result.config) == []
    return result


def served(config: GatewayConfig, host: str, path: str, **kw: Any) -> str | None:
    """The endpoint address the data plane's routing table picks for a request on :80."""
    http = next(x.name for x in config.listeners if x.protocol is Protocol.HTTP)
    entry = routing.winner(routing.table(config, http), Request(host, path, **kw))
    if entry is None:
        return None
    name = entry.rule.backends[0].backend
    found = config.backend(name)
    assert found is not None
    return str(found.endpoints[0].address)


def paths(*entries: tuple[str, str, str]) -> list[dict[str, Any]]:
    return [{"path": p, "pathType": t, "backend": backend(svc)} for t, p, svc in entries]


def test_ingress_precedence_exact_then_longest_prefix_by_element() -> None:
    shop = ingress("acme", "shop", "www.acme.example", paths=paths(("Prefix", "/", "web")))
    api = ingress(
        "acme", "api", "www.acme.example", age=1,
        paths=paths(("Exact", "/api", "api"), ("Prefix", "/api/v2", "v2")),
    )  # fmt: skip
    config = run(shop, api).config
    assert served(config, "www.acme.example", "/api") == SERVICES["api"]
    assert served(config, "www.acme.example", "/api/v2/users") == SERVICES["v2"]
    assert served(config, "www.acme.example", "/api/v2x") == SERVICES["web"]
    assert served(config, "www.acme.example", "/apix") == SERVICES["web"]
    assert served(config, "www.acme.example", "/") == SERVICES["web"]
    assert served(config, "other.acme.example", "/") is None


def test_between_two_ingresses_on_one_path_the_older_serves() -> None:
    newer = ingress(
        "acme", "newer", "www.acme.example", age=5, paths=paths(("Prefix", "/x", "api"))
    )
    older = ingress(
        "acme", "older", "www.acme.example", age=1, paths=paths(("Prefix", "/x", "web"))
    )
    assert served(run(newer, older).config, "www.acme.example", "/x/1") == SERVICES["web"]


def _gateway_and(*routes: L7Object) -> Translation:
    gw = gateway("acme", "gw", [listener("http", "HTTP", 80, hostname="*.acme.example")])
    return run(gw, *routes)


def test_httproute_matches_headers_method_query_and_path() -> None:
    store = http_route(
        "acme",
        "store",
        ["store.acme.example"],
        rules=[
            {"backendRefs": [{"name": "web", "port": 80}]},
            {"matches": [{"headers": [{"name": "X-Canary", "value": "yes"}]}],
             "backendRefs": [{"name": "canary", "port": 80}]},
            {"matches": [{"method": "POST"}], "backendRefs": [{"name": "api", "port": 80}]},
            {"matches": [{"queryParams": [{"name": "v", "value": "2"}]}],
             "backendRefs": [{"name": "v2", "port": 80}]},
            {"matches": [{"path": {"type": "Exact", "value": "/exact"}}],
             "backendRefs": [{"name": "api", "port": 80}]},
        ],
    )  # fmt: skip
    config = _gateway_and(store).config
    host = "store.acme.example"
    assert served(config, host, "/") == SERVICES["web"]
    assert served(config, host, "/", headers={"x-canary": "yes"}) == SERVICES["canary"]
    assert served(config, host, "/", method="POST") == SERVICES["api"]
    assert served(config, host, "/", query={"v": "2"}) == SERVICES["v2"]
    assert served(config, host, "/exact") == SERVICES["api"]
    assert served(config, host, "/exact/more") == SERVICES["web"]


def test_httproute_weights_filters_and_redirects_reach_the_config() -> None:
    split = http_route(
        "acme",
        "split",
        ["split.acme.example"],
        rules=[
            {"backendRefs": [{"name": "web", "port": 80, "weight": 90},
                             {"name": "canary", "port": 80, "weight": 10}],
             "filters": [{"type": "RequestHeaderModifier",
                          "requestHeaderModifier": {"set": [{"name": "X-Env", "value": "prod"}]}}]},
            {"matches": [{"path": {"value": "/old"}}],
             "filters": [{"type": "RequestRedirect",
                          "requestRedirect": {"hostname": "new.acme.example", "statusCode": 301}}]},
        ],
    )  # fmt: skip
    (out,) = _gateway_and(split).config.http_routes
    first, second = out.rules
    assert [b.weight for b in first.backends] == [90, 10]
    assert first.request_headers is not None and first.request_headers.set[0].value == "prod"
    assert second.redirect is not None and second.redirect.hostname == "new.acme.example"
    assert second.redirect.status_code == 301
    assert out.hostnames == ("split.acme.example",)


def test_a_refused_object_contributes_nothing_and_says_why() -> None:
    theft = ingress("bolt", "evil", "www.acme.example", age=9)
    result = run(ingress("acme", "shop", "www.acme.example"), theft)
    assert [r.rule for r in result.results[theft.ref].refusals] == [L7Rule.HOSTNAME_NOT_ALLOWED]
    assert {r.owner.name for r in result.config.http_routes} == {"c1.web.shop"}


def test_backends_are_node_ports_or_pod_ips_inside_the_tenants_networks() -> None:
    shop = ingress("acme", "shop", "www.acme.example")
    raw = [
        mirrored_slice("acme", "web", ["192.0.2.11", "198.51.100.99"]),
        mirrored_slice("acme", "web", ["10.1.0.5", "10.9.0.5"], mode="PodIPs", port=8080),
    ]
    nodes = run(shop, raw=raw)
    (be,) = nodes.config.backends
    assert [(str(e.address), e.port) for e in be.endpoints] == [("192.0.2.11", 30080)]
    notes = nodes.results[shop.ref].notes
    assert any("198.51.100.99" in n and "outside the node networks" in n for n in notes)
    pods = run(
        shop, raw=raw, tenant_spec={"gatewayBackends": "PodIPs", "podNetworks": ["10.1.0.0/16"]}
    )
    (be,) = pods.config.backends
    assert [(str(e.address), e.port) for e in be.endpoints] == [("10.1.0.5", 8080)]


def test_a_service_not_synced_is_an_empty_backend_with_a_note() -> None:
    shop = ingress("acme", "shop", "www.acme.example", paths=paths(("Prefix", "/", "nothere")))
    result = run(shop)
    (be,) = result.config.backends
    assert be.endpoints == ()
    assert any("no synced endpoints" in n for n in result.results[shop.ref].notes)


def test_routes_attach_to_listeners_or_say_why_not() -> None:
    gw = gateway("acme", "gw", [listener("http", "HTTP", 80), listener("db", "TCP", 5432)])
    good = http_route("acme", "good", ["good.acme.example"], age=1)
    catch_all = http_route("acme", "all", [], age=2)
    orphan = http_route("acme", "orphan", ["o.acme.example"], age=3, gateway_name="nope")
    db = route(
        "TCPRoute", "acme", "db", age=4, rules=[{"backendRefs": [{"name": "api", "port": 80}]}]
    )
    result = run(gw, good, catch_all, orphan, db)

    def accepted(obj: L7Object) -> tuple[bool, str]:
        (parent,) = result.results[obj.ref].parents
        (condition,) = [c for c in parent.conditions if c.type == "Accepted"]
        return condition.status, condition.reason

    assert accepted(good) == (True, "Accepted")
    assert accepted(catch_all) == (False, "HostnameNotAllowed")
    assert accepted(orphan) == (False, "NoMatchingParent")
    assert accepted(db) == (True, "Accepted")
    listeners = result.results[ObjectRef("Gateway", gw.metadata.namespace, gw.name)].listeners
    assert listeners["http"].attached == 1 and listeners["db"].attached == 1
    (tcp,) = result.config.tcp_routes
    (tcp_listener,) = [x for x in result.config.listeners if x.name in tcp.listeners]
    assert (tcp_listener.port, tcp_listener.protocol) == (5432, Protocol.TCP)


def test_a_gateway_certificate_is_offered_only_for_the_hostnames_routed_through_it(
    tmp_path: Path,
) -> None:
    cert, key = make_certificate(tmp_path, "store.acme.example")
    gw = gateway(
        "acme", "gw", [listener("https", "HTTPS", 443, tls={"certificateRefs": [{"name": "tls"}]})]
    )
    store = http_route("acme", "store", ["store.acme.example"], age=1)
    secrets = {secret_key("acme", "tls"): {"tls.crt": cert, "tls.key": key}}
    tenants = [tenant("acme"), tenant("bolt")]
    alone = translate(L7World(tenants, [gw], secrets), slices(), [GATEWAY])
    # No route yet: no hostname vetted for the certificate, so it is not offered at all.
    assert alone.config.certificates == () and problems(alone.config) == []
    # The shared HTTPS listener is there all the same, with no tenant's certificate.
    (https,) = [x for x in alone.config.listeners if x.protocol is Protocol.HTTPS]
    assert https.certificates == ()
    routed = translate(L7World(tenants, [gw, store], secrets), slices(), [GATEWAY])
    (certificate,) = routed.config.certificates
    assert certificate.hostnames == ("store.acme.example",)
    assert problems(routed.config) == []


def test_each_certificate_of_a_listener_is_offered_only_for_the_vetted_names_it_covers(
    tmp_path: Path,
) -> None:
    certs = {
        "a": make_certificate(tmp_path, "a.acme.example"),
        "b": make_certificate(tmp_path, "b.acme.example"),
        "w": make_certificate(tmp_path, "*.shop.example"),
        "other": make_certificate(tmp_path, "elsewhere.acme.example"),
    }
    refs = [{"name": n} for n in certs]
    gw = gateway("acme", "gw", [listener("https", "HTTPS", 443, tls={"certificateRefs": refs})])
    hosts = ["a.acme.example", "b.acme.example", "x.shop.example"]
    store = http_route("acme", "store", hosts, age=1)
    secrets = {secret_key("acme", n): {"tls.crt": c, "tls.key": k} for n, (c, k) in certs.items()}
    world = L7World([tenant("acme"), tenant("bolt")], [gw, store], secrets)
    done = translate(world, slices(), [GATEWAY])
    assert problems(done.config) == []
    by_pem = {c.decode(): n for n, (c, _k) in certs.items()}
    offered = {by_pem[c.cert_pem]: c.hostnames for c in done.config.certificates}
    # Never a name the certificate does not cover (the first would otherwise win them all).
    assert offered == {
        "a": ("a.acme.example",),
        "b": ("b.acme.example",),
        "w": ("x.shop.example",),
    }
    notes = done.results[store.ref].notes
    assert any("Secret other" in n and "covers none" in n for n in notes), notes


def test_route_status_says_accepted_or_refused_per_parent_in_gateway_api_style() -> None:
    from teapot_lb.gateway.control.l7status import route_status

    gw = gateway("acme", "gw", [listener("http", "HTTP", 80)])
    good = http_route("acme", "good", ["good.acme.example"], age=1)
    foreign = http_route(
        "acme", "foreign", ["f.acme.example"], age=2,
        rules=[{"backendRefs": [{"name": "db", "namespace": "kube-system", "port": 80}]}],
    )  # fmt: skip
    result = run(gw, good, foreign)
    now = "2026-12-03T00:00:00Z"

    def conditions(obj: L7Object) -> dict[str, tuple[str, str]]:
        (parent,) = route_status(result.results[obj.ref], now)["parents"]
        assert parent["controllerName"] == "lb.teapot.io/gateway"
        return {c["type"]: (c["status"], c["reason"]) for c in parent["conditions"]}

    assert conditions(good) == {
        "Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}  # fmt: skip
    # Mirrors HTTPRouteInvalidCrossNamespaceBackendRef: the route is accepted, the reference
    # never followed (its requests get 500).
    assert conditions(foreign) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", "RefNotPermitted"),
    }
    (rule,) = next(r for r in result.config.http_routes if r.owner.name.endswith("foreign")).rules
    assert [(b.missing, result.config.backend(b.backend)) for b in rule.backends] == [(True, None)]


def test_a_backend_ref_of_another_kind_is_invalid_kind_and_the_route_served() -> None:
    """Mirrors HTTPRouteInvalidBackendRefUnknownKind."""
    from teapot_lb.gateway.control.l7status import route_status

    gw = gateway("acme", "gw", [listener("http", "HTTP", 80)])
    odd = http_route("acme", "odd", ["odd.acme.example"], age=1, rules=[
        {"backendRefs": [{"group": "unknownkind.example.com", "kind": "NonExistent",
                          "name": "x", "port": 8080}]}])  # fmt: skip
    result = run(gw, odd)
    (parent,) = route_status(result.results[odd.ref], "2026-12-06T00:00:00Z")["parents"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in parent["conditions"]}
    assert conditions == {
        "Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", "InvalidKind")}  # fmt: skip
    assert result.config.backends == ()


def _accepted(result: Translation, obj: L7Object) -> tuple[bool, str]:
    (parent,) = result.results[obj.ref].parents
    (condition,) = [c for c in parent.conditions if c.type == "Accepted"]
    return condition.status, condition.reason


def test_a_parent_ref_to_no_listener_is_no_matching_parent() -> None:
    """Mirrors HTTPRouteInvalidParentRefNotMatchingSectionName,
    HTTPRouteInvalidParentRefNotMatchingListenerPort and
    HTTPRouteInvalidParentRefSectionNameNotMatchingPort."""
    gw = gateway("acme", "gw", [listener("http", "HTTP", 80)])

    def parent(**ref: Any) -> L7Object:
        name = "-".join(str(v) for v in ref.values())
        return http_route("acme", name, [f"{name}.acme.example"], age=1,
                          parentRefs=[{"name": "gw", **ref}])  # fmt: skip

    section, port, both, good = (
        parent(sectionName="nope"),
        parent(port=8080),
        parent(sectionName="http", port=8080),
        parent(sectionName="http", port=80),
    )
    result = run(gw, section, port, both, good)
    assert _accepted(result, section) == (False, "NoMatchingParent")
    assert _accepted(result, port) == (False, "NoMatchingParent")
    assert _accepted(result, both) == (False, "NoMatchingParent")
    assert _accepted(result, good) == (True, "Accepted")


def test_a_listener_allowing_other_kinds_does_not_take_an_httproute() -> None:
    """Mirrors HTTPRouteDisallowedKind: allowedRoutes.kinds without HTTPRoute."""
    gw = gateway("acme", "gw", [
        listener("http", "HTTP", 80, allowedRoutes={"kinds": [{"kind": "GRPCRoute"}]}),
    ])  # fmt: skip
    store = http_route("acme", "store", ["store.acme.example"], age=1)
    result = run(gw, store)
    assert _accepted(result, store) == (False, "NotAllowedByListeners")
    assert result.config.http_routes == ()


def test_a_rule_replacing_two_prefixes_becomes_one_rule_per_prefix() -> None:
    """Each PathPrefix match of a ReplacePrefixMatch rule replaces its own prefix. The
    upstream CRDs refuse such a rule (exactly one PathPrefix match); one stored past older
    CRDs is still served as each match would be alone."""
    both = http_route("acme", "both", ["both.acme.example"], age=1, past_the_crd=True, rules=[{
        "matches": [{"path": {"type": "PathPrefix", "value": "/a"}},
                    {"path": {"type": "PathPrefix", "value": "/b"}}],
        "filters": [{"type": "URLRewrite", "urlRewrite": {
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/c"}}}],
        "backendRefs": [{"name": "web", "port": 80}]}])  # fmt: skip
    (route,) = _gateway_and(both).config.http_routes
    assert [r.replaced_prefix() for r in route.rules] == ["/a", "/b"]
    assert {r.rewrite.replace_prefix_match for r in route.rules if r.rewrite} == {"/c"}


def test_explain_shows_a_rewrite_and_a_backend_that_does_not_exist() -> None:
    from teapot_lb.gateway.explain import explain

    route = http_route("acme", "r", ["r.acme.example"], age=1, rules=[
        {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
         "filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "in.acme.example",
             "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}],
         "backendRefs": [{"name": "web", "port": 80},
                         {"name": "nonexistent", "port": 80}]}])  # fmt: skip
    config = _gateway_and(route).config
    text = "\n".join(explain(config, "r.acme.example", "/old/x"))
    assert "rewrite host in.acme.example, prefix /old -> '/new'" in text
    assert "nonexistent" in text and "does not exist: 500" in text


def test_route_conditions_carry_the_generation_they_were_decided_for() -> None:
    """Mirrors HTTPRouteObservedGenerationBump: every condition's observedGeneration is
    the route's metadata.generation, and follows it when the spec changes."""
    from teapot_lb.gateway.control.l7status import route_status

    gw = gateway("acme", "gw", [listener("http", "HTTP", 80)])
    seen = []
    for generation in (1, 2):
        store = http_route("acme", "store", ["store.acme.example"], age=1)
        meta = store.metadata.model_copy(update={"generation": generation})
        store = store.model_copy(update={"metadata": meta})
        (parent,) = route_status(run(gw, store).results[store.ref], "t")["parents"]
        seen.append({c["observedGeneration"] for c in parent["conditions"]})
    assert seen == [{1}, {2}]


def test_a_route_or_gateway_the_webhook_denied_says_not_accepted_with_the_rule() -> None:
    from teapot_lb.gateway.control.l7status import denied_status

    now, why = "2026-12-03T00:00:00Z", "spec.hostnames[0]: outside the DNS domains"
    other = {"parentRef": {"name": "eg"}, "controllerName": "example.com/other", "conditions": []}
    route = {
        "metadata": {"name": "r", "generation": 3},
        "spec": {"parentRefs": [{"name": "gw"}, {"name": "gw", "sectionName": "https"}]},
        "status": {"parents": [other]},
    }
    status = denied_status("HTTPRoute", route, "HostnameNotAllowed", why, now)
    assert status is not None
    assert status["parents"][0] == other  # another controller's entry is kept
    for parent, ref in zip(status["parents"][1:], route["spec"]["parentRefs"], strict=True):
        (accepted,) = parent["conditions"]
        assert (parent["parentRef"], parent["controllerName"]) == (ref, "lb.teapot.io/gateway")
        assert (accepted["type"], accepted["status"], accepted["reason"]) == (
            "Accepted", "False", "HostnameNotAllowed")  # fmt: skip
        assert (accepted["message"], accepted["observedGeneration"]) == (why, 3)
    # Written again later, the same decision is the same status (nothing to patch).
    again = denied_status("HTTPRoute", {**route, "status": status}, "HostnameNotAllowed", why,
                          "2026-12-03T00:05:00Z")  # fmt: skip
    assert again == status
    gateway_status = denied_status("Gateway", {"metadata": {}}, "ModeNotAllowed", "no", now)
    assert gateway_status is not None
    assert [(c["type"], c["status"]) for c in gateway_status["conditions"]] == [
        ("Accepted", "False"), ("Programmed", "False")]  # fmt: skip
    assert denied_status("Ingress", {"metadata": {}}, "HostnameTaken", "taken", now) is None
