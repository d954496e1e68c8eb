"""Incremental planning: per-Service plan results kept between calls (pure).

:func:`~teapot_lb.announce.plan.plan` and
:func:`~teapot_lb.announce.fleet.l2_election_orders` decide per Service; with a
:class:`PlanCache` a Service is decided again only when its inputs may have changed: the
Service itself, its EndpointSlices (when it is `Local`), or any object of the kinds every
decision reads (:data:`PLAN_KINDS`, from the kind registry), or the node and options. The
result is exactly the uncached one. The kept results are :mod:`.per_service`'s, the plan's
totals :mod:`.totals`'; here what a node's cache holds and which Services a node coming or
going can change (:class:`NodeDependencies`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from teapot_lb.announce.election import scored_as
from teapot_lb.announce.per_service import PerService, Versions
from teapot_lb.announce.sessions import Laid
from teapot_lb.announce.totals import PlanResult, PlanTotals, same_announcements
from teapot_lb.model import Node
from teapot_lb.model.kinds import KINDS, Kind

if TYPE_CHECKING:
    from teapot_lb.announce.announcement import Announcement, VIPMembership
    from teapot_lb.announce.fleet import SharedCandidates

# One election a Service's plan ran: the IP (as election.suffix hashes it), the nodes it
# chose (the L2 owner, or the maxNodesPerIP set), and the score a node entering the
# candidates must beat to change that (None: any newcomer changes it).
Election = tuple[bytes, tuple[str, ...], bytes | None]

# What a per-Service decision reads besides the Service and its EndpointSlices: when any of
# these (or the node, or the options) differs from the previous call, everything is planned
# again. The kind registry says which kinds the planner reads (`planned`); Namespaces and
# Secrets are not read by it.
PLAN_KINDS = tuple(info.kind for info in KINDS if info.planned)
L2_KINDS = (Kind.NODE, Kind.ADDRESS_POOL, Kind.L2_ADVERTISEMENT)
VIP_KINDS = (Kind.NODE, Kind.ADDRESS_POOL, Kind.VIP_ADVERTISEMENT)


class NodeDependencies:
    """What each kept Service plan read of the other nodes, so that a node coming, going or
    changing replans only the Services whose decisions it can change: those that ran an
    election the node was chosen in (found by node: each chosen node indexes the Services
    that chose it), or would now win (rendezvous hashing: one hash per election decides
    it), and those that list every candidate (VRRP)."""

    def __init__(self) -> None:
        self._elections: dict[str, list[Election]] = {}
        self._every: set[str] = set()
        self._chosen: dict[str, set[str]] = {}  # node name → keys whose elections chose it
        # The nodes that entered (or changed) at the last :meth:`affected`.
        self.entering: frozenset[str] = frozenset()

    def chosen_before(self, key: str) -> dict[bytes, tuple[str, ...]] | None:
        """What each of the Service's elections chose when it was last planned, by the IP's
        :func:`~teapot_lb.announce.election.suffix` (None: none, or an IP elected twice,
        under two advertisements)."""
        elections = self._elections.get(key)
        if not elections:
            return None
        out = {ip: chosen for ip, chosen, _ in elections}
        return out if len(out) == len(elections) else None

    def note(self, key: str, elections: list[Election], every: bool) -> None:
        self._unindex(key)
        if elections:
            self._elections[key] = elections
            for _, chosen, _ in elections:
                for name in chosen:
                    self._chosen.setdefault(name, set()).add(key)
        if every:
            self._every.add(key)
        else:
            self._every.discard(key)

    def forget(self, key: str) -> None:
        self._unindex(key)
        self._every.discard(key)

    def _unindex(self, key: str) -> None:
        for _, chosen, _ in self._elections.pop(key, ()):
            for name in chosen:
                keys = self._chosen.get(name)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._chosen[name]

    def affected(self, entering: set[str], leaving: set[str]) -> set[str]:
        """The Services whose elections `entering` nodes (or nodes that changed: they may
        enter) and `leaving` nodes can change."""
        self.entering = frozenset(entering)
        out = set(self._every)
        for node in entering | leaving:
            out.update(self._chosen.get(node, ()))
        # Nodes only leaving change only the elections that chose them (no hash); each
        # entering one, those whose chosen it now beats: one hash per election (its name
        # encoded once).
        for entering_node in entering:
            name = entering_node.encode()
            for key, elections in self._elections.items():
                for ip, _, to_beat in elections:
                    if to_beat is None or scored_as(name, ip) < to_beat:
                        out.add(key)
                        break
        return out


class OrdersTable:
    """Every L2 IP of the cluster → the candidates of the Service that holds it, changed
    one Service's entries at a time (a new L2 Service costs its own IPs, not a new table).

    An IP several Services share (``allow-shared-ip``) has the candidates of the greatest
    key, as a walk of the Services in key order leaves them; the others are kept aside so
    that deleting that Service hands the IP to the next."""

    __slots__ = ("_holder", "_shared", "candidates")

    def __init__(self) -> None:
        self.candidates: dict[str, Sequence[str] | SharedCandidates] = {}
        self._holder: dict[str, str] = {}  # IP -> the key whose candidates are in `candidates`
        self._shared: dict[str, dict[str, Sequence[str] | SharedCandidates]] = {}

    def replace(
        self,
        key: str,
        old: Sequence[tuple[str, Sequence[str] | SharedCandidates]] | None,
        new: Sequence[tuple[str, Sequence[str] | SharedCandidates]] | None,
    ) -> None:
        """Service `key`'s entries were `old` and are now `new` (None: none)."""
        for ip, _ in old or ():
            self._drop(key, ip)
        for ip, nodes in new or ():
            self._put(key, ip, nodes)

    def _put(self, key: str, ip: str, nodes: Sequence[str] | SharedCandidates) -> None:
        held = self._shared.get(ip)
        holder = self._holder.get(ip)
        if held is None and holder is not None and holder != key:
            held = self._shared[ip] = {holder: self.candidates[ip]}
        if held is None:
            self._holder[ip] = key
            self.candidates[ip] = nodes
        else:
            held[key] = nodes
            self._settle(ip, held)

    def _drop(self, key: str, ip: str) -> None:
        held = self._shared.get(ip)
        if held is not None:
            held.pop(key, None)
            self._settle(ip, held)
        elif self._holder.get(ip) == key:
            del self._holder[ip], self.candidates[ip]

    def _settle(self, ip: str, held: dict[str, Sequence[str] | SharedCandidates]) -> None:
        if len(held) <= 1:
            del self._shared[ip]
        if not held:
            del self._holder[ip], self.candidates[ip]
            return
        key = max(held)
        self._holder[ip] = key
        self.candidates[ip] = held[key]


class PlanCache:
    """Per-Service results kept between calls of :func:`plan` and :func:`l2_election_orders`
    for one node, so that one changed Service costs one Service's planning.

    Pass the same instance with every call (``plan(view, node, options, cache=c)``); the
    result is exactly the uncached one. `computed`: how many Services were (re)planned.
    """

    def __init__(self) -> None:
        versions = Versions()
        self.plans: PerService[PlanResult] = PerService(versions, same_announcements)
        self.orders: PerService[tuple[tuple[str, Sequence[str] | SharedCandidates], ...]] = (
            PerService(versions, empty=())
        )
        # The Services whose L2 candidates are their own (Local): a Node change replans them.
        self.orders_local: set[str] = set()
        self.totals = PlanTotals()
        # The BGP sessions laid over the plans' results (what the totals hold).
        self.laid = Laid()
        # Each Node's own exclusion (why it may announce nothing), by name, while the view
        # holds the same Node object.
        self.exclusions: dict[str, tuple[Node, str | None]] = {}
        # Every L2 IP → its candidates, as the last call of l2_election_orders left them.
        self.orders_table = OrdersTable()
        self.dependencies = NodeDependencies()
        # Every Service's VRRP instances on every node (vip_memberships), those that have
        # some (by key), and the Services with an IP in a pool a VIPAdvertisement selects.
        self.vip: PerService[tuple[VIPMembership, ...]] = PerService(versions, empty=())
        self.vip_table: dict[str, tuple[VIPMembership, ...]] = {}
        self.vip_selected: set[str] = set()
        # Route mode's announcements in the last plan (not per Service: see plan()).
        self.tenant_announcements: frozenset[Announcement] = frozenset()

    @property
    def computed(self) -> int:
        return self.plans.computed

    @property
    def orders_computed(self) -> int:
        return self.orders.computed
