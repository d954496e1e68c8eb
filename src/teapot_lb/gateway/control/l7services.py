"""The Services that get tenants' dedicated gateway addresses announced (pure).

The shared gateway address is the IP of a LoadBalancer Service in front of the gateway
pods (`deploy/teapot/gateway-node.yaml`): the controller assigns it and the speakers
announce it from the nodes with a ready gateway (externalTrafficPolicy Local), by BGP or
L2. A dedicated address takes the same path: one Service per address, a copy of that
Service (selector, ports, class, traffic policy) with the address pinned
(`lb.teapot.io/ips`), written by the manager's gateway reconcile and deleted with the last
object on the address. So it is announced by the same speakers from the same nodes as the
shared address.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from teapot_lb.addresses import IPAddress, IPFamily
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.service import ANNOTATION_IPS

LABEL_ADDRESS_OF = "gateway.lb.teapot.io/address-of"
"""On a Service the reconcile wrote: the Tenant whose dedicated address it carries."""

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


def service_name(template: str, address: IPAddress) -> str:
    """`<template>-<address>`, the address's dots and colons as dashes (a DNS label)."""
    return f"{template}-{str(address).replace('.', '-').replace(':', '-')}"[:63].rstrip("-")


def address_services(
    addresses: Iterable[tuple[IPAddress, str]], template: KubeObject
) -> dict[str, KubeObject]:
    """Per Service name, the Service that carries each (dedicated address, tenant)."""
    meta = template.get("metadata", {})
    spec = template.get("spec", {})
    out: dict[str, KubeObject] = {}
    for address, tenant in sorted(addresses, key=lambda a: (a[0].version, int(a[0]))):
        name = service_name(str(meta.get("name", "gateway")), address)
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
                "annotations": {ANNOTATION_IPS: str(address)},
            },
            "spec": body,
        }
    return out


def differs(current: KubeObject, wanted: KubeObject) -> bool:
    """Whether a Service the reconcile wrote no longer says what it should (the API
    server's additions, such as clusterIP and nodePorts, do not count)."""
    meta, spec = current.get("metadata", {}), current.get("spec", {})
    want_meta, want_spec = wanted["metadata"], wanted["spec"]
    if (meta.get("annotations") or {}).get(ANNOTATION_IPS) != want_meta["annotations"][
        ANNOTATION_IPS
    ]:
        return True
    if (meta.get("labels") or {}) != want_meta["labels"]:
        return True
    if any(spec.get(k) != v for k, v in want_spec.items() if k != "ports"):
        return True
    ports = [{k: p[k] for k in _PORT_FIELDS if k in p} for p in spec.get("ports") or []]
    return bool(ports != want_spec["ports"])


__all__ = ["LABEL_ADDRESS_OF", "address_services", "differs", "service_name"]
