"""Announcement planning: what one node announces, and why every other choice was made (pure).

`plan(view, node)` reads a :class:`~teapot_lb.cluster.ClusterView` and returns the set of
announcements this node must make (BGP routes per peer, L2 claims, VIP instances) together
with one :class:`Decision` per (Service IP, mode) saying whether the node announces it and,
if not, why. Backends apply the difference between two plans; `teapot-lb explain` prints
the decisions of every node. No I/O, no clock: the same view gives the same plan.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TypeVar

from teapot_lb.announce.announcement import (
    Announcement,
    BGPRoute,
    Decision,
    L2Claim,
    Mode,
    Plan,
    VIPMembership,
    network_of,
)
from teapot_lb.announce.bgp_route import host_prefix, route_of
from teapot_lb.announce.cache import PLAN_KINDS, Election, PlanCache
from teapot_lb.announce.election import chosen, exclusion, score, suffix
from teapot_lb.announce.hop_health import HopVerdict, live_routes
from teapot_lb.announce.sessions import Sessions, lay, with_sessions
from teapot_lb.announce.sessions import announced as announced_to
from teapot_lb.announce.totals import PlanDelta
from teapot_lb.cluster import ClusterView
from teapot_lb.model import (
    AddressPool,
    BGPAdvertisement,
    ExternalTrafficPolicy,
    IPAddress,
    L2Advertisement,
    Node,
    Service,
    VIPAdvertisement,
    matches_any,
    parse_duration,
)
from teapot_lb.model.service import LOAD_BALANCER_CLASS
from teapot_lb.ovn.gateways import Gateways, gateway_nodes
from teapot_lb.tenancy.programmed import programmed_routes
from teapot_lb.tenancy.routes import TenantRoute

_S = TypeVar("_S")


class _Union(AbstractSet[Announcement]):
    """A read-only view of two sets as their union (the second one small: route mode's)."""

    def __init__(self, big: AbstractSet[Announcement], small: frozenset[Announcement]) -> None:
        self._big, self._small = big, small

    @classmethod
    def _from_iterable(cls, items: Iterable[_S]) -> AbstractSet[_S]:
        return frozenset(items)  # what set operations on the view return

    def __repr__(self) -> str:
        return f"_Union({set(self)!r})"

    def __contains__(self, item: object) -> bool:
        return item in self._big or item in self._small

    def __iter__(self) -> Iterator[Announcement]:
        yield from self._big
        yield from (a for a in self._small if a not in self._big)

    def __len__(self) -> int:
        return len(self._big) + sum(1 for a in self._small if a not in self._big)


@dataclass(frozen=True)
class PlanOptions:
    """What the planner cannot read from the view.

    `live_speakers`: nodes whose speaker is alive (from membership); None means every
    node is assumed alive. `established_peers`: the BGPPeer names whose session on this
    node is Established (from the BGP backend); None means every session is assumed up
    (`explain`). `down_peers`: BGPPeers whose session is not established, also when
    `established_peers` is None. A route is "announced to" an Established peer only: the
    others cannot have it yet (the route is held for them). `handle_unclassed`: whether
    Services without a `loadBalancerClass` are ours. `ovn_gateways`: where OVN's gateway
    ports are (from the Southbound); with it, a pool that an OVNAdvertisement also selects
    is announced by BGP only from the nodes of the chassis holding the gateway ports (None:
    not gated, every selected node announces).
    """

    live_speakers: Collection[str] | None = None
    down_peers: Collection[str] = ()
    established_peers: Collection[str] | None = None
    load_balancer_class: str = LOAD_BALANCER_CLASS
    handle_unclassed: bool = True
    ovn_gateways: Gateways | None = None
    # Route mode: what this speaker's probes say of the tenant next hops (a failing hop is
    # withheld while another hop of its route answers; teapot_lb.announce.hop_health).
    tenant_hops: HopVerdict = field(default_factory=HopVerdict)


@dataclass
class _Say:
    """Records decisions about one Service IP on one node."""

    service: str
    ip: str
    node: str
    into: list[Decision]
    note: str = ""  # appended to every reason (the OVN gateway the decision followed)

    def __call__(
        self,
        mode: Mode | None,
        yes: bool,
        reason: str,
        peers: tuple[str, ...] = (),
        *,
        waiting: tuple[str, ...] = (),
    ) -> None:
        reason = f"{reason}; {self.note}" if self.note else reason
        d = Decision(self.service, self.ip, self.node, mode, yes, reason, peers, waiting)
        self.into.append(d)


def node_exclusion(node: Node | None) -> str | None:
    """Why a node may not announce anything at all, or None."""
    if node is None:
        return "node is not known to the cluster (no Node object)"
    return exclusion(node.labels, node.network_unavailable)


# An OVNAdvertisement's pools are load-balanced by OVN, not announced by nodes.
OVN_ONLY = "OVN mode: the OVN writer programs it in the Northbound database, no node announces it"
_NO_LOCAL_ENDPOINT = "no local endpoint: externalTrafficPolicy is Local and no ready endpoint here"


def _sorted(objs: Mapping[str, object]) -> list[str]:
    return sorted(objs)


# OVN gateway gating: node → why not (None: may announce), and the note decisions get.
_Gated = tuple[dict[str, str | None], str]
_Gate = Callable[[Mapping[str, str | None]], _Gated]
# A pool's BGP, L2 and VIP advertisements.
_PoolAdvertisements = tuple[list[BGPAdvertisement], list[L2Advertisement], list[VIPAdvertisement]]


class Planner:
    def __init__(
        self, view: ClusterView, options: PlanOptions, cache: PlanCache | None = None
    ) -> None:
        self.view = view
        self.options = options
        self.sessions = Sessions.of(options.established_peers, options.down_peers)
        self._cache = cache
        # Bounded ECMP, memoised for explain (every node asks about the same IP): node →
        # names of the BGPPeers that select it; (IP, advertisement) → chosen nodes and how
        # many were eligible.
        self._node_peers: dict[str, frozenset[str]] | None = None
        self._chosen: dict[tuple[IPAddress, str], tuple[tuple[str, ...], int]] = {}
        # Every node's own exclusion, and the L2/VIP candidates of Cluster-policy Services
        # per advertisement set: the same for every such Service, so computed once (at
        # 1,000 nodes and 100k Services, per Service they were 10^8 steps).
        self._exclusions: dict[str, str | None] | None = None
        self._shared_candidates: dict[tuple[str, ...], list[str]] = {}
        self._shared_gated: dict[str, _Gated] = {}
        self._deciding_vip: dict[tuple[str, ...], list[VIPAdvertisement]] = {}
        self._pool_advertisements: dict[int, _PoolAdvertisements] = {}
        # What the Service being decided read of the other nodes (for the plan cache; None:
        # not recorded): the elections it ran (IP, chosen nodes, score to beat), and whether
        # it read every candidate (a VRRP instance lists them all).
        self.elections: list[Election] | None = None
        self.reads_every_node = False
        # When the Service is planned again only because other nodes came, went or changed
        # (`entering`: those that came or changed): what its elections chose last time,
        # by IP (:meth:`_elect`).
        self.chosen_before: Mapping[bytes, tuple[str, ...]] | None = None
        self.entering: frozenset[str] = frozenset()

    def eligible(self, key: str, svc: Service) -> Mapping[str, str | None]:
        """Every node → None when it may announce the Service, else why not (mode-independent)."""
        exclusions = self.node_exclusions()
        if svc.spec.external_traffic_policy is not ExternalTrafficPolicy.LOCAL:
            return exclusions
        ready = self.view.ready_endpoint_nodes(key)
        return {
            name: why if why is not None or name in ready else _NO_LOCAL_ENDPOINT
            for name, why in exclusions.items()
        }

    def node_exclusions(self) -> dict[str, str | None]:
        """Every node → None when nothing excludes it from announcing, else why."""
        if self._exclusions is None:
            nodes = self.view.nodes
            if self._cache is None:
                self._exclusions = {n: node_exclusion(node) for n, node in nodes.items()}
            else:
                # Kept per Node object between calls: a step looks at the Nodes that changed.
                memo = self._cache.exclusions
                for gone in [n for n in memo if n not in nodes]:
                    del memo[gone]
                for n, node in nodes.items():
                    hit = memo.get(n)
                    if hit is None or hit[0] is not node:
                        memo[n] = (node, node_exclusion(node))
                self._exclusions = {n: memo[n][1] for n in nodes}
        return self._exclusions

    def handled_services(self) -> Iterable[tuple[str, Service]]:
        for key in _sorted(self.view.services):
            svc = self.view.services[key]
            if svc.is_handled(self.options.load_balancer_class, self.options.handle_unclassed):
                yield key, svc

    def advertisements_for(self, pool: AddressPool) -> _PoolAdvertisements:
        """The advertisements of each mode that select `pool`, by name (the same lists for
        every IP of the pool: callers do not change them)."""
        # By the pool object's identity: the view holds its pools as long as the planner.
        found = self._pool_advertisements.get(id(pool))
        if found is None:
            v = self.view
            bgp = [v.bgp_advertisements[k] for k in _sorted(v.bgp_advertisements)]
            l2 = [v.l2_advertisements[k] for k in _sorted(v.l2_advertisements)]
            vip = [v.vip_advertisements[k] for k in _sorted(v.vip_advertisements)]
            found = self._pool_advertisements[id(pool)] = (
                [a for a in bgp if a.spec.selects_pool(pool)],
                [a for a in l2 if a.spec.selects_pool(pool)],
                [a for a in vip if a.spec.selects_pool(pool)],
            )
        return found

    def decide(
        self, node_name: str, key: str, svc: Service, eligible: Mapping[str, str | None]
    ) -> tuple[set[Announcement], list[Decision]]:
        out: set[Announcement] = set()
        decisions: list[Decision] = []
        node = self.view.nodes.get(node_name)
        node_labels = node.labels if node is not None else {}
        why_not_node = eligible.get(node_name, node_exclusion(None))
        ips = self.view.ingress_ips(key, svc)
        if not ips:
            _Say(key, "", node_name, decisions)(None, False, "no IP assigned yet")
        for ip in ips:
            text = str(ip)  # once per IP: the decisions and every peer's route use it
            say = _Say(key, text, node_name, decisions)
            pool = self.view.pool_of(ip)
            if pool is None:
                say(None, False, "the IP is in no AddressPool")
                continue
            bgp_advs, l2_advs, vip_advs = self.advertisements_for(pool)
            if not (bgp_advs or l2_advs or vip_advs):
                if any(a.spec.selects_pool(pool) for a in self.view.ovn_advertisements.values()):
                    say(None, False, f"{OVN_ONLY}: AddressPool {pool.name}")
                else:
                    say(None, False, f"no advertisement selects AddressPool {pool.name}")
                continue
            bgp_eligible, bgp_say = eligible, say
            if bgp_advs and (gate := self._ovn_gate(pool)) is not None:
                bgp_eligible, note = self._gated(pool.name, gate, eligible)
                bgp_say = _Say(key, text, node_name, decisions, note)
            why_not_bgp = bgp_eligible.get(node_name, why_not_node)
            if bgp := _selecting(Mode.BGP, bgp_advs, node_labels, why_not_bgp, bgp_say):
                self._bgp(ip, node_name, node_labels, bgp, bgp_eligible, bgp_say, out)
            if l2 := _selecting(Mode.L2, l2_advs, node_labels, why_not_node, say):
                self._l2(ip, node_name, l2, eligible, say, out)
            if vip := _selecting(Mode.VIP, vip_advs, node_labels, why_not_node, say):
                self._vip(ip, node_name, vip, eligible, say, out)
        return out, decisions

    def _gated(self, pool: str, gate: _Gate, eligible: Mapping[str, str | None]) -> _Gated:
        """`gate(eligible)`, once per pool for the Cluster-policy Services (which share
        `eligible`)."""
        if eligible is not self._exclusions:
            return gate(eligible)
        got = self._shared_gated.get(pool)
        if got is None:
            got = self._shared_gated[pool] = gate(eligible)
        return got

    def _ovn_gate(self, pool: AddressPool) -> _Gate | None:
        """For a pool an OVNAdvertisement also selects, with the Southbound known: what
        restricts BGP eligibility to the nodes holding the gateway ports, and the note every
        BGP decision of the pool gets (None: not gated)."""
        gateways = self.options.ovn_gateways
        if gateways is None:
            return None
        v = self.view
        advs = [v.ovn_advertisements[k] for k in _sorted(v.ovn_advertisements)]
        selecting = [a for a in advs if a.spec.selects_pool(pool)]
        if not selecting:
            return None
        found = gateway_nodes(selecting, gateways, v.nodes)
        why_not = "not the active OVN gateway chassis' node"

        def gate(eligible: Mapping[str, str | None]) -> _Gated:
            return {
                n: why if why is not None or n in found.nodes else why_not
                for n, why in eligible.items()
            }, found.reason

        return gate

    def _bgp(
        self,
        ip: IPAddress,
        node_name: str,
        node_labels: Mapping[str, str],
        advs: list[BGPAdvertisement],
        eligible: Mapping[str, str | None],
        say: _Say,
        out: set[Announcement],
        next_hops: tuple[IPAddress, ...] = (),
    ) -> None:
        """`next_hops` (route mode): one path per next hop, keyed by its address, so every
        speaker announces the same paths (the same ADD-PATH identifiers, RFC 7911)."""
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
        bounds: list[str] = []  # why the node is, or is not, among each bounded set
        for adv in advs:
            if adv.spec.max_nodes_per_ip is not None:
                inside, why = self._bounded(ip, node_name, adv, eligible)
                bounds.append(why)
                if not inside:
                    continue
            for peer in node_peers:
                if adv.spec.peers and peer.name not in adv.spec.peers:
                    continue
                route = route_of(ip, adv, peer, say.ip)  # (say.ip: the IP's text, made once)
                if next_hops:
                    host = host_prefix(ip, say.ip)  # never aggregated: the tenant's IP
                    out.update(
                        BGPRoute(peer.name, host, route.attributes.evolve(next_hop=h), str(h))
                        for h in next_hops
                    )
                else:
                    out.add(route)
                announced.append(peer.name)
        if not announced:
            if bounds:
                say(Mode.BGP, False, "not chosen: " + "; ".join(bounds))
            else:
                say(Mode.BGP, False, "the advertisements name peers this node has no session with")
            return
        bounded = f" ({'; '.join(bounds)})" if bounds else ""
        targets = tuple(sorted(set(announced)))
        say(Mode.BGP, True, announced_to(targets, bounded), targets)
        # Planned as if every session were up (the routes are the same), then the sessions
        # laid over (with a plan cache: afterwards, over the kept decisions; sessions.py).
        say.into[-1] = with_sessions(say.into[-1], self.sessions)

    def decide_tenant(
        self, node_name: str, route: TenantRoute
    ) -> tuple[set[Announcement], list[Decision]]:
        """Route mode: announce a tenant's IP to this node's peers with the tenant's nodes as
        next hops, where a BGPAdvertisement of the IP's pool selects this node."""
        out: set[Announcement] = set()
        decisions: list[Decision] = []
        node = self.view.nodes.get(node_name)
        node_labels = node.labels if node is not None else {}
        ip = network_of(route.prefix).network_address
        say = _Say(route.request, str(ip), node_name, decisions)
        pool = self.view.pool_of(ip)
        if pool is None:
            say(Mode.BGP, False, "the IP is in no AddressPool")
            return out, decisions
        advs = self.advertisements_for(pool)[0]
        if not advs:
            say(Mode.BGP, False, f"no BGPAdvertisement selects AddressPool {pool.name}")
            return out, decisions
        if bgp := _selecting(Mode.BGP, advs, node_labels, node_exclusion(node), say):
            eligible = self.node_exclusions()
            self._bgp(
                ip, node_name, node_labels, bgp, eligible, say, out, next_hops=route.next_hops
            )
        return out, decisions

    def _bounded(
        self,
        ip: IPAddress,
        node_name: str,
        adv: BGPAdvertisement,
        eligible: Mapping[str, str | None],
    ) -> tuple[bool, str]:
        """Whether ``node_name`` is among the ``maxNodesPerIP`` nodes chosen for ``ip`` by
        ``adv``, and the explanation (which k, which nodes, among how many)."""
        k = adv.spec.max_nodes_per_ip
        assert k is not None
        memo = self._chosen.get((ip, adv.name))
        if memo is None:
            memo = self._choose(ip, adv, k, eligible)
            self._chosen[(ip, adv.name)] = memo
        nodes, _eligible = memo
        # A node entering this IP's candidates changes the chosen set only if it ranks
        # above the k-th (or fewer than k were eligible): see NodeDependencies.
        self._elected(ip, nodes, nodes[-1] if len(nodes) == k else None)
        inside = node_name in nodes
        where = "is" if inside else "is not"
        # (Not how many were eligible: that changes with every node, the chosen set not.)
        why = (
            f"{node_name} {where} among the {len(nodes)} node(s) {', '.join(nodes) or 'none'}"
            f" chosen for this IP by rendezvous hashing, maxNodesPerIP {k} of {adv.name},"
            f" from the eligible live nodes with a session"
        )
        return inside, why

    def _elect(self, ip: IPAddress, candidates: Sequence[str], k: int) -> tuple[str, ...]:
        """The first `k` of `candidates` in `ip`'s rendezvous order. When only other nodes
        changed since the last election of `ip` (:attr:`chosen_before`), and every node it
        chose is still a candidate, the new first `k` are among those and the nodes that
        came or changed: a node that was ranked below the `k` chosen still has `k` chosen
        nodes above it, so only those few are scored, not every candidate."""
        before = self.chosen_before.get(suffix(ip)) if self.chosen_before else None
        if before is not None:
            present = set(candidates)
            if present.issuperset(before):
                return chosen(ip, [*before, *(self.entering & present)], k)
        return chosen(ip, candidates, k)

    def _elected(self, ip: IPAddress, chosen: tuple[str, ...], last: str | None) -> None:
        """Note, for the plan cache, which nodes an IP's election chose and the score a
        newcomer must beat to change it (None: any newcomer changes it)."""
        if self.elections is not None:
            self.elections.append((suffix(ip), chosen, None if last is None else score(last, ip)))

    def _choose(
        self,
        ip: IPAddress,
        adv: BGPAdvertisement,
        k: int,
        eligible: Mapping[str, str | None],
    ) -> tuple[tuple[str, ...], int]:
        """The nodes that may announce ``ip`` under ``adv``: eligible, selected by it, alive
        (when membership knows), with a session to one of its peers; then the first ``k``
        in the IP's election order (:func:`~teapot_lb.announce.election.chosen`)."""
        if self._node_peers is None:
            peers = self.view.bgp_peers.values()
            self._node_peers = {
                name: frozenset(
                    p.name for p in peers if matches_any(p.spec.node_selectors, node.labels)
                )
                for name, node in self.view.nodes.items()
            }
        live = self.options.live_speakers
        wanted = set(adv.spec.peers)
        nodes = self.view.nodes
        candidates = [
            name
            for name, why in eligible.items()
            if why is None
            and (live is None or name in live)
            and matches_any(adv.spec.node_selectors, nodes[name].labels)
            and (self._node_peers[name] & wanted if wanted else self._node_peers[name])
        ]
        return self._elect(ip, candidates, k), len(candidates)

    def _l2(
        self,
        ip: IPAddress,
        node_name: str,
        advs: list[L2Advertisement],
        eligible: Mapping[str, str | None],
        say: _Say,
        out: set[Announcement],
    ) -> None:
        candidates = self.candidates(advs, eligible)
        live = self.options.live_speakers
        if live is not None:
            if node_name not in live:
                say(Mode.L2, False, "speaker not alive (membership)")
                return
            candidates = [n for n in candidates if n in live]
        first = self._elect(ip, candidates, 1)  # (the owner: no need to order the others)
        self._elected(ip, first, first[0] if first else None)
        # The reason names the owner only: a rank or a count would change with every node
        # that comes or goes, and so would every L2 decision of every node (issue 19).
        if not first or first[0] != node_name:
            owner = first[0] if first else "nobody"
            say(Mode.L2, False, f"not elected: owner is {owner}")
            return
        interfaces = sorted({i for a in advs for i in a.spec.interfaces})
        # An advertisement without interfaces allows the default one; then no restriction.
        if any(not a.spec.interfaces for a in advs):
            interfaces = []
        out.add(L2Claim(str(ip), tuple(interfaces)))
        say(Mode.L2, True, "elected: first of the live candidates in the IP's rendezvous order")

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
        self.reads_every_node = True  # the instance lists every candidate
        membership = self.vip_membership(ip, advs[0], eligible)
        out.add(membership)
        candidates = ", ".join(membership.candidates)
        say(Mode.VIP, True, f"VRRP candidate with {candidates} ({membership.advertisement})")

    def vip_membership(
        self, ip: IPAddress, adv: VIPAdvertisement, eligible: Mapping[str, str | None]
    ) -> VIPMembership:
        """The VRRP instance of `ip` that the nodes `adv` decides for join."""
        spec = adv.spec
        interval = None
        if spec.advertisement_interval is not None:
            interval = parse_duration(spec.advertisement_interval)
        return VIPMembership(
            ip=str(ip),
            advertisement=adv.name,
            candidates=tuple(sorted(self.candidates([adv], eligible))),
            interface=spec.interface,
            advertisement_interval_s=interval,
            vrid_range=(spec.vrid_range.start, spec.vrid_range.end) if spec.vrid_range else None,
            unicast_peers=spec.unicast_peers,
        )

    def deciding_vip_advertisements(self, advs: list[VIPAdvertisement]) -> list[VIPAdvertisement]:
        """Of `advs` (a pool's, by name), those that decide some eligible node's instance:
        the first that selects it (Cluster-policy eligibility: what :func:`vip_memberships`
        asks). Once per advertisement set and planner."""
        memo = tuple(a.name for a in advs)
        found = self._deciding_vip.get(memo)
        if found is None:
            nodes = self.view.nodes
            deciding: set[str] = set()
            for name, why in self.node_exclusions().items():
                if why is None:
                    labels = nodes[name].labels
                    first = next(
                        (a for a in advs if matches_any(a.spec.node_selectors, labels)), None
                    )
                    if first is not None:
                        deciding.add(first.name)
            found = self._deciding_vip[memo] = [a for a in advs if a.name in deciding]
        return found

    def candidates(
        self,
        advs: Iterable[L2Advertisement | VIPAdvertisement],
        eligible: Mapping[str, str | None],
    ) -> list[str]:
        advs = list(advs)
        shared = eligible is self._exclusions
        memo = tuple(f"{a.kind}/{a.name}" for a in advs)
        if shared and memo in self._shared_candidates:
            return self._shared_candidates[memo]
        nodes = self.view.nodes
        found = [
            name
            for name, why in eligible.items()
            if why is None
            and any(matches_any(a.spec.node_selectors, nodes[name].labels) for a in advs)
        ]
        if shared:
            self._shared_candidates[memo] = found
        return found


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
    sessions = Sessions.of(opts.established_peers, opts.down_peers)
    if cache is not None:  # the sessions are laid over what is kept (sessions.py)
        opts = replace(opts, established_peers=None, down_peers=())
    planner = Planner(view, opts, cache)
    tenant_anns: set[Announcement] = set()
    tenant_decisions: list[Decision] = []
    for route in live_routes(programmed_routes(view), opts.tenant_hops):
        anns, decs = planner.decide_tenant(node, route)
        tenant_anns |= anns
        tenant_decisions.extend(decs)
    if cache is not None:
        tenant = lay(tuple(tenant_decisions), sessions)
        return _plan_kept(view, node, planner, cache, tenant_anns, tenant, sessions)
    announcements: set[Announcement] = set()
    decisions: list[Decision] = []
    by_service: dict[str, tuple[Decision, ...]] = {}
    for key, svc in planner.handled_services():
        anns, decs = planner.decide(node, key, svc, planner.eligible(key, svc))
        announcements |= anns
        decisions.extend(decs)
        by_service[key] = tuple(decs)
    return Plan(
        node=node,
        announcements=frozenset(announcements | tenant_anns),
        decisions=tuple(decisions),
        tenant_decisions=tuple(tenant_decisions),
        by_service=by_service,
    )


def _plan_kept(
    view: ClusterView,
    node: str,
    planner: Planner,
    cache: PlanCache,
    tenant_anns: set[Announcement],
    tenant_decisions: tuple[Decision, ...],
    sessions: Sessions,
) -> Plan:
    """:func:`plan` with a cache: only Services that may have changed are decided, and the
    plan's totals change by what they changed (`planner` decides as if every session were
    up; `sessions` are laid over its results afterwards)."""
    opts = planner.options

    deps = cache.dependencies

    def decide(key: str, svc: Service) -> tuple[tuple[Announcement, ...], tuple[Decision, ...]]:
        if not svc.is_handled(opts.load_balancer_class, opts.handle_unclassed):
            deps.forget(key)
            return (), ()
        planner.elections, planner.reads_every_node = [], False
        again = key in cache.plans.by_other_nodes
        planner.chosen_before = deps.chosen_before(key) if again else None
        planner.entering = deps.entering
        anns, decs = planner.decide(node, key, svc, planner.eligible(key, svc))
        deps.note(key, planner.elections, planner.reads_every_node)
        planner.elections, planner.chosen_before = None, None
        return tuple(anns), tuple(decs)  # anns is a set: each once

    def affected(entering: set[str], leaving: set[str]) -> set[str] | None:
        if node in entering or node in leaving:
            return None  # this node's own change: every decision may differ
        return deps.affected(entering, leaving)

    scope = (node, options_key(opts, liveness=True))
    live = opts.live_speakers
    cache.plans.results(  # (eager: the kept results are read below)
        view, scope, PLAN_KINDS, decide,
        live=None if live is None else frozenset(live), affected=affected,
    )  # fmt: skip
    totals, delta = cache.totals, cache.laid.update(cache.plans, sessions)
    if delta is None:
        totals.rebuild(cache.laid.results(cache.plans))
    else:
        totals.apply(delta)
    changes = totals.take_delta()
    # Route mode's announcements are few and planned every time: a change of them makes
    # the delta unknown (the backends compare everything); otherwise one of them is
    # neither added nor removed by what the Services changed.
    tenant = frozenset(tenant_anns)
    if tenant != cache.tenant_announcements:
        changes = None
    elif changes is not None and tenant:
        changes = PlanDelta(changes.added - tenant, changes.removed - tenant)
    cache.tenant_announcements = tenant
    modes: dict[Mode, AbstractSet[Announcement]] = dict(totals.by_mode)
    for mode in {a.mode for a in tenant}:
        modes[mode] = _Union(totals.by_mode.get(mode, set()), tenant)
    return Plan(
        node=node,
        announcements=_Union(totals.counts.keys(), tenant),
        decisions=totals.decisions(),
        tenant_decisions=tenant_decisions,
        by_service=totals.ordered(),
        modes=modes,
        delta=changes,
    )


def explain(
    view: ClusterView, service_key: str, options: PlanOptions | None = None
) -> list[Decision]:
    """Every node's decisions for one Service, by node name then IP then mode."""
    planner = Planner(view, options or PlanOptions())
    svc = view.services.get(service_key)
    if svc is None:
        return []
    if not svc.is_handled(planner.options.load_balancer_class, planner.options.handle_unclassed):
        return []
    eligible = planner.eligible(service_key, svc)
    decisions: list[Decision] = []
    for node in sorted(view.nodes):
        decisions.extend(planner.decide(node, service_key, svc, eligible)[1])
    return decisions


def explain_tenant(
    view: ClusterView, request_key: str, options: PlanOptions | None = None
) -> list[Decision]:
    """Route mode: every node's decisions for one TenantLoadBalancer (namespace/name), by
    node name then IP. Empty when the request is not Programmed (its conditions say why)
    or what its status says falls outside its Tenant."""
    planner = Planner(view, options or PlanOptions())
    live = live_routes(programmed_routes(view), planner.options.tenant_hops)
    routes = [r for r in live if r.request == request_key]
    decisions: list[Decision] = []
    for node in sorted(view.nodes):
        for route in routes:
            decisions.extend(planner.decide_tenant(node, route)[1])
    return decisions


def options_key(options: PlanOptions, *, liveness: bool) -> tuple[object, ...]:
    key: tuple[object, ...] = (options.load_balancer_class, options.handle_unclassed)
    if liveness:
        # Which speakers live is not in the key: the cache compares it itself, and replans
        # only the Services whose elections a node coming or going can change. Nor are the
        # BGP sessions: a cached plan is made as if all were up (sessions.py lays them over).
        key += (options.ovn_gateways,)
    return key
