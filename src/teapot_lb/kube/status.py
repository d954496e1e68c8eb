"""Status writes through the ``/status`` subresource, retried on 409 Conflict.

Optimistic concurrency: read the object, compute the new status from what was read,
PUT it with that resourceVersion. If someone wrote in between the server answers 409;
read again and recompute. A status that is already right is not written at all.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from .. import log
from .client import KubeClient
from .errors import Conflict
from .resources import KubeObject, Resource

StatusMutation = Callable[[KubeObject], dict[str, Any] | None]

_log = log.get("kube.status")


async def update_status(
    client: KubeClient,
    resource: Resource,
    name: str,
    namespace: str | None,
    desired_status: StatusMutation,
    *,
    attempts: int = 8,
) -> KubeObject:
    """Set ``status`` to ``desired_status(current_object)``.

    ``desired_status`` gets a private copy of the latest object and returns the complete
    new status (or None to leave it alone); it is called again after every conflict, so
    it must be a pure function of the object. Returns the object as last written (or as
    read, if nothing had to change). Raises :class:`~.errors.NotFound` if the object is
    gone and :class:`~.errors.Conflict` if ``attempts`` conflicts in a row happened.
    """
    for attempt in range(1, attempts + 1):
        current = await client.get(resource, name, namespace)
        status = desired_status(copy.deepcopy(current))
        if status is None or status == current.get("status"):
            return current
        updated = {**current, "status": status}
        try:
            return await client.replace(resource, updated, status=True)
        except Conflict:
            _log.debug(
                "status conflict, retrying", resource=str(resource), name=name, attempt=attempt
            )
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


async def patch_status(
    client: KubeClient,
    resource: Resource,
    name: str,
    namespace: str | None,
    patch: dict[str, Any],
    *,
    was: Mapping[str, Any] | None = None,
) -> KubeObject:
    """Merge-patch part of the status, last writer wins (no resourceVersion, no
    conflicts): for fields this component alone owns. `was`: the status as it stands,
    when `patch` is the whole status it should become: its fields `patch` lacks are
    removed (null in a merge patch; without it they would stay, and the status would
    never equal what was decided)."""
    if was:
        patch = {**{k: None for k in was if k not in patch}, **patch}
    return await client.patch(resource, name, {"status": patch}, namespace=namespace, status=True)
