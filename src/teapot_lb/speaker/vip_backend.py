"""VIP backend: the plan's VIP memberships → keepalived.conf → the supervisor.

The renderer allocates virtual router IDs from the cluster-wide list of VIP groups, so
every node must render from the same list: :func:`cluster_vip_groups` computes it from
the view (the memberships of every node), not only this node's. keepalived is started
only once this node takes part in an instance, and reloaded only when the rendered text
changes (the supervisor compares it).

VRIDs are cluster state: the controller (or standalone mode's assignment, the same
core) allocates one per VIPAdvertisement's Cluster Services and per Local Service and
writes it on the Service (`lb.teapot.io/vrids`, :mod:`teapot_lb.vrrp.vrid_book`); the
groups carry it, so every node renders the same instance for the same IP, whatever its
history, and a node joining changes no VRID. Groups given to :meth:`VIPBackend.apply`
without a VRID (tests, benchmarks) are still numbered by the renderer, with the last
allocation passed back as ``previous_vrids`` and kept in ``<state-dir>/vrids.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path

from teapot_lb import log
from teapot_lb.announce.announcement import Decision, Mode, VIPMembership
from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.fleet import vip_memberships
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.cluster import ClusterView
from teapot_lb.kept import by_name
from teapot_lb.model import ExternalTrafficPolicy, Node
from teapot_lb.model.service import ANNOTATION_VRIDS
from teapot_lb.speaker.backend import Step, Wiring
from teapot_lb.speaker.interfaces import (
    InterfaceInfo,
    TimedListing,
    default_interfaces,
    interfaces,
)
from teapot_lb.vrrp.group import (
    DEFAULT_ADVERT_INTERVAL_S,
    VRID_MAX,
    VRID_MIN,
    IPAddress,
    VipConfigError,
    VipGroup,
)
from teapot_lb.vrrp.instances import group_instances
from teapot_lb.vrrp.notify import Transition
from teapot_lb.vrrp.render import Rendered, render
from teapot_lb.vrrp.supervisor import KeepalivedSupervisor
from teapot_lb.vrrp.vrid_book import parse_vrids


@dataclass(frozen=True)
class VipInput:
    """The cluster-wide VIP memberships, and for Local Services who has endpoints.

    `local`: IP of a Service with `externalTrafficPolicy: Local` → nodes with a ready
    endpoint. Such IPs get an instance of their own whose candidates are all eligible
    nodes regardless of endpoints; a node without endpoints is held in FAULT through
    its track file, so endpoints moving never changes (nor reloads) keepalived.conf.
    """

    memberships: frozenset[VIPMembership] = frozenset()
    local: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # IP -> advertisement -> VRID, as the controller wrote them on the Services.
    vrids: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def cluster_vip_input(
    view: ClusterView, options: PlanOptions | None = None, cache: PlanCache | None = None
) -> VipInput:
    """Every node's VIP memberships (the same on every node for the same view).

    With the speaker's plan `cache`, a step costs the Services that changed and those with
    a VRRP instance, not the cluster (:func:`~teapot_lb.announce.fleet.vip_memberships`)."""
    if not view.vip_advertisements:
        return VipInput()
    held = vip_memberships(view, options, cache=cache)
    out: set[VIPMembership] = set()
    local: dict[str, frozenset[str]] = {}
    vrids: dict[str, Mapping[str, int]] = {}
    for key in sorted(held):  # (an IP Services share: the greatest key's VRIDs)
        memberships = held[key]
        out.update(memberships)
        svc = view.services[key]
        ips = {m.ip for m in memberships}
        if svc.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL:
            ready = frozenset(view.ready_endpoint_nodes(key))
            for ip in ips:
                local[ip] = local.get(ip, frozenset()) | ready
        annotated = parse_vrids(view.vrids_annotation(key, svc))
        vrids.update((ip, annotated) for ip in ips)
    return VipInput(frozenset(out), local, vrids)


def group_name(m: VIPMembership) -> str:
    return f"{m.advertisement}/{m.ip}"


def vip_groups(
    vip_input: VipInput, infos: Mapping[str, InterfaceInfo]
) -> tuple[list[VipGroup], list[str]]:
    """Renderer input from memberships; an IP without an interface is reported, not fatal.

    Without `interface` on the VIPAdvertisement, the interface is the local one whose
    subnet holds the IP; nodes must then name it alike (set `interface` otherwise).
    The VRID is the one the controller wrote on the Service (:mod:`teapot_lb.vrrp.vrid_book`),
    so every node runs the same instance for the IP; without one the IP is not run here.
    """
    groups: list[VipGroup] = []
    errors: list[str] = []
    for m in sorted(vip_input.memberships, key=lambda m: (m.advertisement, m.ip)):
        ip = ip_address(m.ip)
        vrid = vip_input.vrids.get(m.ip, {}).get(m.advertisement)
        if vrid is None:
            errors.append(
                f"{m.ip}: VIP group {group_name(m)}: no virtual router ID allocated for"
                f" VIPAdvertisement {m.advertisement!r} ({ANNOTATION_VRIDS} on the Service,"
                " written by the controller; its Events say why)"
            )
            continue
        iface = m.interface
        if iface is None:
            found = default_interfaces(ip, dict(infos))
            if not found:
                errors.append(f"{m.ip}: no interface's subnet contains it; set interface")
                continue
            iface = found[0]
        try:
            groups.append(
                VipGroup(
                    name=group_name(m),
                    interface=iface,
                    vips=(ip,),
                    candidate_nodes=m.candidates,
                    advert_interval_s=m.advertisement_interval_s or DEFAULT_ADVERT_INTERVAL_S,
                    vrid_range=m.vrid_range or (VRID_MIN, VRID_MAX),
                    unicast=m.unicast_peers,
                    vrid=vrid,
                    local_traffic_policy=m.ip in vip_input.local,
                )
            )
        except VipConfigError as err:
            errors.append(str(err))
    return groups, errors


def node_addresses(
    view: ClusterView, known: dict[str, tuple[Node, tuple[IPAddress, ...]]] | None = None
) -> dict[str, tuple[IPAddress, ...]]:
    """Each Node's addresses. `known` (kept by the caller between calls): see
    :func:`teapot_lb.kept.by_name` (at 1,000 Nodes, parsing them all was most of a step)."""
    return by_name(view.nodes, {} if known is None else known, lambda n: tuple(n.addresses()))


def failed_vips(
    groups: Sequence[VipGroup], errors: Sequence[str], rendered: Sequence[VipConfigError]
) -> dict[str, str]:
    """VIP → why it is not run here, from the errors naming it: those of :func:`vip_groups`
    (which start with the IP) and the renderer's (which name their VIP groups)."""
    out: dict[str, str] = {}
    for text in errors:
        head = text.split(":", 1)[0]
        try:
            out.setdefault(str(ip_address(head)), text)
        except ValueError:
            continue
    vips_of = {g.name: g.vips for g in groups}
    for err in rendered:
        for name in err.groups:
            for ip in vips_of.get(name, ()):
                out.setdefault(str(ip), str(err))
    return out


VRIDS_FILE = "vrids.json"


def load_vrids(path: Path) -> dict[str, int]:
    """The allocation kept by the previous run; empty when missing or unreadable."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, int) and VRID_MIN <= v <= VRID_MAX}


def save_vrids(path: Path, vrids: Mapping[str, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(sorted(vrids.items())), indent=1) + "\n")
    os.replace(tmp, path)


class VIPBackend:
    """A :class:`~teapot_lb.speaker.backend.Backend` of the node speaker."""

    def __init__(
        self,
        node: str,
        state_dir: Path,
        *,
        binary: str = "keepalived",
        on_change: Callable[[], None] | None = None,
        list_interfaces: Callable[[], Awaitable[dict[str, InterfaceInfo]]] = interfaces,
    ) -> None:
        self.node = node
        self._list_interfaces = TimedListing(list_interfaces)
        self._on_change = on_change
        self.transitions = 0
        self.supervisor = KeepalivedSupervisor(
            state_dir, binary=binary, on_transition=self._on_transition
        )
        self.rendered: Rendered | None = None
        self.errors: list[str] = []
        self.failed: dict[str, str] = {}  # VIP -> why this node does not run it (per Service)
        self.vrids_path = state_dir / VRIDS_FILE
        self.vrids: dict[str, int] = load_vrids(self.vrids_path)  # instance token -> VRID
        self._tracks: dict[str, bool] = {}  # track file -> written value
        self._node_addresses: dict[str, tuple[Node, tuple[IPAddress, ...]]] = {}
        self._log = log.get("speaker.vip").bind(node=node)

    # --- the node speaker's backend protocol ------------------------------------------------

    @property
    def mode(self) -> Mode:
        return Mode.VIP

    def plan_options(self, options: PlanOptions) -> PlanOptions:
        return options

    async def apply_plan(self, step: Step) -> None:
        """Every node's memberships, not only this node's (see :func:`cluster_vip_input`)."""
        vip_input = cluster_vip_input(step.view, step.options, step.cache)
        if not vip_input.memberships and self.rendered is None:
            return  # keepalived is not needed (yet)
        infos = await self._list_interfaces()
        groups, errors = vip_groups(vip_input, infos)
        addresses = node_addresses(step.view, self._node_addresses)
        await self.apply(groups, addresses, sorted(infos), errors, vip_input.local)

    def failure_inputs(self) -> object:
        return dict(self.failed)

    def failure(self, decision: Decision) -> str | None:
        return self.failed.get(decision.ip)

    async def withdraw(self) -> None:
        await self.shutdown()

    def _on_transition(self, event: Transition) -> None:
        self.transitions += 1
        self._log.info("vrrp transition", transition=str(event))
        if self._on_change is not None:
            self._on_change()

    def kept_vrids(self, groups: Sequence[VipGroup]) -> dict[str, int]:
        """The previous VRIDs of the instances that still exist.

        Vanished instances are left out on purpose: given them, the renderer lets an
        instance whose node set changed inherit the old VRID, which a node without this
        history (one that just joined, which is what changed the node sets) cannot know,
        and the two would run the same VIPs under different VRIDs. Left out, such an
        instance is allocated afresh, the same on every node.
        """
        current = {key.token() for key in group_instances(groups)}
        return {token: vrid for token, vrid in self.vrids.items() if token in current}

    async def apply(
        self,
        groups: Sequence[VipGroup],
        addresses: Mapping[str, Sequence[IPAddress]],
        interfaces: Sequence[str],
        errors: Sequence[str] = (),
        local: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """Render, set the Local instances' track files, then (re)load keepalived if the
        text changed. `local`: IP → nodes with a ready endpoint (Local Services)."""
        rendered = render(
            self.node,
            groups,
            paths=self.supervisor.paths,
            node_addresses=addresses,
            interfaces=interfaces,
            previous_vrids=self.kept_vrids(groups),
        )
        if rendered.vrids != self.vrids:
            self.vrids = dict(rendered.vrids)
            try:
                save_vrids(self.vrids_path, self.vrids)
            except OSError as exc:
                self._log.warning("cannot keep the VRID allocation", error=str(exc))
        self.errors = [*errors, *(str(e) for e in rendered.errors)]
        self.failed = failed_vips(groups, errors, rendered.errors)
        for err in self.errors:
            self._log.error("vip configuration error", error=err)
        # Track files first, so a new Local instance starts in the right state.
        local = local or {}
        ips_of = {g.name: [str(v) for v in g.vips] for g in groups}
        for inst in rendered.instances:
            if inst.track_file is None:
                continue
            ok = any(
                self.node in local.get(ip, frozenset())
                for g in inst.groups
                for ip in ips_of.get(g, [])
            )
            path = str(inst.track_file)
            if self._tracks.get(path) != ok:
                self.supervisor.set_track(inst.track_file, ok)
                self._tracks[path] = ok
        if self.rendered is not None and self.rendered.text == rendered.text:
            return
        if self.rendered is None and not rendered.instances:
            return  # keepalived is not needed (yet)
        self.rendered = rendered
        await self.supervisor.apply(rendered)

    def masters(self) -> set[str]:
        """The VIPs this node is VRRP master of."""
        return {str(ip) for vips in self.supervisor.masters().values() for ip in vips}

    async def shutdown(self) -> None:
        await self.supervisor.stop()


def build(wiring: Wiring) -> VIPBackend:
    """The backend of `--modes vip`: keepalived, its files under `<state-dir>/keepalived`."""
    return VIPBackend(
        wiring.node,
        wiring.state_dir / "keepalived",
        binary=wiring.keepalived,
        on_change=wiring.notify,
    )
