"""Import and export policy as data, evaluated by one small interpreter (BIRD filters).

The package is its API (import from ``teapot_lb.bgp.policy``); its modules are the
prefix sets (:mod:`.prefixes`), the conditions (:mod:`.conditions`), the verdicts and
changes (:mod:`.actions`) and the rules with their interpreter (:mod:`.filter`).

A :class:`Filter` is a list of :class:`Rule`\\ s. A rule has conditions (all must hold; none:
every route) and actions: changes to the route (:class:`SetLocalPref`,
:class:`StripCommunities`, ...) and at most one verdict, last: :class:`Accept` or
:class:`Reject` with a reason. Rules are tried in order; a rule whose conditions hold applies
its changes, and its verdict (if it has one) decides. A route no rule decides gets the
filter's ``default``. A reject carries its reason and the rule's position, for ``explain``,
logs and metrics.

A relay's per-tenant import filter reads like this::

    Filter((
        reject("bogon", PrefixIn(BOGONS)),
        reject("prefix outside the tenant's allocation",
               Not(PrefixIn(PrefixSet.of("203.0.113.0/24{24,32}")))),
        reject("next hop is not a tenant node", Not(NextHopIn(PrefixSet.of("192.0.2.11")))),
        reject("AS path is not the tenant's ASN only", Not(AsPathIs((64512,)))),
        accept(then=(StripCommunities(), StripLargeCommunities())),
    ), name="tenant-a")

Routes are judged in batches (all prefixes of one UPDATE share their path): conditions on
the path are evaluated once per batch, conditions on the prefix once per prefix, on
integers taken from the NLRI encoding; no ``ipaddress`` object is built.
"""

from __future__ import annotations

from .actions import (
    Accept,
    Action,
    AddCommunities,
    Change,
    KeepCommunities,
    Reject,
    SetLocalPref,
    SetMed,
    SetNextHop,
    SetOrigin,
    StripCommunities,
    StripLargeCommunities,
    Verdict,
)
from .conditions import (
    AsPathContains,
    AsPathHasConfed,
    AsPathHasSet,
    AsPathIs,
    AsPathLength,
    AsPathOnly,
    Condition,
    HasCommunity,
    HasLargeCommunity,
    NextHopIn,
    Not,
    OriginAsIn,
    OriginIs,
    PrefixIn,
    RouteKey,
    parse_community,
)
from .filter import ACCEPT_ALL, Accepted, Filter, Judged, Rejected, Rule, accept, modify, reject
from .prefixes import BOGONS, PrefixRange, PrefixSet

__all__ = [
    "ACCEPT_ALL",
    "BOGONS",
    "Accept",
    "Accepted",
    "Action",
    "AddCommunities",
    "AsPathContains",
    "AsPathHasConfed",
    "AsPathHasSet",
    "AsPathIs",
    "AsPathLength",
    "AsPathOnly",
    "Change",
    "Condition",
    "Filter",
    "HasCommunity",
    "HasLargeCommunity",
    "Judged",
    "KeepCommunities",
    "NextHopIn",
    "Not",
    "OriginAsIn",
    "OriginIs",
    "PrefixIn",
    "PrefixRange",
    "PrefixSet",
    "Reject",
    "Rejected",
    "RouteKey",
    "Rule",
    "SetLocalPref",
    "SetMed",
    "SetNextHop",
    "SetOrigin",
    "StripCommunities",
    "StripLargeCommunities",
    "Verdict",
    "accept",
    "modify",
    "parse_community",
    "reject",
]
