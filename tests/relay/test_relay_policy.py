"""The per-tenant import policy, rule by rule: each accepts what it should and rejects what
it should, with its reason, in IPv4 and IPv6.

acme (ASN 64601) holds 198.51.100.0/28 and 2001:db8:100::/124, nodes in 192.0.2.0/26 and
2001:db8:a::/64; bolt (ASN 64602) holds 198.51.100.16/28 and 2001:db8:100::10/124.
"""

from __future__ import annotations

from dataclasses import replace
from ipaddress import ip_network

import pytest
from tests.relay.builders import ASN, OPTIONS, path, relay_tenant
from tests.tenancy.builders import pools, tenant_body

from teapot_lb.bgp.policy import Accepted, Filter, Rejected
from teapot_lb.bgp.rib import encode_prefix
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST
from teapot_lb.bgp.wire.aspath import SegmentType
from teapot_lb.model.bgp import WELL_KNOWN_COMMUNITIES
from teapot_lb.model.manifest import parse_object
from teapot_lb.relay.policy import Reason, RelayOptions, WellKnownCommunities, tenant_policy

ACME_AS = ASN["acme"]


def _acme(**options: object) -> Filter:
    opts = RelayOptions(**{**OPTIONS.__dict__, **options})  # type: ignore[arg-type]
    return tenant_policy(relay_tenant("acme"), pools(), opts).filter


NODE4, NODE6 = "192.0.2.11", "2001:db8:a::11"

# (prefix, next hop, AS path, expected reason; None: accepted)
CASES = [
    ("198.51.100.5/32", NODE4, (ACME_AS,), None),
    ("2001:db8:100::5/128", NODE6, (ACME_AS,), None),
    ("198.51.100.5/32", NODE4, (ACME_AS, ACME_AS, ACME_AS), None),  # its own prepends
    ("0.0.0.0/0", NODE4, (ACME_AS,), Reason.DEFAULT_ROUTE),
    ("::/0", NODE6, (ACME_AS,), Reason.DEFAULT_ROUTE),
    ("10.1.2.3/32", NODE4, (ACME_AS,), Reason.BOGON),
    ("192.168.0.0/16", NODE4, (ACME_AS,), Reason.BOGON),
    ("fc00::1/128", NODE6, (ACME_AS,), Reason.BOGON),
    ("fe80::1/128", NODE6, (ACME_AS,), Reason.BOGON),
    ("198.51.100.20/32", NODE4, (ACME_AS,), Reason.OUTSIDE_ALLOCATION),  # bolt's
    ("198.51.100.16/28", NODE4, (ACME_AS,), Reason.OUTSIDE_ALLOCATION),
    ("2001:db8:100::15/128", NODE6, (ACME_AS,), Reason.OUTSIDE_ALLOCATION),
    ("8.8.8.8/32", NODE4, (ACME_AS,), Reason.OUTSIDE_ALLOCATION),
    ("198.51.100.0/27", NODE4, (ACME_AS,), Reason.AGGREGATE_NOT_HELD),  # acme's + bolt's
    ("198.51.100.0/24", NODE4, (ACME_AS,), Reason.AGGREGATE_NOT_HELD),
    ("2001:db8:100::/120", NODE6, (ACME_AS,), Reason.AGGREGATE_NOT_HELD),
    ("198.51.100.0/28", NODE4, (ACME_AS,), Reason.HOST_ROUTES_ONLY),  # held, but /28
    ("2001:db8:100::/126", NODE6, (ACME_AS,), Reason.HOST_ROUTES_ONLY),
    ("198.51.100.5/32", "192.0.2.1", (ACME_AS,), Reason.NEXT_HOP_PROTECTED),  # the router
    ("198.51.100.5/32", "192.0.2.61", (ACME_AS,), Reason.NEXT_HOP_PROTECTED),  # management
    ("2001:db8:100::5/128", "2001:db8:a::1", (ACME_AS,), Reason.NEXT_HOP_PROTECTED),
    ("198.51.100.5/32", "192.0.2.71", (ACME_AS,), Reason.NEXT_HOP_OUTSIDE),  # bolt's node
    ("2001:db8:100::5/128", "2001:db8:b::71", (ACME_AS,), Reason.NEXT_HOP_OUTSIDE),
    # Inside acme's node networks, but no registered node's: an unused address, or a
    # router's own leg in the subnet that nobody listed in --protect.
    ("198.51.100.5/32", "192.0.2.40", (ACME_AS,), Reason.NEXT_HOP_NOT_NODE),
    ("2001:db8:100::5/128", "2001:db8:a::40", (ACME_AS,), Reason.NEXT_HOP_NOT_NODE),
    ("198.51.100.5/32", NODE4, (ACME_AS, 64602), Reason.AS_PATH),  # transit of bolt
    ("198.51.100.5/32", NODE4, (64602,), Reason.AS_PATH),  # foreign ASN
    ("198.51.100.5/32", NODE4, (ACME_AS, 65000), Reason.AS_PATH),  # private ASN behind
    ("198.51.100.5/32", NODE4, (), Reason.AS_PATH),  # empty
    ("2001:db8:100::5/128", NODE6, (64602, ACME_AS), Reason.AS_PATH),  # others' prepend
]


@pytest.mark.parametrize(("prefix", "next_hop", "asns", "reason"), CASES)
def test_each_rule_accepts_or_rejects_with_its_reason(
    prefix: str, next_hop: str, asns: tuple[int, ...], reason: Reason | None
) -> None:
    verdict = _acme().judge(ip_network(prefix), path(next_hop, *asns))
    if reason is None:
        assert isinstance(verdict, Accepted), verdict
    else:
        assert isinstance(verdict, Rejected), verdict
        assert verdict.reason == reason
        assert verdict.filter == "acme" and verdict.rule is not None


@pytest.mark.parametrize(
    ("prefix", "hop"), [("198.51.100.5/32", NODE4), ("2001:db8:100::5/128", NODE6)]
)
def test_an_as_set_is_rejected(prefix: str, hop: str) -> None:
    verdict = _acme().judge(ip_network(prefix), path(hop, ACME_AS, sets=(ACME_AS, 64602)))
    assert isinstance(verdict, Rejected) and verdict.reason == Reason.AS_SET


@pytest.mark.parametrize(
    ("prefix", "hop"), [("198.51.100.0/28", NODE4), ("2001:db8:100::/124", NODE6)]
)
def test_an_aggregate_held_in_full_passes_when_aggregates_are_allowed(
    prefix: str, hop: str
) -> None:
    verdict = _acme(aggregates=True).judge(ip_network(prefix), path(hop, ACME_AS))
    assert isinstance(verdict, Accepted)
    half = _acme(aggregates=True).judge(ip_network(prefix).supernet(), path(hop, ACME_AS))
    assert isinstance(half, Rejected) and half.reason == Reason.AGGREGATE_NOT_HELD


BLACKHOLE = WELL_KNOWN_COMMUNITIES["blackhole"]
NO_EXPORT = WELL_KNOWN_COMMUNITIES["no-export"]
NO_ADVERTISE = WELL_KNOWN_COMMUNITIES["no-advertise"]
NO_EXPORT_SUBCONFED = WELL_KNOWN_COMMUNITIES["no-export-subconfed"]
ALLOWED = (ACME_AS << 16) | 100  # the relay-wide allowlist of OPTIONS


def _communities(flt: Filter, *sent: int) -> tuple[int, ...] | Rejected:
    verdict = flt.judge(ip_network("198.51.100.5/32"), path(NODE4, ACME_AS, communities=sent))
    return verdict.path.communities if isinstance(verdict, Accepted) else verdict


def test_communities_are_scrubbed_to_the_allowlist_and_med_removed() -> None:
    other = (64999 << 16) | 1
    sent = path(NODE4, ACME_AS, communities=(other, ALLOWED))
    verdict = _acme().judge(ip_network("198.51.100.5/32"), sent)
    assert isinstance(verdict, Accepted)
    assert verdict.path.communities == (ALLOWED,)
    assert verdict.path.med is None


@pytest.mark.parametrize("reach", [NO_EXPORT, NO_ADVERTISE, NO_EXPORT_SUBCONFED])
def test_rfc1997_reach_limits_are_passed_on_by_default(reach: int) -> None:
    assert _communities(_acme(), reach, ALLOWED) == (reach, ALLOWED)


@pytest.mark.parametrize("reach", [NO_EXPORT, NO_ADVERTISE, NO_EXPORT_SUBCONFED])
def test_rfc1997_reach_limits_honoured_keep_the_route_from_the_routers(reach: int) -> None:
    verdict = _communities(_acme(well_known=WellKnownCommunities.HONOUR), reach)
    assert isinstance(verdict, Rejected) and verdict.reason == Reason.NO_EXPORT_HONOURED
    assert _communities(_acme(well_known=WellKnownCommunities.HONOUR), ALLOWED) == (ALLOWED,)


def test_blackhole_is_removed_without_rtbh() -> None:
    assert _communities(_acme(), BLACKHOLE, ALLOWED) == (ALLOWED,)


def test_blackhole_with_rtbh_passes_with_no_export_added() -> None:
    assert _communities(_acme(rtbh=True), BLACKHOLE) == (BLACKHOLE, NO_EXPORT)
    # Honouring reach limits does not refuse the NO_EXPORT the relay added itself.
    honour = _acme(rtbh=True, well_known=WellKnownCommunities.HONOUR)
    assert _communities(honour, BLACKHOLE) == (BLACKHOLE, NO_EXPORT)
    # Still only inside the tenant's allocation: a blackhole for bolt's prefix is refused.
    theirs = honour.judge(
        ip_network("198.51.100.20/32"), path(NODE4, ACME_AS, communities=(BLACKHOLE,))
    )
    assert isinstance(theirs, Rejected) and theirs.reason == Reason.OUTSIDE_ALLOCATION


def test_a_tenants_rtbh_setting_wins_over_the_relays() -> None:
    on = relay_tenant("acme", relay={"rtbh": True})
    off = relay_tenant("acme", relay={"rtbh": False})
    relay_off, relay_on = OPTIONS, replace(OPTIONS, rtbh=True)
    assert _communities(tenant_policy(on, pools(), relay_off).filter, BLACKHOLE) == (
        BLACKHOLE,
        NO_EXPORT,
    )
    assert _communities(tenant_policy(off, pools(), relay_on).filter, BLACKHOLE) == ()


def test_a_tenants_allowlist_extends_the_relays() -> None:
    mine = (ACME_AS << 16) | 7
    acme = relay_tenant("acme", relay={"communities": ["64601:7"], "largeCommunities": ["1:2:3"]})
    policy = tenant_policy(acme, pools(), OPTIONS)
    assert policy.communities == {ALLOWED, mine} and policy.rtbh is False
    assert _communities(policy.filter, mine, ALLOWED, (64999 << 16) | 1) == (mine, ALLOWED)
    # bolt keeps the relay's allowlist only.
    bolt = tenant_policy(relay_tenant("bolt"), pools(), OPTIONS)
    assert bolt.communities == {ALLOWED}


@pytest.mark.parametrize("kind", [SegmentType.AS_CONFED_SEQUENCE, SegmentType.AS_CONFED_SET])
@pytest.mark.parametrize(
    ("prefix", "hop"), [("198.51.100.5/32", NODE4), ("2001:db8:100::5/128", NODE6)]
)
def test_a_confederation_segment_from_a_tenant_is_treated_as_withdraw(
    kind: SegmentType, prefix: str, hop: str
) -> None:
    sent = path(hop, ACME_AS, confed=(kind, (ACME_AS,)))
    verdict = _acme().judge(ip_network(prefix), sent)
    assert isinstance(verdict, Rejected) and verdict.reason == Reason.AS_CONFED


@pytest.mark.parametrize(("length", "accepted"), [(32, True), (33, False)])
def test_the_as_path_is_capped_at_32_asns_prepends_included(length: int, accepted: bool) -> None:
    verdict = _acme().judge(ip_network("198.51.100.5/32"), path(NODE4, *[ACME_AS] * length))
    if accepted:
        assert isinstance(verdict, Accepted)
    else:
        assert isinstance(verdict, Rejected) and verdict.reason == Reason.AS_PATH_TOO_LONG


def test_the_as_path_cap_is_an_option() -> None:
    long = path(NODE4, *[ACME_AS] * 40)
    assert isinstance(_acme(max_as_path_length=None).judge(ip_network("198.51.100.5/32"), long),
                      Accepted)  # fmt: skip
    short = _acme(max_as_path_length=2).judge(
        ip_network("198.51.100.5/32"), path(NODE4, *[ACME_AS] * 3)
    )
    assert isinstance(short, Rejected) and short.reason == Reason.AS_PATH_TOO_LONG


def test_a_tenant_without_asn_gets_nothing_through() -> None:
    flt = tenant_policy(relay_tenant("acme", asn=None), pools(), OPTIONS).filter
    verdict = flt.judge(ip_network("198.51.100.5/32"), path(NODE4, ACME_AS))
    assert isinstance(verdict, Rejected) and verdict.reason == Reason.AS_PATH


def test_a_pool_in_documentation_space_is_not_a_bogon_but_space_beside_it_is() -> None:
    flt = _acme()
    inside = flt.judge(ip_network("198.51.100.5/32"), path(NODE4, ACME_AS))
    beside = flt.judge(ip_network("198.51.100.200/32"), path(NODE4, ACME_AS))
    assert isinstance(inside, Accepted)
    assert isinstance(beside, Rejected) and beside.reason == Reason.BOGON


def test_a_whole_batch_gets_the_same_verdicts_as_one_route_at_a_time() -> None:
    flt = _acme()
    prefixes = [ip_network(p) for p, hop, _, _ in CASES if hop == NODE4 and ":" not in p]
    sent = path(NODE4, ACME_AS)
    judged = flt.judge_batch(IPV4_UNICAST, [encode_prefix(p) for p in prefixes], sent)
    batch = {enc: None for _, encs in judged.accepted for enc in encs}
    batch |= {enc: why.reason for why, encs in judged.rejected for enc in encs}
    for p in prefixes:
        one = flt.judge(p, sent)
        assert batch[encode_prefix(p)] == (None if isinstance(one, Accepted) else one.reason)


def test_a_prefixs_remembered_verdict_is_per_family_and_the_same_for_every_path() -> None:
    """The leading prefix rules' verdicts are remembered per prefix (a tenant's nodes send
    the same prefixes): a second node's route, another path, or a prefix of the other
    family with the same encoding (cb00:7105::/32 is 203.0.113.5/32's octets) still gets
    the verdict of a fresh judgement."""
    f = _acme()
    accepted = [encode_prefix(ip_network("198.51.100.5/32"))]
    for node in (NODE4, "192.0.2.12", "192.0.2.12"):
        judged = f.judge_batch(IPV4_UNICAST, accepted, path(node, ACME_AS))
        assert judged.accepted_count() == 1 and not judged.rejected
    # Same path rules, then the path decides: a foreign AS path is still rejected.
    judged = f.judge_batch(IPV4_UNICAST, accepted, path(NODE4, 64999))
    assert [(w.reason, len(e)) for w, e in judged.rejected] == [(Reason.AS_PATH.value, 1)]
    v4 = encode_prefix(ip_network("203.0.113.5/32"))
    v6 = encode_prefix(ip_network("cb00:7105::/32"))
    assert v4 == v6
    first = f.judge_batch(IPV4_UNICAST, [v4], path(NODE4, ACME_AS))
    second = f.judge_batch(IPV6_UNICAST, [v6], path(NODE6, ACME_AS))
    assert [w.reason for w, _ in first.rejected] == [Reason.BOGON.value]
    assert [w.reason for w, _ in second.rejected] == [Reason.OUTSIDE_ALLOCATION.value]
    assert f == _acme()  # what it remembers is no part of the filter's value


def test_a_tenant_without_registered_nodes_gets_no_next_hop_through() -> None:
    flt = tenant_policy(relay_tenant("acme", nodes=[]), pools(), OPTIONS).filter
    for prefix, hop in (("198.51.100.5/32", NODE4), ("2001:db8:100::5/128", NODE6)):
        verdict = flt.judge(ip_network(prefix), path(hop, ACME_AS))
        assert isinstance(verdict, Rejected) and verdict.reason == Reason.NEXT_HOP_NOT_NODE


def test_a_registered_address_outside_the_node_networks_is_never_a_next_hop() -> None:
    # nodeNetworks stay the outer bound: validation refuses such an address, and the
    # policy does not count it either.
    outside = [{"name": "n9", "addresses": ["203.0.113.9"]}]
    policy = tenant_policy(relay_tenant("acme", nodes=outside), pools(), OPTIONS)
    assert policy.nodes == ()
    verdict = policy.filter.judge(ip_network("198.51.100.5/32"), path("203.0.113.9", ACME_AS))
    assert isinstance(verdict, Rejected) and verdict.reason == Reason.NEXT_HOP_OUTSIDE


@pytest.mark.parametrize(
    ("community", "governed_by"),
    [
        ("no-export", "--well-known-communities"),
        ("65535:65282", "--well-known-communities"),  # NO_ADVERTISE
        ("no-export-subconfed", "--well-known-communities"),
        ("blackhole", "RTBH"),
    ],
)
def test_a_tenant_cannot_allowlist_a_community_the_relay_governs_by_an_option(
    community: str, governed_by: str
) -> None:
    body = tenant_body("acme", asn=ASN["acme"], relay={"communities": ["64601:1", community]})
    obj, problems = parse_object(body)
    assert obj is None
    assert [(p.field, governed_by in p.message) for p in problems] == [
        ("spec.relay.communities[1]", True)
    ]
