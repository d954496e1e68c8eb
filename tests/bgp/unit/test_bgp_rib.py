"""Adj-RIB-Out diffs and packing; Adj-RIB-In stale handling."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.bgp.policy import (
    Filter,
    HasCommunity,
    Not,
    PrefixIn,
    PrefixSet,
    StripCommunities,
    accept,
    reject,
)
from teapot_lb.bgp.rib import (
    AdjRibIn,
    AdjRibOut,
    ExportContext,
    ReceivedPath,
    RouteAttributes,
    compile_routes,
    encode_prefix,
)
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    AsPath,
    Communities,
    Context,
    LocalPref,
    MpReachNlri,
    NextHop,
    Prefix,
    Update,
    decode_stream,
    split_prefixes,
)

EBGP = ExportContext(
    local_as=65001,
    peer_as=65000,
    next_hop_v4=IPv4Address("192.0.2.10"),
    next_hop_v6=(IPv6Address("2001:db8::10"),),
)
IBGP = ExportContext(local_as=65001, peer_as=65001, next_hop_v4=IPv4Address("192.0.2.10"))


def hosts(n: int, base: str = "198.51.100.0") -> list[IPv4Network]:
    start = int(IPv4Address(base))
    return [IPv4Network((start + i, 32)) for i in range(n)]


def push(
    rib: AdjRibOut, routes: dict[Prefix, RouteAttributes], export: ExportContext = EBGP
) -> list[Update]:
    rib.set_desired(compile_routes(routes))
    raw = rib.updates(export)
    assert all(len(m) <= 4096 for m in raw)
    return [m for m in decode_stream(b"".join(raw)) if isinstance(m, Update)]


def announced(updates: list[Update]) -> set[Prefix]:
    return {p for u in updates for p in u.reachable()}


def withdrawn(updates: list[Update]) -> set[Prefix]:
    return {p for u in updates for p in u.unreachable()}


def test_identical_attributes_share_as_few_updates_as_fit() -> None:
    attrs = RouteAttributes(communities=(65000 << 16 | 1,))
    updates = push(AdjRibOut(), {p: attrs for p in hosts(5000)})
    # 5000 /32s at 5 bytes each, ~4040 bytes of room: 7 messages, not more.
    assert len(updates) == 7
    assert announced(updates) == set(hosts(5000))


def test_different_attributes_go_in_different_updates() -> None:
    a, b = hosts(2)
    updates = push(AdjRibOut(), {a: RouteAttributes(med=1), b: RouteAttributes(med=2)})
    assert len(updates) == 2
    assert {u.nlri for u in updates} == {(a,), (b,)}


def test_second_push_sends_only_the_difference() -> None:
    rib = AdjRibOut()
    first = hosts(10)
    push(rib, dict.fromkeys(first, RouteAttributes()))
    second = first[2:] + hosts(2, "203.0.113.0")
    updates = push(rib, dict.fromkeys(second, RouteAttributes()))
    assert withdrawn(updates) == set(first[:2])
    assert announced(updates) == set(hosts(2, "203.0.113.0"))


def test_changed_attributes_are_re_announced_alone() -> None:
    rib = AdjRibOut()
    nets = hosts(3)
    push(rib, dict.fromkeys(nets, RouteAttributes()))
    updates = push(
        rib,
        {nets[0]: RouteAttributes(), nets[1]: RouteAttributes(med=5), nets[2]: RouteAttributes()},
    )
    assert announced(updates) == {nets[1]} and not withdrawn(updates)


def test_unchanged_routes_send_nothing() -> None:
    rib = AdjRibOut()
    routes = dict.fromkeys(hosts(100), RouteAttributes())
    push(rib, routes)
    assert push(rib, dict(routes)) == []


def test_ipv6_goes_through_mp_reach_with_next_hop_self() -> None:
    p = IPv6Network("2001:db8:5::1/128")
    (update,) = push(AdjRibOut(), {p: RouteAttributes()})
    mp = update.get(MpReachNlri)
    assert mp is not None and mp.nlri == (p,) and mp.next_hops == (IPv6Address("2001:db8::10"),)


def test_ipv6_withdrawals_go_through_mp_unreach() -> None:
    rib = AdjRibOut()
    nets = [IPv6Network((int(IPv6Address("2001:db8::")) + i, 128)) for i in range(2000)]
    push(rib, dict.fromkeys(nets, RouteAttributes()))
    updates = push(rib, {})
    # 17 bytes per /128, ~4060 bytes of room per message: 9 messages.
    assert withdrawn(updates) == set(nets) and len(updates) == 9


def test_ebgp_prepends_our_asn_and_omits_local_pref() -> None:
    (update,) = push(AdjRibOut(), {hosts(1)[0]: RouteAttributes(local_pref=200)})
    assert update.get(AsPath) == AsPath.sequence(65001)
    assert update.get(LocalPref) is None
    assert update.get(NextHop) == NextHop(IPv4Address("192.0.2.10"))


def test_ibgp_sends_local_pref_and_an_empty_as_path() -> None:
    (update,) = push(AdjRibOut(), {hosts(1)[0]: RouteAttributes(local_pref=200)}, IBGP)
    assert update.get(LocalPref) == LocalPref(200)
    assert update.get(AsPath) == AsPath()


def test_explicit_next_hop_and_communities_are_sent() -> None:
    attrs = RouteAttributes(next_hop=IPv4Address("192.0.2.99"), communities=(1, 2))
    (update,) = push(AdjRibOut(), {hosts(1)[0]: attrs})
    assert update.get(NextHop) == NextHop(IPv4Address("192.0.2.99"))
    assert update.get(Communities) == Communities((1, 2))


def test_reset_re_announces_everything_on_the_next_session() -> None:
    rib = AdjRibOut()
    routes = dict.fromkeys(hosts(10), RouteAttributes())
    push(rib, routes)
    rib.reset()
    assert announced(push(rib, routes)) == set(routes)


def test_withdraw_all_withdraws_what_was_sent() -> None:
    rib = AdjRibOut()
    push(rib, dict.fromkeys(hosts(10), RouteAttributes()))
    raw = rib.withdraw_all(EBGP)
    assert withdrawn([m for m in decode_stream(b"".join(raw)) if isinstance(m, Update)]) == set(
        hosts(10)
    )
    assert rib.sent_count() == 0


@settings(max_examples=50)
@given(
    st.lists(
        st.tuples(st.integers(0, 2**32 - 1), st.integers(8, 32), st.integers(0, 3)), max_size=200
    ),
    st.lists(
        st.tuples(st.integers(0, 2**32 - 1), st.integers(8, 32), st.integers(0, 3)), max_size=200
    ),
)
def test_any_two_tables_converge_at_the_peer(
    first: list[tuple[int, int, int]], second: list[tuple[int, int, int]]
) -> None:
    attrs = [RouteAttributes(med=i) for i in range(4)]

    def table(rows: list[tuple[int, int, int]]) -> dict[Prefix, RouteAttributes]:
        return {ip_network((a, n), strict=False): attrs[m] for a, n, m in rows}

    rib = AdjRibOut()
    peer: dict[Prefix, int | None] = {}
    for t in (table(first), table(second)):
        for u in push(rib, t):
            for p in u.unreachable():
                peer.pop(p, None)
            for p in u.reachable():
                peer[p] = u.attributes[2].value if len(u.attributes) > 2 else None  # type: ignore[attr-defined]
    assert peer == {p: a.med for p, a in table(second).items()}


def test_rib_in_keeps_stale_routes_until_swept() -> None:
    rib = AdjRibIn()
    path = ReceivedPath(IPv4Address("192.0.2.1"), ())
    a, b = hosts(2)
    rib.learn(IPV4_UNICAST, [encode_prefix(a), encode_prefix(b)], path)
    rib.mark_stale(IPV4_UNICAST)
    rib.learn(IPV4_UNICAST, [encode_prefix(a)], path)  # refreshed after the restart
    assert rib.stale == {b}
    assert rib.sweep_stale(IPV4_UNICAST) == {IPV4_UNICAST: [encode_prefix(b)]}
    assert set(rib.routes) == {a}


def test_four_octet_path_to_a_two_octet_peer_adds_as4_path() -> None:
    export = ExportContext(
        4200000001, 65000, four_octet_as=False, next_hop_v4=IPv4Address("192.0.2.1")
    )
    rib = AdjRibOut()
    rib.set_desired(compile_routes({hosts(1)[0]: RouteAttributes()}))
    (msg,) = decode_stream(b"".join(rib.updates(export)), Context(four_octet_as=False))
    assert isinstance(msg, Update)
    assert any(a.type_code() == 17 for a in msg.attributes)
    _ = IPV6_UNICAST


# ---------------------------------------------------------------------------- filters

TENANT = Filter(
    (
        reject("outside the allocation", Not(PrefixIn(PrefixSet.of("198.51.100.0/30+")))),
        accept(then=(StripCommunities(),)),
    ),
    name="tenant",
)


def test_import_filter_keeps_rejected_routes_out_with_their_reason() -> None:
    rib = AdjRibIn(TENANT)
    path = ReceivedPath(IPv4Address("192.0.2.1"), (Communities((7,)),))
    inside, outside = hosts(8)[1], hosts(8)[7]
    judged = rib.learn(IPV4_UNICAST, [encode_prefix(inside), encode_prefix(outside)], path)
    assert judged.accepted_count() == 1 and judged.rejected_count() == 1
    assert set(rib.routes) == {inside}
    accepted = rib.get(inside)
    assert accepted is not None and accepted.communities == ()
    why = rib.why_not(outside)
    assert why is not None and why.reason == "outside the allocation"
    assert rib.rejections == {"outside the allocation": 1}


def test_a_rejected_announcement_replaces_the_accepted_one_before_it() -> None:
    rib = AdjRibIn(Filter((reject("tagged", HasCommunity.of("0:7")),)))
    prefix = encode_prefix(hosts(1)[0])
    rib.learn(IPV4_UNICAST, [prefix], ReceivedPath(IPv4Address("192.0.2.1"), ()))
    rib.learn(IPV4_UNICAST, [prefix], ReceivedPath(IPv4Address("192.0.2.1"), (Communities((7,)),)))
    assert len(rib) == 0 and rib.why_not(hosts(1)[0]) is not None
    rib.withdraw(IPV4_UNICAST, [prefix])
    assert rib.why_not(hosts(1)[0]) is None


def test_adj_rib_in_keys_one_prefix_by_one_encoding_whatever_the_host_bits() -> None:
    rib = AdjRibIn()
    path = ReceivedPath(IPv4Address("192.0.2.1"), ())
    # 198.51.100.0/22 sent with host bits set in its last octet: the same prefix.
    (sloppy,) = split_prefixes(b"\x16\xc6\x33\x67", 1, 0)
    rib.learn(IPV4_UNICAST, [sloppy], path)
    assert set(rib.routes) == {IPv4Network("198.51.100.0/22")}
    assert rib.withdraw(IPV4_UNICAST, [encode_prefix(IPv4Network("198.51.100.0/22"))])


def test_export_filter_holds_routes_back_and_withdraws_them_when_it_changes() -> None:
    inside, outside = hosts(8)[1], hosts(8)[7]
    tagged = RouteAttributes(communities=(7,))
    updates = push(AdjRibOut(TENANT), {inside: tagged, outside: tagged})
    assert announced(updates) == {inside}
    assert all(u.get(Communities) is None for u in updates)
    rib = AdjRibOut()
    push(rib, {inside: tagged, outside: tagged})
    rib.export_filter = TENANT
    again = push(rib, {inside: tagged, outside: tagged})
    assert withdrawn(again) == {outside}
    why = rib.why_not(outside)
    assert why is not None and why.reason == "outside the allocation"
