"""What a backend must hold, shaped from a plan's announcements (pure).

A :class:`~teapot_lb.announce.announcement.Plan` is a flat set of announcements; the backends
want it shaped their own way: the BGP backend per peer, prefix → attributes (several
paths of a prefix: :class:`~teapot_lb.bgp.attributes.Paths`) (:func:`bgp_routes`); the
L2 backend per IP, the interfaces to answer on (:func:`l2_claims`); the VIP backend the
memberships as they are. Backends compare these shapes with what they hold and apply only
the difference, so a change to one Service touches only that Service's routes, claims or
VRRP instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from teapot_lb.announce.announcement import BGPRoute, L2Claim
from teapot_lb.bgp.attributes import Desired, Paths, RouteAttributes


def _merge(a: RouteAttributes, b: RouteAttributes) -> RouteAttributes:
    """Two advertisements select the same prefix for one peer: announce it once, with both
    advertisements' communities and the higher local preference."""
    prefs = [p for p in (a.local_pref, b.local_pref) if p is not None]
    return a.evolve(
        communities=tuple(sorted(set(a.communities) | set(b.communities))),
        large_communities=tuple(sorted(set(a.large_communities) | set(b.large_communities))),
        local_pref=max(prefs) if prefs else None,
    )


def bgp_routes(routes: Iterable[BGPRoute]) -> dict[str, dict[str, Desired]]:
    """Peer name → prefix (canonical text) → attributes, or :class:`Paths` when routes of
    the prefix carry path keys (merging is order-independent).

    Prefixes stay text here and in what the backend hands the BGP library (which parses
    them to encode them): hashing and comparing strings is several times cheaper than
    network objects, and a string weighs a fraction of one.
    """
    out: dict[str, dict[str, Desired]] = {}
    keyed: dict[tuple[str, str], dict[str, RouteAttributes]] = {}
    plain: dict[str, dict[str, RouteAttributes]] = {}
    for r in routes:
        per_prefix = keyed.setdefault((r.peer, r.prefix), {}) if r.path else None
        if per_prefix is None:
            per_prefix = plain.setdefault(r.peer, {})
            key = r.prefix
        else:
            key = r.path
        old = per_prefix.get(key)
        per_prefix[key] = r.attributes if old is None else _merge(old, r.attributes)
    for peer, prefixes in plain.items():
        out[peer] = dict(prefixes)
    for (peer, prefix), by_key in keyed.items():
        per_peer = out.setdefault(peer, {})
        alone = plain.get(peer, {}).get(prefix)
        if alone is not None:
            by_key[""] = alone  # a route without a key is the path ""
        per_peer[prefix] = Paths.of(by_key)
    return out


def l2_claims(claims: Iterable[L2Claim]) -> dict[str, tuple[str, ...]]:
    """IP → interfaces to answer on (empty: the interfaces whose subnet contains the IP)."""
    out: dict[str, set[str]] = {}
    unrestricted: set[str] = set()
    for c in claims:
        if not c.interfaces:
            unrestricted.add(c.ip)
        out.setdefault(c.ip, set()).update(c.interfaces)
    return {ip: () if ip in unrestricted else tuple(sorted(ifs)) for ip, ifs in out.items()}


@dataclass(frozen=True)
class MappingDiff:
    """Keys added, removed and changed between two mappings."""

    added: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    changed: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    @property
    def touched(self) -> frozenset[str]:
        return self.added | self.removed | self.changed


def diff_mappings(old: Mapping[str, object], new: Mapping[str, object]) -> MappingDiff:
    return MappingDiff(
        added=frozenset(new.keys() - old.keys()),
        removed=frozenset(old.keys() - new.keys()),
        changed=frozenset(k for k in old.keys() & new.keys() if old[k] != new[k]),
    )
