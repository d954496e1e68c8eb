"""The gateway lab group's input: two tenants and what their agents would have mirrored into
the management cluster (Ingresses over TLS, a Gateway with a TCP and a UDP listener and
their routes, EndpointSlices, TLS Secrets), as `teapot-lb gateway --manifests` reads it;
and what the gateway nodes' speakers (`teapot-lb run --manifests --modes bgp`) read to
announce the gateway IP. Pure: dicts out, the caller writes them."""

from __future__ import annotations

import base64
import json
from typing import Any

from teapot_lb.gateway.control.l7mirror import (
    AGENT,
    ANNOTATION_SERVICE_PORTS,
    LABEL_BACKENDS,
    MANAGED_BY,
    MCS_SERVICE_NAME,
    MCS_SOURCE_CLUSTER,
)
from teapot_lb.model.ingress import INGRESS_CLASS
from teapot_lb.model.service import ANNOTATION_IPS, ANNOTATION_POOL, SERVICE_NAME_LABEL
from teapot_lb.tenancy.l7vet import GATEWAY_CLASS, LABEL_SOURCE_NAME, LABEL_SOURCE_NAMESPACE
from teapot_lb.tenancy.request import LABEL_CLUSTER

CLUSTER = "c1"
SOURCE_NS = "web"
TCP_PORT = 5000
UDP_PORT = 5353
LB_API = "lb.teapot.io/v1alpha1"
LB_NAMESPACE = "teapot-lb-system"
GATEWAY_NAMESPACE = "teapot-gateway"
GATEWAY_POOL = "gateway"
SPEAKER_ASN, ROUTER_ASN = 64512, 64500
HOLD_S, KEEPALIVE_S = 3, 1
BFD_MS, BFD_MULTIPLIER = 100, 3
Obj = dict[str, Any]


def tenant(name: str, domains: list[str], pods: str) -> Obj:
    return {
        "apiVersion": "lb.teapot.io/v1alpha1",
        "kind": "Tenant",
        "metadata": {"name": name},
        "spec": {
            "namespace": f"tenant-{name}",
            "quotas": {"ports": 4},
            "dnsDomains": domains,
            "modes": ["Gateway"],
            "gatewayBackends": "PodIPs",
            "podNetworks": [pods],
        },
    }


def _mirrored(api: str, kind: str, tenant_name: str, name: str, body: Obj) -> Obj:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {
            "name": f"{CLUSTER}.{SOURCE_NS}.{name}",
            "namespace": f"tenant-{tenant_name}",
            "labels": {
                LABEL_CLUSTER: CLUSTER,
                LABEL_SOURCE_NAMESPACE: SOURCE_NS,
                LABEL_SOURCE_NAME: name,
            },
        },
        **body,
    }


def ingress(tenant_name: str, name: str, host: str, service: str, secret: str) -> Obj:
    path = {"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": service, "port": {"number": 80}}}}  # fmt: skip
    spec = {
        "ingressClassName": INGRESS_CLASS,
        "tls": [{"hosts": [host], "secretName": secret}],
        "rules": [{"host": host, "http": {"paths": [path]}}],
    }
    return _mirrored("networking.k8s.io/v1", "Ingress", tenant_name, name, {"spec": spec})


def secret(tenant_name: str, name: str, cert_pem: str, key_pem: str) -> Obj:
    data = {k: base64.b64encode(v.encode()).decode()
            for k, v in (("tls.crt", cert_pem), ("tls.key", key_pem))}  # fmt: skip
    return _mirrored("v1", "Secret", tenant_name, name, {"type": "kubernetes.io/tls", "data": data})


def endpoints(
    tenant_name: str, service: str, addresses: list[str], port: int, udp: bool = False
) -> Obj:
    """The mirrored EndpointSlice of `service` (PodIPs), its Service port 80 (TCP) or
    `port` (UDP) mapped to the pods' `port`."""
    protocol = "UDP" if udp else "TCP"
    front = port if udp else 80
    body = _mirrored("discovery.k8s.io/v1", "EndpointSlice", tenant_name, service, {
        "addressType": "IPv4",
        "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
        "ports": [{"name": "p", "port": port, "protocol": protocol}],
    })  # fmt: skip
    body["metadata"]["name"] = f"{CLUSTER}.{SOURCE_NS}.{service}"
    body["metadata"]["labels"] |= {
        MCS_SOURCE_CLUSTER: CLUSTER, MCS_SERVICE_NAME: service, MANAGED_BY: AGENT,
        LABEL_BACKENDS: "PodIPs",
    }  # fmt: skip
    ports = [{"name": "p", "port": front, "protocol": protocol}]
    body["metadata"]["annotations"] = {ANNOTATION_SERVICE_PORTS: json.dumps(ports)}
    return body


def stream_gateway(tenant_name: str) -> list[Obj]:
    """A Gateway with a TCP and a UDP listener and one route each."""
    api = "gateway.networking.k8s.io/v1"
    gw = _mirrored(api, "Gateway", tenant_name, "streams", {"spec": {
        "gatewayClassName": GATEWAY_CLASS,
        "listeners": [{"name": "tcp", "port": TCP_PORT, "protocol": "TCP"},
                      {"name": "udp", "port": UDP_PORT, "protocol": "UDP"}],
    }})  # fmt: skip
    out = [gw]
    for kind, section, service, port in (
        ("TCPRoute", "tcp", "tcp-echo", 80),
        ("UDPRoute", "udp", "udp-echo", UDP_PORT),
    ):
        spec = {
            "parentRefs": [{"name": "streams", "sectionName": section}],
            "rules": [{"backendRefs": [{"name": service, "port": port}]}],
        }
        out.append(_mirrored(api, kind, tenant_name, section, {"spec": spec}))
    return out


def speaker_docs(vip: str, router: str, nodes: dict[str, str]) -> list[Obj]:
    """The gateway IP as a LoadBalancer Service an operator writes for the speakers of the
    gateway nodes: requested from a pool advertised by BGP (with BFD) to the router,
    `externalTrafficPolicy: Local` with the gateway on each node as its endpoint, so each
    node announces the IP with itself as next hop while its gateway is there."""

    def lb(kind: str, name: str, spec: Obj) -> Obj:
        meta = {"name": name, "namespace": LB_NAMESPACE}
        return {"apiVersion": LB_API, "kind": kind, "metadata": meta, "spec": spec}

    peer = {"myASN": SPEAKER_ASN, "peerASN": ROUTER_ASN, "peerAddress": router,
            "holdTime": f"{HOLD_S}s", "keepaliveTime": f"{KEEPALIVE_S}s", "connectTime": "1s",
            "bfdProfile": "gateway-fast"}  # fmt: skip
    bfd = {"transmitInterval": BFD_MS, "receiveInterval": BFD_MS,
           "detectMultiplier": BFD_MULTIPLIER}  # fmt: skip
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "gateway",
            "namespace": GATEWAY_NAMESPACE,
            "annotations": {ANNOTATION_POOL: GATEWAY_POOL, ANNOTATION_IPS: vip},
        },
        "spec": {
            "type": "LoadBalancer",
            "externalTrafficPolicy": "Local",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP"}],
        },
    }
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "gateway-1", "namespace": GATEWAY_NAMESPACE,
                     "labels": {SERVICE_NAME_LABEL: "gateway"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [a], "nodeName": n, "conditions": {"ready": True}}
                      for n, a in nodes.items()],
        "ports": [{"name": "https", "port": 443, "protocol": "TCP"}],
    }  # fmt: skip
    node_docs = [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
         "status": {"addresses": [{"type": "InternalIP", "address": a}]}}
        for n, a in nodes.items()
    ]  # fmt: skip
    return [
        lb("AddressPool", GATEWAY_POOL, {"addresses": [f"{vip}/32"], "autoAssign": False}),
        lb("BGPPeer", "router", peer),
        lb("BFDProfile", "gateway-fast", bfd),
        lb("BGPAdvertisement", GATEWAY_POOL, {"addressPools": [GATEWAY_POOL]}),
        *node_docs,
        service,
        slice_,
    ]
