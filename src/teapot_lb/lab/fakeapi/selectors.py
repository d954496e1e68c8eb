"""Label and field selectors, parsed and matched the way the API server does.

Label selector grammar (``k8s.io/apimachinery/pkg/labels``): comma-separated
requirements, each one of ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``,
``k notin (a,b)``, ``k`` (exists), ``!k`` (does not exist). ``!=`` and ``notin``
match objects that lack the label. Field selectors allow ``=``, ``==`` and ``!=`` on
the field labels the kind supports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Obj = dict[str, Any]
Matcher = Callable[[Obj], bool]


class SelectorError(ValueError):
    """An unparsable selector (the server answers 400 BadRequest)."""


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^)]*)\)$")
_EQ_RE = re.compile(rf"^({_KEY})\s*(==|!=|=)\s*(.*)$")
_EXISTS_RE = re.compile(rf"^(!?)\s*({_KEY})$")


def _label_requirement(req: str) -> Callable[[Mapping[str, str]], bool]:
    if m := _SET_RE.match(req):
        key, op, values_text = m.group(1), m.group(3), m.group(4)
        values = {v.strip() for v in values_text.split(",") if v.strip()}
        if not values:
            raise SelectorError(f"{req!r}: for 'in' and 'notin' at least one value is required")
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ_RE.match(req):
        key, op, value = m.group(1), m.group(3), m.group(4).strip()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: key in labels and labels[key] == value
    if m := _EXISTS_RE.match(req):
        negate, key = m.group(1) == "!", m.group(2)
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement: {req!r}")


def label_matcher(selector: str | None) -> Matcher:
    if not selector:
        return lambda obj: True
    reqs = [_label_requirement(r) for r in _split_top_level(selector)]

    def match(obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r(labels) for r in reqs)

    return match


def field_value(obj: Obj, path: str) -> str:
    """The string value of a dotted field path; missing fields read as ``""``."""
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return ""
        node = node[part]
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def field_matcher(selector: str | None, supported: frozenset[str]) -> Matcher:
    if not selector:
        return lambda obj: True
    checks: list[tuple[str, bool, str]] = []
    for req in _split_top_level(selector):
        m = re.match(r"^([A-Za-z0-9.]+)\s*(==|!=|=)\s*(.*)$", req)
        if not m:
            raise SelectorError(f"invalid field selector requirement: {req!r}")
        path, op, value = m.group(1), m.group(2), m.group(3).strip()
        if path not in supported:
            raise SelectorError(f'field label not supported: "{path}"')
        checks.append((path, op == "!=", value))

    def match(obj: Obj) -> bool:
        return all((field_value(obj, p) == v) != negate for p, negate, v in checks)

    return match
