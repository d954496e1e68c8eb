#!/usr/bin/env python3
"""Print the import graph of src/teapot_lb's packages and every cycle in it.

Usage: scripts/package_graph.py [--dot]

A line per package: the packages it imports (a top-level module such as
``teapot_lb.log`` counts as a package of its own; imports under ``if TYPE_CHECKING:``
count too, they are still a dependency a reader follows). Exit status 1 when the graph has
a cycle, an import against the layer order (``LAYERS``) or a package in no layer.
tests/test_package_graph.py holds the rule.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "teapot_lb"

# The allowed direction, written once: a package imports only packages of its own layer or
# of a layer above it in this list (lowest first). The same picture as docs/architecture.md.
LAYERS: list[tuple[str, frozenset[str]]] = [
    (
        "foundations",
        frozenset(
            {
                "addresses",
                "httpserve",
                "kept",
                "log",
                "longlived",
                "metrics_table",
                "netlab",
                "timers",
            }
        ),
    ),
    ("the Kubernetes API (client, resources)", frozenset({"kube"})),
    ("the object model", frozenset({"model"})),
    ("the shared cache", frozenset({"cluster"})),
    (
        "protocols and IPAM (sans-I/O machines, their transports)",
        frozenset({"bfd", "bgp", "ipam", "l2", "membership", "sim", "vrrp"}),
    ),
    ("Teapot tenancy's pure core", frozenset({"tenancy"})),
    ("configuration validation", frozenset({"validation"})),
    ("the controller", frozenset({"controller"})),
    ("OVN mode", frozenset({"ovn"})),
    ("who announces what", frozenset({"announce"})),
    ("the speaker and its backends", frozenset({"speaker"})),
    ("standalone mode", frozenset({"standalone"})),
    ("the gateway (data plane, control plane)", frozenset({"gateway"})),
    ("tenant load-balancer providers", frozenset({"providers"})),
    (
        "Teapot processes, providers and front ends",
        frozenset({"manager", "octavia", "relay", "status", "tenant_agent", "webhook"}),
    ),
    ("the lab", frozenset({"lab"})),
    ("the command line", frozenset({"cli"})),
]


def _package(module: str) -> str | None:
    """``teapot_lb.bgp.wire.update`` -> ``bgp``; None outside teapot_lb."""
    parts = module.split(".")
    return parts[1] if parts[0] == "teapot_lb" and len(parts) > 1 else None


def _imports(path: Path, module: str) -> Iterator[str]:
    """The absolute names of the modules ``path`` (module ``module``) imports."""
    tree = ast.parse(path.read_text(), str(path))
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            yield name
            # `from teapot_lb import bgp` imports a package by its name.
            yield from (f"{name}.{alias.name}" for alias in node.names if name == "teapot_lb")


def package_graph(src: Path = SRC) -> dict[str, set[str]]:
    """package -> the other packages its modules import."""
    graph: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.py")):
        relative = path.relative_to(src.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
        source = _package(module)
        if source is None:
            continue
        targets = graph.setdefault(source, set())
        for imported in _imports(path, module):
            target = _package(imported)
            if target is None or target == source:
                continue
            if (src / target).is_dir() or (src / f"{target}.py").is_file():
                targets.add(target)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one package (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def layer_of(package: str, layers: list[tuple[str, frozenset[str]]] = LAYERS) -> int | None:
    """The index of `package`'s layer in `layers` (0: lowest); None when it is in none."""
    return next((i for i, (_, members) in enumerate(layers) if package in members), None)


def layer_breaches(
    graph: Mapping[str, set[str]], layers: list[tuple[str, frozenset[str]]] = LAYERS
) -> list[str]:
    """Every package in no layer, and every import of a package from a higher layer."""
    found = [f"{p}: in no layer of LAYERS" for p in sorted(graph) if layer_of(p, layers) is None]
    for source, targets in sorted(graph.items()):
        here = layer_of(source, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if here is not None and there is not None and there > here:
                found.append(
                    f"{source} ({layers[here][0]}) imports {target} ({layers[there][0]}),"
                    " a higher layer"
                )
    return found


def main(argv: list[str]) -> int:
    graph = package_graph()
    if "--dot" in argv:
        print("digraph teapot_lb {")
        for source, targets in sorted(graph.items()):
            for target in sorted(targets):
                print(f'  "{source}" -> "{target}";')
        print("}")
    else:
        for source, targets in sorted(graph.items()):
            print(f"{source:<16} -> {', '.join(sorted(targets)) or '-'}")
    found = cycles(graph)
    for group in found:
        print("cycle among: " + ", ".join(group), file=sys.stderr)
    breaches = layer_breaches(graph)
    for breach in breaches:
        print(breach, file=sys.stderr)
    return 1 if found or breaches else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
