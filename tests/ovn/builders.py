"""Builders for OVN mode tests: Services with IPs, EndpointSlices with ports, a view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from model.builders import ovn_advertisement, parse, pool, service
from teapot_lb.cluster import ClusterView, Store

POOL = pool("public", "203.0.113.0/28", "2001:db8::/124")
OWNER = "test"


def assigned(doc: dict[str, Any], *ips: str) -> dict[str, Any]:
    """The Service document with `ips` in status.loadBalancer.ingress."""
    return {**doc, "status": {"loadBalancer": {"ingress": [{"ip": ip} for ip in ips]}}}


def web(*ips: str, ports: tuple[str, ...] = ("80",), **spec: Any) -> dict[str, Any]:
    """Service default/web with named ports (`p80`, `p53`...) and the IPs assigned."""
    doc = service("web", *ports, **spec)
    for port in doc["spec"]["ports"]:
        port["name"] = f"p{port['port']}"
    return assigned(doc, *ips)


def endpoints(
    svc: str,
    *backends: tuple[str, str, bool],
    target_port: int = 8080,
    port_name: str = "p80",
    protocol: str = "TCP",
    family: str = "IPv4",
    name: str | None = None,
    pod: Callable[[str], str] = "pod-{}".format,
) -> dict[str, Any]:
    """An EndpointSlice of `svc`: backends as (address, node, ready), one Pod each (named
    `pod(node)`)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name or f"{svc}-{family.lower()}",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": svc},
        },
        "addressType": family,
        "ports": [{"name": port_name, "port": target_port, "protocol": protocol}],
        "endpoints": [
            {
                "addresses": [address],
                "nodeName": node,
                "conditions": {"ready": ready},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": pod(node)},
            }
            for address, node, ready in backends
        ],
    }


def ovn(name: str = "ovn", **spec: Any) -> dict[str, Any]:
    """An OVNAdvertisement of `public` on router gr0 and switch ls0 unless told otherwise."""
    spec.setdefault("gatewayRouters", [{"name": "gr0"}])
    spec.setdefault("logicalSwitches", ["ls0"])
    return ovn_advertisement(name, "public", **spec)


def view(*documents: dict[str, Any]) -> ClusterView:
    store = Store()
    for d in documents:
        store.put_object(parse(d))
    return store.view()
