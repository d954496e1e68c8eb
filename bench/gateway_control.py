"""Benchmark the Teapot gateway's control plane (pure cores, no API server): how long the
tenant agent takes to compute its mirror, the gateway's reconcile to vet and translate
every tenant's objects from scratch, and what one change costs the incremental
translation the reconcile runs (`gateway.translation_cache.TranslationCache`).

N Ingresses (one host and two paths each; every fourth with TLS) and N/4 HTTPRoutes over
T tenants, each tenant with one Gateway and 4 TLS certificates (a wildcard of its domain,
EC P-256, made with `cryptography`); half the tenants' Services have a mirrored
EndpointSlice. Times are the best of --repeat runs of the product's functions:

- `mirror`: `gateway.control.l7mirror.desired_mirror` for one tenant cluster holding N/T Ingresses;
- `vet`: `tenancy.l7vet.vet_all` over every object of every tenant;
- `translate`: `gateway.translate.translate` (vets again, builds the config);
- per change, the CPU (process time) of the reconcile's translation: the changed
  namespace put into the cache and the translation taken, as `GatewayControl` does:
  `ingress_added` (one new Ingress of one tenant), `backend_changed` (one Service's
  mirrored EndpointSlice with another endpoint), `certificate_rotated` (one TLS Secret
  with a new certificate: its check and names read by openssl, as in production);
  --changes of each, on tenants in turn; median and max;
- `simple_ingress_applied`: the CPU of the gateway's whole apply of a simple Ingress added
  (one host, Prefix '/', a Service and a TLS Secret of its own): the translation, then
  the HAProxy driver's check, rendering, plan and files (`per_simple_add`; files for a
  reload only, as the driver writes them), as `teapot-lb gateway` runs it but for the
  runtime API's socket.

    .venv/bin/python bench/gateway_control.py [--sizes 1000,5000,20000] [--per-tenant 40]

`--sizes`: Ingress counts, one run each, tenants = size / --per-tenant (the issue's full
size, 20,000 Ingresses + 5,000 HTTPRoutes and 2,000 certificates over 500 tenants, is
`--sizes 20000 --per-tenant 40`). `--no-full` skips the from-scratch figures (minutes at
20,000). Last line, JSON: per size the figures above, and `flat`: the largest size's
per-change median over the smallest's.

`--real N` also runs `teapot-lb gateway` with HAProxy against a real kube-apiserver holding
N Ingresses and times API write -> served by HAProxy per kind of change: `ingress_added`
(the bench's Ingress shape, two paths: new lines in the frontend, a reload),
`simple_ingress_added` (one host, Prefix '/', to a Service of its own, TLS by a Secret of
its own: a spare backend section of the pool, a certificate added and map rows, no
reload), `simple_ingress_cert0_added` (the same with the tenant's shared certificate: its
crt-list line gains the name, a reload), `backend_changed`, `certificate_rotated`; and the
reloads counted over them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from teapot_lb.gateway.config import GatewayConfig, problems
from teapot_lb.gateway.control.l7mirror import AGENT, MANAGED_BY, TenantCluster, desired_mirror
from teapot_lb.gateway.default_certificate import generate
from teapot_lb.gateway.haproxy import _write_changed, load_pems, with_certificate_names
from teapot_lb.gateway.plan import Change, step
from teapot_lb.gateway.render import DEFAULT_CERTIFICATE, Paths, Rendered
from teapot_lb.gateway.translate import translate
from teapot_lb.gateway.translation_cache import TranslationCache
from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import (
    ENDPOINT_SLICES,
    GATEWAYS,
    HTTP_ROUTES,
    INGRESSES,
    NAMESPACES,
    SECRETS,
    SERVICES,
    TENANTS,
    Resource,
)
from teapot_lb.lab.kubeplane import ControlPlane, free_port
from teapot_lb.lab.measure import percentile
from teapot_lb.lab.netns import netns_socket
from teapot_lb.longlived import freeze_after_slow_full_passes
from teapot_lb.model import parse_object
from teapot_lb.model.service import Service
from teapot_lb.model.tenancy import Tenant
from teapot_lb.netlab import Topology
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY
from teapot_lb.tenancy.l7vet import L7Object, L7World, mirrored_name, vet_all

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CERTS_PER_TENANT = 4
ADDRESS = ip_address("203.0.113.10")
BACKENDS = ("192.0.2.1", "192.0.2.2")  # the nodes (NodePorts, port 30080), one HTTP server each


def _parsed(body: dict[str, Any]) -> Any:
    obj, problems = parse_object(body)
    assert obj is not None and not problems, problems
    return obj


def tenant_body(i: int) -> dict[str, Any]:
    return {
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


def tenant(i: int) -> Tenant:
    return _parsed(tenant_body(i))  # type: ignore[no-any-return]


def gateway_body(t: int) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": meta(t, "gw", 0),
        "spec": {"gatewayClassName": "teapot",
                 "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
    }  # fmt: skip


def route_body(t: int, i: int, n: int) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": meta(t, f"r{i}", n + i),
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [f"r{i}.t{t}.example"],
                 "rules": [{"matches": [{"headers": [{"name": "X-V", "value": "2"}]}],
                            "backendRefs": [{"name": f"s{i % 50}", "port": 80}]}]},
    }  # fmt: skip


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


def simple_ingress_body(t: int, i: int, service: int, secret: int) -> dict[str, Any]:
    """An Ingress of the simple shape: one host, one path (Prefix '/') to Service
    s<service>, TLS by Secret cert<secret>."""
    body = ingress_body(t, i)
    rule = body["spec"]["rules"][0]
    path = rule["http"]["paths"][0]
    path["backend"]["service"]["name"] = f"s{service}"
    rule["http"]["paths"] = [path]
    body["spec"]["tls"] = [{"hosts": [rule["host"]], "secretName": f"cert{secret}"}]
    return body


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
            "labels": {**meta(t, f"s{s}", 0)["labels"], MANAGED_BY: AGENT,
                       "multicluster.kubernetes.io/source-cluster": "c1",
                       "multicluster.kubernetes.io/service-name": f"s{s}",
                       "lb.teapot.io/backends": "NodePorts"},
            "annotations": {"lb.teapot.io/service-ports": '[{"name":"http","port":80}]'},
        },
        "addressType": "IPv4",
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
        c.objects[ns] = [_parsed(gateway_body(t))]
        c.secrets[ns] = {secret_key(t, k): certificate(t, k) for k in range(CERTS_PER_TENANT)}
        c.slices[ns] = {s: endpoint_slice(t, s, [BACKENDS[0]]) for s in range(0, 50, 2)}
    for i in range(n):
        t = i % tenants
        c.objects[f"tenant-{t}"].append(_parsed(ingress_body(t, i)))
    for i in range(n // 4):
        t = i % tenants
        c.objects[f"tenant-{t}"].append(_parsed(route_body(t, i, n)))
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


def per_simple_add(c: Cloud, cache: TranslationCache, changes: int, n: int) -> dict[str, Any]:
    """The CPU of the gateway's whole apply of one simple Ingress added (its Service's
    EndpointSlice and its own TLS Secret put first, not counted), as `teapot-lb gateway`
    runs it but for the runtime API's sockets: the translation, then HAProxy's driver's
    pure part (`problems` given the last sound config, the PEMs, the rendering and the
    plan: `plan.step`) and, for a reload, the files it changed written (to a temporary
    directory; the driver writes none for runtime actions alone)."""
    tenants = len(c.tenants)
    paths = Paths(Path(tempfile.mkdtemp(prefix="gwbench-")))
    default = generate()
    running: Rendered | None = None
    written: Rendered | None = None
    sound: GatewayConfig | None = None

    def apply() -> Change:
        nonlocal running, written, sound
        config = cache.translation().config
        found = problems(config, sound)
        pems, unreadable = load_pems(config)
        assert not found and not unreadable, (found, unreadable)
        sound = config
        pems.setdefault(DEFAULT_CERTIFICATE, default)
        config = with_certificate_names(config, pems)
        new, change = step(config, running, paths, pems)
        if change.reload:
            _write_changed(new, written)
            written = new
        running = new
        return change

    try:
        apply()
        times, reloads = [], 0
        for k in range(changes):
            t = (k * 7) % tenants
            ns, service, secret = f"tenant-{t}", 1000 + 2 * k, 1000 + k
            c.slices[ns][service] = endpoint_slice(t, service, [BACKENDS[0]])
            c.secrets[ns][secret_key(t, secret)] = certificate(t, 2000 + k)
            c.put(cache, ns)
            apply()
            body = simple_ingress_body(t, n + 500_000 + service, service, secret)
            c.objects[ns].append(_parsed(body))

            def added(ns: str = ns) -> None:
                nonlocal reloads
                c.put(cache, ns)
                reloads += apply().reload

            times.append(cpu(added))
    finally:
        shutil.rmtree(paths.base, ignore_errors=True)
    return {"median_s": round(statistics.median(times), 5), "max_s": round(max(times), 5),
            "reloads": reloads}  # fmt: skip


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
    row["simple_ingress_applied"] = per_simple_add(c, cache, args.changes, n)
    print(
        f"  from scratch: vet {row.get('vet_s', '-')} s, translate "
        f"{row.get('translate_s', '-')} s; first incremental translation {first:.3f} s"
    )
    for name, figures in row["per_change"].items():
        print(f"  {name}: median {figures['median_s'] * 1000:.2f} ms CPU, "
              f"max {figures['max_s'] * 1000:.2f} ms")  # fmt: skip
    applied = row["simple_ingress_applied"]
    print(f"  simple Ingress added, translated and applied: median "
          f"{applied['median_s'] * 1000:.2f} ms CPU, max {applied['max_s'] * 1000:.2f} ms, "
          f"{applied['reloads']} reloads")  # fmt: skip
    return row


# --------------------------------------------------------------------------- the real process

BACKEND_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = sys.argv[2].encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer((sys.argv[1], 30080), H).serve_forever()
"""


def get(ns: str, host: str) -> tuple[int, str]:
    """GET / with `host` from inside the namespace: (status, body); (0, why) on failure."""
    try:
        sock = netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
        with sock:
            sock.settimeout(2)
            sock.connect((str(ADDRESS), 80))
            sock.sendall(f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    except OSError as err:
        return 0, str(err)
    head, _, body = data.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), body.decode()


def presented(ns: str, host: str) -> bytes | None:
    """The certificate HAProxy presents on 443 for SNI `host` (DER)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        sock = netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(2)
        sock.connect((str(ADDRESS), 443))
        with context.wrap_socket(sock, server_hostname=host) as tls:
            return tls.getpeercert(binary_form=True)
    except OSError:
        return None


def until(check: Callable[[], bool], limit_s: float, what: str) -> float:
    """Poll `check` every 2 ms; the seconds until it held (RuntimeError after `limit_s`)."""
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > limit_s:
            raise RuntimeError(f"timed out after {limit_s:g} s waiting for {what}")
        time.sleep(0.002)
    return time.perf_counter() - started


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def secret_body(t: int, k: int, data: dict[str, bytes]) -> dict[str, Any]:
    name = mirrored_name("c1", "web", f"cert{k}")
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": f"tenant-{t}",
                     "labels": {"lb.teapot.io/cluster": "c1"}},
        "data": {key: base64.b64encode(v).decode() for key, v in data.items()},
    }  # fmt: skip


async def create_all(kubeconfig: Path, bodies: list[tuple[Resource, dict[str, Any]]]) -> None:
    client = await connect(kubeconfig)
    gate = asyncio.Semaphore(16)

    async def one(resource: Resource, body: dict[str, Any]) -> None:
        async with gate:
            await client.create(resource, body)

    try:
        for start in range(0, len(bodies), 2000):
            await asyncio.gather(*(one(r, b) for r, b in bodies[start : start + 2000]))
    finally:
        await client.close()


class Writer:
    """One API client on its own event loop, kept open: a change's time is its write's,
    not a connection's."""

    def __init__(self, kubeconfig: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(connect(kubeconfig))

    def create(self, resource: Resource, body: dict[str, Any]) -> None:
        self.loop.run_until_complete(self.client.create(resource, body))

    def replace(self, resource: Resource, body: dict[str, Any]) -> None:
        async def run() -> None:
            meta = body["metadata"]
            current = await self.client.get(resource, meta["name"], meta["namespace"])
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
            await self.client.replace(resource, body)

        self.loop.run_until_complete(run())

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


def real_run(n: int, per_tenant: int, args: argparse.Namespace) -> dict[str, Any]:
    """`teapot-lb gateway` with real HAProxy, fed by a real kube-apiserver holding the
    objects of :func:`cloud`; each change made through the API and timed until HAProxy
    serves it (requests every 2 ms from the gateway's namespace)."""
    tenants = max(1, n // per_tenant)
    work = Path(tempfile.mkdtemp(prefix="gwctl-"))
    row: dict[str, Any] = {"ingresses": n, "routes": n // 4, "tenants": tenants,
                           "certificates": tenants * CERTS_PER_TENANT}  # fmt: skip
    root = Path(__file__).resolve().parents[1]
    with ControlPlane(work / "kube") as plane, Topology("gwctl") as topo:
        plane.start()
        crds = ("gatewayclasses", "gateways", "httproutes", "tlsroutes", "tcproutes",
                "udproutes", "referencegrants")  # fmt: skip
        gateway_api = root.parent / "shared" / "gateway-api"
        for crd in crds:
            plane.kubectl("apply", "--server-side", "-f",
                          str(gateway_api / f"gateway.networking.k8s.io_{crd}.yaml"))  # fmt: skip
        for kind in ("tenants", "addresspools", "tenantloadbalancers"):
            plane.kubectl(
                "apply", "-f", str(root / "deploy" / "crds" / f"lb.teapot.io_{kind}.yaml")
            )
        plane.kubectl("wait", "--for=condition=established", "--all", "crd")
        gw = topo.add_host("gw")
        gw.add_address("lo", f"{ADDRESS}/32")
        for i, address in enumerate(BACKENDS):
            gw.add_address("lo", f"{address}/32")
            gw.popen([sys.executable, "-c", BACKEND_SERVER, address, "ab"[i]])
        c = cloud(n, tenants)
        admin = plane.admin_kubeconfig
        bodies: list[tuple[Resource, dict[str, Any]]] = []
        bodies += [(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": f"tenant-{t}"}})
                   for t in range(tenants)]  # fmt: skip
        bodies += [(TENANTS, tenant_body(t)) for t in range(tenants)]
        asyncio.run(create_all(admin, bodies))
        bodies = [(SECRETS, secret_body(t, k, c.secrets[f"tenant-{t}"][secret_key(t, k)]))
                  for t in range(tenants) for k in range(CERTS_PER_TENANT)]  # fmt: skip
        bodies += [(ENDPOINT_SLICES, s) for s in c.every_slice()]
        bodies += [(GATEWAYS, gateway_body(t)) for t in range(tenants)]
        bodies += [(INGRESSES, ingress_body(i % tenants, i)) for i in range(n)]
        bodies += [(HTTP_ROUTES, route_body(i % tenants, i, n)) for i in range(n // 4)]
        started = time.perf_counter()
        asyncio.run(create_all(admin, bodies))
        print(f"  {len(bodies)} objects created through the API in "
              f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
        port = free_port()
        log_path = work / "gateway.log"
        print(f"  the gateway's log: {log_path}", flush=True)
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "teapot-lb"), "gateway", "--kubeconfig",
             str(admin), "--address", str(ADDRESS), "--state-dir", str(work / "state"),
             "--netns", gw.ns, "--metrics-addr", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=log_path.open("wb"),
        )  # fmt: skip
        try:
            last = n - 1 - (n - 1) % 2  # (an even Service: those have endpoints)
            host = f"h{last}.t{last % tenants}.example"
            row["start_to_served_s"] = round(
                until(lambda: get(gw.ns, host)[0] == 200, 1800, f"{host} served"), 2
            )
            print(f"  gateway started, serving every object after {row['start_to_served_s']} s",
                  flush=True)  # fmt: skip
            reloads_before = metric(port, "teapot_lb_gateway_reloads_total")
            row["served"] = measure_changes(c, admin, gw.ns, proc.pid, args.real_changes, n)
            row["reloads"] = metric(port, "teapot_lb_gateway_reloads_total") - reloads_before
            row["gateway_rss_mb"] = round(rss_mb(proc.pid), 1)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return row


def measure_changes(
    c: Cloud, admin: Path, ns: str, pid: int, changes: int, n: int
) -> dict[str, Any]:
    """Per kind of change: API write → served by HAProxy (p50, p99, max) and the gateway
    process's CPU in that time (median)."""
    tenants = len(c.tenants)
    kinds = ("ingress_added", "simple_ingress_added", "simple_ingress_cert0_added",
             "backend_changed", "certificate_rotated")  # fmt: skip
    timings: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpus: dict[str, list[float]] = {k: [] for k in timings}

    def timed(kind: str, write: Callable[[], None], check: Callable[[], bool]) -> None:
        time.sleep(0.3)  # (the previous change's trailing work not counted in this one)
        before = cpu_of(pid)
        started = time.perf_counter()
        write()
        until(check, 120, kind)
        timings[kind].append(time.perf_counter() - started)
        time.sleep(0.2)  # (the reconcile's trailing work counted in its CPU)
        cpus[kind].append(cpu_of(pid) - before)

    def change(k: int, timed: Callable[..., None], writer: Writer) -> None:
        t = (k * 7) % tenants
        i = n + 1000 + k
        host = f"h{i}.t{t}.example"
        body = ingress_body(t, i)
        path = body["spec"]["rules"][0]["http"]["paths"][0]
        path["backend"]["service"]["name"] = "s0"
        body["spec"]["tls"] = [{"hosts": [host], "secretName": "cert0"}]
        timed("ingress_added", lambda b=body: writer.create(INGRESSES, b),
              lambda h=host: get(ns, h) == (200, "a"))  # fmt: skip
        # The simple shape (one host, Prefix '/', to one Service: the gateway's map-routed
        # virtual host) to a Service of its own: its EndpointSlice written first (not
        # timed), the Ingress timed; TLS by a Secret of its own (written first, not timed:
        # a certificate per Ingress, as cert-manager makes them), then by the tenant's
        # shared one (cert0, whose crt-list line gains the host's name).
        for kind, secret in (("simple_ingress_added", 1000 + k), ("simple_ingress_cert0_added", 0)):
            service = 1000 + 2 * k + (kind != "simple_ingress_added") * 500
            writer.create(ENDPOINT_SLICES, endpoint_slice(t, service, [BACKENDS[0]]))
            if secret:
                writer.create(SECRETS, secret_body(t, secret, certificate(t, 2000 + k)))
            simple = simple_ingress_body(t, i + 500_000 + service, service, secret)
            simple_host = simple["spec"]["rules"][0]["host"]
            timed(kind, lambda b=simple: writer.create(INGRESSES, b),
                  lambda h=simple_host: get(ns, h) == (200, "a"))  # fmt: skip
        moved = endpoint_slice(t, 0, [BACKENDS[1]])
        timed("backend_changed",
              lambda m=moved: writer.replace(ENDPOINT_SLICES, m),
              lambda h=host: get(ns, h) == (200, "b"))  # fmt: skip
        writer.replace(ENDPOINT_SLICES, endpoint_slice(t, 0, [BACKENDS[0]]))
        until(lambda h=host: get(ns, h) == (200, "a"), 120, "the endpoint back")  # (not timed)
        data = certificate(t, 1000 + k)
        der = x509.load_pem_x509_certificate(data[CERT_KEY]).public_bytes(
            serialization.Encoding.DER
        )
        timed("certificate_rotated",
              lambda d=data, t=t: writer.replace(SECRETS, secret_body(t, 0, d)),
              lambda h=host, d=der: presented(ns, h) == d)  # fmt: skip
        done = ", ".join(f"{kind} {v[-1] * 1000:.0f} ms" for kind, v in timings.items())
        print(f"  change {k + 1}/{changes}: {done}", flush=True)

    writer = Writer(admin)
    try:
        for k in range(changes):
            change(k, timed, writer)
    finally:
        writer.close()
    return {
        kind: {
            "p50_s": round(statistics.median(v), 4),
            "p99_s": round(percentile(v, 99) or 0, 4),
            "max_s": round(max(v), 4),
            "gateway_cpu_median_s": round(statistics.median(cpus[kind]), 4),
        }
        for kind, v in timings.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--per-tenant", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--no-full", action="store_true")
    parser.add_argument("--real", type=int, default=0,
                        help="also run `teapot-lb gateway` with HAProxy and a real "
                             "kube-apiserver holding this many Ingresses")  # fmt: skip
    parser.add_argument("--real-changes", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the gateway's log and state")
    args = parser.parse_args()
    freeze_after_slow_full_passes()  # as `teapot-lb gateway` does
    # Stopped: the namespaces, daemons and API server are cleaned up on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = [int(x) for x in args.sizes.split(",")]
    cluster = tenant_cluster(args.per_tenant)
    mirror_s = best(3, lambda: desired_mirror(cluster, "c1", "tenant-0"))
    print(f"mirror of one cluster ({args.per_tenant} Ingresses): {mirror_s:.3f} s")
    rows = [run_size(n, args.per_tenant, args) for n in sizes]
    medians = [max(f["median_s"] for f in r["per_change"].values()) for r in (rows[0], rows[-1])]
    real = None
    if args.real:
        print(f"real: {args.real} Ingresses, `teapot-lb gateway` with HAProxy", flush=True)
        real = real_run(args.real, args.per_tenant, args)
        for kind, figures in real["served"].items():
            print(f"  {kind}: served p50 {figures['p50_s'] * 1000:.0f} ms, p99 "
                  f"{figures['p99_s'] * 1000:.0f} ms; gateway CPU median "
                  f"{figures['gateway_cpu_median_s'] * 1000:.0f} ms")  # fmt: skip
        print(f"  reloads: {real['reloads']:.0f}, gateway RSS {real['gateway_rss_mb']} MB")
    print(json.dumps({
        "mirror_s": round(mirror_s, 4), "sizes": rows,
        "flat": round(medians[1] / medians[0], 2) if medians[0] else None, "real": real,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
