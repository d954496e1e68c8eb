"""Loading manifests: directories, multi-document files, List objects, where things came from."""

from __future__ import annotations

from pathlib import Path

from teapot_lb.model import load
from teapot_lb.model.common import ObjectRef

POOL = """apiVersion: lb.teapot.io/v1alpha1
kind: AddressPool
metadata: {{name: {name}}}
spec: {{addresses: [{cidr}]}}
"""


def test_a_directory_is_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "pools.yml").write_text(POOL.format(name="b", cidr="192.0.2.0/25"))
    (tmp_path / "a.yaml").write_text(POOL.format(name="a", cidr="192.0.2.128/25"))
    (tmp_path / "notes.txt").write_text("not a manifest")
    manifest = load([tmp_path])
    assert [o.name for o in manifest.objects] == ["a", "b"]
    assert manifest.problems == []
    assert manifest.sources[ObjectRef("AddressPool", None, "b")].endswith("pools.yml, document 1")


def test_problems_name_the_file_and_document(tmp_path: Path) -> None:
    text = POOL.format(name="ok", cidr="192.0.2.0/24") + "---\n---\n"
    text += POOL.format(name="bad", cidr="192.0.2.1-192.0.2.0")
    (tmp_path / "pools.yaml").write_text(text)
    (problem,) = load([tmp_path]).problems
    assert problem.source == f"{tmp_path / 'pools.yaml'}, document 3"
    assert problem.ref == ObjectRef("AddressPool", None, "bad")


def test_list_objects_are_expanded(tmp_path: Path) -> None:
    items = POOL.format(name="a", cidr="192.0.2.0/25").replace("\n", "\n    ")
    (tmp_path / "list.yaml").write_text(f"apiVersion: v1\nkind: List\nitems:\n  - {items}\n")
    manifest = load([tmp_path / "list.yaml"])
    assert [o.name for o in manifest.objects] == ["a"]
    assert manifest.sources[ObjectRef("AddressPool", None, "a")].endswith("document 1, item 1")


def test_an_object_defined_twice_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text(POOL.format(name="a", cidr="192.0.2.0/25"))
    (tmp_path / "two.yaml").write_text(POOL.format(name="a", cidr="198.51.100.0/25"))
    (problem,) = load([tmp_path]).problems
    assert "defined twice (first in" in problem.message and "one.yaml" in problem.message


def test_a_document_that_is_not_a_mapping_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("- just\n- a list\n")
    (problem,) = load([tmp_path]).problems
    assert "expected a Kubernetes object" in problem.message


def test_empty_yaml_values_read_as_empty_like_kubectl(tmp_path: Path) -> None:
    (tmp_path / "l2.yaml").write_text(
        "apiVersion: lb.teapot.io/v1alpha1\nkind: L2Advertisement\n"
        "metadata:\n  name: all\n  labels:\nspec:\n"
    )
    manifest = load([tmp_path])
    assert manifest.problems == []
    assert manifest.objects[0].metadata.labels == {}
