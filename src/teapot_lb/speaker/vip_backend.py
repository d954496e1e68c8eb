"""VIP backend: the plan's VIP memberships → keepalived.conf → the supervisor.

The renderer allocates virtual router IDs from the cluster-wide list of VIP groups, so
every node must render from the same list: :func:`cluster_vip_groups` computes it from
the view (the memberships of every node), not only this node's. keepalived is started
only once this node takes part in an instance, and reloaded only when the rendered text
changes (the supervisor compares it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from teapot_lb import log
from teapot_lb.announce.plan import Mode, PlanOptions, VIPMembership, plan
from teapot_lb.cluster import ClusterView
from teapot_lb.l2.responder import InterfaceInfo, default_interfaces
from teapot_lb.vrrp.notify import Transition
from teapot_lb.vrrp.render import (
    DEFAULT_ADVERT_INTERVAL_S,
    VRID_MAX,
    VRID_MIN,
    IPAddress,
    Rendered,
    VipConfigError,
    VipGroup,
    render,
)
from teapot_lb.vrrp.supervisor import KeepalivedSupervisor


def cluster_vip_memberships(
    view: ClusterView, options: PlanOptions | None = None
) -> frozenset[VIPMembership]:
    """Every node's VIP memberships (the same on every node for the same view)."""
    if not view.vip_advertisements:
        return frozenset()
    out: set[VIPMembership] = set()
    for node in sorted(view.nodes):
        for a in plan(view, node, options).of_mode(Mode.VIP):
            assert isinstance(a, VIPMembership)
            out.add(a)
    return frozenset(out)


def vip_groups(
    memberships: frozenset[VIPMembership], infos: Mapping[str, InterfaceInfo]
) -> tuple[list[VipGroup], list[str]]:
    """Renderer input from memberships; an IP without an interface is reported, not fatal.

    Without `interface` on the VIPAdvertisement, the interface is the local one whose
    subnet holds the IP; nodes must then name it alike (set `interface` otherwise).
    """
    groups: list[VipGroup] = []
    errors: list[str] = []
    for m in sorted(memberships, key=lambda m: (m.advertisement, m.ip)):
        ip = ip_address(m.ip)
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
                    name=f"{m.advertisement}/{m.ip}",
                    interface=iface,
                    vips=(ip,),
                    candidate_nodes=m.candidates,
                    advert_interval_s=m.advertisement_interval_s or DEFAULT_ADVERT_INTERVAL_S,
                    vrid_range=m.vrid_range or (VRID_MIN, VRID_MAX),
                    unicast=m.unicast_peers,
                )
            )
        except VipConfigError as err:
            errors.append(str(err))
    return groups, errors


def node_addresses(view: ClusterView) -> dict[str, tuple[IPAddress, ...]]:
    return {
        name: tuple(ip_address(str(a)) for a in node.addresses())
        for name, node in view.nodes.items()
    }


class VIPBackend:
    def __init__(
        self,
        node: str,
        state_dir: Path,
        *,
        binary: str = "keepalived",
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.node = node
        self._on_change = on_change
        self.transitions = 0
        self.supervisor = KeepalivedSupervisor(
            state_dir, binary=binary, on_transition=self._on_transition
        )
        self.rendered: Rendered | None = None
        self.errors: list[str] = []
        self._log: Any = log.get("speaker.vip").bind(node=node)

    def _on_transition(self, event: Transition) -> None:
        self.transitions += 1
        self._log.info("vrrp transition", transition=str(event))
        if self._on_change is not None:
            self._on_change()

    async def apply(
        self,
        groups: Sequence[VipGroup],
        addresses: Mapping[str, Sequence[IPAddress]],
        interfaces: Sequence[str],
        errors: Sequence[str] = (),
    ) -> None:
        rendered = render(
            self.node,
            groups,
            paths=self.supervisor.paths,
            node_addresses=addresses,
            interfaces=interfaces,
        )
        self.errors = [*errors, *(str(e) for e in rendered.errors)]
        for err in self.errors:
            self._log.error("vip configuration error", error=err)
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
