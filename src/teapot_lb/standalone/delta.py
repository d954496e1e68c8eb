"""A reload that only adds, edits or removes Services and EndpointSlices (issue 19).

A full reload (:func:`.directory.read`, the checks, the assignment) walks every object:
at 100k Services over a second for a one-Service edit. The usual edit is a file of
Services and EndpointSlices written, added or removed, and then what the walk would find
again can be known beforehand: only the changed files' objects change; no other object's
problems change, provided none names them and no pool has a problem (pools overlapping
are ranked by the Services they hold); and the changed Services' own problems (checked
against the configuration and the Services requesting one of their IPs, the only way two
Services meet in the checks) must be none. This module decides that from the changed
files alone (:func:`file_delta`, :func:`blocked`, :func:`new_problems`) and patches the
last snapshot (:func:`patched`); :class:`~.runner.ManifestSource` does the rest with the
same parts as a full reload. Anything else — another kind in a changed file (before or
after), a file that does not read or parse cleanly, an object also defined in another
file, a problem naming a changed object — is a full reload, which gives the same result
(the tests compare the two).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from teapot_lb.cluster import Kind, object_key
from teapot_lb.model import ApiObject, IPAddress, ObjectRef, Problem, Service
from teapot_lb.model.manifest import ParsedDocument, read_documents
from teapot_lb.model.problem import FILE
from teapot_lb.standalone.directory import (
    FileCache,
    FileEntry,
    Snapshot,
    parse_kept,
    stat_key,
    unknown_kinds_of_ours,
)
from teapot_lb.validation import validate

QUICK_KINDS = frozenset({Kind.SERVICE.value, Kind.ENDPOINT_SLICE.value})
# Problems of these kinds change what a Service's checks find (a pool's range, a
# namespace's labels): while one is reported, every reload is a full one.
_BLOCKING_KINDS = frozenset({Kind.ADDRESS_POOL.value, Kind.NAMESPACE.value})

# What changed, by kind and key: the new object, or None (gone).
Changes = dict[Kind, dict[str, ApiObject | None]]


@dataclass
class FileDelta:
    """What the files that changed since the last read held before and hold now."""

    files: list[Path]  # the manifest files now
    entries: dict[str, FileEntry]  # the changed and added files, read
    removed: list[str]  # files gone
    before: dict[ObjectRef, ApiObject]  # the objects the changed and removed files held
    after: dict[ObjectRef, ApiObject]  # what the changed and added files hold now

    @property
    def names(self) -> set[str]:
        return set(self.entries) | set(self.removed)

    def came(self) -> list[ApiObject]:
        """The objects added or edited (an object equal to what it was is not)."""
        return [o for r, o in self.after.items() if self.before.get(r) is not o]

    def gone(self) -> list[ObjectRef]:
        return [r for r in self.before if r not in self.after]


def file_delta(
    files: list[Path], cache: FileCache, stamp: Callable[[ApiObject], ApiObject] | None = None
) -> FileDelta | None:
    """The changed files' objects before and after, read; None when some changed file
    (before or after) holds anything but Services and EndpointSlices that parse
    cleanly, does not read, or defines an object twice. Objects are parsed as the cache
    keeps them (`stamp`: :meth:`.directory.Stamp.parsed`); one equal to the object the
    file held is given back as that very object (nothing to redo for it)."""
    now = {str(f) for f in files}
    removed = [name for name in cache.entries if name not in now]
    delta = FileDelta(files, {}, removed, {}, {})
    for name in removed:
        if not _add(delta.before, cache.entries[name][1]):
            return None
    for f in files:
        name, stat = str(f), stat_key(f)
        entry = cache.entries.get(name)
        if entry is not None and entry[0] == stat:
            continue
        if stat is None:
            return None  # gone meanwhile: the full reload says what it became
        docs, problems = read_documents([f])
        if problems or unknown_kinds_of_ours(docs):
            return None
        parsed = parse_kept(docs, stamp)
        if entry is not None and not _add(delta.before, entry[1]):
            return None
        if not _add(delta.after, parsed):
            return None
        delta.entries[name] = (stat, parsed, [])
    for name, (stat, parsed, unknown) in delta.entries.items():
        delta.entries[name] = (stat, [_same_if_equal(d, delta.before) for d in parsed], unknown)
    for ref, obj in list(delta.after.items()):
        old = delta.before.get(ref)
        if old is not None and old == obj:
            delta.after[ref] = old
    return delta


def _add(into: dict[ObjectRef, ApiObject], documents: Iterable[ParsedDocument]) -> bool:
    """Put the documents' objects in `into`; False if one is not for a quick reload."""
    for doc in documents:
        if doc.problems or doc.secret is not None:
            return False
        obj = doc.obj
        if obj is None:
            continue  # a kind of another API group, skipped by every reader
        if obj.kind not in QUICK_KINDS:
            return False
        ref = obj.ref
        if ref in into:
            return False  # defined twice: the full reload reports it
        into[ref] = obj
    return True


def _same_if_equal(doc: ParsedDocument, before: Mapping[ObjectRef, ApiObject]) -> ParsedDocument:
    obj = doc.obj
    if obj is None:
        return doc
    old = before.get(obj.ref)
    return doc._replace(obj=old) if old is not None and old == obj else doc


def blocked(snapshot: Snapshot, delta: FileDelta) -> str | None:
    """Why the last snapshot cannot simply be patched with `delta` (None: it can)."""
    names = delta.names
    refs = delta.before.keys() | delta.after.keys()
    for p in snapshot.problems:
        if p.kind in _BLOCKING_KINDS:
            return f"{p.kind} problems"
        if p.kind == FILE:  # (a file that did not read is read again, or went)
            return f"{p.name} had a problem"
        if (p.source or "").split(", ")[0] in names:
            return f"a problem in {p.source}"
        if any(p.involves(r) for r in refs):
            return f"a problem names {p.ref}"
    for ref in delta.after.keys() - delta.before.keys():
        if object_key(ref.namespace, ref.name) in snapshot.objects.get(Kind(ref.kind), {}):
            return f"{ref} is also defined in another file"
    return None


def requests_of(services: Iterable[Service]) -> dict[IPAddress, set[str]]:
    """Which handled Services (keys) request each IP."""
    out: dict[IPAddress, set[str]] = {}
    for svc in services:
        for ip in _requested(svc):
            out.setdefault(ip, set()).add(object_key(svc.metadata.namespace, svc.name))
    return out


def _requested(svc: Service) -> set[IPAddress]:
    if not svc.is_handled():
        return set()
    try:
        return set(svc.requested_ips())
    except ValueError:
        return set()


def move_requests(
    requests: dict[IPAddress, set[str]], old: Iterable[Service], new: Iterable[Service]
) -> None:
    """Update :func:`requests_of`'s map for Services replaced or removed (`old`) and
    added or edited (`new`)."""
    for svc in old:
        key = object_key(svc.metadata.namespace, svc.name)
        for ip in _requested(svc):
            held = requests.get(ip)
            if held is not None:
                held.discard(key)
                if not held:
                    del requests[ip]
    for svc in new:
        key = object_key(svc.metadata.namespace, svc.name)
        for ip in _requested(svc):
            requests.setdefault(ip, set()).add(key)


def new_problems(
    snapshot: Snapshot, services: list[Service], requests: Mapping[IPAddress, set[str]]
) -> list[Problem]:
    """The problems the full checks would find naming these (added or edited) Services:
    they are checked against the configuration and the other Services requesting one of
    their IPs, which is all a Service's checks read besides itself."""
    mine = {object_key(s.metadata.namespace, s.name) for s in services}
    held = snapshot.objects.get(Kind.SERVICE, {})
    sharing = {
        key: held[key]
        for svc in services
        for ip in _requested(svc)
        for key in requests.get(ip, ())
        if key not in mine and key in held
    }
    config = [
        obj
        for kind, objs in snapshot.objects.items()
        if kind.value not in QUICK_KINDS
        for obj in objs.values()
    ]
    found = validate([*config, *sharing.values(), *services], secrets=snapshot.secrets)
    refs = [s.ref for s in services]
    return [p for p in found if any(p.involves(r) for r in refs)]


def patched(snapshot: Snapshot, changes: Changes, files: list[Path]) -> Snapshot:
    """The snapshot with the changed objects put in and the gone ones taken out."""
    objects = dict(snapshot.objects)
    for kind, by_key in changes.items():
        objs = objects[kind] = dict(objects.get(kind, {}))
        for key, obj in by_key.items():
            if obj is None:
                objs.pop(key, None)
            else:
                objs[key] = obj
        if not objs:
            del objects[kind]  # as a full read leaves a kind no object has
    return replace(snapshot, objects=objects, files=[str(f) for f in files])
