"""When this node first saw each manifest object: its creation time in standalone mode.

An API server stamps every object with `metadata.creationTimestamp`; a manifest usually
has none. Conflicts (two Services requesting one IP, two pools sharing a range) are
decided in favour of the older object (:func:`teapot_lb.model.common.creation_order`),
so the manifest source stamps each object that carries no timestamp with the first time
this node read it. The times are kept in `<state-dir>/first-seen.json`, so a restart
decides every conflict as before; an object that leaves the manifests is forgotten (if
it comes back, it is a newcomer). A timestamp written in the manifest always wins: give
one to objects whose precedence must not depend on when each node started.

A reload that read every object rewrites the file; one that knows which objects came and
went (:meth:`FirstSeen.stamp_changed`) appends them to `first-seen.log` instead, one JSON
line each, which is read back over the file at start and folded into it once it holds as
many lines as the file has entries (at 100k objects the file is 10 MB: rewriting it for
every new Service cost a sixth of a second).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from teapot_lb import log
from teapot_lb.model import ApiObject
from teapot_lb.standalone.directory import PRETTY_MAX, write_json

FILE_NAME = "first-seen.json"
JOURNAL_NAME = "first-seen.log"


def stamped(obj: ApiObject, when: datetime) -> ApiObject:
    """A copy of `obj` created at `when`."""
    meta = obj.metadata.model_copy(update={"creation_timestamp": when})
    return obj.model_copy(update={"metadata": meta})


def stamp(
    objects: Sequence[ApiObject],
    seen: dict[str, datetime],
    now: datetime,
    duplicates: Sequence[ApiObject] = (),
) -> tuple[list[ApiObject], dict[str, datetime]]:
    """`objects` with a creation time each (pure): their own, or the first time seen.

    `seen` maps `str(ref)` to the time an object was first seen; returns the objects and
    the new map (objects no longer present dropped, newcomers stamped `now`). An object
    may come stamped already — when it was parsed (:meth:`FirstSeen.parsed`, with this
    `now`), which is how the file cache keeps it, so that an unchanged object comes back
    as itself: a time equal to the one it would get is taken as ours; any other is the
    manifest's own, which wins and is not recorded.

    `duplicates`: the other definitions of some of `objects` (another file defines them
    too; the read keeps the first): one stamped by us has its time recorded too, so that
    when it is the one left, the time the file cache keeps it with is known as ours.
    """
    out: list[ApiObject] = []
    kept: dict[str, datetime] = {}
    for obj in objects:
        ref = str(obj.ref)
        own = obj.metadata.creation_timestamp
        when = kept.get(ref) or seen.get(ref) or now
        if own is not None and own != when:
            out.append(obj)  # the manifest's own time
            continue
        kept[ref] = when
        out.append(obj if own == when else stamped(obj, when))
    for obj in duplicates:
        ref = str(obj.ref)
        when = kept.get(ref) or seen.get(ref) or now
        if ref not in kept and obj.metadata.creation_timestamp == when:
            kept[ref] = when
    return out, kept


def stamp_changed(
    added: Sequence[ApiObject], gone: Sequence[str], seen: dict[str, datetime], now: datetime
) -> tuple[list[ApiObject], dict[str, datetime | None]]:
    """:func:`stamp` for a change only: `added` (new or edited objects, maybe stamped when
    parsed with this `now`) stamped, the refs in `gone` (``str(ref)``: objects that left)
    forgotten, `seen` updated in place. Returns the stamped objects and what changed in
    `seen` (None: forgotten)."""
    changed: dict[str, datetime | None] = {}
    for ref in gone:
        if seen.pop(ref, None) is not None:
            changed[ref] = None
    out: list[ApiObject] = []
    for obj in added:
        ref = str(obj.ref)
        own = obj.metadata.creation_timestamp
        when = seen.get(ref) or now
        if own is not None and own != when:
            out.append(obj)  # the manifest's own time
            continue
        if ref not in seen:
            seen[ref] = changed[ref] = when
        out.append(obj if own == when else stamped(obj, when))
    return out, changed


class FirstSeen:
    """:func:`stamp` with its map kept in a file of the state directory."""

    def __init__(self, state_dir: Path | None) -> None:
        self.path = state_dir / FILE_NAME if state_dir is not None else None
        self.journal = state_dir / JOURNAL_NAME if state_dir is not None else None
        self.journal_lines = 0
        self.seen = self._load()

    def _load(self) -> dict[str, datetime]:
        if self.path is None or not self.path.exists():
            seen: dict[str, datetime] = {}
        else:
            try:
                raw = json.loads(self.path.read_text())
                # One datetime per distinct time (objects first seen in one read share it).
                times: dict[str, datetime] = {}
                seen = {}
                for ref, t in raw.items():
                    text = str(t)
                    when = times.get(text) or times.setdefault(text, datetime.fromisoformat(text))
                    seen[str(ref)] = when
            except (OSError, ValueError, AttributeError) as err:
                # Starting over only makes every object a newcomer of the same age:
                # conflicts then fall back to name order, as before this file existed.
                log.get("standalone").warning(
                    "first-seen times unreadable, starting over",
                    path=str(self.path),
                    error=str(err),
                )
                seen = {}
        self._replay(seen)
        return seen

    def _replay(self, seen: dict[str, datetime]) -> None:
        """Apply the journal's lines over the file's map (a line that does not read — the
        last one, cut short by a crash — is skipped and said once)."""
        if self.journal is None or not self.journal.exists():
            return
        bad = 0
        with contextlib.suppress(OSError), self.journal.open() as fh:
            for line in fh:
                self.journal_lines += 1
                try:
                    entry = json.loads(line)
                    ref, when = str(entry["ref"]), entry["time"]
                    if when is None:
                        seen.pop(ref, None)
                    else:
                        seen[ref] = datetime.fromisoformat(str(when))
                except (ValueError, KeyError, TypeError):
                    bad += 1
        if bad:
            log.get("standalone").warning(
                "first-seen journal lines unreadable, skipped", path=str(self.journal), lines=bad
            )

    def at(self, now: datetime) -> Stamping:
        """The stamps of one read, all from `now`."""
        return Stamping(self, now)

    def parsed(self, obj: ApiObject, now: datetime) -> ApiObject:
        """`obj` as parsed, given the time it will get (its first-seen time, or `now`) if
        it has none, so that the file cache keeps it stamped: no second copy of every
        object. Nothing is recorded (:meth:`stamp` and :meth:`stamp_changed` do, with the
        same `now`)."""
        if obj.metadata.creation_timestamp is not None:
            return obj
        return stamped(obj, self.seen.get(str(obj.ref)) or now)

    def stamp(
        self, objects: Sequence[ApiObject], now: datetime, duplicates: Sequence[ApiObject] = ()
    ) -> list[ApiObject]:
        out, seen = stamp(objects, self.seen, now, duplicates)
        if seen != self.seen:
            self.seen = seen
            self._save()
        return out

    def stamp_changed(
        self, added: Sequence[ApiObject], gone: Sequence[str], now: datetime
    ) -> list[ApiObject]:
        """Stamp the objects that came or changed and forget those that left, recording
        only that (the journal), not the whole map."""
        out, changed = stamp_changed(added, gone, self.seen, now)
        if changed:
            self._append(changed)
        return out

    def _append(self, changed: dict[str, datetime | None]) -> None:
        if self.journal is None:
            return
        if self.journal_lines + len(changed) > max(PRETTY_MAX, len(self.seen)):
            self._save()  # folded into the file
            return
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with self.journal.open("a") as fh:
            for ref, when in changed.items():
                time = when.isoformat() if when is not None else None
                fh.write(json.dumps({"ref": ref, "time": time}) + "\n")
        self.journal_lines += len(changed)

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        times = {ref: t.isoformat() for ref, t in self.seen.items()}
        write_json(self.path, times, pretty=len(times) <= PRETTY_MAX)
        if self.journal is not None:
            # After the file: a crash in between replays lines the file already holds.
            self.journal.unlink(missing_ok=True)
            self.journal_lines = 0


@dataclass(frozen=True)
class Stamping:
    """:class:`FirstSeen`'s stamps for one read (one `now`): each object as it is parsed,
    then the read's objects together (:class:`~.directory.Stamp`)."""

    first_seen: FirstSeen
    now: datetime

    def parsed(self, obj: ApiObject) -> ApiObject:
        return self.first_seen.parsed(obj, self.now)

    def __call__(
        self, objects: Sequence[ApiObject], duplicates: Sequence[ApiObject] = ()
    ) -> list[ApiObject]:
        return self.first_seen.stamp(objects, self.now, duplicates)
