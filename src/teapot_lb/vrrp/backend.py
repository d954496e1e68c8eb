"""VIP mode for one node: cluster view in, keepalived configured (the speaker's entry point).

:class:`VipBackend` ties the pure renderer to the supervisor: it renders this
node's configuration from a :class:`VipClusterView`, writes the Local-policy track
files (endpoint changes never cause a reload), and hands the result to the
supervisor, which reloads keepalived only if the text changed.
"""

from __future__ import annotations

import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from teapot_lb import log
from teapot_lb.vrrp.render import GarpPolicy, IPAddress, Rendered, VipGroup, render
from teapot_lb.vrrp.supervisor import KeepalivedSupervisor


def _log() -> Any:
    return log.get("vrrp.backend")


@dataclass(frozen=True)
class VipClusterView:
    """What every node needs to know, identical on all nodes.

    ``vrids`` is the cluster's VRID allocation (kept by the controller, see
    :func:`teapot_lb.vrrp.render.allocate_vrids`); ``local_endpoints`` maps a
    Local-policy group to the nodes that have ready endpoints for it.
    """

    groups: tuple[VipGroup, ...]
    node_addresses: Mapping[str, tuple[IPAddress, ...]] = field(default_factory=dict)
    vrids: Mapping[str, int] = field(default_factory=dict)
    local_endpoints: Mapping[str, frozenset[str]] = field(default_factory=dict)
    garp: GarpPolicy = field(default_factory=GarpPolicy)


def local_interfaces() -> frozenset[str]:
    """Interface names in this process's network namespace."""
    return frozenset(name for _, name in socket.if_nameindex())


class VipBackend:
    def __init__(self, node: str, supervisor: KeepalivedSupervisor) -> None:
        self.node = node
        self.supervisor = supervisor
        self.rendered: Rendered | None = None

    async def apply(
        self, view: VipClusterView, *, interfaces: Collection[str] | None = None
    ) -> Rendered:
        """Render for this node and make keepalived run it; returns what was rendered.

        ``interfaces`` defaults to this namespace's interfaces. Configuration errors
        are logged and returned in :attr:`Rendered.errors`; the rest still runs.
        """
        rendered = render(
            self.node,
            view.groups,
            paths=self.supervisor.paths,
            node_addresses=view.node_addresses,
            interfaces=local_interfaces() if interfaces is None else interfaces,
            previous_vrids=view.vrids,
            garp=view.garp,
        )
        for err in rendered.errors:
            _log().error("vip configuration error", error=str(err), kind=type(err).__name__)
        # Track files first, so a new Local instance starts with the right value.
        for plan in rendered.instances:
            if plan.track_file is not None:
                ready = any(
                    self.node in view.local_endpoints.get(g, frozenset()) for g in plan.groups
                )
                self.supervisor.set_track(plan.track_file, ready)
        await self.supervisor.apply(rendered)
        self.rendered = rendered
        return rendered
