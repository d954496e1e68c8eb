"""Render one node's ``keepalived.conf`` for VIP mode (pure: no I/O, no clock).

The input is the cluster-wide list of :class:`~teapot_lb.vrrp.group.VipGroup` (one per
Service and advertisement); every node renders from the same input and therefore agrees
on instances, virtual router IDs (VRIDs) and priorities (:mod:`teapot_lb.vrrp.instances`)
without talking to the others. A Service with ``externalTrafficPolicy: Local`` gets an
instance of its own, because its mastership follows its own endpoints (through a track
file, see below).

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

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from teapot_lb.vrrp.group import Family, IPAddress, VipConfigError, VipGroup
from teapot_lb.vrrp.instances import (
    TooManyCandidates,
    allocate_vrids,
    anchor_address,
    group_instances,
    node_priorities,
    stable_hash,
)

# Track-file weight: value 1 x -254 is below -253, which puts the instance in FAULT.
TRACK_WEIGHT = -254


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
    return f"{readable}-{stable_hash('track', group) % 16**8:08x}"


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
