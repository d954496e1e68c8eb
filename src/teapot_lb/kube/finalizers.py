"""Finalizers: hold an object's deletion until our cleanup is done.

Add the finalizer before creating external state for an object; when the object has a
``deletionTimestamp``, clean up and then remove the finalizer (the server deletes the
object once no finalizers are left). Writes carry the resourceVersion they were computed
from and are recomputed on 409 Conflict, so concurrent writers never drop each other's
finalizers.
"""

from __future__ import annotations

from .client import KubeClient
from .errors import Conflict, NotFound
from .resources import KubeObject, Resource, is_deleting

__all__ = ["add_finalizer", "has_finalizer", "is_deleting", "remove_finalizer"]


def has_finalizer(obj: KubeObject, finalizer: str) -> bool:
    return finalizer in (obj.get("metadata", {}).get("finalizers") or [])


async def _set_finalizers(
    client: KubeClient, resource: Resource, obj: KubeObject, finalizers: list[str]
) -> KubeObject:
    meta = obj["metadata"]
    patch = {
        "metadata": {
            "resourceVersion": meta["resourceVersion"],
            "finalizers": finalizers or None,
        }
    }
    return await client.patch(resource, meta["name"], patch, namespace=meta.get("namespace"))


async def add_finalizer(
    client: KubeClient, resource: Resource, obj: KubeObject, finalizer: str, *, attempts: int = 8
) -> KubeObject:
    """Ensure ``finalizer`` is on the object; returns the updated object."""
    meta = obj["metadata"]
    for attempt in range(attempts):
        if has_finalizer(obj, finalizer):
            return obj
        try:
            current = list(obj["metadata"].get("finalizers") or [])
            return await _set_finalizers(client, resource, obj, [*current, finalizer])
        except Conflict:
            if attempt == attempts - 1:
                raise
            obj = await client.get(resource, meta["name"], meta.get("namespace"))
    return obj


async def remove_finalizer(
    client: KubeClient, resource: Resource, obj: KubeObject, finalizer: str, *, attempts: int = 8
) -> KubeObject | None:
    """Remove ``finalizer``; returns the updated object, or None if it is gone (deleted
    because ours was the last finalizer, or already deleted)."""
    meta = obj["metadata"]
    for attempt in range(attempts):
        if not has_finalizer(obj, finalizer):
            return obj
        remaining = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        try:
            updated = await _set_finalizers(client, resource, obj, remaining)
        except NotFound:
            return None
        except Conflict:
            if attempt == attempts - 1:
                raise
            try:
                obj = await client.get(resource, meta["name"], meta.get("namespace"))
            except NotFound:
                return None
            continue
        if not remaining and is_deleting(obj):
            return None
        return updated
    return obj
