"""The gateway's vetting suite: each attempt is refused with its rule and field, and
nothing else of either tenant is disturbed (every other object still vets clean)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.lab.gateway_lab import make_certificate as make_lab_certificate
from teapot_lb.model.common import ObjectRef, dump
from teapot_lb.model.manifest import parse_object
from teapot_lb.tenancy.l7cert import certificate_names, certificate_problem
from teapot_lb.tenancy.l7vet import (
    L7Object,
    L7Rule,
    L7World,
    domain_holds,
    unserved_parts,
    vet_all,
    vet_object,
)
from tenancy.builders import parsed

from .builders import (
    backend,
    gateway,
    http_route,
    ingress,
    ingress_body,
    listener,
    make_certificate,
    route,
    secret_key,
    tenant,
)

SHARED = ["apps.example"]  # a domain the operator gave both tenants (so theft is possible)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, bytes]]:
    directory: Path = tmp_path_factory.mktemp("certs")
    return {cn: make_certificate(directory, cn) for cn in ("www.acme.example", "www.bolt.example")}


def base(
    certs: dict[str, tuple[bytes, bytes]],
) -> tuple[list[L7Object], dict[str, dict[str, bytes]]]:
    """Both tenants' legitimate objects, and their certificates."""
    acme_tls = {"secretName": "acme-tls", "hosts": ["www.acme.example"]}
    objects: list[L7Object] = [
        ingress("acme", "shop", "www.acme.example", tls=[acme_tls]),
        ingress("acme", "api", "api.apps.example", age=1),
        gateway(
            "acme",
            "gw",
            [
                listener("http", "HTTP", 80),
                listener("db", "TCP", 5432),
                listener(
                    "store",
                    "HTTPS",
                    443,
                    hostname="store.apps.example",
                    tls={"certificateRefs": [{"name": "acme-tls"}]},
                ),
            ],
        ),
        http_route("acme", "store", ["a.shop.example"]),
        ingress("bolt", "site", "www.bolt.example", age=2),
        gateway("bolt", "gw", [listener("http", "HTTP", 80), listener("dns", "UDP", 53)], age=2),
        http_route("bolt", "blog", ["blog.apps.example"], age=2),
    ]
    secrets = {
        secret_key("acme", "acme-tls"): dict(
            zip(("tls.crt", "tls.key"), certs["www.acme.example"], strict=True)
        ),
        secret_key("bolt", "bolt-tls"): dict(
            zip(("tls.crt", "tls.key"), certs["www.bolt.example"], strict=True)
        ),
    }
    return objects, secrets


def world_with(
    certs: dict[str, tuple[bytes, bytes]],
    *extra: L7Object,
    secrets: dict[str, dict[str, bytes]] | None = None,
    **tenant_specs: dict[str, Any],
) -> L7World:
    objects, known = base(certs)
    tenants = [
        tenant(name, **{"dnsDomains": [*domains, *SHARED], **tenant_specs.get(name, {})})
        for name, domains in (
            ("acme", ["acme.example", "*.shop.example"]),
            ("bolt", ["bolt.example"]),
        )
    ]
    return L7World(tenants, [*objects, *extra], {**known, **(secrets or {})})


def test_the_base_world_is_served_whole(certs: dict[str, tuple[bytes, bytes]]) -> None:
    verdicts = vet_all(world_with(certs))
    assert verdicts and all(refusals == [] for refusals in verdicts.values()), verdicts


Case = Callable[[dict[str, tuple[bytes, bytes]]], tuple[L7Object, dict[str, Any]]]


def _bolt_ingress(host: str | None, **kw: Any) -> L7Object:
    return ingress("bolt", "evil", host, age=9, **kw)


def _acme(obj: dict[str, Any]) -> L7Object:
    return parsed(obj)  # type: ignore[return-value]


# (name, the attempt, expected rule, expected field, extra world settings)
CASES: list[tuple[str, Callable[[], L7Object], L7Rule, str]] = [
    ("hostname outside the tenant's domains",
     lambda: _bolt_ingress("www.acme.example"), L7Rule.HOSTNAME_NOT_ALLOWED, "spec.rules[0].host"),
    ("hostname theft by Ingress (older one keeps it)",
     lambda: _bolt_ingress("api.apps.example"), L7Rule.HOSTNAME_TAKEN, "spec.rules[0].host"),
    ("hostname theft by HTTPRoute",
     lambda: http_route("bolt", "evil", ["api.apps.example"], age=9), L7Rule.HOSTNAME_TAKEN,
     "spec.hostnames[0]"),
    ("hostname theft by a Gateway listener",
     lambda: gateway("bolt", "gw2", [listener("x", "HTTP", 80, hostname="api.apps.example")],
                     age=9),
     L7Rule.HOSTNAME_TAKEN, "spec.listeners[0].hostname"),
    ("hostname theft through a TLS entry",
     lambda: _bolt_ingress("www.bolt.example", tls=[{"hosts": ["store.apps.example"],
                                                      "secretName": "bolt-tls"}]),
     L7Rule.HOSTNAME_TAKEN, "spec.tls[0].hosts[0]"),
    ("wildcard over another tenant's domain",
     lambda: _bolt_ingress("*.acme.example"), L7Rule.HOSTNAME_NOT_ALLOWED, "spec.rules[0].host"),
    ("wildcard over a parent domain the tenant does not hold whole",
     lambda: ingress("acme", "evil", "*.example", age=9), L7Rule.HOSTNAME_NOT_ALLOWED,
     "spec.rules[0].host"),
    ("apex of a domain held only as a wildcard",
     lambda: ingress("acme", "evil", "shop.example", age=9), L7Rule.HOSTNAME_NOT_ALLOWED,
     "spec.rules[0].host"),
    ("an Ingress rule without host (every hostname)",
     lambda: _bolt_ingress(None), L7Rule.HOSTNAME_NOT_ALLOWED, "spec.rules[0].host"),
    ("an Ingress with only a default backend (every hostname)",
     lambda: _bolt_ingress(None, defaultBackend=backend()),
     L7Rule.HOSTNAME_NOT_ALLOWED, "spec.defaultBackend"),
    ("an invalid hostname",
     lambda: _bolt_ingress("WWW.bolt..example"), L7Rule.INVALID_HOSTNAME, "spec.rules[0].host"),
    ("a Secret of another namespace",
     lambda: gateway("bolt", "gw2", [listener("s", "HTTPS", 443, hostname="s.bolt.example",
         tls={"certificateRefs": [{"name": "acme-tls", "namespace": "other"}]})], age=9),
     L7Rule.SECRET_NOT_ALLOWED, "spec.listeners[0].tls.certificateRefs[0].namespace"),
    ("a certificate that is not a Secret",
     lambda: gateway("bolt", "gw2", [listener("s", "HTTPS", 443, hostname="s.bolt.example",
         tls={"certificateRefs": [{"name": "c", "kind": "ConfigMap"}]})], age=9),
     L7Rule.SECRET_NOT_ALLOWED, "spec.listeners[0].tls.certificateRefs[0]"),
    ("a certificate that does not parse",
     lambda: _bolt_ingress("www.bolt.example", tls=[{"hosts": ["www.bolt.example"],
                                                      "secretName": "broken"}]),
     L7Rule.INVALID_CERTIFICATE, "spec.tls[0].secretName"),
    ("a key that is not the certificate's",
     lambda: _bolt_ingress("www.bolt.example", tls=[{"hosts": ["www.bolt.example"],
                                                      "secretName": "mismatch"}]),
     L7Rule.INVALID_CERTIFICATE, "spec.tls[0].secretName"),
    ("a configuration snippet annotation",
     lambda: _bolt_ingress("www.bolt.example", annotations={
         "nginx.ingress.kubernetes.io/configuration-snippet": "return 200;"}),
     L7Rule.SNIPPET_NOT_ALLOWED,
     "metadata.annotations[nginx.ingress.kubernetes.io/configuration-snippet]"),
    ("an HAProxy controller annotation",
     lambda: _bolt_ingress("www.bolt.example", annotations={
         "haproxy.org/backend-config-snippet": "http-request deny"}),
     L7Rule.SNIPPET_NOT_ALLOWED, "metadata.annotations[haproxy.org/backend-config-snippet]"),
    ("a path breaking out of the configuration line",
     lambda: _bolt_ingress("www.bolt.example", paths=[{"path": "/x\n  use_backend acme",
         "pathType": "Prefix", "backend": backend()}]),
     L7Rule.UNSAFE_VALUE, "spec.rules[0].http.paths[0].path"),
    ("a header value with a quote and an HAProxy sample fetch",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, rules=[{
         "filters": [{"type": "RequestHeaderModifier",
                      "requestHeaderModifier": {"set": [{"name": "X-A", "value": "\" %[src]"}]}}],
         "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.UNSAFE_VALUE, "spec.rules[0].filters[0].requestHeaderModifier.set[0].value"),
    ("a header match name with a space",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, past_the_crd=True, rules=[{
         "matches": [{"headers": [{"name": "X A", "value": "b"}]}],
         "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.UNSAFE_VALUE, "spec.rules[0].matches[0].headers[0].name"),
    ("a redirect to a javascript: scheme",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, past_the_crd=True, rules=[{
         "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "javascript"}}]}]),
     L7Rule.UNSAFE_VALUE, "spec.rules[0].filters[0].requestRedirect.scheme"),
    ("a regular-expression path match",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, rules=[{
         "matches": [{"path": {"type": "RegularExpression", "value": ".*"}}],
         "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.UNSUPPORTED_VALUE, "spec.rules[0].matches[0].path.type"),
    ("an ExtensionRef filter",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, rules=[{
         "filters": [{"type": "ExtensionRef", "extensionRef": {"group": "x", "kind": "Y",
                                                               "name": "z"}}],
         "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.UNSUPPORTED_VALUE, "spec.rules[0].filters[0].type"),
    ("ReplacePrefixMatch on an Exact match (the spec: only PathPrefix)",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, past_the_crd=True, rules=[{
         "matches": [{"path": {"type": "Exact", "value": "/a"}}],
         "filters": [{"type": "RequestRedirect", "requestRedirect": {
             "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/b"}}}]}]),
     L7Rule.UNSUPPORTED_VALUE, "spec.rules[0].filters[0].requestRedirect.path.type"),
    ("a rule field the gateway does not implement (timeouts)",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, rules=[{
         "timeouts": {"request": "1s"}, "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.UNSUPPORTED_VALUE, "spec.rules[0].timeouts"),
    ("a filter on a backendRef",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, rules=[{
         "backendRefs": [{"name": "web", "port": 80, "filters": [
             {"type": "RequestHeaderModifier",
              "requestHeaderModifier": {"set": [{"name": "X-A", "value": "b"}]}}]}]}]),
     L7Rule.UNSUPPORTED_VALUE, "spec.rules[0].backendRefs[0].filters"),
    ("a redirect and a rewrite on one rule",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, past_the_crd=True, rules=[{
         "filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "x.example"}},
                     {"type": "URLRewrite", "urlRewrite": {"hostname": "y.example"}}]}]),
     L7Rule.INCOMPATIBLE_FILTERS, "spec.rules[0].filters"),
    ("a filter carrying another type's configuration",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, past_the_crd=True, rules=[{
         "filters": [{"type": "RequestHeaderModifier",
                      "requestHeaderModifier": {"set": [{"name": "X-A", "value": "b"}]},
                      "requestRedirect": {"hostname": "x.example"}}],
         "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.UNSUPPORTED_VALUE, "spec.rules[0].filters[0].requestRedirect"),
    ("one filter type twice on a rule",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, past_the_crd=True, rules=[{
         "filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "x.example"}},
                     {"type": "URLRewrite", "urlRewrite": {"hostname": "y.example"}}],
         "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.INCOMPATIBLE_FILTERS, "spec.rules[0].filters"),
    ("a rewrite to a name that is not a DNS name",
     lambda: http_route("bolt", "evil", ["h.bolt.example"], age=9, past_the_crd=True, rules=[{
         "filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "a b"}}],
         "backendRefs": [{"name": "web", "port": 80}]}]),
     L7Rule.UNSAFE_VALUE, "spec.rules[0].filters[0].urlRewrite.hostname"),
    ("an oversized object (too many rules)",
     lambda: _acme(ingress_body("bolt", "evil", "www.bolt.example", age=9) | {"spec": {
         "ingressClassName": "teapot",
         "rules": [{"host": f"h{i}.bolt.example"} for i in range(100)]}}),
     L7Rule.OVERSIZED, "hostnames"),
    ("an oversized object (bytes)",
     lambda: _bolt_ingress("www.bolt.example", annotations={"note": "x" * 70_000}),
     L7Rule.OVERSIZED, ""),
    ("ports over quota",
     lambda: gateway("acme", "gw2", [listener("a", "TCP", 6000), listener("b", "TCP", 6001)],
                     age=9),
     L7Rule.QUOTA_EXCEEDED, "spec.listeners[1].port"),
    ("another tenant's port",
     lambda: gateway("acme", "gw2", [listener("dns", "UDP", 53)], age=9),
     L7Rule.PORT_TAKEN, "spec.listeners[0].port"),
    ("HTTP off the shared port",
     lambda: gateway("bolt", "gw2", [listener("alt", "HTTP", 8080)], age=9),
     L7Rule.PORT_NOT_ALLOWED, "spec.listeners[0].port"),
    ("a protocol the gateway does not serve",
     lambda: gateway("bolt", "gw2", [listener("s", "SCTP", 9000)], age=9),
     L7Rule.NOT_SERVED, "spec.listeners[0].protocol"),
    ("a backend in another namespace",
     lambda: route("TCPRoute", "bolt", "evil", age=9, rules=[{
         "backendRefs": [{"name": "db", "namespace": "kube-system", "port": 5432}]}]),
     L7Rule.BACKEND_NOT_ALLOWED, "spec.rules[0].backendRefs[0].namespace"),
    ("a backend that is not a Service",
     lambda: route("UDPRoute", "bolt", "evil", age=9, rules=[{
         "backendRefs": [{"name": "x", "group": "example.io", "kind": "Thing", "port": 53}]}]),
     L7Rule.BACKEND_NOT_ALLOWED, "spec.rules[0].backendRefs[0]"),
    ("an Ingress resource backend",
     lambda: _bolt_ingress("www.bolt.example", paths=[{"path": "/", "pathType": "Prefix",
         "backend": {"resource": {"apiGroup": "k8s.example", "kind": "Bucket", "name": "b"}}}]),
     L7Rule.BACKEND_NOT_ALLOWED, "spec.rules[0].http.paths[0].backend.resource"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "attempt", "rule", "field"), CASES, ids=[c[0] for c in CASES])
def test_an_attempt_is_refused_with_its_reason_and_nothing_else_disturbed(
    certs: dict[str, tuple[bytes, bytes]],
    name: str,
    attempt: Callable[[], L7Object],
    rule: L7Rule,
    field: str,
) -> None:
    bad = attempt()
    cert, key = certs["www.bolt.example"]
    other_key = certs["www.acme.example"][1]
    secrets = {
        secret_key("bolt", "broken"): {
            "tls.crt": b"-----BEGIN CERTIFICATE-----\nAAAA\n",
            "tls.key": key,
        },
        secret_key("bolt", "mismatch"): {"tls.crt": cert, "tls.key": other_key},
    }
    verdicts = vet_all(world_with(certs, bad, secrets=secrets))
    refusals = verdicts.pop(bad.ref)
    assert any(r.rule is rule and r.field == field for r in refusals), refusals
    assert all(r.message for r in refusals)
    disturbed = {ref: r for ref, r in verdicts.items() if r}
    assert disturbed == {}, f"{name}: others refused too: {disturbed}"


# The upstream CRDs' own rules refuse these first (docs/gateway.md, "The upstream CRDs' own
# validation"); the cases above hold them as a cluster with older CRDs would store them.
PAST_THE_CRD = [c for c in CASES if c[0] in {
    "ReplacePrefixMatch on an Exact match (the spec: only PathPrefix)",
    "a redirect and a rewrite on one rule",
    "a filter carrying another type's configuration",
    "one filter type twice on a rule",
    "a rewrite to a name that is not a DNS name",
}]  # fmt: skip


@pytest.mark.parametrize("attempt", [c[1] for c in PAST_THE_CRD], ids=[c[0] for c in PAST_THE_CRD])
def test_the_crds_own_rules_refuse_it_before_the_gateway_vets_it(
    attempt: Callable[[], L7Object],
) -> None:
    obj, problems = parse_object(dump(attempt()))
    assert obj is None and problems and all(p.field.startswith("spec.rules[0]") for p in problems)


def test_a_tenant_without_the_gateway_mode_is_refused(
    certs: dict[str, tuple[bytes, bytes]],
) -> None:
    world = world_with(certs, bolt={"modes": ["Route"]})
    refusals = vet_object(ingress("bolt", "site", "www.bolt.example", age=2), world)
    assert [r.rule for r in refusals] == [L7Rule.MODE_NOT_ALLOWED]


def test_with_the_same_creation_time_the_name_decides(
    certs: dict[str, tuple[bytes, bytes]],
) -> None:
    first = ingress("bolt", "aaa", "same.apps.example", age=5)
    second = ingress("acme", "zzz", "same.apps.example", age=5)
    verdicts = vet_all(world_with(certs, first, second))
    # creation_order sorts by time, then namespace (tenant-acme < tenant-bolt), then name.
    assert [r.rule for r in verdicts[first.ref]] == [L7Rule.HOSTNAME_TAKEN]
    assert verdicts[second.ref] == []


def test_objects_not_of_the_gateway_are_left_alone(certs: dict[str, tuple[bytes, bytes]]) -> None:
    other_class = ingress("bolt", "nginx", None, age=9, ingressClassName="nginx")
    body = ingress_body("bolt", "elsewhere", None, age=9)
    body["metadata"]["namespace"] = "operators-own"
    elsewhere = parsed(body)
    verdicts = vet_all(world_with(certs, other_class, elsewhere))  # type: ignore[arg-type]
    assert (
        verdicts[other_class.ref] == []
        and verdicts[ObjectRef("Ingress", "operators-own", elsewhere.name)] == []
    )


@pytest.mark.parametrize(
    ("domain", "hostname", "held"),
    [
        ("a.example", "a.example", True),
        ("a.example", "x.a.example", True),
        ("a.example", "x.y.a.example", True),
        ("a.example", "*.a.example", True),
        ("a.example", "b.example", False),
        ("a.example", "xa.example", False),
        ("*.a.example", "a.example", False),
        ("*.a.example", "x.a.example", True),
        ("*.a.example", "*.a.example", True),
        ("*.a.example", "b.example", False),
        ("x.a.example", "*.a.example", False),
        ("a.example", "*.example", False),
    ],
)
def test_dns_domains_hold_names_exactly(domain: str, hostname: str, held: bool) -> None:
    assert domain_holds(domain, hostname) is held


def test_a_good_certificate_passes_and_a_mismatch_says_why(
    certs: dict[str, tuple[bytes, bytes]],
) -> None:
    cert, key = certs["www.acme.example"]
    assert certificate_problem(cert, key) is None
    why = certificate_problem(cert, certs["www.bolt.example"][1])
    assert why is not None and "not the key" in why


def test_a_certificate_past_its_end_date_has_expired(
    certs: dict[str, tuple[bytes, bytes]],
) -> None:
    cert, key = certs["www.acme.example"]  # valid for 30 days
    assert certificate_problem(cert, key, now=datetime.now(UTC) + timedelta(days=29)) is None
    later = datetime.now(UTC) + timedelta(days=31)
    assert certificate_problem(cert, key, now=later) == "the certificate has expired"


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        ("key", "tls.key does not parse as a private key"),
        ("chain", "tls.crt holds a certificate chain that does not parse"),
        ("certificate", "tls.crt does not parse as an X.509 certificate"),
    ],
)
def test_what_does_not_parse_is_named(
    certs: dict[str, tuple[bytes, bytes]], broken: str, why: str
) -> None:
    cert, key = certs["www.acme.example"]
    garbage = b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n"
    if broken == "key":
        key = b"-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n"
    elif broken == "chain":
        cert = cert + garbage
    else:
        cert = garbage
    assert certificate_problem(cert, key) == why


def test_a_certificates_names_are_its_dns_names_else_its_common_name(
    certs: dict[str, tuple[bytes, bytes]], tmp_path: Path
) -> None:
    assert certificate_names(certs["www.acme.example"][0]) == ["www.acme.example"]
    cert, _key, _pem = make_lab_certificate(tmp_path, "San.Example")
    assert certificate_names(cert.read_bytes()) == ["san.example"]
    assert certificate_names(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n") == []


def test_a_wildcard_certificate_name_covers_one_label_only() -> None:
    from teapot_lb.tenancy.l7cert import covered_hostnames, name_covers

    assert name_covers("*.a.example", "x.a.example")
    assert name_covers("*.a.example", "*.a.example")
    assert not name_covers("*.a.example", "a.example")
    assert not name_covers("*.a.example", "y.x.a.example")
    assert not name_covers("x.a.example", "*.a.example")
    assert covered_hostnames(
        ["b.example", "*.a.example"], ["x.a.example", "c.example", "b.example"]
    ) == (
        "x.a.example",
        "b.example",
    )


def test_an_ingress_rule_without_host_is_left_out_and_its_other_rules_are_served(
    certs: dict[str, tuple[bytes, bytes]],
) -> None:
    """Issue 34, 7(a): on the shared addresses a rule without host (and a defaultBackend)
    would catch every hostname; only that part is refused, the Ingress is admitted."""
    body = ingress_body("bolt", "mixed", "www.bolt.example", age=9, defaultBackend=backend())
    body["spec"]["rules"].append({"http": body["spec"]["rules"][0]["http"]})
    mixed = parsed(body)
    world = world_with(certs, mixed)  # type: ignore[arg-type]
    assert vet_object(mixed, world) == []  # type: ignore[arg-type]
    left_out = unserved_parts(mixed, world)  # type: ignore[arg-type]
    assert [(r.rule, r.field) for r in left_out] == [
        (L7Rule.HOSTNAME_NOT_ALLOWED, "spec.rules[1].host"),
        (L7Rule.HOSTNAME_NOT_ALLOWED, "spec.defaultBackend"),
    ]
    assert all("Tenant bolt" in r.message for r in left_out)


def test_an_empty_replace_prefix_match_is_valid(certs: dict[str, tuple[bytes, bytes]]) -> None:
    """The spec's `replacePrefixMatch: ""` removes the prefix: it is served, not unsafe."""
    strip = http_route("bolt", "strip", ["s.bolt.example"], age=9, rules=[{
        "matches": [{"path": {"type": "PathPrefix", "value": "/strip"}}],
        "filters": [{"type": "URLRewrite", "urlRewrite": {
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": ""}}}],
        "backendRefs": [{"name": "web", "port": 80}]}])  # fmt: skip
    assert vet_object(strip, world_with(certs, strip)) == []
