"""Render one node's ``keepalived.conf`` for VIP mode (pure: no I/O, no clock).

The input is the cluster-wide list of :class:`VipGroup` (one per Service and
advertisement); every node renders from the same input and therefore agrees on
instances, virtual router IDs (VRIDs) and priorities without talking to the others.

Grouping: one VRRPv3 instance per :class:`InstanceKey` — (interface, address
family, candidate node set, and the instance-level knobs). A Service with
``externalTrafficPolicy: Local`` gets an instance of its own, because its
mastership follows its own endpoints (through a track file, see below).

Decisions that keep traffic flowing (docs/vip.md explains them at length):

* **Stable anchor address.** VRRPv3 adverts carry the instance's address list and
  keepalived drops adverts whose list differs from its own configuration (RFC 5798
  §7.1 "MAY verify"). While nodes reload one after the other, a changed list would
  make backups ignore the master and elect a second one. So each instance advertises
  exactly one address that never changes — a link-local *anchor* derived from the
  VRID — and the Service IPs go to ``virtual_ipaddress_excluded``. Adding or removing
  a Service never changes what is on the wire.
* **Distinct priorities.** Every node of an instance gets a different priority
  (rank by a hash of instance and node, like MetalLB's L2 election), so two backups'
  Master_Down timers never expire together (RFC 5798 §6.1 skew time differs), and a
  dual master is always resolved the same way.
* **GARP after a dual master.** ``higher_prio_send_advert`` makes the losing master
  send one last advert; ``garp_lower_prio_repeat`` makes the winner answer it with a
  fresh gratuitous ARP / unsolicited NA burst, so the last announcement a client sees
  is the winner's. A second burst after ``garp_master_delay`` and a periodic refresh
  bound any remaining stale-MAC window to seconds.
* **Local policy without reload.** A Local instance tracks a file
  (``track_file`` with weight -254): writing 1 puts the node's instance in FAULT
  (it sends priority 0 and drops the VIPs, so a backup takes over after a skew time),
  writing 0 lets it compete again. No configuration change, no reload.
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

VRID_MIN = 1
VRID_MAX = 255
# Priority 255 means "address owner" (RFC 5798 §5.2.4); 0 means "stopped".
PRIORITY_MAX = 254
PRIORITY_MIN = 1
# Largest gap between neighbouring ranks; a wide gap spreads the backups'
# Master_Down timers (skew = (256 - priority) * interval / 256) further apart.
PRIORITY_STEP_MAX = 64
# VRRPv3 carries the advertisement interval in centiseconds in 12 bits.
ADVERT_CENTIS_MIN = 1
ADVERT_CENTIS_MAX = 4095
DEFAULT_ADVERT_INTERVAL_S = 0.1
# Track-file weight: value 1 x -254 is below -253, which puts the instance in FAULT.
TRACK_WEIGHT = -254


class Family(enum.IntEnum):
    V4 = 4
    V6 = 6


# --------------------------------------------------------------------------- errors


class VipConfigError(ValueError):
    """A VIP-mode configuration problem the operator can act on."""


class InvalidVipGroup(VipConfigError):
    def __init__(self, group: str, field_name: str, problem: str) -> None:
        self.group = group
        self.field_name = field_name
        self.problem = problem
        super().__init__(f"VIP group {group!r}: field {field_name!r}: {problem}")


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


class InterfaceMissing(VipConfigError):
    def __init__(self, node: str, interface: str, groups: Sequence[str]) -> None:
        self.node = node
        self.interface = interface
        self.groups = tuple(groups)
        super().__init__(
            f"node {node} has no interface {interface!r} required by VIP group(s)"
            f" {', '.join(self.groups)}; this node does not take part in that instance"
            f" (other instances are unaffected)"
        )


class MissingNodeAddress(VipConfigError):
    def __init__(self, node: str, family: Family, groups: Sequence[str]) -> None:
        self.node = node
        self.family = family
        self.groups = tuple(groups)
        super().__init__(
            f"unicast VRRP for VIP group(s) {', '.join(self.groups)} needs an IPv{family.value}"
            f" address for node {node}, and none is known"
        )


class TooManyCandidates(VipConfigError):
    def __init__(self, count: int, groups: Sequence[str]) -> None:
        self.count = count
        self.groups = tuple(groups)
        super().__init__(
            f"VIP group(s) {', '.join(self.groups)} have {count} candidate nodes; VRRP has only"
            f" {PRIORITY_MAX} distinct priorities, so at most {PRIORITY_MAX} can take part"
        )


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class VipGroup:
    """The VIPs of one Service under one VIP advertisement, as the renderer needs them.

    ``candidate_nodes`` are the nodes allowed to hold the VIPs (node selectors and
    exclusions applied). For ``local_traffic_policy`` Services these are still all
    eligible nodes; which of them have ready endpoints is runtime state written to
    the instance's track file (:attr:`InstancePlan.track_file`), not configuration.
    """

    name: str
    interface: str
    vips: tuple[IPAddress, ...]
    candidate_nodes: tuple[str, ...]
    advert_interval_s: float = DEFAULT_ADVERT_INTERVAL_S
    vrid_range: tuple[int, int] = (VRID_MIN, VRID_MAX)
    unicast: bool = False
    vrid: int | None = None
    local_traffic_policy: bool = False
    preempt: bool = True

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() or c in '"{}' for c in self.name):
            raise InvalidVipGroup(self.name, "name", "must be non-empty, without spaces or quotes")
        if not self.interface or any(c.isspace() or c in '/"{}' for c in self.interface):
            raise InvalidVipGroup(self.name, "interface", f"invalid name {self.interface!r}")
        if not self.vips:
            raise InvalidVipGroup(self.name, "vips", "at least one address is required")
        if len({type(v) for v in self.vips}) > 1:
            raise InvalidVipGroup(self.name, "vips", "mixes IPv4 and IPv6; use one group each")
        if not self.candidate_nodes:
            raise InvalidVipGroup(self.name, "candidate_nodes", "no candidate node")
        if any(not n or any(c.isspace() or c in '/,"{}' for c in n) for n in self.candidate_nodes):
            raise InvalidVipGroup(
                self.name, "candidate_nodes", "node names must be non-empty DNS-style names"
            )
        centis = self.advert_interval_s * 100
        if not (
            ADVERT_CENTIS_MIN <= round(centis) <= ADVERT_CENTIS_MAX
            and math.isclose(centis, round(centis), abs_tol=1e-6)
        ):
            raise InvalidVipGroup(
                self.name,
                "advert_interval_s",
                f"{self.advert_interval_s} is not a multiple of 0.01 s in 0.01-40.95 s (VRRPv3)",
            )
        lo, hi = self.vrid_range
        if not VRID_MIN <= lo <= hi <= VRID_MAX:
            raise InvalidVipGroup(
                self.name, "vrid_range", f"{lo}-{hi} is not a range within {VRID_MIN}-{VRID_MAX}"
            )
        if self.vrid is not None and not VRID_MIN <= self.vrid <= VRID_MAX:
            raise InvalidVipGroup(self.name, "vrid", f"{self.vrid} is not in 1-255")

    @property
    def family(self) -> Family:
        return Family.V6 if self.vips[0].version == 6 else Family.V4

    @property
    def advert_centis(self) -> int:
        return round(self.advert_interval_s * 100)


@dataclass(frozen=True)
class GarpPolicy:
    """Gratuitous ARP / unsolicited NA timing (keepalived's garp_* knobs)."""

    # Second burst after becoming master (keepalived's default is 5 s; a client that
    # took a loser's burst stays wrong until then).
    master_delay_s: int = 1
    master_repeat: int = 3
    # Burst sent by a master that hears a lower-priority advert (a dual master
    # resolving), and a second one after the delay.
    lower_prio_repeat: int = 2
    lower_prio_delay_s: int = 1
    # Periodic refresh while master: bounds any remaining stale-MAC window.
    master_refresh_s: int = 10
    # A master stepping down for a better one first sends one (lower) advert, which
    # triggers the winner's lower_prio burst.
    higher_prio_send_advert: bool = True


@dataclass(frozen=True)
class RenderPaths:
    """Where keepalived finds the files the supervisor owns."""

    notify_fifo: PurePath
    track_dir: PurePath


# --------------------------------------------------------------------------- instances


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


def _digest(*parts: str) -> int:
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
            start = _digest(key.token()) % size
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
    ranked = sorted(key.nodes, key=lambda n: (_digest(seed, n), n))
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


# --------------------------------------------------------------------------- output


@dataclass(frozen=True)
class InstancePlan:
    """One instance this node takes part in, as rendered."""

    name: str
    token: str
    interface: str
    family: Family
    vrid: int
    priority: int
    priorities: Mapping[str, int]
    vips: tuple[IPAddress, ...]
    groups: tuple[str, ...]
    advert_interval_s: float
    preempt: bool
    unicast_peers: tuple[IPAddress, ...]
    track_file: PurePath | None


@dataclass(frozen=True)
class Rendered:
    node: str
    text: str
    instances: tuple[InstancePlan, ...]
    vrids: Mapping[str, int]  # keep and pass back as ``previous_vrids``
    errors: tuple[VipConfigError, ...] = field(default=())

    def instance(self, name: str) -> InstancePlan | None:
        return next((i for i in self.instances if i.name == name), None)

    def instances_for_group(self, group: str) -> tuple[InstancePlan, ...]:
        return tuple(i for i in self.instances if group in i.groups)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def track_file_name(group: str) -> str:
    """A file-system-safe, collision-free name for a Local group's track file."""
    readable = _UNSAFE.sub("_", group)[:40]
    return f"{readable}-{_digest('track', group) % 16**8:08x}"


def instance_name(interface: str, family: Family, vrid: int) -> str:
    # Unique per keepalived (VRID unique per interface and family); stable as long
    # as the VRID is, which is what lets a reload keep the instance's state.
    return f"{_UNSAFE.sub('_', interface)}-v{family.value}-vrid{vrid}"


def _quote(path: PurePath) -> str:
    text = str(path)
    if '"' in text or "\n" in text:
        raise VipConfigError(f"path {text!r} cannot be written to keepalived.conf")
    return f'"{text}"'


def _seconds(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _pick_address(addresses: Sequence[IPAddress], family: Family) -> IPAddress | None:
    for a in addresses:
        if a.version == family.value:
            return a
    return None


def render(
    node: str,
    groups: Sequence[VipGroup],
    *,
    paths: RenderPaths,
    node_addresses: Mapping[str, Sequence[IPAddress]] | None = None,
    interfaces: Collection[str] | None = None,
    previous_vrids: Mapping[str, int] | None = None,
    garp: GarpPolicy | None = None,
) -> Rendered:
    """This node's keepalived.conf for the cluster-wide ``groups``.

    ``interfaces`` are this node's interface names (None: do not check).
    ``node_addresses`` are every node's addresses, used as unicast peers.
    Errors are collected, never raised: an instance with a problem is left out
    (and reported) while every other instance is still rendered.
    """
    garp = garp or GarpPolicy()
    node_addresses = node_addresses or {}
    members = group_instances(groups)
    allocation = allocate_vrids(members, previous_vrids)
    errors: list[VipConfigError] = list(allocation.errors)
    plans: list[InstancePlan] = []
    blocks: list[str] = []
    track_blocks: list[str] = []

    for key, grp in members.items():
        group_names = [g.name for g in grp]
        vrid = allocation.vrids.get(key.token())
        if vrid is None or node not in key.nodes:
            continue
        try:
            priorities = node_priorities(key, vrid)
        except TooManyCandidates as exc:
            errors.append(TooManyCandidates(exc.count, group_names))
            continue
        if interfaces is not None and key.interface not in interfaces:
            errors.append(InterfaceMissing(node, key.interface, group_names))
            continue
        peers: list[IPAddress] = []
        src: IPAddress | None = None
        if key.unicast:
            missing = False
            for other in key.nodes:
                addr = _pick_address(node_addresses.get(other, ()), key.family)
                if addr is None:
                    errors.append(MissingNodeAddress(other, key.family, group_names))
                    missing = True
                elif other == node:
                    src = addr
                else:
                    peers.append(addr)
            if missing:
                continue
        vips = tuple(sorted({v for g in grp for v in g.vips}, key=lambda a: (a.version, int(a))))
        name = instance_name(key.interface, key.family, vrid)
        track: PurePath | None = None
        if key.track is not None:
            track = paths.track_dir / track_file_name(key.track)
            track_blocks.append(
                "\n".join(
                    [
                        f"track_file {name}-local {{",
                        f"    file {_quote(track)}",
                        f"    weight {TRACK_WEIGHT}",
                        # Fail safe: until told otherwise, a node has no endpoints.
                        "    init_file 1",
                        "}",
                    ]
                )
            )
        plan = InstancePlan(
            name=name,
            token=key.token(),
            interface=key.interface,
            family=key.family,
            vrid=vrid,
            priority=priorities[node],
            priorities=priorities,
            vips=vips,
            groups=tuple(group_names),
            advert_interval_s=key.advert_centis / 100,
            preempt=key.preempt,
            unicast_peers=tuple(peers),
            track_file=track,
        )
        plans.append(plan)
        blocks.append(_instance_block(plan, src, garp))

    head = [
        f"# keepalived.conf for node {node}, rendered by teapot-lb (VIP mode). Do not edit.",
        "global_defs {",
        f"    router_id {_UNSAFE.sub('_', node)}",
        f"    vrrp_notify_fifo {_quote(paths.notify_fifo)}",
        "    fifo_write_vrrp_states_on_reload",
        "    vrrp_version 3",
        "}",
    ]
    text = "\n\n".join(["\n".join(head), *track_blocks, *blocks]) + "\n"
    return Rendered(
        node=node,
        text=text,
        instances=tuple(plans),
        vrids=dict(allocation.vrids),
        errors=tuple(errors),
    )


def _instance_block(plan: InstancePlan, src: IPAddress | None, garp: GarpPolicy) -> str:
    lines = [
        f"# groups: {', '.join(plan.groups)}",
        f"vrrp_instance {plan.name} {{",
        "    state BACKUP",
        f"    interface {plan.interface}",
        f"    virtual_router_id {plan.vrid}",
        "    version 3",
        f"    priority {plan.priority}",
        f"    advert_int {_seconds(plan.advert_interval_s)}",
    ]
    if not plan.preempt:
        lines.append("    nopreempt")
    lines += [
        f"    garp_master_delay {garp.master_delay_s}",
        f"    garp_master_repeat {garp.master_repeat}",
        f"    garp_lower_prio_delay {garp.lower_prio_delay_s}",
        f"    garp_lower_prio_repeat {garp.lower_prio_repeat}",
        f"    garp_master_refresh {garp.master_refresh_s}",
        f"    higher_prio_send_advert {'true' if garp.higher_prio_send_advert else 'false'}",
        "    notify_deleted",
    ]
    if src is not None:
        lines.append(f"    unicast_src_ip {src}")
        lines.append("    check_unicast_src")
        lines.append("    unicast_peer {")
        lines += [f"        {p}" for p in plan.unicast_peers]
        lines.append("    }")
    scope = " scope link" if plan.family is Family.V4 else ""
    lines += [
        "    virtual_ipaddress {",
        f"        {anchor_address(plan.family, plan.vrid)}{scope}",
        "    }",
        "    virtual_ipaddress_excluded {",
    ]
    lines += [f"        {v}/{v.max_prefixlen}" for v in plan.vips]
    lines.append("    }")
    if plan.track_file is not None:
        lines += ["    track_file {", f"        {plan.name}-local", "    }"]
    lines.append("}")
    return "\n".join(lines)
