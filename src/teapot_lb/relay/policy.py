"""A tenant's import policy, generated from its `Tenant` as data (pure).

The relay judges every route a tenant's speaker sends with one :class:`~teapot_lb.bgp.policy.Filter`
made here from the Tenant (its allocation, node networks and ASN), the operator's pools and
the relay's options. Each rule rejects with a :class:`Reason`: a short stable name that
metrics count by, ``explain relay`` prints and docs/relay.md lists. The rules, in order:

1. no default route (0.0.0.0/0, ::/0);
2. no bogon or martian (RFC 6890 space), unless an AddressPool of the operator holds it;
3. the prefix overlaps the tenant's allocation;
4. a prefix shorter than a host route only if the tenant holds all of it;
5. host routes only, unless the relay allows aggregates;
6. the next hop is none of the protected addresses (routers, the relay, management nodes);
7. the next hop is inside the tenant's node networks;
8. the next hop is one of the tenant's registered node addresses (sessions are only accepted
   from those, so a router's or an unused address inside the node networks never is);
9. no AS_SET in the AS path;
10. the AS path is the tenant's ASN only (its own prepends allowed: no transit, no foreign or
   private ASN);

then the route is accepted with its communities scrubbed to the relay's allowlist and its
MED removed. The session's max-prefix limit judges the table, not a route, and lives in
:mod:`teapot_lb.relay.rib`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import collapse_addresses, ip_network, summarize_address_range

from teapot_lb.addresses import AddressRange, IPAddress, IPNetwork
from teapot_lb.bgp.policy import (
    BOGONS,
    AsPathHasSet,
    AsPathOnly,
    Filter,
    KeepCommunities,
    NextHopIn,
    Not,
    PrefixIn,
    PrefixRange,
    PrefixSet,
    SetMed,
    accept,
    reject,
)
from teapot_lb.bgp.wire import LargeCommunity
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.allocation import allocated_ranges
from teapot_lb.tenancy.nodes import registered_nodes


class Reason(enum.StrEnum):
    """Why the relay refused a route (or a session): the rule's name."""

    DEFAULT_ROUTE = "default-route"
    BOGON = "bogon"
    OUTSIDE_ALLOCATION = "outside-allocation"
    AGGREGATE_NOT_HELD = "aggregate-not-held"
    HOST_ROUTES_ONLY = "host-routes-only"
    NEXT_HOP_PROTECTED = "next-hop-protected"
    NEXT_HOP_OUTSIDE = "next-hop-outside-node-networks"
    NEXT_HOP_NOT_NODE = "next-hop-not-registered-node"
    AS_SET = "as-set"
    AS_PATH = "as-path-not-tenant"
    MAX_PREFIX = "max-prefix"
    TREAT_AS_WITHDRAW = "malformed-treat-as-withdraw"
    WITHDRAW_NOT_SENT = "withdraw-not-sent"


DESCRIPTIONS: Mapping[Reason, str] = {
    Reason.DEFAULT_ROUTE: "a default route (0.0.0.0/0 or ::/0)",
    Reason.BOGON: "a bogon or martian prefix (RFC 6890) no AddressPool holds",
    Reason.OUTSIDE_ALLOCATION: "the prefix is outside the tenant's allocation",
    Reason.AGGREGATE_NOT_HELD: "an aggregate the tenant does not hold in full",
    Reason.HOST_ROUTES_ONLY: "only host routes (/32, /128) are accepted",
    Reason.NEXT_HOP_PROTECTED: "the next hop is a router, the relay or a management node",
    Reason.NEXT_HOP_OUTSIDE: "the next hop is outside the tenant's node networks",
    Reason.NEXT_HOP_NOT_NODE: "the next hop is none of the tenant's registered node addresses",
    Reason.AS_SET: "the AS path holds an AS_SET",
    Reason.AS_PATH: "the AS path is not the tenant's ASN only",
    Reason.MAX_PREFIX: "beyond the session's max-prefix limit (routes received)",
    Reason.WITHDRAW_NOT_SENT: "a withdrawal of a route the session never sent",
    Reason.TREAT_AS_WITHDRAW: "a malformed UPDATE (RFC 7606 treat-as-withdraw)",
}


class MaxPrefixAction(enum.StrEnum):
    """What the relay does when a session sends more routes than its limit."""

    WARN = "warn"  # log, count, Event; keep accepting
    DROP = "drop"  # reject the routes beyond the limit (reason max-prefix)
    TEARDOWN = "teardown"  # Cease/Maximum Number of Prefixes Reached, then a restart timer


@dataclass(frozen=True)
class RelayOptions:
    """The operator's settings, the same for every tenant."""

    aggregates: bool = False  # accept prefixes shorter than host routes if held in full
    communities: frozenset[int] = frozenset()  # allowlist; every other one is scrubbed
    large_communities: frozenset[LargeCommunity] = frozenset()
    protected: tuple[IPNetwork, ...] = ()  # never a next hop (routers, relay, management)
    max_prefixes: int | None = 1000  # routes received per session (before policy)
    max_prefix_action: MaxPrefixAction = MaxPrefixAction.TEARDOWN
    max_prefix_restart: float = 60.0  # seconds before a torn-down session may come back
    stale_time: int = 120  # graceful restart: the most a tenant's stale routes are kept
    gtsm: bool = True  # tenant sessions are single hop: TTL 255 both ways (RFC 5082)


@dataclass(frozen=True)
class TenantPolicy:
    """One tenant's filter and what it was made from (for explain)."""

    tenant: str
    asn: int | None
    allocation: tuple[IPNetwork, ...]
    node_networks: tuple[IPNetwork, ...]
    filter: Filter = field(compare=False)
    nodes: tuple[IPAddress, ...] = ()  # the registered node addresses


def _blocks(ranges: Iterable[AddressRange]) -> list[IPNetwork]:
    """The ranges as the fewest CIDR blocks (merged across pools and allocations)."""
    nets: list[IPNetwork] = [n for r in ranges for n in summarize_address_range(r.first, r.last)]
    v4 = [n for n in nets if n.version == 4]
    v6 = [n for n in nets if n.version == 6]
    return [*collapse_addresses(v4), *collapse_addresses(v6)]


def _ranges(nets: Iterable[IPNetwork], lo: int | None, hi: int | None) -> PrefixSet:
    """Each block with lengths ``lo`` (None: the block's) to ``hi`` (None: host routes)."""
    return PrefixSet(
        tuple(
            PrefixRange(n, n.prefixlen if lo is None else lo, n.max_prefixlen if hi is None else hi)
            for n in nets
        )
    )


def _hosts(nets: Iterable[IPNetwork]) -> PrefixSet:
    return PrefixSet(tuple(PrefixRange(n, n.max_prefixlen, n.max_prefixlen) for n in nets))


DEFAULT_ROUTES = PrefixSet.of("0.0.0.0/0", "::/0")


def routable(pools: Iterable[AddressPool]) -> list[IPNetwork]:
    """What the operator's pools hold: never a bogon, whatever space it is in."""
    return _blocks(r for p in pools for r in p.address_ranges())


def tenant_policy(
    tenant: Tenant,
    pools: Mapping[str, AddressPool],
    options: RelayOptions,
    nodes: Iterable[IPAddress] | None = None,
) -> TenantPolicy:
    """The tenant's import filter. ``pools`` by name, as Tenants name them; ``nodes`` the
    tenant's registered node addresses (None: its ``spec.nodes``)."""
    registered = sorted(
        registered_nodes(tenant) if nodes is None else nodes,
        key=lambda a: (a.version, a),
    )
    allocation = _blocks(r for rs in allocated_ranges(tenant, pools).values() for r in rs)
    networks = tenant.node_networks()
    asn = tenant.spec.asn
    rules = [
        reject(Reason.DEFAULT_ROUTE, PrefixIn(DEFAULT_ROUTES)),
        reject(
            Reason.BOGON,
            PrefixIn(BOGONS),
            Not(PrefixIn(_ranges(routable(pools.values()), 0, None))),
        ),
        # Overlapping the allocation: inside it, or covering part of it.
        reject(Reason.OUTSIDE_ALLOCATION, Not(PrefixIn(_ranges(allocation, 0, None)))),
        reject(Reason.AGGREGATE_NOT_HELD, Not(PrefixIn(_ranges(allocation, None, None)))),
    ]
    if not options.aggregates:
        rules.append(reject(Reason.HOST_ROUTES_ONLY, Not(PrefixIn(_hosts(allocation)))))
    if options.protected:
        rules.append(
            reject(Reason.NEXT_HOP_PROTECTED, NextHopIn(_ranges(options.protected, None, None)))
        )
    rules += [
        reject(Reason.NEXT_HOP_OUTSIDE, Not(NextHopIn(_ranges(networks, None, None)))),
        reject(Reason.NEXT_HOP_NOT_NODE, Not(NextHopIn(PrefixSet.of(*registered)))),
        reject(Reason.AS_SET, AsPathHasSet()),
        reject(Reason.AS_PATH, Not(AsPathOnly(frozenset({asn} if asn else ())))),
        accept(
            then=(
                KeepCommunities(options.communities, options.large_communities),
                SetMed(None),
            )
        ),
    ]
    return TenantPolicy(
        tenant=tenant.name,
        asn=asn,
        allocation=tuple(allocation),
        node_networks=tuple(networks),
        filter=Filter(tuple(rules), name=tenant.name),
        nodes=tuple(registered),
    )


def protected_addresses(texts: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Addresses or networks as text (CLI, BGPPeer addresses) → networks; ValueError names
    the bad one."""
    return tuple(ip_network(t.strip(), strict=False) for t in texts)


__all__ = [
    "DESCRIPTIONS",
    "MaxPrefixAction",
    "Reason",
    "RelayOptions",
    "TenantPolicy",
    "protected_addresses",
    "routable",
    "tenant_policy",
]
