"""Benchmark the Teapot gateway's control plane (pure cores, no API server): how long the
tenant agent takes to compute its mirror, the gateway's reconcile to vet and translate
every tenant's objects from scratch, and what one change costs the incremental
translation the reconcile runs (`gateway.translation_cache.TranslationCache`).

N Ingresses (one host and two paths each; every fourth with TLS) and N/4 HTTPRoutes over
T tenants, each tenant with one Gateway and 4 TLS certificates (a wildcard of its domain,
EC P-256, made with `cryptography`); half the tenants' Services have a mirrored
EndpointSlice. Times are the best of --repeat runs of the product's functions:

- `mirror`: `tenancy.l7mirror.desired_mirror` for one tenant cluster holding N/T Ingresses;
- `vet`: `tenancy.l7vet.vet_all` over every object of every tenant;
- `translate`: `gateway.translate.translate` (vets again, builds the config);
- per change, the CPU (process time) of the reconcile's translation: the changed
  namespace put into the cache and the translation taken, as `GatewayControl` does:
  `ingress_added` (one new Ingress of one tenant), `backend_changed` (one Service's
  mirrored EndpointSlice with another endpoint), `certificate_rotated` (one TLS Secret
  with a new certificate: its check and names read by openssl, as in production);
  --changes of each, on tenants in turn; median and max.

    .venv/bin/python bench/gateway_control.py [--sizes 1000,5000,20000] [--per-tenant 40]

`--sizes`: Ingress counts, one run each, tenants = size / --per-tenant (the issue's full
size, 20,000 Ingresses + 5,000 HTTPRoutes and 2,000 certificates over 500 tenants, is
`--sizes 20000 --per-tenant 40`). `--no-full` skips the from-scratch figures (minutes at
20,000). Last line, JSON: per size the figures above, and `flat`: the largest size's
per-change median over the smallest's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from ipaddress import ip_address
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from teapot_lb.gateway.translate import translate
from teapot_lb.gateway.translation_cache import TranslationCache
from teapot_lb.kube.resources import ENDPOINT_SLICES, INGRESSES, SERVICES
from teapot_lb.longlived import freeze_after_slow_full_passes
from teapot_lb.model import parse_object
from teapot_lb.model.service import Service
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY
from teapot_lb.tenancy.l7mirror import TenantCluster, desired_mirror
from teapot_lb.tenancy.l7vet import L7Object, L7World, mirrored_name, vet_all

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CERTS_PER_TENANT = 4
ADDRESS = ip_address("203.0.113.10")


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
    host = f"h{i}.t{t}.example"
    tls = [{"hosts": [host], "secretName": f"cert{i % CERTS_PER_TENANT}"}] if i % 4 == 0 else []
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta(t, f"i{i}", i),
        "spec": {
            "ingressClassName": "teapot",
            "rules": [{"host": host, "http": {"paths": paths}}],
            "tls": tls,
        },
    }


def certificate(t: int, serial: int) -> dict[str, bytes]:
    """A TLS Secret's data: a certificate for *.t{t}.example and its key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"t{t}.example")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial + 1)
        .not_valid_before(datetime.now(UTC) - timedelta(days=1))
        .not_valid_after(datetime.now(UTC) + timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(f"*.t{t}.example")]), False)
        .sign(key, hashes.SHA256())
    )
    return {
        CERT_KEY: cert.public_bytes(serialization.Encoding.PEM),
        KEY_KEY: key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    }


def secret_key(t: int, k: int) -> str:
    return f"tenant-{t}/{mirrored_name('c1', 'web', f'cert{k}')}"


def endpoint_slice(t: int, s: int, addresses: list[str]) -> dict[str, Any]:
    return {
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
        "endpoints": [{"addresses": [a]} for a in addresses],
        "ports": [{"name": "http", "port": 30080}],
    }  # fmt: skip


@dataclass
class Cloud:
    """What the management cluster holds, by tenant namespace (as the reconcile's views)."""

    tenants: list[Tenant]
    objects: dict[str, list[L7Object]] = field(default_factory=dict)
    slices: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    secrets: dict[str, dict[str, dict[str, bytes]]] = field(default_factory=dict)

    def world(self) -> L7World:
        objects = [o for objs in self.objects.values() for o in objs]
        secrets = {k: d for held in self.secrets.values() for k, d in held.items()}
        return L7World(self.tenants, objects, secrets)

    def every_slice(self) -> list[dict[str, Any]]:
        return [s for held in self.slices.values() for s in held.values()]

    def put(self, cache: TranslationCache, namespace: str) -> None:
        slices = list(self.slices.get(namespace, {}).values())
        cache.put(namespace, self.objects[namespace], slices, self.secrets[namespace])


def cloud(n: int, tenants: int) -> Cloud:
    c = Cloud([tenant(t) for t in range(tenants)])
    for t in range(tenants):
        ns = f"tenant-{t}"
        c.objects[ns] = [
            _parsed({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": meta(t, "gw", 0),
                "spec": {"gatewayClassName": "teapot",
                         "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
            })
        ]  # fmt: skip
        c.secrets[ns] = {secret_key(t, k): certificate(t, k) for k in range(CERTS_PER_TENANT)}
        c.slices[ns] = {s: endpoint_slice(t, s, [f"192.0.2.{k + 1}" for k in range(3)])
                        for s in range(0, 50, 2)}  # fmt: skip
    for i in range(n):
        t = i % tenants
        c.objects[f"tenant-{t}"].append(_parsed(ingress_body(t, i)))
    for i in range(n // 4):
        t = i % tenants
        c.objects[f"tenant-{t}"].append(
            _parsed({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": meta(t, f"r{i}", n + i),
                "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [f"r{i}.t{t}.example"],
                         "rules": [{"matches": [{"headers": [{"name": "X-V", "value": "2"}]}],
                                    "backendRefs": [{"name": f"s{i % 50}", "port": 80}]}]},
            })
        )  # fmt: skip
    return c


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


def cpu(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def per_change(c: Cloud, cache: TranslationCache, changes: int, n: int) -> dict[str, Any]:
    """The translation's CPU for each kind of change, on tenants in turn."""
    tenants = len(c.tenants)
    out: dict[str, Any] = {}
    kinds: dict[str, Callable[[int], str]] = {}

    def ingress_added(k: int) -> str:
        t = (k * 7) % tenants
        c.objects[f"tenant-{t}"].append(_parsed(ingress_body(t, n + 1000 + k * tenants + t)))
        return f"tenant-{t}"

    def backend_changed(k: int) -> str:
        t = (k * 11) % tenants
        c.slices[f"tenant-{t}"][0] = endpoint_slice(t, 0, [f"192.0.2.{100 + k % 100}"])
        return f"tenant-{t}"

    def certificate_rotated(k: int) -> str:
        t = (k * 13) % tenants
        c.secrets[f"tenant-{t}"][secret_key(t, 0)] = certificate(t, 100 + k)
        return f"tenant-{t}"

    kinds = {"ingress_added": ingress_added, "backend_changed": backend_changed,
             "certificate_rotated": certificate_rotated}  # fmt: skip
    for name, change in kinds.items():
        times = []
        for k in range(changes):
            namespace = change(k)

            def reconcile(ns: str = namespace) -> None:
                c.put(cache, ns)
                cache.translation()

            times.append(cpu(reconcile))
            assert cache.rebuilt == {namespace}, (name, cache.rebuilt)
        out[name] = {"median_s": round(statistics.median(times), 5), "max_s": round(max(times), 5)}
    return out


def run_size(n: int, per_tenant: int, args: argparse.Namespace) -> dict[str, Any]:
    tenants = max(1, n // per_tenant)
    made = time.perf_counter()
    c = cloud(n, tenants)
    world = c.world()
    print(f"{n} Ingresses, {n // 4} HTTPRoutes, {tenants} Gateways over {tenants} tenants, "
          f"{tenants * CERTS_PER_TENANT} certificates (made in "
          f"{time.perf_counter() - made:.1f} s)", flush=True)  # fmt: skip
    row: dict[str, Any] = {"ingresses": n, "routes": n // 4, "tenants": tenants,
                           "certificates": tenants * CERTS_PER_TENANT}  # fmt: skip
    cache = TranslationCache()
    cache.reset(c.tenants, [ADDRESS])
    for namespace in c.objects:
        c.put(cache, namespace)
    first = cpu(cache.translation)
    row["first_translation_s"] = round(first, 3)
    result = cache.translation()
    row["http_routes"] = len(result.config.http_routes)
    row["refused"] = sum(1 for r in result.results.values() if not r.accepted)
    if not args.no_full:
        verdicts = vet_all(world)
        assert sum(1 for r in verdicts.values() if r) == row["refused"]
        row["vet_s"] = round(best(args.repeat, lambda: vet_all(world)), 4)
        slices = c.every_slice()
        row["translate_s"] = round(
            best(args.repeat, lambda: translate(world, slices, [ADDRESS])), 4
        )
        assert translate(world, slices, [ADDRESS]).config == result.config
    row["per_change"] = per_change(c, cache, args.changes, n)
    print(
        f"  from scratch: vet {row.get('vet_s', '-')} s, translate "
        f"{row.get('translate_s', '-')} s; first incremental translation {first:.3f} s"
    )
    for name, figures in row["per_change"].items():
        print(f"  {name}: median {figures['median_s'] * 1000:.2f} ms CPU, "
              f"max {figures['max_s'] * 1000:.2f} ms")  # fmt: skip
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--per-tenant", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--no-full", action="store_true")
    args = parser.parse_args()
    freeze_after_slow_full_passes()  # as `teapot-lb gateway` does
    sizes = [int(x) for x in args.sizes.split(",")]
    cluster = tenant_cluster(args.per_tenant)
    mirror_s = best(3, lambda: desired_mirror(cluster, "c1", "tenant-0"))
    print(f"mirror of one cluster ({args.per_tenant} Ingresses): {mirror_s:.3f} s")
    rows = [run_size(n, args.per_tenant, args) for n in sizes]
    medians = [max(f["median_s"] for f in r["per_change"].values()) for r in (rows[0], rows[-1])]
    print(json.dumps({
        "mirror_s": round(mirror_s, 4), "sizes": rows,
        "flat": round(medians[1] / medians[0], 2) if medians[0] else None,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
