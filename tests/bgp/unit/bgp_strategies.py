"""Hypothesis strategies for BGP messages and attributes."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from hypothesis import strategies as st

from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    AddPath,
    AddPathFamily,
    AddPathMode,
    Aggregator,
    As4Aggregator,
    As4Path,
    AsPath,
    AtomicAggregate,
    Communities,
    EnhancedRouteRefresh,
    ExtendedCommunities,
    Family,
    FourOctetAS,
    GracefulRestart,
    GracefulRestartFamily,
    Keepalive,
    LargeCommunities,
    LargeCommunity,
    LocalPref,
    MpReachNlri,
    MpUnreachNlri,
    MultiExitDisc,
    Multiprotocol,
    NextHop,
    Notification,
    Open,
    Origin,
    RouteRefresh,
    RouteRefreshMessage,
    Segment,
    UnknownAttribute,
    UnknownCapability,
    Update,
)

u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
ipv4 = st.builds(IPv4Address, u32)
ipv6 = st.builds(IPv6Address, st.integers(0, 2**128 - 1))


@st.composite
def v4_prefixes(draw: st.DrawFn) -> IPv4Network:
    plen = draw(st.integers(0, 32))
    addr = draw(u32) & (((1 << 32) - 1) ^ ((1 << (32 - plen)) - 1))
    return IPv4Network((addr, plen))


@st.composite
def v6_prefixes(draw: st.DrawFn) -> IPv6Network:
    plen = draw(st.integers(0, 128))
    addr = draw(st.integers(0, 2**128 - 1)) & ((2**128 - 1) ^ ((1 << (128 - plen)) - 1))
    return IPv6Network((addr, plen))


families = st.sampled_from([IPV4_UNICAST, IPV6_UNICAST])
any_family = st.builds(Family, u16, st.integers(0, 255))

capabilities = st.one_of(
    st.builds(Multiprotocol, any_family),
    st.just(RouteRefresh()),
    st.just(EnhancedRouteRefresh()),
    st.builds(FourOctetAS, u32),
    st.builds(
        GracefulRestart,
        st.integers(0, 0xFFF),
        st.booleans(),
        st.booleans(),
        st.lists(st.builds(GracefulRestartFamily, any_family, st.booleans()), max_size=3).map(
            tuple
        ),
    ),
    st.builds(
        AddPath,
        st.lists(
            st.builds(
                AddPathFamily,
                any_family,
                st.sampled_from([AddPathMode.RECEIVE, AddPathMode.SEND, AddPathMode.BOTH]),
            ),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        UnknownCapability,
        st.integers(0, 255).filter(lambda c: c not in (1, 2, 64, 65, 69, 70)),
        st.binary(max_size=8),
    ),
)

opens = st.builds(
    Open,
    u16,
    u16,
    ipv4,
    st.lists(capabilities, max_size=6).map(tuple),
)


def segments(four: bool, types: tuple[int, ...] = (1, 2, 3, 4)) -> st.SearchStrategy[Segment]:
    asn = u32 if four else u16
    return st.builds(
        Segment, st.sampled_from(types), st.lists(asn, min_size=1, max_size=6).map(tuple)
    )


def path_attributes(four: bool) -> st.SearchStrategy[list[object]]:
    asn = u32 if four else u16
    optional: list[st.SearchStrategy[object]] = [
        st.builds(MultiExitDisc, u32),
        st.builds(LocalPref, u32),
        st.just(AtomicAggregate()),
        st.builds(Aggregator, asn, ipv4),
        st.builds(Communities, st.lists(u32, min_size=1, max_size=8).map(tuple)),
        st.builds(
            LargeCommunities,
            st.lists(st.builds(LargeCommunity, u32, u32, u32), min_size=1, max_size=4).map(tuple),
        ),
        st.builds(
            ExtendedCommunities,
            st.lists(st.binary(min_size=8, max_size=8), min_size=1, max_size=4).map(tuple),
        ),
        st.builds(
            UnknownAttribute,
            st.sampled_from([33, 40, 99, 200]),
            st.sampled_from([0xC0, 0xE0, 0x80]),
            st.binary(max_size=300),
        ),
        st.builds(
            MpUnreachNlri,
            st.just(IPV6_UNICAST),
            st.lists(v6_prefixes(), max_size=5).map(tuple),
        ),
    ]
    if not four:
        optional.append(st.builds(As4Path, st.lists(segments(True, (1, 2)), max_size=3).map(tuple)))
        optional.append(st.builds(As4Aggregator, u32, ipv4))
    mandatory = st.tuples(
        st.builds(Origin, st.integers(0, 2)),
        st.builds(AsPath, st.lists(segments(four), max_size=3).map(tuple)),
        st.builds(NextHop, ipv4),
    )
    return st.tuples(
        mandatory,
        st.lists(st.one_of(optional), max_size=5, unique_by=lambda a: a.type_code()),  # type: ignore[attr-defined]
        st.one_of(
            st.none(),
            st.builds(
                MpReachNlri,
                st.just(IPV6_UNICAST),
                st.one_of(st.tuples(ipv6), st.tuples(ipv6, ipv6)),
                st.lists(v6_prefixes(), max_size=5).map(tuple),
            ),
        ),
    ).map(lambda t: [*t[0], *t[1], *([t[2]] if t[2] is not None else [])])


def updates(four: bool) -> st.SearchStrategy[Update]:
    return st.builds(
        Update,
        st.lists(v4_prefixes(), max_size=10).map(tuple),
        path_attributes(four).map(tuple),
        st.lists(v4_prefixes(), max_size=10).map(tuple),
    )


notifications = st.builds(
    Notification, st.integers(0, 255), st.integers(0, 255), st.binary(max_size=64)
)
route_refreshes = st.builds(RouteRefreshMessage, any_family, st.integers(0, 255))
keepalives = st.just(Keepalive())
