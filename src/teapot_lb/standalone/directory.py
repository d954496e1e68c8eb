"""The manifest directory: which files, whether they changed, and what they hold.

What changed is decided by a fingerprint (path, size, mtime, inode of every manifest
file): cheap for the few hundred files a directory holds, and it sees edits, renames and
deletions alike. It is compared when the inotify watch (:mod:`.watch`) wakes the reader,
every few seconds anyway, and at every poll where inotify is unavailable. Hidden files
and directories (editor swap files, the default `.state` directory) are skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from teapot_lb.cluster import ClusterView, Kind, Store, object_key
from teapot_lb.cluster.compact import compact
from teapot_lb.controller import UnparsedPool
from teapot_lb.kept import Kept
from teapot_lb.model import ApiObject, ObjectRef, Problem
from teapot_lb.model.kinds import KINDS
from teapot_lb.model.manifest import (
    MODELS,
    Document,
    ParsedDocument,
    combine,
    files_under,
    parse_document,
    parse_object,
    read_documents,
)
from teapot_lb.validation import validate_manifest
from teapot_lb.validation.config import OwnChecks

Fingerprint = tuple[tuple[str, int, int, int], ...]

# Configuration objects are left out when a problem names them; Services are kept (the
# controller refuses them with their reason) and pools go to the controller as unparsed.
_DROPPED_WHEN_INVALID = frozenset(
    info.kind.value
    for info in KINDS
    if info.config and info.in_manifests and info.kind is not Kind.ADDRESS_POOL
)


OUR_GROUP = "lb.teapot.io/"


def unknown_kinds_of_ours(documents: list[Document]) -> list[Problem]:
    """Documents of our API group whose kind teapot-lb does not know (a typo such as
    `AdressPool`): reported, where other unknown kinds (a Deployment beside the Services)
    are skipped silently."""
    out: list[Problem] = []
    for doc in documents:
        body = doc.body
        if not isinstance(body, Mapping):
            continue
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if not isinstance(api_version, str) or not api_version.startswith(OUR_GROUP):
            continue
        if (api_version, str(kind)) in MODELS:
            continue
        _, problems = parse_object(body)
        out.extend(replace(p, source=doc.source) for p in problems)
    return out


def write_json(path: Path, doc: Any, *, pretty: bool = True) -> None:
    """Write a JSON document atomically (a reader sees the old or the new one). Not
    `pretty` (for large documents): on one line, by the C encoder, about ten times faster
    than Python's indenting one (seconds for 100k Services' status)."""
    write_text(path, json.dumps(doc, indent=1 if pretty else None, sort_keys=True))


def write_text(path: Path, text: str) -> None:
    """Write a text file atomically, with a final newline."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)


# Documents with more entries than this are written on one line (:func:`write_json`).
PRETTY_MAX = 1000


def manifest_files(root: Path, skip: Path | None = None) -> list[Path]:
    return [root] if root.is_file() else files_under(root, skip)


def fingerprint(files: list[Path]) -> Fingerprint:
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((str(f), st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


@dataclass
class Snapshot:
    """The directory's contents: objects by kind and key, and every problem found."""

    objects: dict[Kind, dict[str, ApiObject]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    unparsed_pools: dict[str, UnparsedPool] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    secrets: dict[str, dict[str, bytes]] = field(default_factory=dict)  # BGP passwords

    def view(self) -> ClusterView:
        store = Store()
        self.fill(store)
        return store.view()

    def fill(
        self, store: Store, replace: Mapping[Kind, Mapping[str, ApiObject]] | None = None
    ) -> None:
        for info in KINDS:
            if not info.in_manifests:
                continue
            kind = info.kind
            objs: Mapping[str, ApiObject] = self.objects.get(kind, {})
            if replace is not None and kind in replace:
                objs = replace[kind]
            store.replace(kind, objs)
        store.replace(Kind.SECRET, self.secrets)


@dataclass
class FileCache:
    """Per manifest file: its (size, mtime, inode) when it last read cleanly, its
    documents parsed (not their YAML: the objects are what a reload reuses, and a large
    directory's YAML documents would double its memory), and the problems of documents
    of our group whose kind is unknown. Unchanged files are not read again (YAML and
    model parsing are most of a reload), and their objects stay the same objects, so the
    Store and the plan cache see that they did not change; a file that stops reading
    keeps its last good content."""

    entries: dict[str, FileEntry] = field(default_factory=dict)
    # Each Service's own validation, kept while it and the pools stay the same objects.
    checks: Kept[OwnChecks] = field(default_factory=Kept)


# A file read cleanly: its (size, mtime, inode), its documents parsed, and the problems of
# documents of our group with an unknown kind.
FileEntry = tuple[tuple[int, int, int], list[ParsedDocument], list[Problem]]


def parse_kept(
    documents: list[Document], stamp: Callable[[ApiObject], ApiObject] | None = None
) -> list[ParsedDocument]:
    """A file's documents parsed as the cache keeps them: each object given its creation
    time (`stamp`, :meth:`Stamp.parsed`) and compacted
    (:func:`~teapot_lb.cluster.compact.compact`) at once, so that one object is kept per
    document and its copies (with a status) share its parts from the start."""
    out = []
    for doc in documents:
        parsed = parse_document(doc, ignore_unknown_kinds=True)
        obj = parsed.obj
        if obj is not None and stamp is not None:
            obj = stamp(obj)
        compact(obj)
        problems = parsed.problems or _NO_PROBLEMS
        out.append(ParsedDocument(parsed.source, obj, problems, parsed.secret))
    return out


# The problems of each document that has none: one list for all (read only).
_NO_PROBLEMS: list[Problem] = []


def stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class Stamp(Protocol):
    """Gives objects their creation time (:mod:`.first_seen`): each one as it is parsed
    (what the file cache keeps), then the objects of a read together."""

    def parsed(self, obj: ApiObject) -> ApiObject: ...

    def __call__(
        self, objects: Sequence[ApiObject], duplicates: Sequence[ApiObject] = ()
    ) -> list[ApiObject]: ...


def read(
    root: Path,
    skip: Path | None = None,
    cache: FileCache | None = None,
    stamp: Stamp | None = None,
) -> Snapshot:
    """Read and check the directory.

    With a `cache` (kept between reads), unchanged files are not parsed again and a file
    that does not read (a YAML error, a half-written save) keeps its last good content
    instead of vanishing with everything it declares; the problem is still reported.
    `stamp` gives objects their creation time before they are checked (conflicts are
    decided by age: :mod:`.first_seen`).
    """
    files = manifest_files(root, skip)
    documents: list[ParsedDocument] = []
    file_problems: list[Problem] = []
    unknown: list[Problem] = []
    for f in files:
        key, stat = str(f), stat_key(f)
        entry = cache.entries.get(key) if cache is not None else None
        if entry is None or stat is None or entry[0] != stat:
            docs, problems = read_documents([f])
            if problems and entry is not None:
                note = " (its last good content stays in use)"
                file_problems.extend(replace(p, message=p.message + note) for p in problems)
            else:
                file_problems.extend(problems)
                parsed = parse_kept(docs, stamp.parsed if stamp is not None else None)
                entry = (stat or (0, 0, 0), parsed, unknown_kinds_of_ours(docs))
                if cache is not None and not problems and stat is not None:
                    cache.entries[key] = entry
        documents.extend(entry[1])
        unknown.extend(entry[2])
    if cache is not None:
        for gone in set(cache.entries) - {str(f) for f in files}:
            del cache.entries[gone]
    manifest = combine(documents)
    manifest.problems[:0] = file_problems + unknown
    manifest.files = [str(f) for f in files]
    if stamp is not None:
        manifest.objects = stamp(manifest.objects, manifest.duplicates)
    # The manifests are standalone mode's only source of Secrets: a BGPPeer's missing
    # passwordSecret is a problem of the peer.
    problems = validate_manifest(
        manifest, secrets_known=True, kept=cache.checks if cache is not None else None
    )
    bad: set[ObjectRef] = {p.ref for p in problems}
    snap = Snapshot(problems=problems, files=[str(f) for f in files], secrets=manifest.secrets)
    for obj in manifest.objects:
        ref = obj.ref
        if ref.kind in _DROPPED_WHEN_INVALID and ref in bad:
            continue
        key = object_key(ref.namespace, ref.name)
        snap.objects.setdefault(Kind(ref.kind), {})[key] = obj
    pool_refs = {o.ref for o in manifest.objects if o.ref.kind == "AddressPool"}
    for p in manifest.problems:  # pools that did not parse at all
        if p.kind == "AddressPool" and p.ref not in pool_refs:
            key = object_key(p.namespace, p.name)
            prev = snap.unparsed_pools.get(key)
            found = (*prev.problems, p) if prev else (p,)
            snap.unparsed_pools[key] = UnparsedPool(p.ref, found)
    return snap
