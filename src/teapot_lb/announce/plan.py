"""Announcement planning: what one node announces, and why every other choice was made (pure).

`plan(view, node)` reads a :class:`~teapot_lb.cluster.ClusterView` and returns the set of
announcements this node must make (BGP routes per peer, L2 claims, VIP instances) together
with one :class:`Decision` per (Service IP, mode) saying whether the node announces it and,
if not, why. Backends apply the difference between two plans; `teapot-lb explain` prints
the decisions of every node. No I/O, no clock: the same view gives the same plan.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from ipaddress import ip_network
from typing import TypeVar

from teapot_lb.announce.cache import L2_KINDS, PLAN_KINDS, PlanCache
from teapot_lb.announce.election import EXCLUDE_LABEL, ranking
from teapot_lb.bgp.attributes import DEFAULT_ATTRIBUTES, RouteAttributes
from teapot_lb.bgp.wire import LargeCommunity
from teapot_lb.cluster import ClusterView
from teapot_lb.model import (
    AddressPool,
    BGPAdvertisement,
    BGPPeer,
    ExternalTrafficPolicy,
    IPAddress,
    L2Advertisement,
    Node,
    Service,
    VIPAdvertisement,
    matches_any,
    parse_community,
    parse_duration,
    parse_large_community,
)
from teapot_lb.model.service import LOAD_BALANCER_CLASS


class Mode(StrEnum):
    BGP = "bgp"
    L2 = "l2"
    VIP = "vip"


@dataclass(frozen=True)
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
        if hop is not None and ip_network(self.prefix).version != hop.version:
            # Refused here, in the planner that made it: the BGP library would refuse it
            # too, but only when the whole peer's routes are set.
            raise ValueError(
                f"BGP route {self.prefix} (path {self.path!r}) to {self.peer}: next hop "
                f"{hop} is not of the prefix's address family"
            )

    @property
    def mode(self) -> Mode:
        return Mode.BGP


@dataclass(frozen=True, order=True)
class L2Claim:
    """Answer ARP/NDP for `ip`, on `interfaces` (empty: the interface whose subnet holds it)."""

    ip: str
    interfaces: tuple[str, ...] = ()

    @property
    def mode(self) -> Mode:
        return Mode.L2


@dataclass(frozen=True, order=True)
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


@dataclass(frozen=True)
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
    by identity to do only the work of what changed)."""

    node: str
    announcements: frozenset[Announcement]
    decisions: tuple[Decision, ...]
    by_service: Mapping[str, tuple[Decision, ...]] = field(default_factory=dict, compare=False)

    def of_mode(self, mode: Mode) -> set[Announcement]:
        return {a for a in self.announcements if a.mode is mode}


@dataclass(frozen=True)
class PlanOptions:
    """What the planner cannot read from the view.

    `live_speakers`: nodes whose speaker is alive (from membership); None means every
    node is assumed alive. `established_peers`: the BGPPeer names whose session on this
    node is Established (from the BGP backend); None means every session is assumed up
    (`explain`). `down_peers`: BGPPeers whose session is not established, also when
    `established_peers` is None. A route is "announced to" an Established peer only: the
    others cannot have it yet (the route is held for them). `handle_unclassed`: whether
    Services without a `loadBalancerClass` are ours.
    """

    live_speakers: Collection[str] | None = None
    down_peers: Collection[str] = ()
    established_peers: Collection[str] | None = None
    load_balancer_class: str = LOAD_BALANCER_CLASS
    handle_unclassed: bool = True


@dataclass
class _Say:
    """Records decisions about one Service IP on one node."""

    service: str
    ip: str
    node: str
    into: list[Decision]

    def __call__(
        self,
        mode: Mode | None,
        yes: bool,
        reason: str,
        peers: tuple[str, ...] = (),
        *,
        waiting: tuple[str, ...] = (),
    ) -> None:
        d = Decision(self.service, self.ip, self.node, mode, yes, reason, peers, waiting)
        self.into.append(d)


def node_exclusion(node: Node | None) -> str | None:
    """Why a node may not announce anything at all, or None."""
    if node is None:
        return "node is not known to the cluster (no Node object)"
    if EXCLUDE_LABEL in node.labels:
        return f"excluded: node has label {EXCLUDE_LABEL}"
    if node.network_unavailable:
        return "excluded: node condition NetworkUnavailable is True"
    return None


def _eligible_nodes(view: ClusterView, service_key: str, service: Service) -> dict[str, str | None]:
    """Every node → None when it may announce the Service, else why not (mode-independent)."""
    local = service.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
    ready = view.ready_endpoint_nodes(service_key) if local else set()
    out: dict[str, str | None] = {}
    for name, node in view.nodes.items():
        why = node_exclusion(node)
        if why is None and local and name not in ready:
            why = "no local endpoint: externalTrafficPolicy is Local and no ready endpoint here"
        out[name] = why
    return out


def _prefix(ip: IPAddress, adv: BGPAdvertisement) -> str:
    if ip.version == 4:
        length = adv.spec.aggregation_length if adv.spec.aggregation_length is not None else 32
    else:
        v6 = adv.spec.aggregation_length_v6
        length = v6 if v6 is not None else 128
    return _prefix_text(ip, length)


# Planning runs on every change for every Service: parse each IP/prefix and community
# list once, not once per Service, peer and plan.
@lru_cache(maxsize=65536)
def _prefix_text(ip: IPAddress, length: int) -> str:
    return str(ip_network(f"{ip}/{length}", strict=False))


@lru_cache(maxsize=4096)
def _communities(texts: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(sorted({parse_community(c) for c in texts}))


@lru_cache(maxsize=4096)
def _large_communities(texts: tuple[str, ...]) -> tuple[LargeCommunity, ...]:
    return tuple(sorted({LargeCommunity(*parse_large_community(c)) for c in texts}))


def _sorted(objs: Mapping[str, object]) -> list[str]:
    return sorted(objs)


class _Planner:
    def __init__(self, view: ClusterView, options: PlanOptions) -> None:
        self.view = view
        self.options = options

    def handled_services(self) -> Iterable[tuple[str, Service]]:
        for key in _sorted(self.view.services):
            svc = self.view.services[key]
            if svc.is_handled(self.options.load_balancer_class, self.options.handle_unclassed):
                yield key, svc

    def advertisements_for(
        self, pool: AddressPool
    ) -> tuple[list[BGPAdvertisement], list[L2Advertisement], list[VIPAdvertisement]]:
        v = self.view
        bgp = [v.bgp_advertisements[k] for k in _sorted(v.bgp_advertisements)]
        l2 = [v.l2_advertisements[k] for k in _sorted(v.l2_advertisements)]
        vip = [v.vip_advertisements[k] for k in _sorted(v.vip_advertisements)]
        return (
            [a for a in bgp if a.spec.selects_pool(pool)],
            [a for a in l2 if a.spec.selects_pool(pool)],
            [a for a in vip if a.spec.selects_pool(pool)],
        )

    def decide(
        self, node_name: str, key: str, svc: Service, eligible: Mapping[str, str | None]
    ) -> tuple[set[Announcement], list[Decision]]:
        out: set[Announcement] = set()
        decisions: list[Decision] = []
        node = self.view.nodes.get(node_name)
        node_labels = node.labels if node is not None else {}
        why_not_node = eligible.get(node_name, node_exclusion(None))
        ips = svc.ingress_ips()
        if not ips:
            _Say(key, "", node_name, decisions)(None, False, "no IP assigned yet")
        for ip in ips:
            say = _Say(key, str(ip), node_name, decisions)
            pool = self.view.pool_of(ip)
            if pool is None:
                say(None, False, "the IP is in no AddressPool")
                continue
            bgp_advs, l2_advs, vip_advs = self.advertisements_for(pool)
            if not (bgp_advs or l2_advs or vip_advs):
                say(None, False, f"no advertisement selects AddressPool {pool.name}")
                continue
            if bgp := _selecting(Mode.BGP, bgp_advs, node_labels, why_not_node, say):
                self._bgp(ip, node_labels, bgp, say, out)
            if l2 := _selecting(Mode.L2, l2_advs, node_labels, why_not_node, say):
                self._l2(ip, node_name, l2, eligible, say, out)
            if vip := _selecting(Mode.VIP, vip_advs, node_labels, why_not_node, say):
                self._vip(ip, node_name, vip, eligible, say, out)
        return out, decisions

    def _bgp(
        self,
        ip: IPAddress,
        node_labels: Mapping[str, str],
        advs: list[BGPAdvertisement],
        say: _Say,
        out: set[Announcement],
    ) -> None:
        peers = self.view.bgp_peers
        node_peers = [
            peers[k]
            for k in _sorted(peers)
            if matches_any(peers[k].spec.node_selectors, node_labels)
        ]
        if not node_peers:
            say(Mode.BGP, False, "no BGPPeer selects this node")
            return
        announced: list[str] = []
        for adv in advs:
            for peer in node_peers:
                if adv.spec.peers and peer.name not in adv.spec.peers:
                    continue
                out.add(_route(ip, adv, peer))
                announced.append(peer.name)
        if not announced:
            say(Mode.BGP, False, "the advertisements name peers this node has no session with")
            return
        targets = set(announced)
        established = self.options.established_peers
        down = targets & set(self.options.down_peers)
        if established is not None:
            down |= targets - set(established)
        up, waiting = sorted(targets - down), tuple(sorted(down))
        held = f"held for {', '.join(waiting)} (session not Established: not received there)"
        if not up:
            say(Mode.BGP, False, f"no session Established: {held}", waiting=waiting)
            return
        reason = "announced to " + ", ".join(up) + (f"; {held}" if waiting else "")
        say(Mode.BGP, True, reason, tuple(up), waiting=waiting)

    def _l2(
        self,
        ip: IPAddress,
        node_name: str,
        advs: list[L2Advertisement],
        eligible: Mapping[str, str | None],
        say: _Say,
        out: set[Announcement],
    ) -> None:
        candidates = self._candidates(advs, eligible)
        live = self.options.live_speakers
        if live is not None:
            if node_name not in live:
                say(Mode.L2, False, "speaker not alive (membership)")
                return
            candidates = [n for n in candidates if n in live]
        order = ranking(ip, candidates)
        if not order or order[0] != node_name:
            owner = order[0] if order else "nobody"
            rank = order.index(node_name) + 1 if node_name in order else 0
            say(Mode.L2, False, f"not elected: owner is {owner} (rank {rank} of {len(order)})")
            return
        interfaces = sorted({i for a in advs for i in a.spec.interfaces})
        # An advertisement without interfaces allows the default one; then no restriction.
        if any(not a.spec.interfaces for a in advs):
            interfaces = []
        out.add(L2Claim(str(ip), tuple(interfaces)))
        say(Mode.L2, True, f"elected among {len(order)} candidate(s)")

    def _vip(
        self,
        ip: IPAddress,
        node_name: str,
        advs: list[VIPAdvertisement],
        eligible: Mapping[str, str | None],
        say: _Say,
        out: set[Announcement],
    ) -> None:
        # The first advertisement (by name) that selects this node decides the instance.
        adv = advs[0]
        candidates = tuple(sorted(self._candidates([adv], eligible)))
        spec = adv.spec
        interval = None
        if spec.advertisement_interval is not None:
            interval = parse_duration(spec.advertisement_interval)
        vrids = (spec.vrid_range.start, spec.vrid_range.end) if spec.vrid_range else None
        out.add(
            VIPMembership(
                ip=str(ip),
                advertisement=adv.name,
                candidates=candidates,
                interface=spec.interface,
                advertisement_interval_s=interval,
                vrid_range=vrids,
                unicast_peers=spec.unicast_peers,
            )
        )
        say(Mode.VIP, True, f"VRRP candidate with {', '.join(candidates)} ({adv.name})")

    def _candidates(
        self,
        advs: Iterable[L2Advertisement | VIPAdvertisement],
        eligible: Mapping[str, str | None],
    ) -> list[str]:
        nodes = self.view.nodes
        return [
            name
            for name, why in eligible.items()
            if why is None
            and any(matches_any(a.spec.node_selectors, nodes[name].labels) for a in advs)
        ]


_Adv = TypeVar("_Adv", BGPAdvertisement, L2Advertisement, VIPAdvertisement)


def _selecting(
    mode: Mode,
    advs: list[_Adv],
    node_labels: Mapping[str, str],
    why_not_node: str | None,
    say: _Say,
) -> list[_Adv]:
    """The advertisements of one mode that select this node; records why when none does."""
    if not advs:
        return []
    if why_not_node is not None:
        say(mode, False, why_not_node)
        return []
    selecting = [a for a in advs if matches_any(a.spec.node_selectors, node_labels)]
    if not selecting:
        names = ", ".join(a.name for a in advs)
        say(mode, False, f"not selected: nodeSelectors of {names} do not match the node")
    return selecting


def _route(ip: IPAddress, adv: BGPAdvertisement, peer: BGPPeer) -> BGPRoute:
    spec = adv.spec
    return BGPRoute(
        peer=peer.name,
        prefix=_prefix(ip, adv),
        attributes=RouteAttributes(
            communities=_communities(tuple(spec.communities)),
            large_communities=_large_communities(tuple(spec.large_communities)),
            local_pref=spec.local_pref if peer.is_ibgp() else None,
        ),
    )


def plan(
    view: ClusterView,
    node: str,
    options: PlanOptions | None = None,
    *,
    cache: PlanCache | None = None,
) -> Plan:
    """What `node` announces for every Service it may serve, with the reason for each choice.

    With a `cache` (one per caller, kept between calls), Services whose inputs did not change
    since the previous call reuse their decisions; the plan is the same as without it.
    """
    opts = options or PlanOptions()
    planner = _Planner(view, opts)
    announcements: set[Announcement] = set()
    decisions: list[Decision] = []
    by_service: dict[str, tuple[Decision, ...]] = {}
    if cache is None:
        for key, svc in planner.handled_services():
            anns, decs = planner.decide(node, key, svc, _eligible_nodes(view, key, svc))
            announcements |= anns
            decisions.extend(decs)
            by_service[key] = tuple(decs)
    else:

        def decide(key: str, svc: Service) -> tuple[frozenset[Announcement], tuple[Decision, ...]]:
            if not svc.is_handled(opts.load_balancer_class, opts.handle_unclassed):
                return frozenset(), ()
            anns, decs = planner.decide(node, key, svc, _eligible_nodes(view, key, svc))
            return frozenset(anns), tuple(decs)

        scope = (node, _options_key(opts, liveness=True))
        for kept_anns, kept_decs in cache.plans.results(view, scope, PLAN_KINDS, decide):
            announcements |= kept_anns
            decisions.extend(kept_decs)
            if kept_decs:
                by_service[kept_decs[0].service] = kept_decs
    return Plan(node, frozenset(announcements), tuple(decisions), by_service)


def explain(
    view: ClusterView, service_key: str, options: PlanOptions | None = None
) -> list[Decision]:
    """Every node's decisions for one Service, by node name then IP then mode."""
    planner = _Planner(view, options or PlanOptions())
    svc = view.services.get(service_key)
    if svc is None:
        return []
    if not svc.is_handled(planner.options.load_balancer_class, planner.options.handle_unclassed):
        return []
    eligible = _eligible_nodes(view, service_key, svc)
    decisions: list[Decision] = []
    for node in sorted(view.nodes):
        decisions.extend(planner.decide(node, service_key, svc, eligible)[1])
    return decisions


def l2_election_orders(
    view: ClusterView, options: PlanOptions | None = None, *, cache: PlanCache | None = None
) -> dict[str, tuple[str, ...]]:
    """Every IP announced in L2 mode → the nodes allowed to own it, in election order.

    Liveness is ignored: this is what every speaker agrees on even when heartbeats are
    cut, so the L2 backend uses it to settle two owners answering at once (split brain).
    With a `cache`, unchanged Services reuse their orders (the result is the same).
    """
    opts = options or PlanOptions()
    planner = _Planner(view, opts)

    def orders(key: str, svc: Service) -> tuple[tuple[str, tuple[str, ...]], ...]:
        if not svc.is_handled(opts.load_balancer_class, opts.handle_unclassed):
            return ()
        out: list[tuple[str, tuple[str, ...]]] = []
        eligible: dict[str, str | None] | None = None
        for ip in svc.ingress_ips():
            pool = view.pool_of(ip)
            if pool is None:
                continue
            l2_advs = planner.advertisements_for(pool)[1]
            if not l2_advs:
                continue
            if eligible is None:
                eligible = _eligible_nodes(view, key, svc)
            out.append((str(ip), ranking(ip, planner._candidates(l2_advs, eligible))))
        return tuple(out)

    out: dict[str, tuple[str, ...]] = {}
    if cache is None:
        per_service: Iterable[tuple[tuple[str, tuple[str, ...]], ...]] = (
            orders(key, view.services[key]) for key in _sorted(view.services)
        )
    else:
        scope = _options_key(opts, liveness=False)
        per_service = cache.orders.results(view, scope, L2_KINDS, orders)
    for items in per_service:
        for ip_text, order in items:
            out[ip_text] = order
    return out


def _options_key(options: PlanOptions, *, liveness: bool) -> tuple[object, ...]:
    key: tuple[object, ...] = (options.load_balancer_class, options.handle_unclassed)
    if liveness:
        live = options.live_speakers
        up = options.established_peers
        key += (None if live is None else frozenset(live), frozenset(options.down_peers))
        key += (None if up is None else frozenset(up),)
    return key
