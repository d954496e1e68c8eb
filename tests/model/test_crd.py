"""CRDs are generated from the models: structural, no $ref, committed copies up to date."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from teapot_lb.model.crd import (
    CUSTOM_RESOURCES,
    CustomResource,
    custom_resource_definition,
    file_name,
    render,
)

CRD_DIR = Path(__file__).resolve().parents[2] / "deploy" / "crds"
ALLOWED_KEYS = {
    "description", "type", "format", "enum", "default", "properties", "required", "items",
    "additionalProperties", "minimum", "maximum", "minLength", "maxLength", "pattern",
    "minItems", "maxItems",
}  # fmt: skip


def schema_nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from schema_nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from schema_nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_nodes(node["additionalProperties"], f"{path}{{}}")


def openapi(kind: CustomResource) -> dict[str, Any]:
    schema: dict[str, Any] = custom_resource_definition(kind)["spec"]["versions"][0]["schema"]
    return schema["openAPIV3Schema"]


@pytest.mark.parametrize("kind", CUSTOM_RESOURCES, ids=lambda k: k.name)
def test_schema_is_structural(kind: CustomResource) -> None:
    for path, node in schema_nodes(openapi(kind)):
        assert "type" in node, f"{kind.name}{path} has no type"
        assert set(node) <= ALLOWED_KEYS, f"{kind.name}{path}: {set(node) - ALLOWED_KEYS}"


@pytest.mark.parametrize("kind", CUSTOM_RESOURCES, ids=lambda k: k.name)
def test_committed_crd_matches_the_model(kind: CustomResource) -> None:
    committed = (CRD_DIR / file_name(kind)).read_text(encoding="utf-8")
    assert committed == render(kind), "run scripts/gen-crds.sh and commit deploy/crds"


@pytest.mark.parametrize("kind", CUSTOM_RESOURCES, ids=lambda k: k.name)
def test_rendered_yaml_has_no_anchors_and_has_a_status_subresource(kind: CustomResource) -> None:
    crd = yaml.safe_load(render(kind))
    version = crd["spec"]["versions"][0]
    assert (crd["spec"]["group"], version["name"]) == ("lb.teapot.io", "v1alpha1")
    assert version["subresources"] == {"status": {}}
    assert "&id" not in render(kind)


def test_address_pool_schema_validates_what_openapi_can() -> None:
    pool = next(k for k in CUSTOM_RESOURCES if k.name == "AddressPool")
    spec = openapi(pool)["properties"]["spec"]
    assert spec["required"] == ["addresses"]
    assert spec["properties"]["autoAssign"]["default"] is True
    status = openapi(pool)["properties"]["status"]["properties"]
    assert {"assignedIPv4", "availableIPv4", "assignedIPv6", "availableIPv6"} <= status.keys()
    columns = [c["name"] for c in custom_resource_definition(pool)["spec"]["versions"][0][
        "additionalPrinterColumns"]]  # fmt: skip
    assert columns[:4] == ["Addresses", "Auto Assign", "Avoid Buggy IPs", "Assigned IPv4"]


def test_peer_schema_bounds_asns_and_ports() -> None:
    peer = next(k for k in CUSTOM_RESOURCES if k.name == "BGPPeer")
    spec = openapi(peer)["properties"]["spec"]["properties"]
    assert (spec["myASN"]["minimum"], spec["myASN"]["maximum"]) == (1, 4294967295)
    assert spec["peerPort"]["maximum"] == 65535
    assert "pattern" in spec["holdTime"]


def test_vip_schema_bounds_vrids() -> None:
    vip = next(k for k in CUSTOM_RESOURCES if k.name == "VIPAdvertisement")
    vrid = openapi(vip)["properties"]["spec"]["properties"]["vridRange"]["properties"]
    assert (vrid["start"]["minimum"], vrid["end"]["maximum"]) == (1, 255)
