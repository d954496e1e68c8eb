"""The mutable cache behind the views: what informers or the manifest loader put in."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from teapot_lb.cluster.view import ClusterView, Kind, object_key

_FIELD = {
    Kind.SERVICE: "services",
    Kind.ENDPOINT_SLICE: "endpoint_slices",
    Kind.NODE: "nodes",
    Kind.NAMESPACE: "namespaces",
    Kind.ADDRESS_POOL: "pools",
    Kind.BGP_PEER: "bgp_peers",
    Kind.BGP_ADVERTISEMENT: "bgp_advertisements",
    Kind.L2_ADVERTISEMENT: "l2_advertisements",
    Kind.VIP_ADVERTISEMENT: "vip_advertisements",
    Kind.SECRET: "secrets",
}


class Store:
    """Objects per kind and key. Not thread-safe; one event loop owns it.

    :meth:`view` returns an immutable snapshot; it is rebuilt only after a change,
    so readers that ask often (every reconcile) pay nothing when nothing changed.
    """

    def __init__(self) -> None:
        self._objects: dict[Kind, dict[str, Any]] = {kind: {} for kind in Kind}
        self._view: ClusterView | None = None
        self.generation = 0

    def put(self, kind: Kind, key: str, obj: Any) -> None:
        self._objects[kind][key] = obj
        self._changed()

    def put_object(self, obj: Any) -> str:
        """Put a typed model object; its kind and key come from its metadata."""
        kind = Kind(obj.kind)
        key = object_key(obj.metadata.namespace, obj.metadata.name)
        self.put(kind, key, obj)
        return key

    def delete(self, kind: Kind, key: str) -> Any | None:
        obj = self._objects[kind].pop(key, None)
        if obj is not None:
            self._changed()
        return obj

    def replace(self, kind: Kind, objects: Mapping[str, Any]) -> None:
        """Replace every object of one kind (a re-list, or a re-read manifest directory)."""
        self._objects[kind] = dict(objects)
        self._changed()

    def get(self, kind: Kind, key: str) -> Any | None:
        return self._objects[kind].get(key)

    def keys(self, kind: Kind) -> list[str]:
        return sorted(self._objects[kind])

    def view(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView(
                **{
                    _FIELD[kind]: MappingProxyType(dict(objs))
                    for kind, objs in self._objects.items()
                }
            )
        return self._view

    def _changed(self) -> None:
        self._view = None
        self.generation += 1
