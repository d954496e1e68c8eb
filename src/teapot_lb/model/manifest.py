"""Reading objects from YAML manifests: files or directories of multi-document YAML.

`parse_object` is pure (a decoded document in, a typed object or problems out) and is what
the webhook uses; `read_documents` / `load` add the file reading for `teapot-lb validate`
and standalone mode. Problems carry the file and document number they come from.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from teapot_lb.model.common import ObjectRef
from teapot_lb.model.gateway_api_schema import upstream_problems
from teapot_lb.model.kinds import KINDS, ApiObject
from teapot_lb.model.problem import FILE, Problem


def _identity(cls: type[BaseModel]) -> tuple[str, str]:
    fields = cls.model_fields
    return str(fields["api_version"].default), str(fields["kind"].default)


# (apiVersion, kind) -> model, for every kind of the registry that manifests may hold.
MODELS: dict[tuple[str, str], type[BaseModel]] = {
    _identity(info.model): info.model for info in KINDS if info.model is not None
}
_API_VERSION_OF_KIND = {kind: api for api, kind in MODELS}

# libyaml's parser when it is there: YAML parsing is most of a standalone reload.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YAML_SUFFIXES = (".yaml", ".yml", ".json")


class Document(NamedTuple):
    """One decoded YAML document and where it came from (`path, document N`)."""

    source: str
    body: object


@dataclass
class Manifest:
    """Typed objects read from manifests, where each came from, and what was wrong."""

    objects: list[ApiObject] = field(default_factory=list)
    sources: dict[ObjectRef, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    # `v1` Secrets (BGP passwords): `namespace/name` → decoded data, as the speaker keeps
    # them (standalone mode reads them here; a cluster serves them from the API).
    secrets: dict[str, dict[str, bytes]] = field(default_factory=dict)
    # The objects defined again (same kind, namespace and name) after the first, which
    # `objects` holds: reported as problems, and left out.
    duplicates: list[ApiObject] = field(default_factory=list)

    def with_sources(self, problems: Iterable[Problem]) -> list[Problem]:
        """The problems, each marked with the file its object was read from."""
        return [p if p.source else replace(p, source=self.sources.get(p.ref)) for p in problems]


def _ref_of_body(body: Mapping[str, Any]) -> ObjectRef:
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = meta.get("name"), meta.get("namespace")
    return ObjectRef(
        str(body.get("kind") or "<no kind>"),
        namespace if isinstance(namespace, str) else None,
        name if isinstance(name, str) and name else "<unnamed>",
    )


def parse_object(
    body: object, *, ignore_unknown_kinds: bool = False, old: Mapping[str, Any] | None = None
) -> tuple[ApiObject | None, list[Problem]]:
    """A typed object from one decoded document, or the problems that prevent it.

    With `ignore_unknown_kinds`, documents of kinds teapot-lb does not read give
    `(None, [])` instead of a problem. A Gateway API object is first held to its upstream
    CRD's schema and CEL rules, as a kube-apiserver holds it (`old`: the object it
    replaces, for the rules that compare with it).
    """
    if not isinstance(body, Mapping):
        what = type(body).__name__
        bad = ObjectRef("<document>", None, "<unnamed>")
        return None, [_at(bad, "", f"expected a Kubernetes object (a mapping), got a {what}")]
    ref = _ref_of_body(body)
    api_version, kind = body.get("apiVersion"), body.get("kind")
    cls = MODELS.get((str(api_version), str(kind)))
    if cls is None:
        if kind in _API_VERSION_OF_KIND:
            want = _API_VERSION_OF_KIND[str(kind)]
            return None, [_at(ref, "apiVersion", f"{kind} is {want}, not {api_version!r}")]
        if ignore_unknown_kinds:
            return None, []
        known = ", ".join(k for _, k in MODELS)
        return None, [
            _at(ref, "kind", f"{api_version}/{kind} is not a kind teapot-lb reads ({known})")
        ]
    refused = upstream_problems(body, old)
    if refused:
        return None, refused
    try:
        obj = cls.model_validate(body)
    except ValidationError as err:
        return None, [_at(ref, _field_path(e["loc"]), _message(cls, e)) for e in err.errors()]
    return typing.cast(ApiObject, obj), []


def _at(ref: ObjectRef, field_path: str, message: str) -> Problem:
    return Problem(ref.kind, ref.name, ref.namespace, field_path, message)


_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _field_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            continue
        elif not _IDENTIFIER_RE.match(part):  # a map key such as an annotation name
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def _message(cls: type[BaseModel], error: ErrorDetails) -> str:
    kind, msg = error["type"], error["msg"]
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        loc = error["loc"]
        owner = _model_at(cls, loc[:-1])
        unknown = str(loc[-1])
        if owner is None:
            return f"unknown field {unknown!r}"
        known = sorted(f.alias or name for name, f in owner.model_fields.items())
        close = difflib.get_close_matches(unknown, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown field {unknown!r}; {hint}known fields: {', '.join(known)}"
    return msg


def _model_at(cls: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class that validates the value at `loc` inside `cls`, if it is one."""
    current: object = cls
    for part in loc:
        current = _unwrap(current, part)
        if current is None:
            return None
    model = _model_in(current)
    return model


def _model_in(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _unwrap(annotation: object, part: int | str) -> object | None:
    if isinstance(part, str):
        model = _model_in(annotation)
        if model is None:
            return None
        for name, info in model.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, Sequence):
        item: object = typing.get_args(annotation)[0]
        return item
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _unwrap(arg, part)
            if found is not None:
                return found
    return None


# --- files ------------------------------------------------------------------------------------


def manifest_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[Problem]]:
    """The YAML files named, directories expanded recursively in sorted order."""
    files: list[Path] = []
    problems: list[Problem] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(files_under(path))
        elif path.is_file():
            files.append(path)
        else:
            problems.append(_file_problem(path, "no such file or directory"))
    return files, problems


def files_under(root: Path, skip: Path | None = None) -> list[Path]:
    """YAML/JSON files below `root`, sorted; hidden files and folders (such as the
    `.state/` standalone mode writes beside the manifests) and `skip` are left out."""
    files: list[Path] = []
    for path in sorted(root.rglob("*")):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        if skip is not None and path.is_relative_to(skip):
            continue
        if path.suffix in YAML_SUFFIXES and path.is_file():
            files.append(path)
    return files


def _file_problem(path: Path, message: str) -> Problem:
    return Problem(FILE, str(path), None, "", message, source=str(path))


def decode_documents(text: str, source: str) -> tuple[list[Document], list[Problem]]:
    """The non-empty documents of a multi-document YAML text (`kind: List` items expanded)."""
    documents: list[Document] = []
    try:
        for index, body in enumerate(yaml.load_all(text, Loader=_SafeLoader), start=1):
            if body is None:
                continue
            where = f"{source}, document {index}"
            if isinstance(body, Mapping) and body.get("kind") == "List":
                items = body.get("items") or []
                for item_index, item in enumerate(items, start=1):
                    documents.append(Document(f"{where}, item {item_index}", item))
            else:
                documents.append(Document(where, body))
    except yaml.YAMLError as err:
        return documents, [_file_problem(Path(source), _yaml_error(err))]
    return documents, []


def _yaml_error(err: yaml.YAMLError) -> str:
    """A one-line account of a YAML syntax error, with its position."""
    mark = getattr(err, "problem_mark", None)
    what = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"not valid YAML{where}: {what}" + (f" ({context})" if context else "")


def read_documents(
    paths: Iterable[str | Path], files_read: list[str] | None = None
) -> tuple[list[Document], list[Problem]]:
    """All documents in the files (and directories) named; `files_read` collects file names."""
    files, problems = manifest_files(paths)
    if files_read is not None:
        files_read.extend(str(f) for f in files)
    documents: list[Document] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            problems.append(_file_problem(path, f"cannot read: {err}"))
            continue
        found, bad = decode_documents(text, str(path))
        documents.extend(found)
        problems.extend(bad)
    return documents, problems


def secret_data(body: Mapping[str, Any]) -> tuple[dict[str, bytes], list[Problem]]:
    """A `v1` Secret's `data` (base64) and `stringData` (text; wins, as the API server
    merges it), decoded; an entry that does not decode is a problem naming it."""
    ref = _ref_of_body(body)
    out: dict[str, bytes] = {}
    problems: list[Problem] = []
    data = body.get("data")
    for k, v in (data if isinstance(data, Mapping) else {}).items():
        try:
            out[str(k)] = base64.b64decode(str(v), validate=True)
        except (binascii.Error, ValueError):
            problems.append(_at(ref, f"data[{k}]", "is not base64 (use stringData for text)"))
    text = body.get("stringData")
    for k, v in (text if isinstance(text, Mapping) else {}).items():
        out[str(k)] = str(v).encode()
    return out, problems


def _is_secret(body: object) -> bool:
    return (
        isinstance(body, Mapping)
        and body.get("apiVersion") == "v1"
        and body.get("kind") == "Secret"
    )


class ParsedDocument(NamedTuple):
    """One document parsed on its own: its object, or a `v1` Secret's data, and its
    problems (each naming the document). What a reader may keep of a file it will not
    parse again (:func:`combine` puts documents together)."""

    source: str
    obj: ApiObject | None
    problems: list[Problem]
    secret: tuple[ObjectRef, dict[str, bytes]] | None = None


def parse_document(doc: Document, *, ignore_unknown_kinds: bool = False) -> ParsedDocument:
    if _is_secret(doc.body):
        assert isinstance(doc.body, Mapping)
        data, problems = secret_data(doc.body)
        found = [replace(p, source=doc.source) for p in problems]
        return ParsedDocument(doc.source, None, found, (_ref_of_body(doc.body), data))
    obj, problems = parse_object(doc.body, ignore_unknown_kinds=ignore_unknown_kinds)
    return ParsedDocument(doc.source, obj, [replace(p, source=doc.source) for p in problems])


def combine(documents: Iterable[ParsedDocument]) -> Manifest:
    """The manifest of parsed documents; duplicates (same kind, namespace, name) reported."""
    manifest = Manifest()
    for doc in documents:
        manifest.problems.extend(doc.problems)
        if doc.secret is not None:
            ref, data = doc.secret
            key = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
            manifest.secrets[key] = data
            manifest.sources.setdefault(ref, doc.source)
            continue
        obj = doc.obj
        if obj is None:
            continue
        ref = obj.ref
        if ref in manifest.sources:
            first = manifest.sources[ref]
            manifest.problems.append(
                Problem(
                    ref.kind,
                    ref.name,
                    ref.namespace,
                    "",
                    f"defined twice (first in {first})",
                    source=doc.source,
                )
            )
            manifest.duplicates.append(obj)
            continue
        manifest.sources[ref] = doc.source
        manifest.objects.append(obj)
    return manifest


def parse_documents(
    documents: Iterable[Document], *, ignore_unknown_kinds: bool = False
) -> Manifest:
    """Typed objects from decoded documents; duplicates (same kind, namespace, name) reported.
    `v1` Secrets go to :attr:`Manifest.secrets`."""
    return combine(parse_document(d, ignore_unknown_kinds=ignore_unknown_kinds) for d in documents)


def load(paths: Iterable[str | Path], *, ignore_unknown_kinds: bool = False) -> Manifest:
    """Read and parse every manifest under `paths`."""
    files: list[str] = []
    documents, problems = read_documents(paths, files)
    manifest = parse_documents(documents, ignore_unknown_kinds=ignore_unknown_kinds)
    manifest.problems[:0] = problems
    manifest.files = files
    return manifest
