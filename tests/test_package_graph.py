"""The import graph of src/teapot_lb's packages (scripts/package_graph.py prints it).

Issue 36's goal is no package cycle at all. Until the Teapot half is cut along its layers,
the cycles that exist are written here and may only shrink: a package that joins a cycle,
or a new cycle, fails this test. Remove a group (or a package from it) when a change
breaks it; the test then holds the smaller graph.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]

KNOWN_CYCLES = [
    ["announce", "controller", "gateway", "ovn", "speaker", "standalone", "tenancy", "validation"],
    ["cluster", "kube", "model"],
]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "package_graph", ROOT / "scripts" / "package_graph.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_package_joins_a_cycle_and_no_new_cycle_appears() -> None:
    graph = _script()
    found = graph.cycles(graph.package_graph(ROOT / "src" / "teapot_lb"))
    for group in found:
        assert any(set(group) <= set(known) for known in KNOWN_CYCLES), (
            f"a new package cycle among {group}: scripts/package_graph.py shows the imports"
        )


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
