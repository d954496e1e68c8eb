"""Builders for the gateway's control-plane tests: two tenants, acme and bolt.

acme (namespace tenant-acme) holds the DNS domains acme.example and *.shop.example; bolt
(tenant-bolt) holds bolt.example. Both may use the gateway, with 2 exclusive ports each.
Objects are given as mirrored by a tenant agent of cluster c1 from namespace `web`.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from teapot_lb.model.gateway_api import Gateway, HTTPRoute, TCPRoute, TLSRoute, UDPRoute
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.manifest import MODELS
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.tenancy.l7vet import (
    LABEL_SOURCE_NAME,
    LABEL_SOURCE_NAMESPACE,
    L7Object,
    mirrored_name,
)
from teapot_lb.tenancy.request import LABEL_CLUSTER
from tenancy.builders import TENANTS, parsed, tenant_body, tlb_body

DOMAINS = {"acme": ["acme.example", "*.shop.example"], "bolt": ["bolt.example"]}
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
GW = "gateway.networking.k8s.io/v1"


def tenant(name: str, **spec: Any) -> Tenant:
    body = tenant_body(name, **{"dnsDomains": DOMAINS[name], "modes": ["Route", "Gateway"]})
    body["spec"]["quotas"]["ports"] = 2
    body["spec"].update(spec)
    obj = parsed(body)
    assert isinstance(obj, Tenant)
    return obj


def meta(
    tenant_name: str, name: str, *, age: int = 0, cluster: str = "c1", **extra: Any
) -> dict[str, Any]:
    """Mirrored metadata: `age` minutes after EPOCH (smaller is older)."""
    namespace = TENANTS[tenant_name]["namespace"]
    return {
        "name": mirrored_name(cluster, "web", name),
        "namespace": namespace,
        "creationTimestamp": (EPOCH + timedelta(minutes=age)).isoformat(),
        "labels": {LABEL_CLUSTER: cluster, LABEL_SOURCE_NAMESPACE: "web", LABEL_SOURCE_NAME: name},
        **extra,
    }


def proxy_request(
    tenant_name: str, name: str, addresses: list[str], *, age: int = 0, **spec: Any
) -> TenantLoadBalancer:
    """A Gateway-mode TenantLoadBalancer (provider proxy) `age` minutes after EPOCH, as the
    manager left it: `addresses` assigned (its status). Ports: 80/TCP at nodePort 30080
    unless `ports` says; backends: the tenant's nodes, ready unless `ready=False`."""
    body = tlb_body(tenant_name, name, mode="Gateway", **spec)
    body["metadata"]["creationTimestamp"] = (EPOCH + timedelta(minutes=age)).isoformat()
    body["metadata"]["uid"] = f"uid-{name}"
    body["status"] = {"addresses": addresses}
    obj = parsed(body)
    assert isinstance(obj, TenantLoadBalancer)
    return obj


def backend(service: str = "web", port: int = 80) -> dict[str, Any]:
    return {"service": {"name": service, "port": {"number": port}}}


def ingress_body(
    tenant_name: str,
    name: str,
    host: str | None = "www.acme.example",
    *,
    age: int = 0,
    paths: list[dict[str, Any]] | None = None,
    tls: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "http": {"paths": paths or [{"path": "/", "pathType": "Prefix", "backend": backend()}]}
    }
    if host is not None:
        rule["host"] = host
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta(tenant_name, name, age=age, annotations=annotations or {}),
        "spec": {"ingressClassName": "teapot", "rules": [rule], "tls": tls or [], **spec},
    }


def ingress(*args: Any, **kwargs: Any) -> Ingress:
    obj = parsed(ingress_body(*args, **kwargs))
    assert isinstance(obj, Ingress)
    return obj


def listener(name: str, protocol: str, port: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "protocol": protocol, "port": port, **extra}


def gateway(
    tenant_name: str,
    name: str,
    listeners: list[dict[str, Any]],
    *,
    age: int = 0,
    addresses: list[dict[str, Any]] | None = None,
    past_the_crd: bool = False,
) -> Gateway:
    """A Gateway of class teapot; `addresses`: its spec.addresses (a dedicated address);
    `past_the_crd` as for :func:`route`."""
    spec: dict[str, Any] = {"gatewayClassName": "teapot", "listeners": listeners}
    if addresses is not None:
        spec["addresses"] = addresses
    body = {"apiVersion": GW, "kind": "Gateway", "metadata": meta(tenant_name, name, age=age)}
    body["spec"] = spec
    obj = MODELS[GW, "Gateway"].model_validate(body) if past_the_crd else parsed(body)
    assert isinstance(obj, Gateway)
    return obj


def route(
    kind: str,
    tenant_name: str,
    name: str,
    *,
    age: int = 0,
    gateway_name: str = "gw",
    past_the_crd: bool = False,
    **spec: Any,
) -> L7Object:
    """`past_the_crd`: typed by the model alone, as a cluster with older or looser CRDs
    than the vendored ones would store it (the gateway's own vetting still holds)."""
    spec.setdefault("parentRefs", [{"name": gateway_name}])
    body = {"apiVersion": GW, "kind": kind, "metadata": meta(tenant_name, name, age=age)}
    body["spec"] = spec
    obj = MODELS[GW, kind].model_validate(body) if past_the_crd else parsed(body)
    assert isinstance(obj, HTTPRoute | TLSRoute | TCPRoute | UDPRoute)
    return obj


def http_route(tenant_name: str, name: str, hostnames: list[str], **spec: Any) -> L7Object:
    spec.setdefault("rules", [{"backendRefs": [{"name": "web", "port": 80}]}])
    return route("HTTPRoute", tenant_name, name, hostnames=hostnames, **spec)


def make_certificate(directory: Path, cn: str) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (PEM), from openssl."""
    cert, key = directory / f"{cn}.crt", directory / f"{cn}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-subj", f"/CN={cn}", "-days", "30", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert.read_bytes(), key.read_bytes()


def secret_key(tenant_name: str, name: str, cluster: str = "c1") -> str:
    return f"{TENANTS[tenant_name]['namespace']}/{mirrored_name(cluster, 'web', name)}"


def mirrored_slice(
    tenant_name: str,
    service: str,
    addresses: list[str],
    *,
    mode: str = "NodePorts",
    port: int = 30080,
    service_port: int = 80,
    name: str = "http",
) -> dict[str, Any]:
    """A mirrored EndpointSlice of Service web/`service` (cluster c1), as the agent writes it."""
    from teapot_lb.gateway.control.l7mirror import (
        ANNOTATION_SERVICE_PORTS,
        LABEL_BACKENDS,
        MCS_SERVICE_NAME,
        MCS_SOURCE_CLUSTER,
    )

    ports = f'[{{"name":"{name}","port":{service_port},"protocol":"TCP"}}]'
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": mirrored_name("c1", "web", f"{service}-{mode.lower()}"),
            "namespace": TENANTS[tenant_name]["namespace"],
            "labels": {
                LABEL_CLUSTER: "c1",
                LABEL_SOURCE_NAMESPACE: "web",
                LABEL_SOURCE_NAME: service,
                MCS_SOURCE_CLUSTER: "c1",
                MCS_SERVICE_NAME: service,
                LABEL_BACKENDS: mode,
            },
            "annotations": {ANNOTATION_SERVICE_PORTS: ports},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
        "ports": [{"name": name, "port": port, "protocol": "TCP"}],
    }
