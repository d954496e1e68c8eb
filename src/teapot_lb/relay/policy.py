"""A tenant's import policy, generated from its `Tenant` as data (pure).

The relay judges every route a tenant's speaker sends with one :class:`~teapot_lb.bgp.policy.Filter`
made here from the Tenant (its allocation, node networks, ASN and ``spec.relay``), the
operator's pools and the relay's options. Each rule rejects with a :class:`Reason`: a short
stable name that metrics count by, ``explain relay`` prints and docs/relay.md lists. The
rules, in order:

1. no default route (0.0.0.0/0, ::/0);
2. no bogon or martian (RFC 6890 space), unless an AddressPool of the operator holds it;
3. the prefix overlaps the tenant's allocation;
4. a prefix shorter than a host route only if the tenant holds all of it;
5. host routes only, unless the relay allows aggregates;
6. the next hop is none of the protected addresses (routers, the relay, management nodes);
7. the next hop is inside the tenant's node networks;
8. the next hop is one of the tenant's registered node addresses (sessions are only accepted
   from those, so a router's or an unused address inside the node networks never is);
9. no confederation segment: the relay and its tenants are in no confederation, so one
   makes the AS_PATH malformed (RFC 5065 §5), and the route is treated as withdrawn
   (RFC 7606 §7.2): its session's earlier path for the prefix goes;
10. no AS_SET in the AS path;
11. the AS path no longer than the cap (``--max-as-path-length``, 32 as arouteserver);
12. the AS path is the tenant's ASN only (its own prepends allowed: no transit, no foreign
    or private ASN);
13. with ``--well-known-communities honour``: no NO_EXPORT, NO_ADVERTISE or
    NO_EXPORT_SUBCONFED (RFC 1997): the routers are outside the relay's AS, so such a
    route is not advertised to them;

then, with RTBH (RFC 7999 §3.2), BLACKHOLE gets NO_EXPORT beside it, and the route is
accepted with its communities scrubbed to the relay's and the Tenant's allowlists (the
three RFC 1997 ones kept when passed through, BLACKHOLE kept with RTBH) and its MED
removed. The session's max-prefix limit judges the table, not a route, and lives in
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
    AddCommunities,
    AsPathHasConfed,
    AsPathHasSet,
    AsPathLength,
    AsPathOnly,
    Filter,
    HasCommunity,
    KeepCommunities,
    NextHopIn,
    Not,
    PrefixIn,
    PrefixRange,
    PrefixSet,
    Rule,
    SetMed,
    accept,
    modify,
    reject,
)
from teapot_lb.bgp.wire import LargeCommunity
from teapot_lb.bgp.wire.community import BLACKHOLE, NO_ADVERTISE, NO_EXPORT, NO_EXPORT_SUBCONFED
from teapot_lb.model.bgp import parse_community, parse_large_community
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
    AS_CONFED = "as-confed-segment"
    AS_SET = "as-set"
    AS_PATH_TOO_LONG = "as-path-too-long"
    AS_PATH = "as-path-not-tenant"
    NO_EXPORT_HONOURED = "no-export-honoured"
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
    Reason.AS_CONFED: "a confederation segment from outside the relay's confederation (RFC 5065"
    " §5): malformed AS_PATH, treated as withdrawn (RFC 7606 §7.2)",
    Reason.AS_SET: "the AS path holds an AS_SET",
    Reason.AS_PATH_TOO_LONG: "the AS path is longer than the relay's cap (--max-as-path-length)",
    Reason.AS_PATH: "the AS path is not the tenant's ASN only",
    Reason.NO_EXPORT_HONOURED: "NO_EXPORT, NO_ADVERTISE or NO_EXPORT_SUBCONFED, honoured"
    " (--well-known-communities honour): not advertised to the routers",
    Reason.MAX_PREFIX: "beyond the session's max-prefix limit",
    Reason.WITHDRAW_NOT_SENT: "a withdrawal of a route the session never sent",
    Reason.TREAT_AS_WITHDRAW: "a malformed UPDATE (RFC 7606 treat-as-withdraw)",
}


class MaxPrefixAction(enum.StrEnum):
    """What the relay does when a session sends more routes than its limit."""

    WARN = "warn"  # log, count, Event; keep accepting
    DROP = "drop"  # reject the routes beyond the limit (reason max-prefix)
    TEARDOWN = "teardown"  # Cease/Maximum Number of Prefixes Reached, then a restart timer


class MaxPrefixCount(enum.StrEnum):
    """What a session's max-prefix limit counts."""

    ACCEPTED = "accepted"  # routes the policy accepted (BIRD's `import limit`)
    RECEIVED = "received"  # every route received, filtered ones too (BIRD's `receive limit`)


class WellKnownCommunities(enum.StrEnum):
    """What the relay does with NO_EXPORT, NO_ADVERTISE and NO_EXPORT_SUBCONFED (RFC 1997)."""

    PASS = "pass"  # passed on to the routers, which act on them (route servers' default)
    HONOUR = "honour"  # the relay acts on them: such a route is not advertised to the routers


# The RFC 1997 communities that limit a route's reach.
REACH_LIMITS = frozenset({NO_EXPORT, NO_ADVERTISE, NO_EXPORT_SUBCONFED})


@dataclass(frozen=True)
class RelayOptions:
    """The operator's settings, the same for every tenant."""

    aggregates: bool = False  # accept prefixes shorter than host routes if held in full
    # Allowlists for every tenant (a Tenant's spec.relay adds its own); every other
    # community is scrubbed but those governed below.
    communities: frozenset[int] = frozenset()
    large_communities: frozenset[LargeCommunity] = frozenset()
    well_known: WellKnownCommunities = WellKnownCommunities.PASS
    rtbh: bool = False  # BLACKHOLE passed on (NO_EXPORT added); a Tenant's spec.relay.rtbh wins
    protected: tuple[IPNetwork, ...] = ()  # never a next hop (routers, relay, management)
    max_prefixes: int | None = 1000  # routes per session, counted as max_prefix_count says
    max_prefix_count: MaxPrefixCount = MaxPrefixCount.ACCEPTED
    max_prefix_action: MaxPrefixAction = MaxPrefixAction.TEARDOWN
    max_as_path_length: int | None = 32  # ASNs, prepends included; None: no cap
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
    communities: frozenset[int] = frozenset()  # allowlisted: the relay's and the Tenant's
    large_communities: frozenset[LargeCommunity] = frozenset()
    rtbh: bool = False


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
        reject(Reason.AS_CONFED, AsPathHasConfed()),
        reject(Reason.AS_SET, AsPathHasSet()),
    ]
    if options.max_as_path_length is not None:
        cap = AsPathLength(0, options.max_as_path_length)
        rules.append(reject(Reason.AS_PATH_TOO_LONG, Not(cap)))
    rules.append(reject(Reason.AS_PATH, Not(AsPathOnly(frozenset({asn} if asn else ())))))
    communities, large, rtbh = tenant_communities(tenant, options)
    rules += _community_rules(communities, large, rtbh, options.well_known)
    return TenantPolicy(
        tenant=tenant.name,
        asn=asn,
        allocation=tuple(allocation),
        node_networks=tuple(networks),
        communities=communities,
        large_communities=large,
        rtbh=rtbh,
        filter=Filter(tuple(rules), name=tenant.name),
        nodes=tuple(registered),
    )


def tenant_communities(
    tenant: Tenant, options: RelayOptions
) -> tuple[frozenset[int], frozenset[LargeCommunity], bool]:
    """The tenant's allowlists (the relay's, extended by its ``spec.relay``) and whether it
    may blackhole (its ``spec.relay.rtbh``, else the relay's ``--rtbh``)."""
    mine = tenant.spec.relay
    communities = options.communities | {parse_community(c) for c in mine.communities}
    large = options.large_communities | {
        LargeCommunity(*parse_large_community(c)) for c in mine.large_communities
    }
    return communities, large, options.rtbh if mine.rtbh is None else mine.rtbh


def _community_rules(
    communities: frozenset[int],
    large: frozenset[LargeCommunity],
    rtbh: bool,
    well_known: WellKnownCommunities,
) -> list[Rule]:
    """The last rules: the RFC 1997 reach limits honoured or passed, BLACKHOLE with RTBH
    only, the allowlists, no MED (it means nothing between the tenant's AS and the
    routers')."""
    keep = set(communities)
    rules: list[Rule] = []
    if well_known is WellKnownCommunities.HONOUR:
        rules.append(reject(Reason.NO_EXPORT_HONOURED, HasCommunity(REACH_LIMITS)))
    else:
        keep |= REACH_LIMITS
    if rtbh:
        # RFC 7999 §3.2: a blackholed prefix goes no further than the routers told to drop
        # its traffic. Only the tenant's own prefixes get here (rules 3-5).
        rules.append(
            modify(HasCommunity(frozenset({BLACKHOLE})), then=(AddCommunities((NO_EXPORT,)),))
        )
        keep |= {BLACKHOLE, NO_EXPORT}
    rules.append(accept(then=(KeepCommunities(frozenset(keep), large), SetMed(None))))
    return rules


def protected_addresses(texts: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Addresses or networks as text (CLI, BGPPeer addresses) → networks; ValueError names
    the bad one."""
    return tuple(ip_network(t.strip(), strict=False) for t in texts)


__all__ = [
    "DESCRIPTIONS",
    "REACH_LIMITS",
    "MaxPrefixAction",
    "MaxPrefixCount",
    "Reason",
    "RelayOptions",
    "TenantPolicy",
    "WellKnownCommunities",
    "protected_addresses",
    "routable",
    "tenant_communities",
    "tenant_policy",
]
