"""Benchmark the Teapot gateway's control plane (pure cores, no API server): how long the
tenant agent takes to compute its mirror, and the gateway's reconcile to vet and
translate every tenant's objects into the data plane's GatewayConfig.

N Ingresses (one host and two paths each) and N/4 HTTPRoutes over T tenants, each tenant
with one Gateway; half the tenants' Services have a mirrored EndpointSlice. Times are the
best of --repeat runs of the product's functions:

- `mirror`: `gateway.control.l7mirror.desired_mirror` for one tenant cluster holding N/T Ingresses;
- `vet`: `tenancy.l7vet.vet_all` over every object of every tenant;
- `translate`: `gateway.translate.translate` (vets again, builds the config).

    .venv/bin/python bench/gateway_control.py [--ingresses 1000] [--tenants 10]

Last line, JSON: ingresses, routes, tenants, mirror_s, vet_s, translate_s, refused.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from ipaddress import ip_address
from typing import Any

from teapot_lb.gateway.control.l7mirror import TenantCluster, desired_mirror
from teapot_lb.gateway.translate import translate
from teapot_lb.kube.resources import ENDPOINT_SLICES, INGRESSES, SERVICES
from teapot_lb.model import parse_object
from teapot_lb.model.service import Service
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7vet import L7Object, L7World, vet_all

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _parsed(body: dict[str, Any]) -> Any:
    obj, problems = parse_object(body)
    assert obj is not None and not problems, problems
    return obj


def tenant(i: int) -> Tenant:
    return _parsed(
        {
            "apiVersion": "lb.teapot.io/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": f"t{i}"},
            "spec": {
                "namespace": f"tenant-{i}",
                "nodeNetworks": ["192.0.2.0/24"],
                "dnsDomains": [f"t{i}.example"],
                "modes": ["Route", "Gateway"],
            },
        }
    )  # type: ignore[no-any-return]


def meta(t: int, name: str, age: int) -> dict[str, Any]:
    return {
        "name": f"c1.web.{name}",
        "namespace": f"tenant-{t}",
        "creationTimestamp": (EPOCH + timedelta(seconds=age)).isoformat(),
        "labels": {
            "lb.teapot.io/cluster": "c1",
            "lb.teapot.io/source-namespace": "web",
            "lb.teapot.io/source-name": name,
        },
    }


def ingress_body(t: int, i: int) -> dict[str, Any]:
    paths = [
        {
            "path": p,
            "pathType": kind,
            "backend": {"service": {"name": f"s{i % 50}", "port": {"number": 80}}},
        }
        for p, kind in (("/", "Prefix"), ("/api", "Exact"))
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta(t, f"i{i}", i),
        "spec": {
            "ingressClassName": "teapot",
            "rules": [{"host": f"h{i}.t{t}.example", "http": {"paths": paths}}],
        },
    }


def world(n: int, tenants: int) -> tuple[L7World, list[dict[str, Any]]]:
    objects: list[L7Object] = []
    for t in range(tenants):
        objects.append(
            _parsed({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": meta(t, "gw", 0),
                "spec": {"gatewayClassName": "teapot",
                         "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
            })
        )  # fmt: skip
    for i in range(n):
        objects.append(_parsed(ingress_body(i % tenants, i)))
    for i in range(n // 4):
        t = i % tenants
        objects.append(
            _parsed({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": meta(t, f"r{i}", n + i),
                "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [f"r{i}.t{t}.example"],
                         "rules": [{"matches": [{"headers": [{"name": "X-V", "value": "2"}]}],
                                    "backendRefs": [{"name": f"s{i % 50}", "port": 80}]}]},
            })
        )  # fmt: skip
    slices = [
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                **meta(t, f"s{s}-np", 0),
                "labels": {**meta(t, f"s{s}", 0)["labels"],
                           "multicluster.kubernetes.io/source-cluster": "c1",
                           "multicluster.kubernetes.io/service-name": f"s{s}",
                           "lb.teapot.io/backends": "NodePorts"},
                "annotations": {"lb.teapot.io/service-ports": '[{"name":"http","port":80}]'},
            },
            "endpoints": [{"addresses": [f"192.0.2.{k + 1}"]} for k in range(3)],
            "ports": [{"name": "http", "port": 30080}],
        }
        for t in range(tenants)
        for s in range(0, 50, 2)
    ]  # fmt: skip
    return L7World([tenant(t) for t in range(tenants)], objects, {}), slices


def tenant_cluster(n: int) -> TenantCluster:
    ingresses = {}
    for i in range(n):
        body = ingress_body(0, i)
        body["metadata"] = {"name": f"i{i}", "namespace": "web"}
        ingresses[f"web/i{i}"] = body
    services: dict[str, Service] = {}
    slices = {}
    for s in range(50):
        services[f"web/s{s}"] = _parsed({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"s{s}", "namespace": "web"},
            "spec": {"ports": [{"name": "http", "port": 80, "nodePort": 30000 + s}]},
        })  # fmt: skip
        slices[f"web/s{s}-x"] = {
            "metadata": {"name": f"s{s}-x", "namespace": "web",
                         "labels": {"kubernetes.io/service-name": f"s{s}"}},
            "endpoints": [{"addresses": [f"10.0.{s}.{k}"], "conditions": {"ready": True}}
                          for k in range(1, 4)],
            "ports": [{"name": "http", "port": 8080}],
        }  # fmt: skip
    raw = {INGRESSES: ingresses, ENDPOINT_SLICES: slices, SERVICES: {}}
    return TenantCluster(raw, services, {})


def best(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    l7, slices = world(args.ingresses, args.tenants)
    cluster = tenant_cluster(args.ingresses // args.tenants)
    mirror_s = best(args.repeat, lambda: desired_mirror(cluster, "c1", "tenant-0"))
    verdicts = vet_all(l7)
    vet_s = best(args.repeat, lambda: vet_all(l7))
    addresses = [ip_address("203.0.113.10")]
    translate_s = best(args.repeat, lambda: translate(l7, slices, addresses))
    result = translate(l7, slices, addresses)
    refused = sum(1 for r in verdicts.values() if r)
    print(f"objects: {len(l7.objects)} ({args.ingresses} Ingresses, {args.ingresses // 4} "
          f"HTTPRoutes, {args.tenants} Gateways) over {args.tenants} tenants")  # fmt: skip
    print(f"mirror of one cluster ({args.ingresses // args.tenants} Ingresses): {mirror_s:.3f} s")
    print(f"vet every object: {vet_s:.3f} s   translate (vet + config): {translate_s:.3f} s")
    print(f"config: {len(result.config.http_routes)} HTTP routes, "
          f"{len(result.config.backends)} backends; refused: {refused}")  # fmt: skip
    print(json.dumps({
        "ingresses": args.ingresses, "routes": args.ingresses // 4, "tenants": args.tenants,
        "mirror_s": round(mirror_s, 4), "vet_s": round(vet_s, 4),
        "translate_s": round(translate_s, 4), "refused": refused,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
