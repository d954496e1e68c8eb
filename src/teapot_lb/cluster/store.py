"""The mutable cache behind the views: what informers or the manifest loader put in."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from teapot_lb.cluster.changes import EVERY_KEY, Change, ChangeLog
from teapot_lb.cluster.compact import compact
from teapot_lb.cluster.projection import Projection
from teapot_lb.cluster.view import Assigned, ClusterView, Stored
from teapot_lb.model import ApiObject, EndpointSlice
from teapot_lb.model.kinds import KINDS, REGISTRY, Kind, object_key

# The part of `Store._copies` that copies what was assigned beside the Services.
_ASSIGNED = "assigned"
# A replace that changed more keys than this records "every key" of the kind (a re-list).
_LISTED_MAX = 1024


class Store:
    """Objects per kind and key. Not thread-safe; one event loop owns it.

    :meth:`view` returns an immutable snapshot; it is rebuilt only after a change,
    so readers that ask often (every reconcile) pay nothing when nothing changed.
    Which view field holds a kind comes from the kind registry
    (:data:`teapot_lb.model.kinds.KINDS`). Objects are compacted as they come in
    (:func:`~teapot_lb.cluster.compact.compact`: equal inner parts and strings shared),
    after `project` (a :data:`~teapot_lb.cluster.projection.Projection`) has cut each typed
    object down to what the Store's reader reads: the full object is never kept.
    """

    def __init__(self, project: Projection | None = None) -> None:
        self.project = project
        self._objects: dict[Kind, dict[str, Stored]] = {info.kind: {} for info in KINDS}
        self._view: ClusterView | None = None
        # Each kind's read-only copy given to the views, kept until that kind changes (a
        # Node's change does not copy 100,000 Services); "assigned" for _assigned.
        self._copies: dict[Kind | str, Mapping[str, Any]] = {}
        self.generation = 0
        self.changes = ChangeLog()
        # EndpointSlices by Service key (by slice key, in the order of the slices' table),
        # and the lists views hand out (a list is replaced, never changed, once handed out).
        self._slices: dict[str, dict[str, EndpointSlice]] = {}
        self._slice_lists: dict[str, list[EndpointSlice]] = {}
        # What a controller in this process assigned, per Service key (ClusterView.assigned).
        self._assigned: dict[str, Assigned] = {}

    def put(self, kind: Kind, key: str, obj: Stored) -> None:
        model = REGISTRY[kind].model
        if model is not None and not isinstance(obj, model):
            raise TypeError(f"a {type(obj).__name__} is not a {kind.value}")
        old = self._objects[kind].get(key)
        obj = self._kept(obj)
        self._objects[kind][key] = obj
        self._changed(kind, key, old, obj)

    def put_object(self, obj: ApiObject) -> str:
        """Put a typed model object; its kind and key come from its metadata."""
        kind = Kind(obj.kind)
        key = object_key(obj.metadata.namespace, obj.metadata.name)
        self.put(kind, key, obj)
        return key

    def delete(self, kind: Kind, key: str) -> Stored | None:
        obj = self._objects[kind].pop(key, None)
        if obj is not None:
            self._changed(kind, key, obj, None)
        return obj

    def replace(self, kind: Kind, objects: Mapping[str, Stored]) -> None:
        """Replace every object of one kind (a re-list, or a re-read manifest directory).

        An object the Store holds already (the same object, put again: a manifest reload
        that reused what an unchanged file parsed to) is kept as it is, and the change log
        names the keys that changed, so a cache of per-object results redoes only those;
        when nothing changed, nothing is recorded. Past :data:`_LISTED_MAX` changed keys the
        log says "every key" instead."""
        held = self._objects[kind]
        fresh: dict[str, Stored] = {}
        changed: list[str] = []
        for key, obj in objects.items():
            old = held.get(key)
            if old is not None and old is obj:
                fresh[key] = old
            else:
                fresh[key] = self._kept(obj)
                changed.append(key)
        gone = [key for key in held if key not in fresh]
        if not changed and not gone:
            return
        self._objects[kind] = fresh
        if len(changed) + len(gone) <= _LISTED_MAX:
            for key in changed:
                self._changed(kind, key, held.get(key), fresh[key])
            for key in gone:
                self._changed(kind, key, held[key], None)
            return
        if kind is Kind.ENDPOINT_SLICE:
            self._slices, self._slice_lists = {}, {}
            for key, obj in fresh.items():
                self._index_slice(key, None, obj)
        self._changed(kind, EVERY_KEY, None, None)

    def assign(self, key: str, assigned: Assigned | None) -> None:
        """Set (None: drop) what was assigned to the Service at `key`; a change of it is a
        change of the Service (its plans read it)."""
        old = self._assigned.get(key)
        if assigned is None:
            if old is None:
                return
            del self._assigned[key]
        elif _same(old, assigned):
            return
        else:
            self._assigned[key] = assigned
        self._changed(Kind.SERVICE, key, None, None, _ASSIGNED)

    def replace_assigned(self, assigned: Mapping[str, Assigned]) -> None:
        """:meth:`assign` for every key at once: the keys not in `assigned` are dropped
        (recorded as :meth:`replace` records its kind's changes). An equal value keeps the
        object held, so readers that compare by identity see no change."""
        held = self._assigned
        fresh: dict[str, Assigned] = {}
        changed: list[str] = []
        for key, new in assigned.items():
            old = held.get(key)
            if old is not None and _same(old, new):
                fresh[key] = old
            else:
                fresh[key] = new
                changed.append(key)
        changed += [k for k in held if k not in fresh]
        if not changed:
            return
        self._assigned = fresh
        if len(changed) > _LISTED_MAX:
            changed = [EVERY_KEY]
        for key in changed:
            self._changed(Kind.SERVICE, key, None, None, _ASSIGNED)

    def _kept(self, obj: Stored) -> Stored:
        """What the Store keeps of `obj`: projected (a typed object), then compacted."""
        if self.project is not None and not isinstance(obj, Mapping):
            obj = self.project(obj)
        return compact(obj)

    def get(self, kind: Kind, key: str) -> Stored | None:
        return self._objects[kind].get(key)

    def keys(self, kind: Kind) -> list[str]:
        return sorted(self._objects[kind])

    def view(self) -> ClusterView:
        if self._view is None:
            # Each field holds only its kind's model (put checks it), so the view's field
            # types hold although the registry is a runtime table.
            fields = {
                info.view_field: self._copy(info.kind, self._objects[info.kind]) for info in KINDS
            }
            self._view = ClusterView(
                **fields,
                assigned=self._copy(_ASSIGNED, self._assigned),
                changes=(self.changes, self.changes.mark),
                slice_index=self._slice_lists,
            )
        return self._view

    def _copy(self, part: Kind | str, objects: Mapping[str, Any]) -> Mapping[str, Any]:
        copy = self._copies.get(part)
        if copy is None:
            copy = self._copies[part] = MappingProxyType(dict(objects))
        return copy

    def _changed(
        self,
        kind: Kind,
        key: str,
        old: Stored | None,
        new: Stored | None,
        part: Kind | str | None = None,
    ) -> None:
        """Record a change of `key` (`part`: what changed, when not `kind`'s objects)."""
        self._view = None
        self._copies.pop(kind if part is None else part, None)
        self.generation += 1
        if kind is Kind.ENDPOINT_SLICE and key != EVERY_KEY:
            self._index_slice(key, old, new)
        services = tuple(s for s in (_service_of(old), _service_of(new)) if s is not None)
        self.changes.record(Change(kind, key, services))

    def _index_slice(self, key: str, old: Stored | None, new: Stored | None) -> None:
        """Move one EndpointSlice in the per-Service index (as ClusterView would index it)."""
        before, after = _service_of(old), _service_of(new)
        for service, obj in ((before, None), (after, new)):
            if service is None or (obj is None and before == after):
                continue
            slices = self._slices.setdefault(service, {})
            if isinstance(obj, EndpointSlice):
                slices[key] = obj  # in place when it was there
            else:
                slices.pop(key, None)
            if slices:
                self._slice_lists[service] = list(slices.values())
            else:
                del self._slices[service]
                self._slice_lists.pop(service, None)


def _same(old: Assigned | None, new: Assigned) -> bool:
    return old is new or (old is not None and old == new)


def _service_of(obj: Stored | None) -> str | None:
    if isinstance(obj, EndpointSlice) and obj.service_name:
        return object_key(obj.metadata.namespace, obj.service_name)
    return None
