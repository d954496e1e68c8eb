"""The import graph of src/teapot_lb's packages (scripts/package_graph.py prints it).

No package cycle, and every import goes down the layer list written once in
scripts/package_graph.py (``LAYERS``, the picture of docs/architecture.md): a new package
is placed in a layer, and an import that goes up names both packages and their layers.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "package_graph", ROOT / "scripts" / "package_graph.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_packages_have_no_cycle() -> None:
    graph = _script()
    found = graph.cycles(graph.package_graph(ROOT / "src" / "teapot_lb"))
    assert found == [], f"package cycles {found}: scripts/package_graph.py shows the imports"


def test_every_package_is_in_a_layer_and_imports_only_its_own_or_lower_layers() -> None:
    graph = _script()
    assert graph.layer_breaches(graph.package_graph(ROOT / "src" / "teapot_lb")) == []


def test_the_layer_check_names_an_upward_import_and_an_unplaced_package() -> None:
    graph = _script()
    layers = [("low", frozenset({"a"})), ("high", frozenset({"b", "c"}))]
    assert graph.layer_breaches({"a": set(), "b": {"a", "c"}, "c": set()}, layers) == []
    assert graph.layer_breaches({"a": {"b"}, "b": set(), "d": set()}, layers) == [
        "d: in no layer of LAYERS",
        "a (low) imports b (high), a higher layer",
    ]


def test_each_package_is_in_one_layer_only() -> None:
    graph = _script()
    names = [p for _, members in graph.LAYERS for p in members]
    assert len(names) == len(set(names))


def test_the_cycle_finder_finds_a_cycle_and_only_that() -> None:
    graph = _script()
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert graph.cycles(edges) == [["a", "b", "c"]]
    assert graph.cycles({"a": {"b"}, "b": set()}) == []


def test_relative_and_absolute_imports_are_both_counted(tmp_path: Path) -> None:
    graph = _script()
    src = tmp_path / "teapot_lb"
    for package in ("one", "two", "three"):
        (src / package).mkdir(parents=True)
        (src / package / "__init__.py").write_text("")
    (src / "log.py").write_text("")
    (src / "one" / "a.py").write_text("from ..two import x\nimport teapot_lb.log\n")
    (src / "two" / "b.py").write_text("from teapot_lb import three\n")
    assert graph.package_graph(src) == {
        "one": {"two", "log"},
        "two": {"three"},
        "three": set(),
        "log": set(),
    }
