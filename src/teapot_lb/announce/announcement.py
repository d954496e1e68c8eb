"""What a node announces, and the decision behind it (pure data): the announcement of each
mode (:class:`BGPRoute`, :class:`L2Claim`, :class:`VIPMembership`), one :class:`Decision`
per Service IP, node and mode, and the :class:`Plan` that holds them
(:func:`teapot_lb.announce.plan.plan` makes it; the backends apply it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import TYPE_CHECKING

from teapot_lb.bgp.attributes import DEFAULT_ATTRIBUTES, RouteAttributes

if TYPE_CHECKING:
    from teapot_lb.announce.totals import PlanDelta


class Mode(StrEnum):
    BGP = "bgp"
    L2 = "l2"
    VIP = "vip"


@dataclass(frozen=True, slots=True)
class BGPRoute:
    """Announce `prefix` to the BGPPeer `peer` with these path attributes (the BGP
    library's one route-attribute type). The next hop is the session's (next-hop self)
    unless `attributes.next_hop` names another (a third-party next hop on the peer's
    segment, RFC 4271 §5.1.3).

    `path` names one of several paths of the prefix (a backend node, say): routes of one
    peer and prefix with distinct `path` keys are announced as distinct paths, with
    ADD-PATH (RFC 7911) to peers that negotiated it, and the first path by key to the
    others; a route with the empty key is the path "". Routes with the same peer, prefix
    and key are merged (communities, the higher local preference)."""

    peer: str
    prefix: str
    attributes: RouteAttributes = DEFAULT_ATTRIBUTES
    path: str = ""

    def __post_init__(self) -> None:
        hop = self.attributes.next_hop
        if hop is not None and network_of(self.prefix).version != hop.version:
            # Refused here, in the planner that made it: the BGP library would refuse it
            # too, but only when the whole peer's routes are set.
            raise ValueError(
                f"BGP route {self.prefix} (path {self.path!r}) to {self.peer}: next hop "
                f"{hop} is not of the prefix's address family"
            )

    @property
    def mode(self) -> Mode:
        return Mode.BGP


@dataclass(frozen=True, order=True, slots=True)
class L2Claim:
    """Answer ARP/NDP for `ip`, on `interfaces` (empty: the interface whose subnet holds it)."""

    ip: str
    interfaces: tuple[str, ...] = ()

    @property
    def mode(self) -> Mode:
        return Mode.L2


@dataclass(frozen=True, order=True, slots=True)
class VIPMembership:
    """Take part in the keepalived election for `ip` among `candidates` (sorted node names)."""

    ip: str
    advertisement: str
    candidates: tuple[str, ...]
    interface: str | None = None
    advertisement_interval_s: float | None = None
    vrid_range: tuple[int, int] | None = None
    unicast_peers: bool = False

    @property
    def mode(self) -> Mode:
        return Mode.VIP


Announcement = BGPRoute | L2Claim | VIPMembership


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether `node` announces `ip` of Service `service` in `mode`, and why (not)."""

    service: str
    ip: str
    node: str
    mode: Mode | None
    announces: bool
    reason: str
    peers: tuple[str, ...] = ()  # BGP: the peers the route is announced to (Established)
    waiting: tuple[str, ...] = ()  # BGP: peers it is held for, whose session is not up


@dataclass(frozen=True)
class Plan:
    """`by_service`: each Service's decisions; with a :class:`PlanCache`, an unchanged
    Service keeps the very same tuple from one plan to the next (reporting compares them
    by identity to do only the work of what changed).

    A plan made with a cache does not copy what the cache keeps: `announcements`,
    `decisions`, `by_service` and `modes` are views of the cache's totals, valid until the
    next plan made with the same cache (which changes them), and `delta` says what this
    plan changed in the one before it (None: not known, compare everything)."""

    node: str
    announcements: AbstractSet[Announcement]
    decisions: Sequence[Decision]
    tenant_decisions: tuple[Decision, ...] = ()
    """Route mode (Teapot management cluster): one per TenantLoadBalancer address, its
    `service` the request's namespace/name (apart: nothing reports them on a Service)."""
    by_service: Mapping[str, tuple[Decision, ...]] = field(default_factory=dict, compare=False)
    # The announcements per mode, when the planner kept them (with a cache): of_mode copies
    # them instead of looking at every announcement.
    modes: Mapping[Mode, AbstractSet[Announcement]] | None = field(
        default=None, compare=False, repr=False
    )
    delta: PlanDelta | None = field(default=None, compare=False, repr=False)

    def of_mode(self, mode: Mode) -> set[Announcement]:
        if self.modes is not None:
            return set(self.modes.get(mode, ()))
        return {a for a in self.announcements if a.mode is mode}


@lru_cache(maxsize=65536)
def network_of(prefix: str) -> IPv4Network | IPv6Network:
    """A route's prefix parsed (once per prefix: planning runs on every change)."""
    return ip_network(prefix)
