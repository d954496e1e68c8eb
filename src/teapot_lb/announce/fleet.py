"""What every node's plan says, taken together, computed once per Service rather than once
per node and Service (pure): the L2 election order of every IP (the L2 backend settles split
brain with it) and the VRRP instances of every Service (every node renders its segment's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from teapot_lb.announce.announcement import VIPMembership
from teapot_lb.announce.cache import L2_KINDS, VIP_KINDS, OrdersTable, PlanCache
from teapot_lb.announce.election import ranking
from teapot_lb.announce.plan import Planner, PlanOptions, options_key
from teapot_lb.cluster import ClusterView
from teapot_lb.model import Service, parse_ip


@dataclass(frozen=True)
class SharedCandidates:
    """The L2 candidates every Service of these L2Advertisements (by name) shares: those of
    the Services without `externalTrafficPolicy: Local`."""

    advertisements: tuple[str, ...]


class ElectionOrders(Mapping[str, tuple[str, ...]]):
    """Every L2 IP → the nodes allowed to own it, in election order, each order ranked
    when it is first read (and the last few kept).

    The L2 backend reads one IP's order only when it judges a claim (split brain), but a
    ranking costs one SHA-256 per candidate: ranking every IP over 1,000 nodes at each
    change (the plan already ranked them once) cost minutes at 25k L2 IPs, and holding
    every order ~8 KB per IP (issue 19). What is kept per IP is its candidates: a list, or
    for the IPs of Services without `externalTrafficPolicy: Local` the advertisements whose
    candidates they share (:class:`SharedCandidates`), looked up when read, so that a Node
    change does not touch every IP's entry."""

    _KEEP = 1024

    def __init__(
        self,
        candidates: Mapping[str, Sequence[str] | SharedCandidates],
        shared: Callable[[SharedCandidates], Sequence[str]] | None = None,
    ) -> None:
        self._candidates = candidates
        self._shared = shared
        self._ranked: dict[str, tuple[str, ...]] = {}

    def __getitem__(self, ip: str) -> tuple[str, ...]:
        order = self._ranked.get(ip)
        if order is None:
            nodes = self._candidates[ip]
            if isinstance(nodes, SharedCandidates):
                assert self._shared is not None
                nodes = self._shared(nodes)
            order = ranking(parse_ip(ip), nodes)
            if len(self._ranked) >= self._KEEP:
                del self._ranked[next(iter(self._ranked))]
            self._ranked[ip] = order
        return order

    def __iter__(self) -> Iterator[str]:
        return iter(self._candidates)

    def __len__(self) -> int:
        return len(self._candidates)

    def __contains__(self, ip: object) -> bool:
        return ip in self._candidates


def l2_election_orders(
    view: ClusterView, options: PlanOptions | None = None, *, cache: PlanCache | None = None
) -> ElectionOrders:
    """Every IP announced in L2 mode → the nodes allowed to own it, in election order
    (ranked when read: :class:`ElectionOrders`).

    Liveness is ignored: this is what every speaker agrees on even when heartbeats are
    cut, so the L2 backend uses it to settle two owners answering at once (split brain).
    With a `cache`, unchanged Services reuse their candidates (the result is the same).
    """
    opts = options or PlanOptions()
    planner = Planner(view, opts, cache)
    local = cache.orders_local if cache is not None else set()

    def candidates(
        key: str, svc: Service
    ) -> tuple[tuple[str, Sequence[str] | SharedCandidates], ...]:
        local.discard(key)
        if not svc.is_handled(opts.load_balancer_class, opts.handle_unclassed):
            return ()
        out: list[tuple[str, Sequence[str] | SharedCandidates]] = []
        eligible: Mapping[str, str | None] | None = None
        for ip in view.ingress_ips(key, svc):
            pool = view.pool_of(ip)
            if pool is None:
                continue
            l2_advs = planner.advertisements_for(pool)[1]
            if not l2_advs:
                continue
            if eligible is None:
                eligible = planner.eligible(key, svc)
            if eligible is planner.node_exclusions():
                out.append((str(ip), SharedCandidates(tuple(a.name for a in l2_advs))))
            else:
                local.add(key)  # its candidates read the Nodes: planned again when they change
                out.append((str(ip), planner.candidates(l2_advs, eligible)))
        return tuple(out)

    def shared(of: SharedCandidates) -> Sequence[str]:
        by_name = {a.name: a for a in view.l2_advertisements.values()}
        return planner.candidates(
            [by_name[n] for n in of.advertisements], planner.node_exclusions()
        )

    def affected(entering: set[str], leaving: set[str]) -> set[str]:
        # A Local Service's candidates are nodes with a ready endpoint of it: only a change
        # of one of those can change them.
        nodes = entering | leaving
        assert cache is not None
        return {k for k in local if not nodes.isdisjoint(cache.orders.ready_of(k) or ())}

    if cache is None:
        out: dict[str, Sequence[str] | SharedCandidates] = {}
        for key in sorted(view.services):
            for ip_text, nodes in candidates(key, view.services[key]):
                out[ip_text] = nodes  # (an IP Services share: the greatest key's)
        return ElectionOrders(out, shared)
    scope = options_key(opts, liveness=False)
    cache.orders.results(view, scope, L2_KINDS, candidates, affected=affected)
    table, delta = cache.orders_table, cache.orders.delta
    if delta is None:  # every Service was walked: the table is made again
        table = cache.orders_table = OrdersTable()
        for key, items in cache.orders.items():
            table.replace(key, None, items)
    else:  # only the Services that changed
        for key, old, new in delta:
            table.replace(key, old, new)
    # (a new answer each time: the shared candidates are looked up in this view, and the
    # orders ranked afresh)
    return ElectionOrders(table.candidates, shared)


def vip_memberships(
    view: ClusterView, options: PlanOptions | None = None, *, cache: PlanCache | None = None
) -> Mapping[str, tuple[VIPMembership, ...]]:
    """Every Service with a VRRP instance → the instances of its IPs, on every node.

    What :func:`plan` gives the nodes, taken together (every node renders every instance
    of its segment so that VRIDs stay unique), computed once per Service rather than once
    per node and Service (10^8 decisions at 1,000 nodes and 100k Services): a node joins the
    instance of the first VIPAdvertisement (by name) that selects it, so an IP has one
    instance per advertisement that comes first for some eligible node. Services with
    `externalTrafficPolicy: Local` count as Cluster ones: instance membership must not
    follow endpoints (a node without one is held in FAULT instead). With a `cache`,
    unchanged Services keep their instances, and a Node change re-decides only the
    Services with an IP in a pool a VIPAdvertisement selects. The mapping is the cache's
    (valid until the next call with it).
    """
    opts = options or PlanOptions()
    planner = Planner(view, opts, cache)
    selected: set[str] = cache.vip_selected if cache is not None else set()

    def memberships(key: str, svc: Service) -> tuple[VIPMembership, ...]:
        selected.discard(key)
        if not svc.is_handled(opts.load_balancer_class, opts.handle_unclassed):
            return ()
        out: list[VIPMembership] = []
        for ip in view.ingress_ips(key, svc):
            pool = view.pool_of(ip)
            advs = planner.advertisements_for(pool)[2] if pool is not None else []
            if advs:
                selected.add(key)  # a Node change may give it instances, or take them
                eligible = planner.node_exclusions()
                for adv in planner.deciding_vip_advertisements(advs):
                    out.append(planner.vip_membership(ip, adv, eligible))
        return tuple(out)

    if cache is None:
        found = ((key, memberships(key, view.services[key])) for key in sorted(view.services))
        return {key: held for key, held in found if held}

    def affected(entering: set[str], leaving: set[str]) -> set[str]:
        for gone in [k for k in selected if k not in view.services]:
            selected.discard(gone)
        return set(selected)  # every instance lists every candidate

    scope = options_key(opts, liveness=False)
    cache.vip.results(view, scope, VIP_KINDS, memberships, affected=affected)
    table, delta = cache.vip_table, cache.vip.delta
    if delta is None:  # every Service was walked
        table.clear()
        table.update((key, held) for key, held in cache.vip.items() if held)
    else:
        for key, _, held in delta:
            if held:
                table[key] = held
            else:
                table.pop(key, None)
    return table
