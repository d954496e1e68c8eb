"""The Services that get tenants' dedicated gateway addresses announced (pure).

The shared gateway address is the IP of a LoadBalancer Service in front of the gateway
pods (`deploy/teapot/gateway-node.yaml`): the controller assigns it and the speakers
announce it from the nodes with a ready gateway (externalTrafficPolicy Local), by BGP or
L2. A dedicated address takes the same path: one Service per address, a copy of that
Service (selector, ports, class, traffic policy) with the address pinned
(`lb.teapot.io/ips`), written by the manager's gateway reconcile and deleted with the last
object on the address. So it is announced by the same speakers from the same nodes as the
shared address.

A Gateway-mode TenantLoadBalancer's address (provider `proxy`) takes the same path: one
copy per address the gateway serves the request on, deleted when it no longer does. That
copy names the requests it carries (:data:`ANNOTATION_ADDRESS_FOR`): the address is theirs
(the manager's book holds it for them), and the manager does not read the copy as a
dedicated address, which would claim it a second time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from teapot_lb.addresses import IPAddress, IPFamily
from teapot_lb.gateway.translate.results import LoadBalancerResult
from teapot_lb.kube.resources import KubeObject, object_key
from teapot_lb.model.service import ANNOTATION_IPS

LABEL_ADDRESS_OF = "gateway.lb.teapot.io/address-of"
"""On a Service the reconcile wrote: the Tenant whose address it carries."""
ANNOTATION_ADDRESS_FOR = "gateway.lb.teapot.io/address-for"
"""On a copy carrying TenantLoadBalancers' address: their NAMESPACE/NAME, comma-separated
(several when they share the address). Absent: a dedicated gateway address."""

# What is copied of the template's spec: the rest (clusterIP, nodePorts, ...) is the API
# server's to give each Service.
_COPIED = (
    "type",
    "loadBalancerClass",
    "externalTrafficPolicy",
    "selector",
    "allocateLoadBalancerNodePorts",
)
_PORT_FIELDS = ("name", "port", "protocol", "targetPort")
_OURS = (ANNOTATION_IPS, ANNOTATION_ADDRESS_FOR)  # the annotations the reconcile writes


def service_name(template: str, address: IPAddress) -> str:
    """`<template>-<address>`, the address's dots and colons as dashes (a DNS label)."""
    return f"{template}-{str(address).replace('.', '-').replace(':', '-')}"[:63].rstrip("-")


def address_services(
    addresses: Iterable[tuple[IPAddress, str]],
    template: KubeObject,
    requests: Iterable[LoadBalancerResult] = (),
) -> dict[str, KubeObject]:
    """Per Service name, the Service that carries each (dedicated address, tenant), and
    each address a Gateway-mode request is served on (`requests`: the gateway's results;
    an address none of a request's ports is served on, refused, gets none)."""
    meta = template.get("metadata", {})
    spec = template.get("spec", {})
    tenants = dict(addresses)
    carriers: dict[IPAddress, set[str]] = {}
    for result in requests:
        for address in result.addresses:
            # (the address layer gives no object an address a request holds: both is a
            # view behind, and the request keeps it, as the book does)
            tenants[address] = result.tenant
            request = result.request
            carriers.setdefault(address, set()).add(object_key(request.namespace, request.name))
    out: dict[str, KubeObject] = {}
    for address, tenant in sorted(tenants.items(), key=lambda a: (a[0].version, int(a[0]))):
        name = service_name(str(meta.get("name", "gateway")), address)
        annotations = {ANNOTATION_IPS: str(address)}
        if address in carriers:
            annotations[ANNOTATION_ADDRESS_FOR] = ",".join(sorted(carriers[address]))
        body: dict[str, Any] = {k: spec[k] for k in _COPIED if k in spec}
        body["ports"] = [{k: p[k] for k in _PORT_FIELDS if k in p} for p in spec.get("ports") or []]
        body["ipFamilies"] = [IPFamily.of(address).value]
        body["ipFamilyPolicy"] = "SingleStack"
        out[name] = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace"),
                "labels": {**(meta.get("labels") or {}), LABEL_ADDRESS_OF: tenant},
                "annotations": annotations,
            },
            "spec": body,
        }
    return out


def carried_requests(service: KubeObject) -> tuple[str, ...]:
    """The TenantLoadBalancers (NAMESPACE/NAME) whose address a copy carries; empty: a
    dedicated gateway address's."""
    text = (service.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_ADDRESS_FOR)
    return tuple(k for k in str(text or "").split(",") if k)


def differs(current: KubeObject, wanted: KubeObject) -> bool:
    """Whether a Service the reconcile wrote no longer says what it should (the API
    server's additions, such as clusterIP and nodePorts, do not count)."""
    meta, spec = current.get("metadata", {}), current.get("spec", {})
    want_meta, want_spec = wanted["metadata"], wanted["spec"]
    annotations = meta.get("annotations") or {}
    want_annotations = want_meta["annotations"]
    if any(annotations.get(k) != want_annotations.get(k) for k in _OURS):
        return True
    if (meta.get("labels") or {}) != want_meta["labels"]:
        return True
    if any(spec.get(k) != v for k, v in want_spec.items() if k != "ports"):
        return True
    ports = [{k: p[k] for k in _PORT_FIELDS if k in p} for p in spec.get("ports") or []]
    return bool(ports != want_spec["ports"])


__all__ = [
    "ANNOTATION_ADDRESS_FOR",
    "LABEL_ADDRESS_OF",
    "address_services",
    "carried_requests",
    "differs",
    "service_name",
]
