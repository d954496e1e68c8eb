"""When this node first saw each manifest object: its creation time in standalone mode.

An API server stamps every object with `metadata.creationTimestamp`; a manifest usually
has none. Conflicts (two Services requesting one IP, two pools sharing a range) are
decided in favour of the older object (:func:`teapot_lb.model.common.creation_order`),
so the manifest source stamps each object that carries no timestamp with the first time
this node read it. The times are kept in `<state-dir>/first-seen.json`, so a restart
decides every conflict as before; an object that leaves the manifests is forgotten (if
it comes back, it is a newcomer). A timestamp written in the manifest always wins: give
one to objects whose precedence must not depend on when each node started.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from teapot_lb import log
from teapot_lb.kept import Kept
from teapot_lb.model import ApiObject
from teapot_lb.standalone.directory import PRETTY_MAX, write_json

FILE_NAME = "first-seen.json"


def stamp(
    objects: Sequence[ApiObject],
    seen: dict[str, datetime],
    now: datetime,
    memo: Kept[tuple[str, ApiObject]] | None = None,
) -> tuple[list[ApiObject], dict[str, datetime]]:
    """`objects` with a creation time each (pure): their own, or the first time seen.

    `seen` maps `str(ref)` to the time an object was first seen; returns the objects and
    the new map (objects no longer present dropped, newcomers stamped `now`). `memo`
    (kept by the caller between calls): each object's ref and stamped copy, so that the
    same object coming again with the same time gets the same stamped copy back (an
    unchanged object stays the same object from one reload to the next) and its ref is
    not made again.
    """
    out: list[ApiObject] = []
    kept: dict[str, datetime] = {}
    if memo is not None:
        memo.begin()
    for obj in objects:
        if obj.metadata.creation_timestamp is not None:
            out.append(obj)
            continue
        hit = memo.get(obj) if memo is not None else None
        ref = hit[0] if hit is not None else str(obj.ref)
        when = kept.get(ref) or seen.get(ref) or now
        kept[ref] = when
        if hit is None or hit[1].metadata.creation_timestamp != when:
            meta = obj.metadata.model_copy(update={"creation_timestamp": when})
            hit = (ref, obj.model_copy(update={"metadata": meta}))
        if memo is not None:
            memo.put(obj, hit)
        out.append(hit[1])
    if memo is not None:
        memo.end()
    return out, kept


class FirstSeen:
    """:func:`stamp` with its map kept in a file of the state directory."""

    def __init__(self, state_dir: Path | None) -> None:
        self.path = state_dir / FILE_NAME if state_dir is not None else None
        self.seen = self._load()
        self._stamped: Kept[tuple[str, ApiObject]] = Kept()

    def _load(self) -> dict[str, datetime]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            raw = json.loads(self.path.read_text())
            return {str(ref): datetime.fromisoformat(str(t)) for ref, t in raw.items()}
        except (OSError, ValueError, AttributeError) as err:
            # Starting over only makes every object a newcomer of the same age: conflicts
            # then fall back to name order, as before this file existed.
            log.get("standalone").warning(
                "first-seen times unreadable, starting over", path=str(self.path), error=str(err)
            )
            return {}

    def stamp(self, objects: Sequence[ApiObject], now: datetime) -> list[ApiObject]:
        out, seen = stamp(objects, self.seen, now, self._stamped)
        if seen != self.seen:
            self.seen = seen
            self._save()
        return out

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        times = {ref: t.isoformat() for ref, t in self.seen.items()}
        write_json(self.path, times, pretty=len(times) <= PRETTY_MAX)
