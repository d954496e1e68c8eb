"""CustomResourceDefinitions generated from the models (`python -m teapot_lb.model.crd DIR`).

The pydantic JSON schema is rewritten into a Kubernetes *structural* schema: every `$ref`
inlined, `Optional[X]` (anyOf with null) reduced to X, no titles, no `additionalProperties:
false`, no `const`. Descriptions come from the models' docstrings, so `kubectl explain`
shows the same text as the code.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from teapot_lb.model.bfd import BFDProfile
from teapot_lb.model.bgp import BGPAdvertisement, BGPPeer
from teapot_lb.model.common import GROUP, VERSION
from teapot_lb.model.kinds import REGISTRY, Kind
from teapot_lb.model.l2 import L2Advertisement
from teapot_lb.model.ovn import OVNAdvertisement
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer, TenantNodes
from teapot_lb.model.vip import VIPAdvertisement

HEADER = "# Generated from teapot_lb.model by scripts/gen-crds.sh; do not edit.\n"

# Keys of a pydantic JSON schema that a CRD's OpenAPI v3 schema does not take.
_DROPPED_KEYS = {"title", "propertyNames", "examples"}


@dataclass(frozen=True)
class Column:
    """One `kubectl get` column."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    description: str = ""

    def to_crd(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.priority:
            column["priority"] = self.priority
        if self.description:
            column["description"] = self.description
        return column


@dataclass(frozen=True)
class CustomResource:
    """A custom resource's CRD: its model, short names and printer columns (its plural and
    group come from the kind registry, :mod:`teapot_lb.model.kinds`)."""

    model: type[BaseModel]
    short_names: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def name(self) -> str:
        return str(self.model.model_fields["kind"].default)

    @property
    def plural(self) -> str:
        return REGISTRY[Kind(self.name)].resource.plural

    @property
    def scope(self) -> str:
        return "Namespaced" if REGISTRY[Kind(self.name)].resource.namespaced else "Cluster"


_AGE = Column("Age", "date", ".metadata.creationTimestamp")
_POOLS = Column("Pools", "string", ".spec.addressPools")
_NODES = Column("Node Selectors", "string", ".spec.nodeSelectors", priority=10)

CUSTOM_RESOURCES: tuple[CustomResource, ...] = (
    CustomResource(
        AddressPool,
        ("pool",),
        (
            Column("Addresses", "string", ".spec.addresses"),
            Column("Auto Assign", "boolean", ".spec.autoAssign"),
            Column("Avoid Buggy IPs", "boolean", ".spec.avoidBuggyIPs"),
            Column("Assigned IPv4", "integer", ".status.assignedIPv4"),
            Column("Available IPv4", "integer", ".status.availableIPv4"),
            Column("Assigned IPv6", "integer", ".status.assignedIPv6"),
            Column("Available IPv6", "integer", ".status.availableIPv6"),
            _AGE,
        ),
    ),
    CustomResource(
        BGPPeer,
        ("bgpp",),
        (
            Column("Address", "string", ".spec.peerAddress"),
            Column("My ASN", "integer", ".spec.myASN"),
            Column("Peer ASN", "integer", ".spec.peerASN"),
            Column("Port", "integer", ".spec.peerPort", priority=10),
            Column("Hold Time", "string", ".spec.holdTime", priority=10),
            _NODES,
            _AGE,
        ),
    ),
    CustomResource(
        BGPAdvertisement,
        ("bgpadv",),
        (
            _POOLS,
            Column("Peers", "string", ".spec.peers"),
            Column("Aggregation Length", "integer", ".spec.aggregationLength", priority=10),
            Column("Local Pref", "integer", ".spec.localPref", priority=10),
            Column("Communities", "string", ".spec.communities", priority=10),
            _NODES,
            _AGE,
        ),
    ),
    CustomResource(
        BFDProfile,
        ("bfdp",),
        (
            Column("Receive Interval", "integer", ".spec.receiveInterval"),
            Column("Transmit Interval", "integer", ".spec.transmitInterval"),
            Column("Detect Multiplier", "integer", ".spec.detectMultiplier"),
            Column("Passive", "boolean", ".spec.passiveMode", priority=10),
            Column("Minimum TTL", "integer", ".spec.minimumTtl", priority=10),
            _AGE,
        ),
    ),
    CustomResource(
        L2Advertisement,
        ("l2adv",),
        (_POOLS, Column("Interfaces", "string", ".spec.interfaces"), _NODES, _AGE),
    ),
    CustomResource(
        VIPAdvertisement,
        ("vipadv",),
        (
            _POOLS,
            Column("Interface", "string", ".spec.interface"),
            Column("First VRID", "integer", ".spec.vridRange.start"),
            Column("Last VRID", "integer", ".spec.vridRange.end"),
            _NODES,
            _AGE,
        ),
    ),
    CustomResource(
        OVNAdvertisement,
        ("ovnadv",),
        (
            _POOLS,
            Column("Gateway Routers", "string", ".spec.gatewayRouters[*].name"),
            Column("Logical Switches", "string", ".spec.logicalSwitches"),
            _AGE,
        ),
    ),
    CustomResource(
        Tenant,
        ("tenant",),
        (
            Column("Namespace", "string", ".spec.namespace"),
            Column("Modes", "string", ".spec.modes"),
            Column("Addresses", "integer", ".status.usage.addresses"),
            Column("Address Quota", "integer", ".spec.quotas.addresses"),
            Column("Load Balancers", "integer", ".status.usage.loadBalancers"),
            Column("Refused", "integer", ".status.refused", priority=10),
            Column("Node Networks", "string", ".spec.nodeNetworks", priority=10),
            _AGE,
        ),
    ),
    CustomResource(
        TenantNodes,
        ("tnodes",),
        (
            Column("Cluster", "string", ".spec.cluster"),
            Column("Refused", "integer", ".status.refused"),
            Column("Accepted", "string", '.status.conditions[?(@.type=="Accepted")].status'),
            _AGE,
        ),
    ),
    CustomResource(
        TenantLoadBalancer,
        ("tlb",),
        (
            Column("Cluster", "string", ".spec.source.cluster"),
            Column("Service", "string", ".spec.source.name"),
            Column("Addresses", "string", ".status.addresses"),
            Column("Accepted", "string", '.status.conditions[?(@.type=="Accepted")].status'),
            Column("Programmed", "string", '.status.conditions[?(@.type=="Programmed")].status'),
            Column("Reason", "string", '.status.conditions[?(@.type=="Accepted")].reason'),
            Column("Next Hops", "string", ".status.nextHops", priority=10),
            _AGE,
        ),
    ),
)


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as a Kubernetes structural OpenAPI v3 schema (no `$ref`)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return _structural(raw, defs)


def _structural(node: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        target = _structural(defs[ref.rsplit("/", 1)[-1]], defs)
        node = {**target, **node}  # the field's own description wins over the model's
    options = node.pop("anyOf", None)
    if options is not None:
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) != 1:
            raise ValueError(f"cannot express a union of {kept} in a structural schema")
        node = {**_structural(kept[0], defs), **node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "default":
            if isinstance(value, bool | int | float | str):
                out["default"] = value
        elif key == "additionalProperties":
            if isinstance(value, Mapping):
                out[key] = _structural(value, defs)
        elif key == "properties":
            out[key] = {name: _structural(prop, defs) for name, prop in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        else:
            out[key] = value
    return _ordered(out)


_KEY_ORDER = ("description", "type", "format", "enum", "default")


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    first = {k: node[k] for k in _KEY_ORDER if k in node}
    return {**first, **{k: v for k, v in node.items() if k not in first}}


def custom_resource_definition(kind: CustomResource) -> dict[str, Any]:
    """The CustomResourceDefinition object for one kind."""
    body = structural_schema(kind.model)
    properties = body["properties"]
    schema: dict[str, Any] = {
        "description": body.get("description", ""),
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": properties["spec"],
            "status": properties["status"],
        },
    }
    if "spec" in body.get("required", []):
        schema["required"] = ["spec"]
    singular = kind.name.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.name,
                "listKind": f"{kind.name}List",
                "plural": kind.plural,
                "singular": singular,
                "shortNames": list(kind.short_names),
                "categories": ["teapot-lb"],
            },
            "scope": kind.scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [c.to_crd() for c in kind.columns],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated sub-schemas out in full: no YAML anchors and aliases in a CRD."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(kind: CustomResource) -> str:
    """The CRD as YAML text, exactly as committed under deploy/crds/."""
    return HEADER + yaml.dump(
        custom_resource_definition(kind),
        Dumper=_PlainDumper,
        sort_keys=False,
        allow_unicode=True,
        width=100,
    )


def file_name(kind: CustomResource) -> str:
    return f"{GROUP}_{kind.plural}.yaml"


def write_all(directory: Path) -> list[Path]:
    """Write one YAML file per kind into `directory`; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in CUSTOM_RESOURCES:
        path = directory / file_name(kind)
        path.write_text(render(kind), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m teapot_lb.model.crd OUTPUT_DIR", file=sys.stderr)
        return 2
    for path in write_all(Path(argv[0])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
