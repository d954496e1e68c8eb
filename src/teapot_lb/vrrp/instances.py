"""VRRP instances: which groups share one, its virtual router ID and its priorities (pure).

Groups with the same :class:`InstanceKey` (interface, address family, candidate node
set and the instance-level knobs) share one VRRPv3 instance. Every node computes the
same instances, VRIDs (:func:`allocate_vrids`) and priorities (:func:`node_priorities`)
from the same groups, without talking to the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from teapot_lb.vrrp.group import Family, VipConfigError, VipGroup

# Priority 255 means "address owner" (RFC 5798 §5.2.4); 0 means "stopped".
PRIORITY_MAX = 254
PRIORITY_MIN = 1
# Largest gap between neighbouring ranks; a wide gap spreads the backups'
# Master_Down timers (skew = (256 - priority) * interval / 256) further apart.
PRIORITY_STEP_MAX = 64


class VridRangeExhausted(VipConfigError):
    def __init__(
        self, interface: str, family: Family, vrid_range: tuple[int, int], groups: Sequence[str]
    ) -> None:
        self.interface = interface
        self.family = family
        self.vrid_range = vrid_range
        self.groups = tuple(groups)
        lo, hi = vrid_range
        super().__init__(
            f"no free virtual router ID in {lo}-{hi} on interface {interface} (IPv{family.value})"
            f" for VIP group(s) {', '.join(self.groups)}: every VRID in the range is in use"
            f" on that interface; widen vridRange or spread Services over fewer node sets"
        )


class VridCollision(VipConfigError):
    def __init__(
        self,
        interface: str,
        family: Family,
        vrid: int,
        groups: Sequence[str],
        holder_groups: Sequence[str],
    ) -> None:
        self.interface = interface
        self.family = family
        self.vrid = vrid
        self.groups = tuple(groups)
        self.holder_groups = tuple(holder_groups)
        super().__init__(
            f"virtual router ID {vrid} on interface {interface} (IPv{family.value}) is requested"
            f" explicitly by VIP group(s) {', '.join(self.groups)} but is already held by"
            f" {', '.join(self.holder_groups)}; choose another vrid"
        )


class TooManyCandidates(VipConfigError):
    def __init__(self, count: int, groups: Sequence[str]) -> None:
        self.count = count
        self.groups = tuple(groups)
        super().__init__(
            f"VIP group(s) {', '.join(self.groups)} have {count} candidate nodes; VRRP has only"
            f" {PRIORITY_MAX} distinct priorities, so at most {PRIORITY_MAX} can take part"
        )


@dataclass(frozen=True)
class InstanceKey:
    """What makes two groups share one VRRP instance."""

    interface: str
    family: Family
    nodes: tuple[str, ...]  # sorted
    advert_centis: int
    vrid_range: tuple[int, int]
    unicast: bool
    preempt: bool
    explicit_vrid: int | None
    track: str | None  # group name for Local policy

    @classmethod
    def of(cls, group: VipGroup) -> InstanceKey:
        return cls(
            interface=group.interface,
            family=group.family,
            nodes=tuple(sorted(set(group.candidate_nodes))),
            advert_centis=group.advert_centis,
            vrid_range=group.vrid_range,
            unicast=group.unicast,
            preempt=group.preempt,
            explicit_vrid=group.vrid,
            track=group.name if group.local_traffic_policy else None,
        )

    @property
    def pool(self) -> tuple[str, Family]:
        """VRIDs must be unique per (interface, family) on the LAN."""
        return (self.interface, self.family)

    def token(self) -> str:
        """A stable, readable identity (used for hashing and as allocation key)."""
        parts = [
            self.interface,
            f"v{self.family.value}",
            ",".join(self.nodes),
            f"adv={self.advert_centis}cs",
            f"range={self.vrid_range[0]}-{self.vrid_range[1]}",
        ]
        if self.unicast:
            parts.append("unicast")
        if not self.preempt:
            parts.append("nopreempt")
        if self.explicit_vrid is not None:
            parts.append(f"vrid={self.explicit_vrid}")
        if self.track is not None:
            parts.append(f"local={self.track}")
        return "/".join(parts)

    def lineage(self) -> str:
        """The token without the node set: what stays when nodes join or leave."""
        return lineage_of_token(self.token())


def lineage_of_token(token: str) -> str:
    # Token layout: interface / family / nodes / knobs...; interface and node names
    # never contain "/".
    parts = token.split("/")
    return "/".join(parts[:2] + parts[3:])


def stable_hash(*parts: str) -> int:
    """A 64-bit hash of ``parts``, the same on every node and every run."""
    h = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(h[:8], "big")


def group_instances(groups: Iterable[VipGroup]) -> dict[InstanceKey, tuple[VipGroup, ...]]:
    """Groups by instance, keys and members in a deterministic order."""
    out: dict[InstanceKey, list[VipGroup]] = {}
    for g in groups:
        out.setdefault(InstanceKey.of(g), []).append(g)
    return {
        k: tuple(sorted(out[k], key=lambda g: g.name)) for k in sorted(out, key=InstanceKey.token)
    }


@dataclass(frozen=True)
class Allocation:
    vrids: dict[str, int]  # token -> VRID, for every instance that got one
    errors: tuple[VipConfigError, ...]


def allocate_vrids(
    members: Mapping[InstanceKey, Sequence[VipGroup]],
    previous: Mapping[str, int] | None = None,
) -> Allocation:
    """Give every instance a VRID, unique per (interface, family).

    Deterministic: the same inputs give the same VRIDs on every node. Stable:
    explicit VRIDs first, then instances keep their ``previous`` VRID when it is
    still free and in range; a new instance whose node set is the only change from
    a vanished one (same interface, family and knobs: nodes joined or left)
    inherits that VRID, so keepalived keeps the instance across the reload; other
    new instances take a hash-preferred VRID, probing upwards (wrapping) within
    their range. Adding an instance therefore
    never renumbers one listed in ``previous``; without ``previous`` a new instance
    whose preferred VRID is taken by an older one may sort first and take it, so
    callers that need stability across changes keep the last allocation (the
    controller stores it; :attr:`Rendered.vrids` is the value to keep).
    """
    previous = previous or {}
    current = {k.token() for k in members}
    vanished: dict[str, list[int]] = {}
    for token, old_vrid in sorted(previous.items()):
        if token not in current:
            vanished.setdefault(lineage_of_token(token), []).append(old_vrid)
    vrids: dict[str, int] = {}
    errors: list[VipConfigError] = []
    pools: dict[tuple[str, Family], list[InstanceKey]] = {}
    for key in sorted(members, key=InstanceKey.token):
        pools.setdefault(key.pool, []).append(key)

    def names(key: InstanceKey) -> list[str]:
        return [g.name for g in members[key]]

    for (interface, family), keys in sorted(pools.items()):
        taken: dict[int, InstanceKey] = {}
        for key in keys:
            if key.explicit_vrid is None:
                continue
            holder = taken.get(key.explicit_vrid)
            if holder is not None:
                errors.append(
                    VridCollision(interface, family, key.explicit_vrid, names(key), names(holder))
                )
                continue
            taken[key.explicit_vrid] = key
            vrids[key.token()] = key.explicit_vrid
        pending = [k for k in keys if k.explicit_vrid is None]
        fresh: list[InstanceKey] = []
        for key in pending:
            old = previous.get(key.token())
            lo, hi = key.vrid_range
            if old is not None and lo <= old <= hi and old not in taken:
                taken[old] = key
                vrids[key.token()] = old
            else:
                fresh.append(key)
        for key in fresh:
            lo, hi = key.vrid_range
            heirs = vanished.get(key.lineage(), [])
            inherited = next((v for v in heirs if lo <= v <= hi and v not in taken), None)
            if inherited is not None:
                heirs.remove(inherited)
                taken[inherited] = key
                vrids[key.token()] = inherited
                continue
            size = hi - lo + 1
            start = stable_hash(key.token()) % size
            for i in range(size):
                candidate = lo + (start + i) % size
                if candidate not in taken:
                    taken[candidate] = key
                    vrids[key.token()] = candidate
                    break
            else:
                errors.append(VridRangeExhausted(interface, family, key.vrid_range, names(key)))
    return Allocation(vrids=vrids, errors=tuple(errors))


def node_priorities(key: InstanceKey, vrid: int) -> dict[str, int]:
    """Distinct priorities for the instance's nodes, highest first by hash rank.

    The rank is a hash of (instance lineage, VRID, node): different instances rank
    the nodes differently, so masters spread over the nodes; and it is a
    rendezvous hash, so a node joining or leaving the set keeps the other nodes'
    order (the master stays unless the newcomer ranks first).
    Raises :class:`TooManyCandidates` beyond 254 nodes.
    """
    count = len(key.nodes)
    if count > PRIORITY_MAX:
        raise TooManyCandidates(count, ())
    seed = f"{key.lineage()}#{vrid}"
    ranked = sorted(key.nodes, key=lambda n: (stable_hash(seed, n), n))
    step = min(PRIORITY_STEP_MAX, (PRIORITY_MAX - PRIORITY_MIN) // max(count - 1, 1))
    return {node: PRIORITY_MAX - rank * step for rank, node in enumerate(ranked)}


def anchor_address(family: Family, vrid: int) -> str:
    """The one address an instance advertises; never changes while the VRID does not.

    Link-local, so it is never routed and never collides with a Service IP:
    169.254.253.<vrid> for IPv4 (RFC 3927) and fe80::7e1b:<vrid> for IPv6, where
    RFC 5798 §5.2.9 asks for a link-local first address anyway.
    """
    if family is Family.V4:
        return f"169.254.253.{vrid}/32"
    return f"fe80::7e1b:{vrid:x}/128"
