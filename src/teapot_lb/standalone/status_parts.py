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
        for key, items in announcing.items():
            before = counted.get(key)
            if before is not items:
                self._count(before or (), -1)
                self._count(items, +1)
                counted[key] = items
        for key in counted.keys() - announcing.keys():
            self._count(counted.pop(key), -1)
        return json.dumps({mode: ips for mode, ips in sorted(self._sorted.items()) if ips})

    def _count(self, items: tuple[Announcing, ...], by: int) -> None:
        for a in items:
            mode = a.mode.value
            counts = self._counts.setdefault(mode, {})
            n = counts.get(a.ip, 0) + by
            ips = self._sorted.setdefault(mode, [])
            if n == 0:
                del counts[a.ip]
                at = bisect.bisect_left(ips, ip_order(a.ip), key=ip_order)
                del ips[at]
            else:
                if n == 1 and by > 0:
                    bisect.insort(ips, a.ip, key=ip_order)
                counts[a.ip] = n
