"""The bulky parts of a large `status.json`, kept as JSON text between writes (issue 19).

Past :data:`~.directory.PRETTY_MAX` Services the status file's per-Service entries and the
announced IPs are most of it (50 MB at 100k Services), and building and encoding them
whole held the event loop for about two seconds per write. :class:`StatusParts` keeps
each Service's entry encoded, with the very objects it was made from (its assignment,
what this node announces for it and its failures: a step hands out the same objects for
a Service that did not change), and the announced IPs counted and sorted; a write
re-encodes only the entries whose objects changed and joins the rest.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping

from teapot_lb.speaker.node import ip_order
from teapot_lb.speaker.report import Announcing, summary
from teapot_lb.standalone.assign import Assignment

# More IPs moved than one in this many of a mode's list: sort it anew rather than
# bisect for each.
RESORT_SHARE = 16
_NO_ANNOUNCING: tuple[Announcing, ...] = ()
_NO_FAILURES: Mapping[str, str] = {}


def entry(
    a: Assignment, announcing: tuple[Announcing, ...], failures: Mapping[str, str]
) -> dict[str, object]:
    """One Service's entry in `status.json`'s `services`."""
    return {
        "ips": [str(ip) for ip in a.ips],
        "pool": a.pool,
        "refused": a.refused,
        "vrids": a.vrids,
        "vrid_refused": list(a.vrid_refused),
        "announcing": summary(announcing),
        "failures": dict(failures),
    }


class StatusParts:
    """`services` and `announcing` of `status.json`, as JSON text, redone where changed."""

    def __init__(self) -> None:
        # Per Service: the objects its entry was made from, and `"key":{entry}`.
        self._entries: dict[
            str, tuple[Assignment, tuple[Announcing, ...], Mapping[str, str], str]
        ] = {}
        # Per Service, what was counted as announced; per mode, the IPs' counts (two
        # Services may share one) and the IPs in address order.
        self._counted: dict[str, tuple[Announcing, ...]] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self._sorted: dict[str, list[str]] = {}
        self.encoded = 0  # entries encoded by the last call (for tests)

    def services(
        self,
        assignments: Mapping[str, Assignment],
        announcing: Mapping[str, tuple[Announcing, ...]],
        failures: Mapping[str, Mapping[str, str]],
    ) -> str:
        """The `services` object: an entry per assigned Service."""
        held, fresh = self._entries, {}
        self.encoded = 0
        for key, a in assignments.items():
            ann = announcing.get(key, _NO_ANNOUNCING)
            fail = failures.get(key, _NO_FAILURES)
            kept = held.get(key)
            if kept is None or kept[0] is not a or kept[1] is not ann or kept[2] is not fail:
                text = json.dumps(key) + ":" + json.dumps(entry(a, ann, fail), sort_keys=True)
                kept = (a, ann, fail, text)
                self.encoded += 1
            fresh[key] = kept
        self._entries = fresh
        return "{" + ",".join(kept[3] for kept in fresh.values()) + "}"

    def announced(self, announcing: Mapping[str, tuple[Announcing, ...]]) -> str:
        """Mode → the IPs this node announces, in address order (as ``announced_ips``)."""
        counted = self._counted
        came: list[Announcing] = []
        went: list[Announcing] = []
        for key, items in announcing.items():
            before = counted.get(key)
            if before is not items:
                went.extend(before or ())
                came.extend(items)
                counted[key] = items
        for key in counted.keys() - announcing.keys():
            went.extend(counted.pop(key))
        self._count(came, went)
        return json.dumps({mode: ips for mode, ips in sorted(self._sorted.items()) if ips})

    def _count(self, came: list[Announcing], went: list[Announcing]) -> None:
        """Count the IPs announced and no longer announced; an IP seen first or last moves
        into or out of its mode's sorted list (by bisection, or a new sort when many
        did: the first write, the last at stop)."""
        moved: dict[str, list[tuple[str, bool]]] = {}
        for items, by in ((went, -1), (came, +1)):
            for a in items:
                mode = a.mode.value
                counts = self._counts.setdefault(mode, {})
                n = counts.get(a.ip, 0) + by
                if n == 0:
                    del counts[a.ip]
                    moved.setdefault(mode, []).append((a.ip, False))
                else:
                    if n == 1 and by > 0:
                        moved.setdefault(mode, []).append((a.ip, True))
                    counts[a.ip] = n
        for mode, ips_moved in moved.items():
            ips = self._sorted.setdefault(mode, [])
            if len(ips_moved) * RESORT_SHARE > len(ips):
                self._sorted[mode] = sorted(self._counts[mode], key=ip_order)
                continue
            for ip, added in ips_moved:
                if added:
                    bisect.insort(ips, ip, key=ip_order)
                else:
                    del ips[bisect.bisect_left(ips, ip_order(ip), key=ip_order)]
