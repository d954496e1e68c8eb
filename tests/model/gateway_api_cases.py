"""Gateway API manifests and the verdict the upstream CRDs give them: applied to the real
kube-apiserver (tests/realapi/test_gateway_api_crds.py) and to our evaluation of the same
CRDs (tests/model/test_gateway_api_schema.py), which must agree.

Each case: a name, the object, and None (accepted) or a part of the refusal's message (the
CRD rule's own message, or the schema keyword's). Arranged from the rules of Gateway API
v1.6.1's standard-channel CRDs: HTTPRoute filters, path matches, ReplacePrefixMatch,
backend references, parent references; Gateway listeners' hostname, protocol and TLS mode;
TLSRoute hostnames; and the OpenAPI checks (pattern, enum, maxItems, required).
"""

from __future__ import annotations

from typing import Any, NamedTuple

GW = "gateway.networking.k8s.io/v1"


class Case(NamedTuple):
    name: str
    body: dict[str, Any]
    refused_with: str | None  # None: accepted


def http_route(*rules: dict[str, Any], **spec: Any) -> dict[str, Any]:
    spec.setdefault("parentRefs", [{"name": "gw"}])
    spec.setdefault("hostnames", ["www.example.com"])
    spec["rules"] = list(rules) or [{"backendRefs": [{"name": "web", "port": 80}]}]
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "r"}, "spec": spec}


def gateway(*listeners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": GW,
        "kind": "Gateway",
        "metadata": {"name": "gw"},
        "spec": {"gatewayClassName": "teapot", "listeners": list(listeners)},
    }


def tls_route(hostnames: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": GW,
        "kind": "TLSRoute",
        "metadata": {"name": "t"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": hostnames,
            "rules": [{"backendRefs": [{"name": "web", "port": 443}]}],
        },
    }


WEB = {"name": "web", "port": 80}
CERT = {"certificateRefs": [{"name": "www-cert"}]}


def redirect(**path: str) -> dict[str, Any]:
    return {"type": "RequestRedirect", "requestRedirect": {"path": path}}


def rewrite(**path: str) -> dict[str, Any]:
    return {"type": "URLRewrite", "urlRewrite": {"path": path}}


def prefix(value: str) -> dict[str, Any]:
    return {"path": {"type": "PathPrefix", "value": value}}


def exact(value: str) -> dict[str, Any]:
    return {"path": {"type": "Exact", "value": value}}


CASES: list[Case] = [
    # --- HTTPRoute
    Case("a plain route", http_route(), None),
    Case(
        "a route with header, query and method matches",
        http_route({
            "matches": [{**prefix("/api"), "headers": [{"name": "x-env", "value": "blue"}],
                         "queryParams": [{"name": "v", "value": "2"}], "method": "GET"}],
            "backendRefs": [WEB],
        }),
        None,
    ),
    Case("a Service reference without a port", http_route({"backendRefs": [{"name": "web"}]}),
         "Must have port for Service reference"),
    Case(
        "a redirect's ReplacePrefixMatch on a PathPrefix match",
        http_route({"matches": [prefix("/old")],
                    "filters": [redirect(type="ReplacePrefixMatch", replacePrefixMatch="/new")]}),
        None,
    ),
    Case(
        "a redirect's ReplacePrefixMatch on an Exact match",
        http_route({"matches": [exact("/old")],
                    "filters": [redirect(type="ReplacePrefixMatch", replacePrefixMatch="/new")]}),
        "When using RequestRedirect filter with path.replacePrefixMatch, exactly one PathPrefix",
    ),
    Case(
        "a rewrite's ReplacePrefixMatch on the defaulted match (PathPrefix /)",
        http_route({"filters": [rewrite(type="ReplacePrefixMatch", replacePrefixMatch="/v2")],
                    "backendRefs": [WEB]}),
        None,
    ),
    Case(
        "a rewrite's ReplacePrefixMatch on two PathPrefix matches",
        http_route({"matches": [prefix("/a"), prefix("/b")],
                    "filters": [rewrite(type="ReplacePrefixMatch", replacePrefixMatch="/v2")],
                    "backendRefs": [WEB]}),
        "When using URLRewrite filter with path.replacePrefixMatch, exactly one PathPrefix",
    ),
    Case(
        "a ReplaceFullPath type with a replacePrefixMatch value",
        http_route({"filters": [rewrite(type="ReplaceFullPath", replacePrefixMatch="/x")],
                    "backendRefs": [WEB]}),
        "replaceFullPath must be specified when type is set to 'ReplaceFullPath'",
    ),
    Case("a redirect together with backendRefs",
         http_route({"filters": [{"type": "RequestRedirect",
                                  "requestRedirect": {"scheme": "https"}}],
                     "backendRefs": [WEB]}),
         "RequestRedirect filter must not be used together with backendRefs"),
    Case("a redirect and a rewrite in one rule",
         http_route({"filters": [{"type": "RequestRedirect",
                                  "requestRedirect": {"hostname": "a.example.com"}},
                                 {"type": "URLRewrite",
                                  "urlRewrite": {"hostname": "b.example.com"}}]}),
         "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite"),
    Case("a RequestHeaderModifier filter without its configuration",
         http_route({"filters": [{"type": "RequestHeaderModifier"}], "backendRefs": [WEB]}),
         "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type"),
    Case("a RequestHeaderModifier filter twice",
         http_route({"filters": [
             {"type": "RequestHeaderModifier",
              "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}]}},
             {"type": "RequestHeaderModifier",
              "requestHeaderModifier": {"set": [{"name": "x-b", "value": "2"}]}}],
             "backendRefs": [WEB]}),
         "RequestHeaderModifier filter cannot be repeated"),
    Case("a path with a double slash", http_route({"matches": [prefix("/a//b")],
                                                   "backendRefs": [WEB]}),
         "must not contain '//'"),
    Case("an Exact path that is not absolute", http_route({"matches": [exact("a")],
                                                           "backendRefs": [WEB]}),
         "value must be an absolute path and start with '/'"),
    Case("two references to one Gateway without sectionName",
         http_route(parentRefs=[{"name": "gw"}, {"name": "gw"}]),
         "sectionName must be unique when parentRefs includes 2 or more references"),
    Case("a redirect to a javascript: scheme",
         http_route({"filters": [{"type": "RequestRedirect",
                                  "requestRedirect": {"scheme": "javascript"}}]}),
         'supported values: "http", "https"'),
    Case("an upper-case hostname", http_route(hostnames=["WWW.example.com"]), "should match"),
    Case("seventeen hostnames",
         http_route(hostnames=[f"h{i}.example.com" for i in range(17)]), "must have at most 16"),
    # --- Gateway
    Case("HTTP and HTTPS listeners", gateway(
        {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "*.example.com"},
        {"name": "https", "port": 443, "protocol": "HTTPS", "tls": CERT}), None),
    Case("an HTTP listener with tls",
         gateway({"name": "http", "port": 80, "protocol": "HTTP", "tls": CERT}),
         "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"),
    Case("an HTTPS listener in Passthrough mode",
         gateway({"name": "https", "port": 443, "protocol": "HTTPS",
                  "tls": {"mode": "Passthrough"}}),
         "tls mode must be Terminate for protocol HTTPS"),
    Case("a TLS listener without tls",
         gateway({"name": "tls", "port": 443, "protocol": "TLS"}),
         "tls mode must be set for protocol TLS"),
    Case("a Terminate listener without certificates",
         gateway({"name": "https", "port": 443, "protocol": "HTTPS", "tls": {"mode": "Terminate"}}),
         "certificateRefs or options must be specified when mode is Terminate"),
    Case("a TCP listener with a hostname",
         gateway({"name": "tcp", "port": 5432, "protocol": "TCP", "hostname": "db.example.com"}),
         "hostname must not be specified for protocols ['TCP', 'UDP']"),
    Case("two listeners of one name", gateway(
        {"name": "web", "port": 80, "protocol": "HTTP"},
        {"name": "web", "port": 8080, "protocol": "HTTP"}), "uplicate"),
    Case("two listeners of one port, protocol and hostname", gateway(
        {"name": "a", "port": 80, "protocol": "HTTP", "hostname": "a.example.com"},
        {"name": "b", "port": 80, "protocol": "HTTP", "hostname": "a.example.com"}),
        "Combination of port, protocol and hostname must be unique for each listener"),
    Case("a Gateway without a class",
         {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "gw"},
          "spec": {"listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}},
         "Required value"),
    # --- TLSRoute
    Case("a TLSRoute for a wildcard hostname", tls_route(["*.example.com"]), None),
    Case("a TLSRoute for an IP address", tls_route(["192.0.2.1"]),
         "Hostnames cannot contain an IP"),
]  # fmt: skip
