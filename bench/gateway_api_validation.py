"""Benchmark the upstream Gateway API CRDs' validation (schema and CEL rules) per object.

What `parse_object` adds for a Gateway API object (teapot_lb.model.gateway_api_schema):
prune, default, the OpenAPI checks and every `x-kubernetes-validations` rule of the node
present. Three objects of growing size: a one-rule HTTPRoute, an HTTPRoute of 16 rules
with matches, filters and two backends each, and a Gateway of 16 listeners. Also the
first-use cost (reading and compiling the six vendored CRDs) and the model parse alone,
for scale. `compile_ms` includes importing the library (done on first use).

    .venv/bin/python bench/gateway_api_validation.py [--repeat 200]

Prints one line per object and, last, one JSON object: {name: {"check_us", "cached_us",
"parse_us"}} and "compile_ms" (`cached_us`: the same object again, as a standalone reload
of an unchanged manifest meets it).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from teapot_lb.model.gateway_api_schema import CRD_FILES, schema_of, upstream_problems
from teapot_lb.model.manifest import MODELS

GW = "gateway.networking.k8s.io/v1"


def small_route() -> dict[str, Any]:
    return {
        "apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "t"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["www.example.com"],
                 "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
    }  # fmt: skip


def large_route() -> dict[str, Any]:
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": f"/app{i}"},
                         "headers": [{"name": "x-env", "value": "blue"}]}],
            "filters": [{"type": "RequestHeaderModifier",
                         "requestHeaderModifier": {"set": [{"name": "x-rule", "value": str(i)}]}},
                        {"type": "URLRewrite", "urlRewrite": {"path": {
                            "type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}],
            "backendRefs": [{"name": "blue", "port": 80, "weight": 90},
                            {"name": "green", "port": 80, "weight": 10}],
        }
        for i in range(16)
    ]  # fmt: skip
    body = small_route()
    body["spec"]["rules"] = rules
    body["spec"]["hostnames"] = [f"h{i}.example.com" for i in range(8)]
    return body


def large_gateway() -> dict[str, Any]:
    listeners = [
        {"name": f"https-{i}", "port": 443, "protocol": "HTTPS", "hostname": f"h{i}.example.com",
         "tls": {"certificateRefs": [{"name": f"cert-{i}"}]}}
        for i in range(16)
    ]  # fmt: skip
    return {
        "apiVersion": GW, "kind": "Gateway", "metadata": {"name": "gw", "namespace": "t"},
        "spec": {"gatewayClassName": "teapot", "listeners": listeners},
    }  # fmt: skip


def per_call_us(call: Callable[[], object], repeat: int) -> float:
    call()
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - start) / repeat * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    start = time.perf_counter()
    for kind in CRD_FILES:
        schema_of(kind, "v1")
    compile_ms = (time.perf_counter() - start) * 1e3
    print(f"import the library, read and compile the six CRDs: {compile_ms:.1f} ms (once)")
    figures: dict[str, Any] = {"compile_ms": round(compile_ms, 1)}
    for name, body in (("small HTTPRoute", small_route()), ("16-rule HTTPRoute", large_route()),
                       ("16-listener Gateway", large_gateway())):  # fmt: skip
        assert upstream_problems(body) == [], name
        schema = schema_of(body["kind"], "v1")
        check = per_call_us(lambda b=body, s=schema: s.check(b), args.repeat)
        cached = per_call_us(lambda b=body: upstream_problems(b), args.repeat)
        model = MODELS[GW, body["kind"]]
        parse = per_call_us(lambda b=body, m=model: m.model_validate(b), args.repeat)
        print(f"{name}: CRD validation {check:.0f} µs (seen before: {cached:.0f} µs),"
              f" model parse {parse:.0f} µs")  # fmt: skip
        figures[name] = {"check_us": round(check), "cached_us": round(cached),
                         "parse_us": round(parse)}  # fmt: skip
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
