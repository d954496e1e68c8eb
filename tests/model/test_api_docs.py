"""docs/api.md documents every field of every kind (so the reference cannot fall behind)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.model.crd import CUSTOM_RESOURCES, CustomResource, structural_schema

DOC = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")


def field_paths(node: dict[str, Any], path: str) -> Iterator[str]:
    """Dotted paths of object fields (not descending into list items such as selectors)."""
    for name, child in node.get("properties", {}).items():
        yield f"{path}.{name}"
        yield from field_paths(child, f"{path}.{name}")


@pytest.mark.parametrize("kind", CUSTOM_RESOURCES, ids=lambda k: k.name)
def test_every_field_is_in_the_api_reference(kind: CustomResource) -> None:
    schema = structural_schema(kind.model)["properties"]
    paths = [*field_paths(schema["spec"], "spec"), *field_paths(schema["status"], "status")]
    missing = [p for p in paths if p not in DOC and p != "status.conditions"]
    assert f"## {kind.name}" in DOC
    assert not missing, f"docs/api.md does not mention {missing}"
