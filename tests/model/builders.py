"""Builders of manifest documents for tests: a line per object, overrides in camelCase.

They return plain dicts (documents as a YAML file would hold them), so that the same
builder serves valid objects and broken ones; `parse` and `problems_of` run the real
loading and validation path on them.
"""

from __future__ import annotations

from typing import Any

from teapot_lb.model import ApiObject, Problem, parse_object
from teapot_lb.model.manifest import Document, parse_documents
from teapot_lb.validation import validate_manifest

NS = "lb-system"
API = "lb.teapot.io/v1alpha1"


def _object(kind: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": NS, **{k: v for k, v in meta.items() if v}}
    return {"apiVersion": API, "kind": kind, "metadata": metadata, "spec": spec}


def pool(
    name: str, *addresses: str, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    return _object("AddressPool", name, {"addresses": list(addresses), **spec}, labels=labels)


def peer(name: str, address: str = "192.0.2.254", **spec: Any) -> dict[str, Any]:
    body = {"myASN": 64512, "peerASN": 64500, "peerAddress": address, **spec}
    return _object("BGPPeer", name, {k: v for k, v in body.items() if v is not None})


def bgp_advertisement(name: str, *pools: str, **spec: Any) -> dict[str, Any]:
    return _object("BGPAdvertisement", name, {"addressPools": list(pools), **spec})


def bfd_profile(name: str, **spec: Any) -> dict[str, Any]:
    return _object("BFDProfile", name, spec)


def l2_advertisement(name: str, *pools: str, **spec: Any) -> dict[str, Any]:
    return _object("L2Advertisement", name, {"addressPools": list(pools), **spec})


def vip_advertisement(name: str, *pools: str, **spec: Any) -> dict[str, Any]:
    return _object("VIPAdvertisement", name, {"addressPools": list(pools), **spec})


def ovn_advertisement(name: str, *pools: str, **spec: Any) -> dict[str, Any]:
    return _object("OVNAdvertisement", name, {"addressPools": list(pools), **spec})


def service(
    name: str,
    *ports: str,
    namespace: str = "default",
    ips: str | None = None,
    pool: str | None = None,
    sharing_key: str | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A LoadBalancer Service; ports as "80" or "53/UDP"; annotations by keyword."""
    annotations = {
        key: value
        for key, value in (
            ("lb.teapot.io/ips", ips),
            ("lb.teapot.io/pool", pool),
            ("lb.teapot.io/sharing-key", sharing_key),
        )
        if value is not None
    }
    port_list = []
    for text in ports or ("80",):
        number, _, protocol = text.partition("/")
        port_list.append({"port": int(number), "protocol": protocol or "TCP"})
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    if labels:
        metadata["labels"] = labels
    body = {"type": "LoadBalancer", "ports": port_list, **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": body}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def labels_selector(labels: dict[str, str]) -> dict[str, Any]:
    return {"matchLabels": labels}


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return {"matchExpressions": [requirement]}


def zone(name: str) -> dict[str, Any]:
    """A node selector for one zone label."""
    return labels_selector({"topology.kubernetes.io/zone": name})


def parse(document: dict[str, Any]) -> Any:
    """The typed object for a document that must be valid in shape."""
    obj, problems = parse_object(document)
    assert not problems, [str(p) for p in problems]
    return obj


def objects(*documents: dict[str, Any]) -> list[ApiObject]:
    return [parse(d) for d in documents]


def problems_of(*documents: dict[str, Any]) -> list[Problem]:
    """Every problem the documents have, through the same path as `teapot-lb validate`."""
    docs = [Document(f"test, document {i}", d) for i, d in enumerate(documents, start=1)]
    return validate_manifest(parse_documents(docs))
