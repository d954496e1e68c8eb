"""A tiny renderer for the subset of Helm's Go templates our chart uses (helm is not
installed here). What it supports is what deploy/helm/teapot-lb/values.yaml promises:

- `{{ .Values.a.b }}`, `{{ .Release.Name }}`, `{{ .Release.Namespace }}`,
  `{{ .Chart.AppVersion }}`, string and integer literals;
- pipelines with `default X`, `quote`, `toYaml`, `nindent N`, `indent N`, and `not X`;
- `{{ if X }}` / `{{ else }}` / `{{ end }}`, and `{{-` / `-}}` whitespace trimming;
- `{{/* comments */}}`.

Anything else raises, so a template that uses more than this fails the tests instead of
rendering wrongly. It proves the templates render to the YAML we test with this subset's
semantics; it does not prove helm itself renders them identically.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "teapot-lb"
_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


class TemplateError(Exception):
    pass


@dataclass
class _If:
    condition: str
    then: list[Any] = field(default_factory=list)
    otherwise: list[Any] = field(default_factory=list)
    in_else: bool = False


def _parse(text: str) -> list[Any]:
    """Text pieces and actions, with trimming applied; `if` blocks nested."""
    pieces: list[Any] = []
    pos = 0
    for match in _ACTION.finditer(text):
        before = text[pos : match.start()]
        if match.group(1):
            before = before.rstrip()
        pieces.append(before)
        pieces.append(("action", match.group(2)))
        pos = match.end()
        if match.group(3):
            rest = text[pos:]
            pos += len(rest) - len(rest.lstrip())
    pieces.append(text[pos:])
    root: list[Any] = []
    stack: list[tuple[list[Any], _If | None]] = [(root, None)]
    for piece in pieces:
        current = stack[-1][0]
        if isinstance(piece, str):
            current.append(piece)
            continue
        body = piece[1]
        if body.startswith("/*"):
            continue
        if body.startswith("if "):
            block = _If(body[3:].strip())
            current.append(block)
            stack.append((block.then, block))
        elif body == "else":
            block_or_none = stack[-1][1]
            if block_or_none is None or block_or_none.in_else:
                raise TemplateError("else without if")
            block_or_none.in_else = True
            stack[-1] = (block_or_none.otherwise, block_or_none)
        elif body == "end":
            if len(stack) == 1:
                raise TemplateError("end without if")
            stack.pop()
        else:
            current.append(("expr", body))
    if len(stack) != 1:
        raise TemplateError("if without end")
    return root


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and not (
        isinstance(value, Mapping | list) and not value
    )


def _to_yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=False).rstrip("\n")


def _indent(n: int, text: str) -> str:
    return "\n".join(" " * n + line if line else line for line in str(text).split("\n"))


class Renderer:
    def __init__(self, context: Mapping[str, Any]) -> None:
        self.context = context

    def term(self, token: str) -> Any:
        if token.startswith("."):
            value: Any = self.context
            for part in token[1:].split("."):
                if not isinstance(value, Mapping):
                    raise TemplateError(f"{token}: {part} of a non-map")
                value = value.get(part)
            return value
        if token.startswith('"'):
            return json.loads(token)
        if token.isdigit():
            return int(token)
        raise TemplateError(f"unsupported term {token!r}")

    def call(self, name: str, args: list[Any]) -> Any:
        match name, args:
            case "default", [fallback, value]:
                return value if _truthy(value) else fallback
            case "quote", [value]:
                return json.dumps("" if value is None else str(value))
            case "toYaml", [value]:
                return _to_yaml(value)
            case "nindent", [int() as n, value]:
                return "\n" + _indent(n, value)
            case "indent", [int() as n, value]:
                return _indent(n, value)
            case "not", [value]:
                return not _truthy(value)
        raise TemplateError(f"unsupported function {name} with {len(args)} argument(s)")

    def pipeline(self, text: str) -> Any:
        value: Any = None
        for i, stage in enumerate(part.strip() for part in text.split("|")):
            tokens = shlex.split(stage, posix=False)
            if i == 0 and len(tokens) == 1:
                value = self.term(tokens[0])
                continue
            args = [self.term(t) for t in tokens[1:]]
            value = self.call(tokens[0], args if i == 0 else [*args, value])
        return value

    def render(self, nodes: list[Any]) -> str:
        out: list[str] = []
        for node in nodes:
            if isinstance(node, str):
                out.append(node)
            elif isinstance(node, _If):
                branch = node.then if _truthy(self.pipeline(node.condition)) else node.otherwise
                out.append(self.render(branch))
            else:
                value = self.pipeline(node[1])
                if isinstance(value, Mapping | list):
                    raise TemplateError(f"{node[1]!r} prints a map or list; use toYaml")
                out.append("" if value is None else _scalar(value))
        return "".join(out)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _merge(base: Any, override: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base.get(key), value)
        return merged
    return override


def render_chart(
    values: Mapping[str, Any] | None = None,
    *,
    namespace: str = "teapot-lb-system",
    release: str = "teapot-lb",
    chart: Path = CHART,
) -> dict[str, str]:
    """Every template rendered: `{template file name: YAML text}`."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    defaults = yaml.safe_load((chart / "values.yaml").read_text())
    context = {
        "Values": _merge(defaults, values or {}),
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm"},
        "Chart": {
            "Name": meta["name"],
            "Version": meta["version"],
            "AppVersion": meta["appVersion"],
        },
    }
    renderer = Renderer(context)
    return {
        path.name: renderer.render(_parse(path.read_text()))
        for path in sorted((chart / "templates").glob("*.yaml"))
    }


def render_objects(values: Mapping[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """The rendered chart as Kubernetes objects (empty documents dropped)."""
    objects: list[dict[str, Any]] = []
    for text in render_chart(values, **kwargs).values():
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def render_manifest(values: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    """One multi-document YAML file, as `helm template` would print it."""
    parts = []
    for name, text in render_chart(values, **kwargs).items():
        for doc in re.split(r"^---\s*$", text, flags=re.M):
            if doc.strip():
                parts.append(f"---\n# Source: teapot-lb/templates/{name}\n{doc.strip()}\n")
    return "".join(parts)
