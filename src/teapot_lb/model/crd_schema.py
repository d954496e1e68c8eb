"""A CustomResourceDefinition's schema applied to an object as the API server applies it.

For objects that never pass an API server (standalone manifests, `teapot-lb validate`) and
for the webhook, which may face a cluster with older CRDs: the upstream CRD is the one
source of truth, read as it is, never copied into hand-written checks. In the API server's
order (apiextensions-apiserver): unknown fields and nulls pruned, `default`s applied, then
the OpenAPI value checks (type, required, enum, lengths, pattern, items, bounds, formats,
list uniqueness, oneOf/anyOf/not) and, when those pass, the CEL rules of
`x-kubernetes-validations` on every node present, each with its message at its field path.

CEL is evaluated by `common-expression-language` (the `cel` module) with the Kubernetes
library functions the rules use that it lacks (`isIP`; `split`/`substring` from its own
strings extension). A rule that names a function neither provides is *unevaluable*:
:meth:`CrdSchema.unevaluable` lists it, and the callers report it (it is never skipped
silently). Transition rules (`oldSelf`) only run on an update of a correlated value (the
webhook's old object); on a create, and for manifests, they are skipped as the API server
skips them.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


def _is_ip(value: str) -> bool:
    """Kubernetes' `isIP`: an IPv4 or IPv6 address, no zone, not IPv4-mapped IPv6."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    return not (
        isinstance(address, ipaddress.IPv6Address)
        and (address.scope_id is not None or address.ipv4_mapped is not None)
    )


@functools.cache
def _cel() -> ModuleType:
    """The interpreter, imported on first use: its package imports its command line (rich,
    typer: 0.6 s and some MB), which only processes that meet Gateway API objects pay."""
    import cel

    return cel


@functools.cache
def _extensions() -> dict[str, Callable[..., Any]]:
    """Functions of the Kubernetes CEL environment the interpreter lacks, by name."""
    from cel import stdlib

    return {"isIP": _is_ip, **stdlib.EXTENSIONS["strings"]}


# What the interpreter evaluates itself (standard definitions, each tried by a test;
# operators are `_x_`, `!_`, `@in`...). Macros (`has`, `all`, `exists`, `exists_one`,
# `filter`, `map`) are expanded when compiling and are not listed as functions.
_BUILT_IN = frozenset(
    {
        "size", "matches", "contains", "startsWith", "endsWith", "duration", "timestamp",
        "int", "uint", "double", "string", "bytes", "type", "dyn",
    }
)  # fmt: skip


def _evaluable(function: str) -> bool:
    return function in _BUILT_IN or function in _extensions() or not function[0].isalpha()


@dataclass(frozen=True)
class FieldError:
    """A value the schema refuses: the field path (`spec.rules[0].matches[0]`) and why."""

    path: str
    message: str


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry, compiled once."""

    source: str
    message: str
    program: Any  # cel.Program (the stub types `compile` only)
    functions: tuple[str, ...]
    transition: bool
    missing: tuple[str, ...]  # functions neither the interpreter nor we provide

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Rule:
        source = str(entry["rule"])
        program = _cel().compile(source)
        functions = tuple(program.functions())
        return cls(
            source,
            str(entry.get("message") or f"failed rule: {source}"),
            program,
            tuple(f for f in functions if f in _extensions()),
            "oldSelf" in program.variables(),
            tuple(f for f in functions if not _evaluable(f)),
        )


@dataclass(frozen=True)
class Batch:
    """A node's rules without `oldSelf` as one program (a list of their results): one
    binding of `self` and one run per node instead of one per rule (binding a value is
    most of a rule's cost)."""

    rules: tuple[Rule, ...]
    program: Any  # cel.Program
    functions: tuple[str, ...]

    @classmethod
    def of(cls, rules: tuple[Rule, ...]) -> Batch | None:
        plain = tuple(r for r in rules if not r.transition and not r.missing)
        if not plain:
            return None
        program = _cel().compile("[" + ", ".join(f"({r.source})" for r in plain) + "]")
        functions = tuple(sorted({f for r in plain for f in r.functions}))
        return cls(plain, program, functions)


_local = threading.local()


def _run(key: str, program: Any, functions: tuple[str, ...], **variables: object) -> object:
    """`program` with `variables` bound; one Context per program and thread (a Context is
    not thread-safe, and registering its functions anew costs more than a rule)."""
    contexts: dict[str, Any] | None = getattr(_local, "contexts", None)  # cel.Context
    if contexts is None:
        contexts = _local.contexts = {}
    context = contexts.get(key)
    if context is None:
        context = contexts[key] = _cel().Context()
        for name in functions:
            context.add_function(name, _extensions()[name])
    for name, value in variables.items():
        context.add_variable(name, value)
    return program.execute(context)


_ABSENT = object()

# Property names CEL reserves: a rule reads `namespace` as `self.__namespace__`
# (Kubernetes' escaping of property names, apiserver/schema/cel/model/escaping.go).
_RESERVED = frozenset(
    {
        "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
        "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
        "void", "while",
    }
)  # fmt: skip
_ESCAPES = (("__", "__underscores__"), (".", "__dot__"), ("-", "__dash__"), ("/", "__slash__"))


def _escaped(name: str) -> str:
    """The name a CEL rule uses for property `name`."""
    if name in _RESERVED:
        return f"__{name}__"
    for plain, escape in _ESCAPES:
        name = name.replace(plain, escape)
    return name


@dataclass
class Node:
    """One schema node, compiled: what the API server reads of it."""

    type: str | None = None
    properties: dict[str, Node] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    items: Node | None = None
    additional: Node | None = None  # additionalProperties: a map's values
    preserve_unknown: bool = False
    default: object = _ABSENT
    enum: tuple[object, ...] | None = None
    max_length: int | None = None
    min_length: int | None = None
    pattern: re.Pattern[str] | None = None
    max_items: int | None = None
    min_items: int | None = None
    max_properties: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    format: str | None = None
    list_type: str | None = None
    map_keys: tuple[str, ...] = ()
    one_of: tuple[Node, ...] = ()
    any_of: tuple[Node, ...] = ()
    not_: Node | None = None
    rules: tuple[Rule, ...] = ()
    batch: Batch | None = None
    escapes: bool = False  # a property name below is escaped for CEL (`__namespace__`)
    cel_names: dict[str, str] = field(default_factory=dict)  # property -> its CEL name
    ruled: bool = False  # this node or one below has rules (the CEL walk skips the rest)

    @classmethod
    def of(cls, schema: Mapping[str, Any]) -> Node:
        extra = schema.get("additionalProperties")
        pattern = schema.get("pattern")
        node = cls(
            type=schema.get("type"),
            properties={k: cls.of(v) for k, v in (schema.get("properties") or {}).items()},
            required=tuple(schema.get("required") or ()),
            items=cls.of(schema["items"]) if "items" in schema else None,
            additional=cls.of(extra) if isinstance(extra, Mapping) else None,
            preserve_unknown=bool(schema.get("x-kubernetes-preserve-unknown-fields")),
            default=schema.get("default", _ABSENT),
            enum=tuple(schema["enum"]) if "enum" in schema else None,
            max_length=schema.get("maxLength"),
            min_length=schema.get("minLength"),
            pattern=re.compile(pattern) if pattern is not None else None,
            max_items=schema.get("maxItems"),
            min_items=schema.get("minItems"),
            max_properties=schema.get("maxProperties"),
            minimum=schema.get("minimum"),
            maximum=schema.get("maximum"),
            format=schema.get("format"),
            list_type=schema.get("x-kubernetes-list-type"),
            map_keys=tuple(schema.get("x-kubernetes-list-map-keys") or ()),
            one_of=tuple(cls.of(s) for s in schema.get("oneOf") or ()),
            any_of=tuple(cls.of(s) for s in schema.get("anyOf") or ()),
            not_=cls.of(schema["not"]) if "not" in schema else None,
            rules=tuple(Rule.of(e) for e in schema.get("x-kubernetes-validations") or ()),
        )
        node.batch = Batch.of(node.rules)
        below = [*node.properties.values(), node.items, node.additional]
        node.cel_names = {name: _escaped(name) for name in node.properties}
        node.escapes = any(k != v for k, v in node.cel_names.items()) or any(
            child.escapes for child in below if child is not None
        )
        node.ruled = bool(node.rules) or any(c.ruled for c in below if c is not None)
        return node

    def cel_value(self, value: object) -> object:
        """`value` as the rules see it: object properties under their escaped names."""
        if not self.escapes:
            return value
        if isinstance(value, Mapping):
            out: dict[str, object] = {}
            for key, item in value.items():
                child = self.properties.get(key)
                if child is not None:
                    out[self.cel_names[key]] = child.cel_value(item)
                else:  # a map's key stays as it is
                    out[key] = self.additional.cel_value(item) if self.additional else item
            return out
        if isinstance(value, list) and self.items is not None:
            return [self.items.cel_value(item) for item in value]
        return value

    def walk(self, path: str = "") -> Iterator[tuple[str, Rule]]:
        """Every rule below this node, with the field path it applies at (`[*]`: each item)."""
        for rule in self.rules:
            yield path or "<root>", rule
        for name, child in self.properties.items():
            yield from child.walk(f"{path}.{name}" if path else name)
        if self.items is not None:
            yield from self.items.walk(f"{path}[*]")
        if self.additional is not None:
            yield from self.additional.walk(f"{path}[*]")


# --------------------------------------------------------------------------- prune, default


def _pruned(node: Node, value: object) -> object:
    """A copy without nulls and without the fields the schema does not know."""
    if isinstance(value, Mapping):
        out: dict[str, object] = {}
        for key, item in value.items():
            if item is None:
                continue
            child = node.properties.get(key) or node.additional
            if child is not None:
                out[key] = _pruned(child, item)
            elif node.preserve_unknown:
                out[key] = copy.deepcopy(item)
        return out
    if isinstance(value, list):
        return [_pruned(node.items, v) if node.items is not None else v for v in value]
    return value


def _defaulted(node: Node, value: object) -> None:
    """Applies the schema's defaults in place, top down (a default is defaulted too)."""
    if isinstance(value, dict):
        for key, child in node.properties.items():
            if key not in value and child.default is not _ABSENT:
                value[key] = copy.deepcopy(child.default)
            if key in value:
                _defaulted(child, value[key])
        if node.additional is not None:
            for key in value:
                if key not in node.properties:
                    _defaulted(node.additional, value[key])
    elif isinstance(value, list) and node.items is not None:
        for item in value:
            _defaulted(node.items, item)


# --------------------------------------------------------------------------- value checks

_TYPES: dict[str, Callable[[object], bool]] = {
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def _format_error(fmt: str, value: object) -> str | None:
    if fmt == "int32" and isinstance(value, int) and not -(2**31) <= value < 2**31:
        return "must fit in 32 bits (int32)"
    if fmt in ("ipv4", "ipv6") and isinstance(value, str):
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return f"must be an {fmt.upper()} address"
        if address.version != int(fmt[-1]):
            return f"must be an {fmt.upper()} address"
    return None


def _quoted(values: tuple[object, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _at(path: str, key: str | int) -> str:
    """The field path of `key` under `path` (`spec.rules[0]`, a map key as `[a/b]`)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def _value_errors(node: Node, value: object, path: str) -> Iterator[FieldError]:
    """The OpenAPI checks of `value` and everything under it (no CEL)."""
    if node.type is not None and not _TYPES[node.type](value):
        yield FieldError(path, f"must be of type {node.type}, not {type(value).__name__}")
        return
    if node.enum is not None and value not in node.enum:
        yield FieldError(path, f'unsupported value "{value}": supported values: '
                         f"{_quoted(node.enum)}")  # fmt: skip
    if isinstance(value, str):
        if node.max_length is not None and len(value) > node.max_length:
            yield FieldError(path, f"may not be longer than {node.max_length} characters"
                             f" (is {len(value)})")  # fmt: skip
        if node.min_length is not None and len(value) < node.min_length:
            yield FieldError(path, f"must be at least {node.min_length} character(s) long")
        if node.pattern is not None and not node.pattern.search(value):
            yield FieldError(path, f'"{value}" should match "{node.pattern.pattern}"')
    if isinstance(value, int | float) and not isinstance(value, bool):
        if node.minimum is not None and value < node.minimum:
            yield FieldError(path, f"must be greater than or equal to {node.minimum}")
        if node.maximum is not None and value > node.maximum:
            yield FieldError(path, f"must be less than or equal to {node.maximum}")
    if node.format is not None:
        wrong = _format_error(node.format, value)
        if wrong:
            yield FieldError(path, wrong)
    if node.one_of and sum(_matches(s, value) for s in node.one_of) != 1:
        yield FieldError(path, "must match exactly one of the schemas in oneOf")
    if node.any_of and not any(_matches(s, value) for s in node.any_of):
        yield FieldError(path, "must match at least one of the schemas in anyOf")
    if node.not_ is not None and _matches(node.not_, value):
        yield FieldError(path, "must not match the schema in not")
    if isinstance(value, Mapping):
        for key in node.required:
            if key not in value:
                yield FieldError(_at(path, key), "Required value")
        if node.max_properties is not None and len(value) > node.max_properties:
            yield FieldError(path, f"must have at most {node.max_properties} entries")
        for key, item in value.items():
            child = node.properties.get(key) or node.additional
            if child is not None:
                yield from _value_errors(child, item, _at(path, key))
    elif isinstance(value, list):
        if node.max_items is not None and len(value) > node.max_items:
            yield FieldError(path, f"must have at most {node.max_items} items (has {len(value)})")
        if node.min_items is not None and len(value) < node.min_items:
            yield FieldError(path, f"must have at least {node.min_items} item(s)")
        yield from _duplicates(node, value, path)
        if node.items is not None:
            for index, item in enumerate(value):
                yield from _value_errors(node.items, item, _at(path, index))


def _duplicates(node: Node, value: list[object], path: str) -> Iterator[FieldError]:
    """Items repeated in a `set` list, or keys repeated in a `map` list."""
    if node.list_type not in ("set", "map"):
        return
    seen: list[object] = []
    for index, item in enumerate(value):
        if node.list_type == "map" and isinstance(item, Mapping):
            key: object = ", ".join(f"{k}={item.get(k)!r}" for k in node.map_keys)
        else:
            key = item
        if key in seen:
            yield FieldError(_at(path, index), f"duplicate value: {key}")
        seen.append(key)


def _matches(node: Node, value: object) -> bool:
    return next(_value_errors(node, value, ""), None) is None


# --------------------------------------------------------------------------- CEL


def _old_item(node: Node, old: object, item: object) -> object:
    """The old list item correlated with `item`: by its keys in a `map` list; none else
    (atomic lists and sets do not correlate, as in the API server)."""
    if node.list_type != "map" or not isinstance(old, list) or not isinstance(item, Mapping):
        return _ABSENT
    key = tuple(item.get(k) for k in node.map_keys)
    for candidate in old:
        if isinstance(candidate, Mapping) and tuple(candidate.get(k) for k in node.map_keys) == key:
            return candidate
    return _ABSENT


def _failed(rule: Rule, result: object, path: str) -> Iterator[FieldError]:
    if result is not True:
        yield FieldError(path or "<root>", rule.message)


def _rule_errors(node: Node, value: object, path: str, old: object) -> Iterator[FieldError]:
    seen = node.cel_value(value) if node.rules else value
    batch, results = node.batch, None
    if batch is not None:
        try:
            results = _run(batch.program.source, batch.program, batch.functions, self=seen)
        except Exception:  # one rule failed to evaluate: each alone says which, below
            results = None
        if isinstance(results, list):
            for rule, result in zip(batch.rules, results, strict=True):
                yield from _failed(rule, result, path)
    for rule in node.rules:
        if rule.missing or (rule.transition and old is _ABSENT):
            continue  # unevaluable: reported by CrdSchema.unevaluable; transition: no old
        if isinstance(results, list) and not rule.transition:
            continue  # its result came with the batch
        variables = {"self": seen}
        if rule.transition:
            variables["oldSelf"] = node.cel_value(old)
        try:
            result = _run(rule.source, rule.program, rule.functions, **variables)
        except Exception as err:  # the interpreter raises plain RuntimeError/ValueError
            # As the API server says it: the error, then the rule's message.
            yield FieldError(path or "<root>", f"{err} evaluating rule: {rule.message}")
            continue
        yield from _failed(rule, result, path)
    if isinstance(value, Mapping):
        for key, item in value.items():
            child = node.properties.get(key) or node.additional
            if child is not None and child.ruled:
                before = old.get(key, _ABSENT) if isinstance(old, Mapping) else _ABSENT
                yield from _rule_errors(child, item, _at(path, key), before)
    elif isinstance(value, list) and node.items is not None and node.items.ruled:
        for index, item in enumerate(value):
            before = _old_item(node, old, item)
            yield from _rule_errors(node.items, item, _at(path, index), before)


# --------------------------------------------------------------------------- the schema


@dataclass(frozen=True)
class CrdSchema:
    """The schema of one version of a CRD, compiled."""

    kind: str
    version: str
    root: Node

    @classmethod
    def of(cls, crd: Mapping[str, Any], version: str) -> CrdSchema:
        kind = str(crd["spec"]["names"]["kind"])
        for entry in crd["spec"]["versions"]:
            if entry["name"] == version:
                return cls(kind, version, Node.of(entry["schema"]["openAPIV3Schema"]))
        raise KeyError(f"{kind} has no version {version}")

    def check(
        self, body: Mapping[str, Any], old: Mapping[str, Any] | None = None
    ) -> list[FieldError]:
        """What the API server would refuse of `body` on a create (`old` None) or an
        update. `status` is left out (a subresource: the API server ignores it here) and
        `metadata` is the API server's own business."""
        value = self._prepared(body)
        errors = list(_value_errors(self.root, value, ""))
        if errors:
            return errors  # CEL runs on values the schema accepts (as the API server)
        before: object = _ABSENT if old is None else self._prepared(old)
        return list(_rule_errors(self.root, value, "", before))

    def _prepared(self, body: Mapping[str, Any]) -> dict[str, Any]:
        rest = {k: v for k, v in body.items() if k not in ("status", "metadata")}
        value = _pruned(self.root, rest)
        assert isinstance(value, dict)
        _defaulted(self.root, value)
        value.pop("status", None)
        if "metadata" in body:
            value["metadata"] = body["metadata"]
        return value

    def rules(self) -> list[tuple[str, Rule]]:
        return list(self.root.walk())

    def unevaluable(self) -> list[str]:
        """`Kind field: rule (why)` for each rule this module cannot evaluate."""
        return [
            f"{self.kind} {path}: {rule.source!r} (no function {', '.join(rule.missing)})"
            for path, rule in self.rules()
            if rule.missing
        ]
