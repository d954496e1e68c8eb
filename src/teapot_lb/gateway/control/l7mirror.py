"""The Teapot ingress controller's core (pure): which of a tenant cluster's objects the
shared gateway serves, and what the tenant agent mirrors of them into the tenant's
namespace of the management cluster; and what status comes back.

Mirrored: Ingresses of the `teapot` class (or of an IngressClass whose controller is
``lb.teapot.io/gateway``), Gateways of a GatewayClass of that controller, and the
HTTPRoutes, TLSRoutes, TCPRoutes and UDPRoutes attached to such a Gateway; with them the
EndpointSlices of the Services they reference (pod IPs, and the nodes at the Services'
nodePorts — which of the two the gateway uses is the Tenant's `gatewayBackends`) and the
TLS Secrets they reference, only those, only their certificate and key.

A mirror keeps its source's spec and annotations as written (vetting reads them); it is
named ``cluster.namespace.name`` (:func:`~teapot_lb.tenancy.l7vet.mirrored_name`) and
labelled with its source; EndpointSlices carry the multi-cluster Services API's
``multicluster.kubernetes.io/source-cluster`` and ``service-name`` labels. Everything of one
source cluster carries ``lb.teapot.io/cluster``, so its agent owns and cleans up exactly
that. A digest of the mirrored content (annotation) tells whether a mirror is current
even after the API server has defaulted fields of it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from teapot_lb.kube.resources import (
    ENDPOINT_SLICES,
    GATEWAY_CLASSES,
    GATEWAYS,
    HTTP_ROUTES,
    INGRESS_CLASSES,
    INGRESSES,
    SECRETS,
    TCP_ROUTES,
    TLS_ROUTES,
    UDP_ROUTES,
    KubeObject,
    Resource,
    object_key,
)
from teapot_lb.model import parse_object
from teapot_lb.model.gateway_api import (
    GATEWAY_GROUP,
    Gateway,
    GatewayClass,
    HTTPRoute,
    Route,
    TCPRoute,
    TLSRoute,
    UDPRoute,
    route_backend_refs,
)
from teapot_lb.model.ingress import (
    CLASS_ANNOTATION,
    GATEWAY_CONTROLLER,
    INGRESS_CLASS,
    Ingress,
    IngressClass,
)
from teapot_lb.model.service import SERVICE_NAME_LABEL, ExternalTrafficPolicy, Node, Service
from teapot_lb.model.tenancy import GatewayBackends
from teapot_lb.tenancy.l7address import ANNOTATION_DEDICATED_ADDRESS
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY
from teapot_lb.tenancy.l7vet import (
    GATEWAY_CLASS,
    LABEL_SOURCE_NAME,
    LABEL_SOURCE_NAMESPACE,
    mirrored_name,
)
from teapot_lb.tenancy.request import LABEL_CLUSTER

MCS_SOURCE_CLUSTER = "multicluster.kubernetes.io/source-cluster"
MCS_SERVICE_NAME = "multicluster.kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
# A label value: no "/" (the EndpointSlice controller itself is endpointslice-controller.k8s.io).
AGENT = "tenant-agent.lb.teapot.io"
LABEL_BACKENDS = "lb.teapot.io/backends"
ANNOTATION_DIGEST = "lb.teapot.io/mirror-digest"
# On mirrored EndpointSlices: the Service's ports (JSON list of name, port, protocol), so
# that a reference to a Service port number finds the endpoints' port of the same name.
ANNOTATION_SERVICE_PORTS = "lb.teapot.io/service-ports"
# On EndpointSlices the Octavia driver writes: the active health check of its pool's
# members (JSON, the gateway's HealthCheck shape). A tenant agent never writes it.
ANNOTATION_HEALTH_CHECK = "lb.teapot.io/health-check"
# Written by the gateway's reconcile on a refused mirrored Ingress (Ingress status has no
# conditions): "Reason: message". The agent keeps it and tells the tenant by an Event.
ANNOTATION_REFUSED = "gateway.lb.teapot.io/refused"
_OURS = ("lb.teapot.io/", "gateway.lb.teapot.io/")
_DROPPED_ANNOTATIONS = {"kubectl.kubernetes.io/last-applied-configuration"}
# Our annotations a tenant writes as a request (vetted by the gateway, like the spec).
_TENANTS_OWN = {ANNOTATION_DEDICATED_ADDRESS}

ROUTES: tuple[Resource, ...] = (HTTP_ROUTES, TLS_ROUTES, TCP_ROUTES, UDP_ROUTES)
# What the agent reads of the tenant cluster for the gateway (besides Services, Nodes and
# EndpointSlices, which it watches anyway), and what it writes into the management one.
TENANT_RESOURCES: tuple[Resource, ...] = (
    INGRESSES,
    INGRESS_CLASSES,
    GATEWAY_CLASSES,
    GATEWAYS,
    *ROUTES,
    SECRETS,
)
MIRRORED: tuple[Resource, ...] = (SECRETS, ENDPOINT_SLICES, GATEWAYS, INGRESSES, *ROUTES)


@dataclass(frozen=True)
class TenantCluster:
    """What the mirror reads of one tenant cluster: raw objects by resource and key, and
    the typed Services and Nodes."""

    raw: Mapping[Resource, Mapping[str, KubeObject]]
    services: Mapping[str, Service] = field(default_factory=dict)
    nodes: Mapping[str, Node] = field(default_factory=dict)

    def of(self, resource: Resource) -> Mapping[str, KubeObject]:
        return self.raw.get(resource, {})


@dataclass(frozen=True)
class Served:
    """A tenant object the gateway serves, and its mirror's name."""

    resource: Resource
    key: str  # namespace/name in the tenant cluster
    raw: KubeObject
    mirror: str


@dataclass
class Mirror:
    """The management objects one tenant cluster should have, by (resource, name)."""

    objects: dict[tuple[Resource, str], KubeObject] = field(default_factory=dict)
    served: list[Served] = field(default_factory=list)


def digest(body: KubeObject) -> str:
    """A digest of what a mirror says (not its metadata bookkeeping nor status)."""
    meta = body.get("metadata", {})
    content = {
        k: v for k, v in body.items() if k not in ("metadata", "status", "apiVersion", "kind")
    }
    content["labels"] = meta.get("labels") or {}
    content["annotations"] = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k != ANNOTATION_DIGEST
    }
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def current_digest(body: KubeObject | None) -> str | None:
    if body is None:
        return None
    return (body.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_DIGEST)


def _parsed(raw: KubeObject) -> Any:
    """The typed object, or None when it does not parse or is a mirror itself (a tenant
    cluster that is also a management cluster must not mirror its mirrors)."""
    if LABEL_CLUSTER in ((raw.get("metadata") or {}).get("labels") or {}):
        return None
    obj, problems = parse_object(raw, ignore_unknown_kinds=True)
    return None if problems else obj


def teapot_classes(cluster: TenantCluster) -> tuple[set[str], set[str]]:
    """Names of the Ingress classes and GatewayClasses the gateway serves."""
    ingress = {INGRESS_CLASS}
    for raw in cluster.of(INGRESS_CLASSES).values():
        obj = _parsed(raw)
        if isinstance(obj, IngressClass) and obj.spec.controller == GATEWAY_CONTROLLER:
            ingress.add(obj.name)
    gateway = set()
    for raw in cluster.of(GATEWAY_CLASSES).values():
        obj = _parsed(raw)
        if isinstance(obj, GatewayClass) and obj.spec.controller_name == GATEWAY_CONTROLLER:
            gateway.add(obj.name)
    return ingress, gateway


class _Builder:
    def __init__(self, cluster: TenantCluster, name: str, namespace: str) -> None:
        self.cluster = cluster
        self.name = name
        self.namespace = namespace
        self.mirror = Mirror()
        self.services: set[tuple[str, str]] = set()
        self.secrets: set[tuple[str, str]] = set()
        self.annotations: dict[str, str] = {}

    def labels(self, source_ns: str, source_name: str) -> dict[str, str]:
        return {
            LABEL_CLUSTER: self.name,
            LABEL_SOURCE_NAMESPACE: source_ns,
            LABEL_SOURCE_NAME: source_name,
        }

    def add(self, resource: Resource, body: KubeObject) -> None:
        meta = body["metadata"]
        meta.setdefault("annotations", {})[ANNOTATION_DIGEST] = digest(body)
        self.mirror.objects[(resource, meta["name"])] = body

    def object(self, resource: Resource, raw: KubeObject, spec: dict[str, Any]) -> None:
        meta = raw.get("metadata", {})
        ns, name = meta.get("namespace") or "default", meta["name"]
        annotations = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k not in _DROPPED_ANNOTATIONS and (k in _TENANTS_OWN or not k.startswith(_OURS))
        }
        if resource is INGRESSES:
            annotations.pop(CLASS_ANNOTATION, None)
        mirror = mirrored_name(self.name, ns, name)
        body = {
            "apiVersion": raw.get("apiVersion", resource.api_version),
            "kind": resource.kind,
            "metadata": {
                "name": mirror,
                "namespace": self.namespace,
                "labels": self.labels(ns, name),
                "annotations": annotations,
            },
            "spec": spec,
        }
        self.add(resource, body)
        self.mirror.served.append(Served(resource, object_key(ns, name), raw, mirror))

    def secret(self, ns: str, name: str) -> None:
        raw = self.cluster.of(SECRETS).get(object_key(ns, name))
        if raw is None:
            return
        data = raw.get("data") or {}
        mirrored: dict[str, str] = {k: data[k] for k in (CERT_KEY, KEY_KEY) if k in data}
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": mirrored_name(self.name, ns, name),
                "namespace": self.namespace,
                "labels": self.labels(ns, name),
            },
            "type": "kubernetes.io/tls",
            "data": mirrored,
        }
        text = raw.get("stringData") or {}  # an object no API server merged yet (tests)
        for k in (CERT_KEY, KEY_KEY):
            if k in text:
                mirrored[k] = base64.b64encode(str(text[k]).encode()).decode()
        self.add(SECRETS, body)

    def slices(self, ns: str, service_name: str) -> None:
        service = self.cluster.services.get(object_key(ns, service_name))
        if service is None:
            return
        labels = {
            **self.labels(ns, service_name),
            MCS_SOURCE_CLUSTER: self.name,
            MCS_SERVICE_NAME: service_name,
            MANAGED_BY: AGENT,
        }
        ports = [
            {"name": p.name or "", "port": p.port, "protocol": p.protocol.value}
            for p in service.spec.ports
        ]
        self.annotations = {ANNOTATION_SERVICE_PORTS: json.dumps(ports, separators=(",", ":"))}
        ready_nodes: set[str] = set()
        for _key, raw in sorted(self.cluster.of(ENDPOINT_SLICES).items()):
            meta = raw.get("metadata", {})
            if meta.get("namespace") != ns:
                continue
            if (meta.get("labels") or {}).get(SERVICE_NAME_LABEL) != service_name:
                continue
            endpoints = [
                {k: e[k] for k in ("addresses", "conditions", "nodeName") if k in e}
                for e in raw.get("endpoints") or []
            ]
            ready_nodes.update(
                e["nodeName"]
                for e in endpoints
                if e.get("nodeName") and (e.get("conditions") or {}).get("ready") is not False
            )
            self.add(
                ENDPOINT_SLICES,
                {
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": mirrored_name(self.name, ns, meta["name"]),
                        "namespace": self.namespace,
                        "labels": {**labels, LABEL_BACKENDS: GatewayBackends.POD_IPS.value},
                        "annotations": dict(self.annotations),
                    },
                    "addressType": raw.get("addressType", "IPv4"),
                    "endpoints": endpoints,
                    "ports": raw.get("ports") or [],
                },
            )
        self._node_port_slices(service, labels, ready_nodes)

    def _node_port_slices(
        self, service: Service, labels: dict[str, str], ready_nodes: set[str]
    ) -> None:
        ports = [
            {"name": p.name or "", "protocol": p.protocol.value, "port": p.node_port}
            for p in service.spec.ports
            if p.node_port is not None
        ]
        if not ports:
            return
        local = service.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
        by_family: dict[str, list[dict[str, Any]]] = {}
        for name in sorted(self.cluster.nodes):
            node = self.cluster.nodes[name]
            ready = not node.spec.unschedulable and (not local or name in ready_nodes)
            for address in node.addresses():
                family = "IPv4" if address.version == 4 else "IPv6"
                by_family.setdefault(family, []).append(
                    {"addresses": [str(address)], "conditions": {"ready": ready}, "nodeName": name}
                )
        for family, endpoints in sorted(by_family.items()):
            suffix = f"{service.name}.nodeports.{family.lower()}"
            self.add(
                ENDPOINT_SLICES,
                {
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": mirrored_name(self.name, service.namespace, suffix),
                        "namespace": self.namespace,
                        "labels": {**labels, LABEL_BACKENDS: GatewayBackends.NODE_PORTS.value},
                        "annotations": dict(self.annotations),
                    },
                    "addressType": family,
                    "endpoints": endpoints,
                    "ports": ports,
                },
            )


def desired_mirror(cluster: TenantCluster, name: str, namespace: str) -> Mirror:
    """What tenant cluster `name` should have in its management `namespace`."""
    build = _Builder(cluster, name, namespace)
    ingress_classes, gateway_classes = teapot_classes(cluster)
    for _key, raw in sorted(cluster.of(INGRESSES).items()):
        obj = _parsed(raw)
        if not isinstance(obj, Ingress) or obj.class_name not in ingress_classes:
            continue
        spec = dict(raw.get("spec") or {})
        spec["ingressClassName"] = INGRESS_CLASS
        build.object(INGRESSES, raw, spec)
        for _, backend in obj.backends():
            if backend.service is not None:
                build.services.add((obj.namespace, backend.service.name))
        build.secrets.update((obj.namespace, t.secret_name) for t in obj.spec.tls if t.secret_name)
    gateways: set[str] = set()
    for key, raw in sorted(cluster.of(GATEWAYS).items()):
        gw = _parsed(raw)
        if not isinstance(gw, Gateway) or gw.spec.gateway_class_name not in gateway_classes:
            continue
        gateways.add(key)
        spec = dict(raw.get("spec") or {})
        spec["gatewayClassName"] = GATEWAY_CLASS
        build.object(GATEWAYS, raw, spec)
        for listener in gw.spec.listeners:
            for cert in listener.tls.certificate_refs if listener.tls else []:
                same = cert.namespace in (None, gw.namespace)
                if not cert.group and cert.kind == "Secret" and same:
                    build.secrets.add((gw.namespace, cert.name))
    for resource in ROUTES:
        for _key, raw in sorted(cluster.of(resource).items()):
            route = _parsed(raw)
            if not isinstance(route, HTTPRoute | TLSRoute | TCPRoute | UDPRoute):
                continue
            if not attached_gateways(route) & gateways:
                continue
            build.object(resource, raw, dict(raw.get("spec") or {}))
            for _, ref in route_backend_refs(route):
                if (
                    not ref.group
                    and ref.kind == "Service"
                    and ref.namespace in (None, route.namespace)
                ):
                    build.services.add((route.namespace, ref.name))
    for ns, secret in sorted(build.secrets):
        build.secret(ns, secret)
    for ns, service in sorted(build.services):
        build.slices(ns, service)
    return build.mirror


def attached_gateways(route: Route) -> set[str]:
    """Keys (namespace/name) of the Gateways a route names as parents."""
    return {
        object_key(ref.namespace or route.namespace, ref.name)
        for ref in route.spec.parent_refs
        if ref.group == GATEWAY_GROUP and ref.kind == "Gateway"
    }


# --------------------------------------------------------------------------- status back


def status_back(served: Served, mirror: KubeObject | None) -> dict[str, Any] | None:
    """The status patch the tenant's object needs from its mirror, or None when it says
    the same already."""
    if mirror is None:
        return None
    theirs = mirror.get("status") or {}
    ours = served.raw.get("status") or {}
    if served.resource is INGRESSES:
        wanted = (theirs.get("loadBalancer") or {}).get("ingress") or []
        if ((ours.get("loadBalancer") or {}).get("ingress") or []) == wanted:
            return None
        return {"loadBalancer": {"ingress": wanted}}
    if served.resource is GATEWAYS:
        patch = {
            k: theirs.get(k) or [] for k in ("addresses", "conditions", "listeners")
            if (theirs.get(k) or []) != (ours.get(k) or [])
        }  # fmt: skip
        return patch or None
    kept = [p for p in ours.get("parents") or [] if p.get("controllerName") != GATEWAY_CONTROLLER]
    parents = kept + [
        p for p in theirs.get("parents") or [] if p.get("controllerName") == GATEWAY_CONTROLLER
    ]
    return None if parents == (ours.get("parents") or []) else {"parents": parents}


def refusal_of(mirror: KubeObject | None) -> tuple[str, str] | None:
    """(reason, message) of a refusal the gateway's reconcile left on a mirror (an
    Ingress's annotation; a Gateway's, or a route's parent's of our controller,
    Accepted=False condition), or None."""
    if mirror is None:
        return None
    text = (mirror.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_REFUSED)
    if text:
        reason, _, message = text.partition(": ")
        return reason, message
    status = mirror.get("status") or {}
    conditions = list(status.get("conditions") or [])
    for parent in status.get("parents") or []:
        if parent.get("controllerName") == GATEWAY_CONTROLLER:
            conditions += parent.get("conditions") or []
    for c in conditions:
        if c.get("type") == "Accepted" and c.get("status") == "False":
            reason = str(c.get("reason", ""))
            return reason, str(c.get("message", "")).removeprefix(f"{reason}: ")
    return None


def class_status(raw: KubeObject, now: str) -> dict[str, Any] | None:
    """A GatewayClass of our controller: Accepted (the agent is its controller here)."""
    spec = raw.get("spec") or {}
    if spec.get("controllerName") != GATEWAY_CONTROLLER:
        return None
    generation = raw.get("metadata", {}).get("generation")
    conditions = (raw.get("status") or {}).get("conditions") or []
    for c in conditions:
        current = c.get("type") == "Accepted" and c.get("status") == "True"
        if current and c.get("observedGeneration") == generation:
            return None
    accepted = {
        "type": "Accepted",
        "status": "True",
        "reason": "Accepted",
        "message": "served by the Teapot gateway through the management cluster",
        "lastTransitionTime": now,
    }
    if generation is not None:
        accepted["observedGeneration"] = generation
    others = [c for c in conditions if c.get("type") != "Accepted"]
    return {**(raw.get("status") or {}), "conditions": [*others, accepted]}


def keep_ours(current: KubeObject, desired: KubeObject) -> KubeObject:
    """The desired mirror as a replacement of `current`: its resourceVersion, and the
    annotations the gateway's reconcile wrote (refusals) kept."""
    meta = dict(desired["metadata"])
    theirs = current.get("metadata", {})
    kept = {
        k: v
        for k, v in (theirs.get("annotations") or {}).items()
        if k.startswith("gateway.lb.teapot.io/")
    }
    meta["annotations"] = {**meta.get("annotations", {}), **kept}
    meta["resourceVersion"] = theirs.get("resourceVersion")
    body = {**desired, "metadata": meta}
    if "status" in current:
        body["status"] = current["status"]
    return body


def owned(objects: Iterable[KubeObject], cluster: str) -> list[KubeObject]:
    return [
        o
        for o in objects
        if (o.get("metadata", {}).get("labels") or {}).get(LABEL_CLUSTER) == cluster
    ]


__all__ = [
    "AGENT",
    "ANNOTATION_DIGEST",
    "ANNOTATION_HEALTH_CHECK",
    "ANNOTATION_REFUSED",
    "ANNOTATION_SERVICE_PORTS",
    "LABEL_BACKENDS",
    "MCS_SERVICE_NAME",
    "MCS_SOURCE_CLUSTER",
    "MIRRORED",
    "ROUTES",
    "TENANT_RESOURCES",
    "Mirror",
    "Served",
    "TenantCluster",
    "attached_gateways",
    "class_status",
    "current_digest",
    "desired_mirror",
    "keep_ours",
    "refusal_of",
    "status_back",
    "teapot_classes",
]
