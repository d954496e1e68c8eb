"""The policy interpreter, rule kind by rule kind (in the manner of BIRD's filter tests).

Each condition accepts what it should and rejects what it should; each change does what it
says; a reject carries its reason and the rule's position; batches give the same answers as
one route at a time.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.bgp.attributes import ReceivedPath, RouteAttributes
from teapot_lb.bgp.policy import (
    ACCEPT_ALL,
    BOGONS,
    Accept,
    Accepted,
    AddCommunities,
    AsPathContains,
    AsPathIs,
    AsPathLength,
    Condition,
    Filter,
    HasCommunity,
    HasLargeCommunity,
    Judged,
    NextHopIn,
    Not,
    OriginAsIn,
    OriginIs,
    PrefixIn,
    PrefixRange,
    PrefixSet,
    Reject,
    Rejected,
    Rule,
    SetLocalPref,
    SetMed,
    SetNextHop,
    StripCommunities,
    StripLargeCommunities,
    accept,
    modify,
    parse_community,
    reject,
)
from teapot_lb.bgp.rib import encode_prefix
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    AsPath,
    Communities,
    LargeCommunities,
    LargeCommunity,
    Origin,
    OriginCode,
    Prefix,
    community,
    pack_path_id,
)

NODE_A = IPv4Address("192.0.2.11")
NODE_B = IPv4Address("192.0.2.12")
TENANT_AS = 64512
PATH = RouteAttributes(next_hop=NODE_A, as_path=(TENANT_AS,))


def net(text: str) -> Prefix:
    return ip_network(text)


def only(condition: Condition) -> Filter:
    """A filter accepting exactly what ``condition`` matches."""
    return Filter((accept(condition),), default=Reject("no match"))


def passes(f: Filter, prefix: str, path: RouteAttributes = PATH) -> bool:
    return isinstance(f.judge(net(prefix), path), Accepted)


# ---------------------------------------------------------------------------- prefix ranges


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("203.0.113.0/24", ["203.0.113.0/24"], ["203.0.113.0/25", "203.0.112.0/23"]),
        ("203.0.113.0/24+", ["203.0.113.0/24", "203.0.113.7/32"], ["203.0.112.0/23"]),
        ("203.0.113.0/24-", ["203.0.113.0/24", "203.0.112.0/23", "0.0.0.0/0"], ["203.0.113.0/25"]),
        ("203.0.113.0/24{26,28}", ["203.0.113.64/26", "203.0.113.16/28"], ["203.0.113.0/25"]),
        ("2001:db8::/32{48,64}", ["2001:db8:1::/48", "2001:db8:1:2::/64"], ["2001:db8::/32"]),
    ],
)
def test_prefix_range_holds_its_lengths_inside_its_network(
    text: str, inside: list[str], outside: list[str]
) -> None:
    rng = PrefixSet((PrefixRange.parse(text),))
    assert all(net(p) in rng for p in inside)
    assert not any(net(p) in rng for p in outside)


def test_prefix_range_never_matches_the_other_family() -> None:
    assert net("::/0") not in PrefixSet.of("0.0.0.0/0+")
    assert net("0.0.0.0/0") not in PrefixSet.of("::/0+")


@pytest.mark.parametrize(
    "text", ["203.0.113.1/24", "203.0.113.0/24{28,33}", "203.0.113.0/24{28,26}", "nonsense"]
)
def test_bad_prefix_range_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="prefix range"):
        PrefixRange.parse(text)


def test_prefix_set_of_addresses_holds_host_routes() -> None:
    nodes = PrefixSet.of("192.0.2.11", IPv6Address("2001:db8::11"))
    assert NODE_A in nodes and IPv6Address("2001:db8::11") in nodes
    assert NODE_B not in nodes


def test_bogons_hold_documentation_and_private_space_not_public() -> None:
    assert net("10.1.0.0/16") in BOGONS and net("2001:db8:5::/48") in BOGONS
    assert net("8.8.8.0/24") not in BOGONS and net("2a00:1450::/32") not in BOGONS
    assert net("203.0.113.7/32") not in BOGONS.without("203.0.113.0/24+")
    with pytest.raises(ValueError, match=r"no range 203\.0\.113\.0/25"):
        BOGONS.without("203.0.113.0/25")


@given(
    base=st.integers(0, 2**32 - 1),
    plen=st.integers(0, 32),
    lo=st.integers(0, 32),
    span=st.integers(0, 32),
    probe=st.integers(0, 2**32 - 1),
    probe_len=st.integers(0, 32),
)
def test_prefix_range_agrees_with_ipaddress_subnet_of(
    base: int, plen: int, lo: int, span: int, probe: int, probe_len: int
) -> None:
    network = IPv4Network((base, plen), strict=False)
    lo = max(lo, plen)
    hi = min(32, lo + span)
    rng = PrefixRange(network, lo, hi)
    candidate = IPv4Network((probe, probe_len), strict=False)
    expected = candidate.subnet_of(network) and lo <= probe_len <= hi
    assert (candidate in PrefixSet((rng,))) == expected


# ---------------------------------------------------------------------------- conditions


def test_prefix_in_accepts_inside_the_allocation_and_rejects_outside() -> None:
    f = only(PrefixIn(PrefixSet.of("203.0.113.0/24{24,32}")))
    assert passes(f, "203.0.113.7/32") and passes(f, "203.0.113.0/24")
    assert not passes(f, "198.51.100.7/32") and not passes(f, "203.0.112.0/23")


def test_next_hop_in_accepts_the_node_set_and_rejects_others() -> None:
    f = only(NextHopIn(PrefixSet.of("192.0.2.11", "192.0.2.12")))
    assert passes(f, "203.0.113.7/32", RouteAttributes(next_hop=NODE_B))
    assert not passes(f, "203.0.113.7/32", RouteAttributes(next_hop=IPv4Address("192.0.2.99")))
    assert not passes(f, "203.0.113.7/32", RouteAttributes(next_hop=None))


def test_as_path_is_matches_exactly() -> None:
    f = only(AsPathIs((TENANT_AS,)))
    assert passes(f, "203.0.113.7/32", RouteAttributes(as_path=(TENANT_AS,)))
    assert not passes(f, "203.0.113.7/32", RouteAttributes(as_path=(TENANT_AS, 64999)))
    assert not passes(f, "203.0.113.7/32", RouteAttributes(as_path=()))


def test_as_path_contains_and_length_and_origin_as() -> None:
    path = RouteAttributes(as_path=(64512, 64513, 64514))
    assert passes(only(AsPathContains(frozenset({64513}))), "203.0.113.7/32", path)
    assert not passes(only(AsPathContains(frozenset({1}))), "203.0.113.7/32", path)
    assert passes(only(AsPathLength(1, 3)), "203.0.113.7/32", path)
    assert not passes(only(AsPathLength(0, 2)), "203.0.113.7/32", path)
    assert passes(only(OriginAsIn(frozenset({64514}))), "203.0.113.7/32", path)
    assert not passes(only(OriginAsIn(frozenset({64512}))), "203.0.113.7/32", path)
    assert not passes(only(OriginAsIn(frozenset({64512}))), "203.0.113.7/32", RouteAttributes())


def test_has_community_and_large_community() -> None:
    tagged = RouteAttributes(
        communities=(community(65000, 1),), large_communities=(LargeCommunity(65000, 1, 2),)
    )
    assert passes(only(HasCommunity.of("65000:1", "65000:9")), "203.0.113.7/32", tagged)
    assert not passes(only(HasCommunity.of("65000:2")), "203.0.113.7/32", tagged)
    large = HasLargeCommunity(frozenset({LargeCommunity(65000, 1, 2)}))
    assert passes(only(large), "203.0.113.7/32", tagged)
    assert not passes(only(large), "203.0.113.7/32", RouteAttributes())


def test_origin_is() -> None:
    assert passes(only(OriginIs(OriginCode.IGP)), "203.0.113.7/32")
    incomplete = RouteAttributes(origin=OriginCode.INCOMPLETE)
    assert not passes(only(OriginIs(OriginCode.IGP)), "203.0.113.7/32", incomplete)


def test_not_inverts_path_and_prefix_conditions() -> None:
    assert not passes(only(Not(AsPathIs((TENANT_AS,)))), "203.0.113.7/32")
    assert passes(only(Not(PrefixIn(PrefixSet.of("198.51.100.0/24+")))), "203.0.113.7/32")


def test_conditions_of_a_rule_must_all_hold() -> None:
    f = only_all(PrefixIn(PrefixSet.of("203.0.113.0/24+")), AsPathIs((TENANT_AS,)))
    assert passes(f, "203.0.113.7/32")
    assert not passes(f, "203.0.113.7/32", RouteAttributes(as_path=(1,)))
    assert not passes(f, "198.51.100.7/32")


def only_all(*conditions: Condition) -> Filter:
    return Filter((accept(*conditions),), default=Reject("no match"))


def test_bad_community_text_is_refused_naming_it() -> None:
    assert parse_community("65000:1") == community(65000, 1)
    with pytest.raises(ValueError, match="65000:x"):
        parse_community("65000:x")
    with pytest.raises(ValueError, match=r"0\.\.65535"):
        parse_community("70000:1")


# ---------------------------------------------------------------------------- actions


def test_reject_carries_its_reason_rule_and_filter_name() -> None:
    f = Filter((accept(AsPathIs((1,))), reject("not ours", Not(AsPathIs((1,))))), name="t")
    verdict = f.judge(net("203.0.113.7/32"), PATH)
    assert verdict == Rejected("not ours", 1, "t")
    assert str(verdict) == "rejected by filter 't' rule 2: not ours"


def test_default_decides_what_no_rule_does() -> None:
    assert isinstance(Filter().judge(net("203.0.113.7/32"), PATH), Accepted)
    closed = Filter(default=Reject("filter reached its end"))
    assert closed.judge(net("203.0.113.7/32"), PATH) == Rejected("filter reached its end", None)


def test_first_deciding_rule_wins() -> None:
    f = Filter((reject("first"), reject("second")))
    assert f.judge(net("203.0.113.7/32"), PATH) == Rejected("first", 0)


def test_changes_apply_before_the_verdict_and_carry_on_without_one() -> None:
    f = Filter(
        (
            modify(then=(SetLocalPref(200),)),
            accept(HasCommunity.of("65000:1"), then=(SetMed(5),)),
            accept(then=(AddCommunities((community(65000, 9),)),)),
        )
    )
    tagged = RouteAttributes(communities=(community(65000, 1),))
    assert f.judge(net("203.0.113.7/32"), tagged) == Accepted(
        RouteAttributes(communities=(community(65000, 1),), local_pref=200, med=5)
    )
    assert f.judge(net("203.0.113.7/32"), RouteAttributes()) == Accepted(
        RouteAttributes(communities=(community(65000, 9),), local_pref=200)
    )


def test_large_communities_sort_like_their_numbers() -> None:
    values = {LargeCommunity(2, 0, 0), LargeCommunity(1, 5, 0), LargeCommunity(1, 2, 3)}
    assert [str(c) for c in sorted(values)] == ["1:2:3", "1:5:0", "2:0:0"]


def test_strip_communities_all_or_listed() -> None:
    path = RouteAttributes(
        communities=(community(65000, 1), community(65000, 2)),
        large_communities=(LargeCommunity(1, 2, 3),),
    )
    strip_all = Filter((accept(then=(StripCommunities(), StripLargeCommunities())),))
    assert strip_all.judge(net("203.0.113.7/32"), path) == Accepted(RouteAttributes())
    strip_one = Filter((accept(then=(StripCommunities(frozenset({community(65000, 1)})),)),))
    verdict = strip_one.judge(net("203.0.113.7/32"), path)
    assert isinstance(verdict, Accepted) and verdict.path.communities == (community(65000, 2),)


def test_set_next_hop() -> None:
    f = Filter((accept(then=(SetNextHop(NODE_B),)),))
    assert f.judge(net("203.0.113.7/32"), PATH) == Accepted(
        RouteAttributes(next_hop=NODE_B, as_path=(TENANT_AS,))
    )


def test_a_verdict_must_be_the_last_action() -> None:
    with pytest.raises(ValueError, match="last"):
        Rule((), (Accept(), SetMed(1)))
    with pytest.raises(ValueError, match="last"):
        Rule((), (Reject("a"), Reject("b")))


def test_changes_to_a_received_path_rebuild_its_attributes() -> None:
    received = ReceivedPath(
        NODE_A,
        (
            Origin(0),
            AsPath.sequence(TENANT_AS),
            Communities((community(65000, 1),)),
            LargeCommunities((LargeCommunity(1, 2, 3),)),
        ),
    )
    f = Filter((accept(then=(StripCommunities(), StripLargeCommunities(), SetLocalPref(50))),))
    verdict = f.judge(net("203.0.113.7/32"), received)
    assert isinstance(verdict, Accepted)
    out = verdict.path
    assert out.communities == () and out.large_communities == () and out.local_pref == 50
    assert out.as_path == (TENANT_AS,) and out.next_hop == NODE_A
    assert out.get(Communities) is None


# ---------------------------------------------------------------------------- the relay filter


def relay_filter() -> Filter:
    """The Teapot relay's per-tenant import filter (docs/bgp.md shows the same)."""
    return Filter(
        (
            reject("bogon", PrefixIn(LAB_BOGONS)),
            reject("prefix outside the tenant's allocation", Not(PrefixIn(ALLOCATION))),
            reject("next hop is not a tenant node", Not(NextHopIn(NODES))),
            reject("AS path is not the tenant's ASN only", Not(AsPathIs((TENANT_AS,)))),
            accept(then=(StripCommunities(), StripLargeCommunities())),
        ),
        name="tenant-a",
    )


# BOGONS without the documentation space the tests allocate from (as docs/bgp.md shows).
LAB_BOGONS = BOGONS.without("192.0.2.0/24+", "203.0.113.0/24+", "2001:db8::/32+")
ALLOCATION = PrefixSet.of("203.0.113.0/25{25,32}", "2001:db8:a::/48{48,128}")
NODES = PrefixSet.of("192.0.2.11", "192.0.2.12", "2001:db8::11")


ELSEWHERE = RouteAttributes(IPv4Address("192.0.2.99"), as_path=(TENANT_AS,))
TRANSIT = RouteAttributes(NODE_A, as_path=(TENANT_AS, 64999))


ELSEWHERE = RouteAttributes(IPv4Address("192.0.2.99"), as_path=(TENANT_AS,))
TRANSIT = RouteAttributes(NODE_A, as_path=(TENANT_AS, 64999))


@pytest.mark.parametrize(
    ("prefix", "path", "reason"),
    [
        ("203.0.113.7/32", PATH, None),
        ("2001:db8:a::7/128", RouteAttributes(IPv6Address("2001:db8::11"), as_path=(64512,)), None),
        ("10.0.0.0/8", PATH, "bogon"),
        ("203.0.113.200/32", PATH, "prefix outside the tenant's allocation"),
        ("203.0.113.0/24", PATH, "prefix outside the tenant's allocation"),
        ("203.0.113.7/32", ELSEWHERE, "next hop is not a tenant node"),
        ("203.0.113.7/32", TRANSIT, "AS path is not the tenant's ASN only"),
    ],
)
def test_relay_filter_accepts_the_tenants_routes_and_names_why_not(
    prefix: str, path: RouteAttributes, reason: str | None
) -> None:
    verdict = relay_filter().judge(net(prefix), path)
    if reason is None:
        assert isinstance(verdict, Accepted)
    else:
        assert isinstance(verdict, Rejected) and verdict.reason == reason


def test_relay_filter_strips_communities() -> None:
    tagged = RouteAttributes(NODE_A, communities=(community(65000, 666),), as_path=(TENANT_AS,))
    verdict = relay_filter().judge(net("203.0.113.7/32"), tagged)
    assert isinstance(verdict, Accepted) and verdict.path.communities == ()


# ---------------------------------------------------------------------------- batches

prefixes_v4 = st.builds(
    lambda v, n: IPv4Network((v, n), strict=False), st.integers(0, 2**32 - 1), st.integers(0, 32)
)
prefixes_v6 = st.builds(
    lambda v, n: IPv6Network((v, n), strict=False), st.integers(0, 2**128 - 1), st.integers(0, 128)
)
paths = st.builds(
    RouteAttributes,
    next_hop=st.sampled_from([NODE_A, NODE_B, None]),
    communities=st.lists(st.sampled_from([1, 2, community(65000, 1)]), max_size=2).map(tuple),
    as_path=st.lists(st.sampled_from([64512, 64513]), max_size=2).map(tuple),
)


@given(
    prefixes=st.one_of(
        st.lists(prefixes_v4, max_size=30, unique=True),
        st.lists(prefixes_v6, max_size=30, unique=True),
    ),
    path=paths,
)
def test_batch_judges_like_one_route_at_a_time(
    prefixes: list[Prefix], path: RouteAttributes
) -> None:
    f = Filter(
        (
            reject("bogon", PrefixIn(BOGONS)),
            modify(PrefixIn(PrefixSet.of("0.0.0.0/0{24,32}", "::/0{64,128}")), then=(SetMed(7),)),
            reject("wrong path", Not(AsPathIs((64512,)))),
            accept(HasCommunity.of("65000:1"), then=(StripCommunities(),)),
            accept(PrefixIn(PrefixSet.of("128.0.0.0/1+", "8000::/1+"))),
        ),
        default=Reject("end"),
    )
    family = IPV4_UNICAST if not prefixes or prefixes[0].version == 4 else IPV6_UNICAST
    one = {encode_prefix(p): f.judge(p, path) for p in prefixes}
    judged = f.judge_batch(family, [encode_prefix(p) for p in prefixes], path)
    assert by_encoding(judged) == one


def by_encoding(
    judged: Judged[RouteAttributes],
) -> dict[bytes, Accepted[RouteAttributes] | Rejected]:
    """A batch's verdicts, each encoding's on its own."""
    out: dict[bytes, Accepted[RouteAttributes] | Rejected] = {}
    for path, encs in judged.accepted:
        out.update(dict.fromkeys(encs, Accepted(path)))
    for why, encs in judged.rejected:
        out.update(dict.fromkeys(encs, why))
    return out


# Prefixes about the ranges' edges: in, beside or covering a /118, bogon space and the
# pool's /48, of lengths at, below and above the ranges' own, so that batches share regions.
NEAR = [net("2001:db8:1::/118"), net("2001:db8:1::400/118"), net("fc00::/7"), net("::/0")]
near_prefixes = st.builds(
    lambda base, offset, plen: IPv6Network(
        (int(base.network_address) + offset, plen), strict=False
    ),
    st.sampled_from(NEAR),
    st.one_of(st.integers(0, 2**12), st.integers(0, 2**100)),
    st.one_of(st.sampled_from([0, 7, 48, 64, 117, 118, 119, 127, 128]), st.integers(0, 128)),
)


@given(
    batches=st.lists(
        st.lists(near_prefixes, max_size=20, unique=True),
        max_size=5,
    ),
    add_path=st.booleans(),
)
def test_a_filter_remembers_verdicts_by_region_and_still_judges_each_prefix_alone(
    batches: list[list[Prefix]], add_path: bool
) -> None:
    """The leading prefix rules' verdicts are kept per region (length and leading bits):
    over batch after batch (ADD-PATH ones too) they are what one route at a time gives."""
    f = Filter(
        (
            reject("default", PrefixIn(PrefixSet.of("0.0.0.0/0", "::/0"))),
            reject("bogon", PrefixIn(BOGONS), Not(PrefixIn(PrefixSet.of("2001:db8:1::/48+")))),
            reject("outside", Not(PrefixIn(PrefixSet.of("2001:db8:1::/118{0,128}")))),
            reject("not held", Not(PrefixIn(PrefixSet.of("2001:db8:1::/118+")))),
            reject("hosts only", Not(PrefixIn(PrefixSet.of("2001:db8:1::/118{128,128}")))),
        ),
        name="t",
    )
    path = RouteAttributes(IPv6Address("2001:db8::11"), as_path=(TENANT_AS,))
    pid = pack_path_id(7) if add_path else b""
    for prefixes in batches:
        one = {pid + encode_prefix(p): f.judge(p, path) for p in prefixes}
        judged = f.judge_batch(
            IPV6_UNICAST, [pid + encode_prefix(p) for p in prefixes], path, add_path=add_path
        )
        assert by_encoding(judged) == one


def test_accept_all_hands_the_batch_back_untouched() -> None:
    encs = [encode_prefix(net("203.0.113.7/32"))]
    judged = ACCEPT_ALL.judge_batch(IPV4_UNICAST, encs, PATH)
    assert judged.accepted == [(PATH, encs)] and not judged.rejected


def test_filters_print_like_bird_filters() -> None:
    text = str(relay_filter())
    assert text.startswith("filter tenant-a {")
    assert 'reject "next hop is not a tenant node"' in text
    assert "!(net ~ [203.0.113.0/25+, 2001:db8:a::/48+])" in text
    assert "10.0.0.0/8+" in text and "203.0.113.0/24+" not in text
    assert "bgp_community.delete(all)" in text
