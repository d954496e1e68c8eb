"""ADD-PATH (RFC 7911): the capability, Path Identifiers in NLRI, negotiation, and a prefix
announced with several paths (one per next hop) that are sent and withdrawn one by one."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.bgp.attributes import Paths, RouteAttributes
from teapot_lb.bgp.config import PeerConfig
from teapot_lb.bgp.fsm import RoutesLearned, RoutesWithdrawn, State, negotiate_add_path
from teapot_lb.bgp.neighbor import Neighbor
from teapot_lb.bgp.neighbor_orders import Adopt, Dial, NeighborTimer, Order, Report, Transmit
from teapot_lb.bgp.policy import Filter, PrefixIn, PrefixSet, reject
from teapot_lb.bgp.rib import AdjRibOut, ExportContext, compile_routes, path_id, path_ids
from teapot_lb.bgp.speaker import Speaker
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    AddPath,
    AddPathFamily,
    AddPathMode,
    AsPath,
    CodecError,
    Context,
    ErrorCode,
    GracefulRestart,
    GracefulRestartFamily,
    Keepalive,
    MessageReader,
    MessageType,
    Multiprotocol,
    NextHop,
    Open,
    Origin,
    Prefix,
    UpdateRoutes,
    decode_path,
    decode_update_routes,
    pack_attribute,
    pack_path_prefix,
    pack_update,
    split_prefixes,
)
from teapot_lb.bgp.wire.capability import pack_capability, unpack_capabilities
from teapot_lb.bgp.wire.mp import pack_mp_reach_value, pack_mp_unreach_value
from teapot_lb.lab.wait import wait_for_async

US = IPv4Address("192.0.2.10")
THEM = IPv4Address("192.0.2.1")
VIP = IPv4Network("203.0.113.10/32")
VIP6 = IPv6Network("2001:db8:10::10/128")
BACKENDS = {f"node-{c}": IPv4Address(f"192.0.2.{n}") for c, n in (("a", 21), ("b", 22), ("c", 23))}
BACKENDS6 = {f"node-{c}": IPv6Address(f"2001:db8::{n}") for c, n in (("a", 21), ("b", 22))}
BOTH = frozenset({IPV4_UNICAST, IPV6_UNICAST})
V4_ONLY = frozenset({IPV4_UNICAST})


def paths(backends: dict[str, IPv4Address] | dict[str, IPv6Address]) -> Paths:
    return Paths.of({k: RouteAttributes(next_hop=a) for k, a in backends.items()})


# --- the capability ------------------------------------------------------------------------


def test_capability_round_trips_with_a_mode_per_family() -> None:
    cap = AddPath(
        (
            AddPathFamily(IPV4_UNICAST, AddPathMode.SEND),
            AddPathFamily(IPV6_UNICAST, AddPathMode.BOTH),
        )
    )
    assert pack_capability(cap) == bytes([69, 8, 0, 1, 1, 2, 0, 2, 1, 3])
    assert unpack_capabilities(pack_capability(cap)) == [cap]
    assert cap.mode(IPV6_UNICAST) is AddPathMode.BOTH


def test_capability_of_a_length_not_a_multiple_of_four_is_a_malformed_open() -> None:
    with pytest.raises(CodecError) as err:
        unpack_capabilities(bytes([69, 3, 0, 1, 1]))
    assert err.value.code == ErrorCode.OPEN_MESSAGE


def test_capability_with_an_unknown_send_receive_value_is_ignored() -> None:
    """RFC 7911 §4: treated as not understood: no family gets several paths."""
    (cap,) = unpack_capabilities(bytes([69, 4, 0, 1, 1, 7]))
    assert cap == AddPath(())
    assert cap.mode(IPV4_UNICAST) is AddPathMode.OFF


def test_open_carries_the_capability_only_when_configured() -> None:
    def caps(**kw: object) -> list[object]:
        n = Neighbor(PeerConfig("192.0.2.1", 65000, **kw), local_as=65001, router_id=US)  # type: ignore[arg-type]
        return list(n.session_config.open_message().capabilities)

    assert not any(isinstance(c, AddPath) for c in caps())
    (cap,) = [c for c in caps(add_path=AddPathMode.SEND) if isinstance(c, AddPath)]
    assert {f.family for f in cap.families} == BOTH
    assert {f.mode for f in cap.families} == {AddPathMode.SEND}


def test_peer_config_refuses_an_add_path_that_is_not_a_mode() -> None:
    with pytest.raises(ValueError, match=r"peer 192\.0\.2\.1: add_path"):
        PeerConfig("192.0.2.1", 65000, add_path="send")  # type: ignore[arg-type]


# --- negotiation ------------------------------------------------------------------------


def peer_open(mode: AddPathMode | None, families: frozenset = BOTH) -> Open:  # type: ignore[type-arg]
    caps: list[object] = [Multiprotocol(f) for f in sorted(families)]
    if mode is not None:
        caps.append(AddPath(tuple(AddPathFamily(f, mode) for f in sorted(families))))
    return Open.build(65000, 90, THEM, tuple(caps))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ours", "theirs", "send", "receive"),
    [
        (AddPathMode.SEND, AddPathMode.RECEIVE, BOTH, frozenset()),
        (AddPathMode.SEND, AddPathMode.BOTH, BOTH, frozenset()),
        (AddPathMode.SEND, AddPathMode.SEND, frozenset(), frozenset()),
        (AddPathMode.RECEIVE, AddPathMode.SEND, frozenset(), BOTH),
        (AddPathMode.BOTH, AddPathMode.BOTH, BOTH, BOTH),
        (AddPathMode.BOTH, None, frozenset(), frozenset()),
        (AddPathMode.OFF, AddPathMode.BOTH, frozenset(), frozenset()),
    ],
)
def test_we_send_where_we_said_send_and_the_peer_said_receive_and_the_reverse(
    ours: AddPathMode,
    theirs: AddPathMode | None,
    send: frozenset,  # type: ignore[type-arg]
    receive: frozenset,  # type: ignore[type-arg]
) -> None:
    assert negotiate_add_path(ours, peer_open(theirs), BOTH) == (send, receive)


def test_add_path_is_negotiated_only_for_families_both_sides_carry() -> None:
    send, _ = negotiate_add_path(AddPathMode.SEND, peer_open(AddPathMode.RECEIVE), V4_ONLY)
    assert send == V4_ONLY


# --- NLRI with Path Identifiers ----------------------------------------------------------------

v4_prefixes = st.builds(
    lambda a, n: IPv4Network((a, n), strict=False), st.integers(0, 2**32 - 1), st.integers(0, 32)
)
v6_prefixes = st.builds(
    lambda a, n: IPv6Network((a, n), strict=False), st.integers(0, 2**128 - 1), st.integers(0, 128)
)


@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.one_of(v4_prefixes, v6_prefixes))))
def test_nlri_with_path_identifiers_round_trip(entries: list[tuple[int, Prefix]]) -> None:
    for version in (4, 6):
        mine = [(pid, p) for pid, p in entries if p.version == version]
        data = b"".join(pack_path_prefix(pid, p) for pid, p in mine)
        encs = split_prefixes(data, 1 if version == 4 else 2, 3, add_path=True)
        assert [decode_path(e, 1 if version == 4 else 2) for e in encs] == mine


def test_nlri_whose_path_identifier_overruns_is_an_update_error() -> None:
    with pytest.raises(CodecError) as err:
        split_prefixes(b"\x00\x00\x01", 1, 10, add_path=True)
    assert err.value.code == ErrorCode.UPDATE_MESSAGE


def test_the_receive_path_keeps_path_identifiers_in_both_nlri_fields_and_mp_attributes() -> None:
    ctx = Context(add_path=BOTH)
    attrs = Origin(0).pack() + AsPath.sequence(65000).pack() + NextHop(THEM).pack()
    v6_reach = pack_mp_reach_value(
        IPV6_UNICAST, IPv6Address("2001:db8::1").packed, pack_path_prefix(9, VIP6)
    )
    mp = pack_attribute(0x80, 14, v6_reach)
    body = pack_update(pack_path_prefix(4, VIP), attrs + mp, pack_path_prefix(5, VIP))[19:]
    routes = decode_update_routes(body, ctx)
    by_family = {r.family: r.encodings for r in routes.reach}
    assert [decode_path(e, 1) for e in by_family[IPV4_UNICAST]] == [(5, VIP)]
    assert [decode_path(e, 2) for e in by_family[IPV6_UNICAST]] == [(9, VIP6)]
    assert [decode_path(e, 1) for e in routes.unreach[0].encodings] == [(4, VIP)]


# --- path identifiers --------------------------------------------------------------------


def test_a_path_keeps_its_identifier_whatever_the_other_paths_are() -> None:
    alone = path_ids(["node-b"])
    among = path_ids(["node-a", "node-b", "node-c"])
    assert alone[0] == among[1] == path_id("node-b")
    assert path_id("") == 1  # a prefix's only path


def test_path_identifiers_of_one_prefix_are_distinct_even_when_keys_collide() -> None:
    ids = path_ids(["same", "same", "same"])
    assert len(set(ids)) == 3


# --- the Adj-RIB-Out ------------------------------------------------------------------------

EXPORT = ExportContext(local_as=65001, peer_as=65000, next_hop_v4=US, families=V4_ONLY)
ADD_PATH_EXPORT = ExportContext(
    local_as=65001,
    peer_as=65000,
    next_hop_v4=US,
    next_hop_v6=(IPv6Address("2001:db8::10"),),
    add_path=BOTH,
)


def decoded(messages: list[bytes], add_path: frozenset = BOTH) -> list[UpdateRoutes]:  # type: ignore[type-arg]
    reader = MessageReader()
    reader.feed(b"".join(messages))
    ctx = Context(add_path=add_path)
    return [decode_update_routes(b, ctx) for t, b in reader.frames() if t == MessageType.UPDATE]


def announced_paths(updates: list[UpdateRoutes]) -> dict[tuple[int, Prefix], object]:
    """(Path Identifier, prefix) → next hop, over every UPDATE."""
    out: dict[tuple[int, Prefix], object] = {}
    for u in updates:
        for reach in u.reach:
            for enc in reach.encodings:
                out[decode_path(enc, reach.family.afi)] = reach.next_hops[0]
    return out


def withdrawn_paths(updates: list[UpdateRoutes]) -> set[tuple[int, Prefix]]:
    return {
        decode_path(enc, gone.family.afi)
        for u in updates
        for gone in u.unreach
        for enc in gone.encodings
    }


def test_every_path_goes_out_with_its_own_identifier_and_next_hop() -> None:
    rib = AdjRibOut()
    rib.set_desired(compile_routes({VIP: paths(BACKENDS), VIP6: paths(BACKENDS6)}))
    sent = announced_paths(decoded(rib.updates(ADD_PATH_EXPORT)))
    assert sent == {
        **{(path_id(k), VIP): a for k, a in BACKENDS.items()},
        **{(path_id(k), VIP6): a for k, a in BACKENDS6.items()},
    }
    assert rib.sent_count() == 5


def test_removing_one_path_withdraws_that_path_only() -> None:
    rib = AdjRibOut()
    rib.set_desired(compile_routes({VIP: paths(BACKENDS)}))
    rib.updates(ADD_PATH_EXPORT)
    rest = {k: a for k, a in BACKENDS.items() if k != "node-b"}
    rib.set_desired(compile_routes({VIP: paths(rest)}))
    updates = decoded(rib.updates(ADD_PATH_EXPORT))
    assert withdrawn_paths(updates) == {(path_id("node-b"), VIP)}
    assert announced_paths(updates) == {}


def test_a_changed_next_hop_replaces_that_path_only() -> None:
    rib = AdjRibOut()
    rib.set_desired(compile_routes({VIP: paths(BACKENDS)}))
    rib.updates(ADD_PATH_EXPORT)
    moved = {**BACKENDS, "node-c": IPv4Address("192.0.2.33")}
    rib.set_desired(compile_routes({VIP: paths(moved)}))
    updates = decoded(rib.updates(ADD_PATH_EXPORT))
    assert announced_paths(updates) == {(path_id("node-c"), VIP): IPv4Address("192.0.2.33")}
    assert withdrawn_paths(updates) == set()


def test_a_peer_without_add_path_gets_the_first_path_by_key_only() -> None:
    rib = AdjRibOut()
    rib.set_desired(compile_routes({VIP: paths(BACKENDS)}))
    (update,) = decoded(rib.updates(EXPORT), add_path=frozenset())
    (reach,) = update.reach
    assert reach.encodings == (b"\x20" + VIP.network_address.packed,)
    assert reach.next_hops == (BACKENDS["node-a"],)


def test_a_peer_without_add_path_follows_when_the_first_path_goes() -> None:
    rib = AdjRibOut()
    rib.set_desired(compile_routes({VIP: paths(BACKENDS)}))
    rib.updates(EXPORT)
    rest = {k: a for k, a in BACKENDS.items() if k != "node-a"}
    rib.set_desired(compile_routes({VIP: paths(rest)}))
    (update,) = decoded(rib.updates(EXPORT), add_path=frozenset())
    assert update.reach[0].next_hops == (BACKENDS["node-b"],) and not update.unreach


def test_a_single_path_to_an_add_path_peer_carries_identifier_one() -> None:
    rib = AdjRibOut()
    rib.set_desired(compile_routes({VIP: RouteAttributes()}))
    assert announced_paths(decoded(rib.updates(ADD_PATH_EXPORT))) == {(1, VIP): US}


def test_the_export_filter_judges_paths_by_their_prefix() -> None:
    other = IPv4Network("203.0.113.20/32")
    rib = AdjRibOut(Filter((reject("not here", PrefixIn(PrefixSet.of(str(VIP)))),)))
    rib.set_desired(compile_routes({VIP: paths(BACKENDS), other: paths(BACKENDS)}))
    sent = announced_paths(decoded(rib.updates(ADD_PATH_EXPORT)))
    assert {p for _, p in sent} == {other}
    why = rib.why_not(VIP)
    assert why is not None and why.reason == "not here"


def test_a_path_whose_next_hop_is_of_the_other_family_is_refused() -> None:
    """Falling back to next-hop self would send the traffic to the speaker's own node."""
    wrong = Paths.of({"node-a": RouteAttributes(next_hop=BACKENDS6["node-a"])})
    with pytest.raises(ValueError, match="next hop 2001:db8::21 is not of the prefix's family"):
        compile_routes({VIP: wrong})
    with pytest.raises(ValueError, match="not of the prefix's family"):
        compile_routes({VIP6: RouteAttributes(next_hop=BACKENDS["node-a"])})


def test_paths_need_unique_sorted_keys() -> None:
    with pytest.raises(ValueError, match="at least one path"):
        Paths(())
    with pytest.raises(ValueError, match="unique and sorted"):
        Paths((("b", RouteAttributes()), ("a", RouteAttributes())))


# --- a neighbor, end to end (sans I/O) ----------------------------------------------------------


def established(add_path: AddPathMode, theirs: AddPathMode | None) -> tuple[Neighbor, int]:
    n = Neighbor(PeerConfig("192.0.2.1", 65000, add_path=add_path), local_as=65001, router_id=US)
    (dial,) = [o for o in n.start() if isinstance(o, Dial)]
    n.connection_made(dial.link, US)
    n.data_received(dial.link, peer_open(theirs, V4_ONLY).pack() + Keepalive().pack())
    assert n.state == State.ESTABLISHED
    return n, dial.link


def transmitted(orders: list[Order], add_path: frozenset = V4_ONLY) -> list[UpdateRoutes]:  # type: ignore[type-arg]
    return decoded([o.data for o in orders if isinstance(o, Transmit)], add_path)


def test_a_neighbor_that_negotiated_add_path_gets_every_path_then_loses_one() -> None:
    n, _ = established(AddPathMode.SEND, AddPathMode.RECEIVE)
    assert n.export is not None and n.export.add_path == V4_ONLY
    n.set_desired(compile_routes({VIP: paths(BACKENDS)}))
    first = transmitted(n.timer_expired(NeighborTimer.FLUSH))
    assert set(announced_paths(first).values()) == set(BACKENDS.values())
    n.set_desired(compile_routes({VIP: paths({"node-a": BACKENDS["node-a"]})}))
    second = transmitted(n.timer_expired(NeighborTimer.FLUSH))
    assert withdrawn_paths(second) == {(path_id("node-b"), VIP), (path_id("node-c"), VIP)}


def test_a_neighbor_without_add_path_gets_one_path_without_identifiers() -> None:
    n, _ = established(AddPathMode.SEND, None)
    assert n.export is not None and n.export.add_path == frozenset()
    n.set_desired(compile_routes({VIP: paths(BACKENDS)}))
    (update,) = transmitted(n.timer_expired(NeighborTimer.FLUSH), frozenset())
    assert update.reach[0].next_hops == (BACKENDS["node-a"],)
    assert update.reach[0].encodings == (b"\x20" + VIP.network_address.packed,)


def test_a_neighbor_receiving_paths_keeps_each_and_a_withdrawal_removes_one() -> None:
    n, link = established(AddPathMode.RECEIVE, AddPathMode.SEND)
    attrs = Origin(0).pack() + AsPath.sequence(65000).pack()
    announce = b"".join(
        pack_update(b"", attrs + NextHop(a).pack(), pack_path_prefix(pid, VIP))
        for pid, a in ((7, BACKENDS["node-a"]), (8, BACKENDS["node-b"]))
    )
    orders = n.data_received(link, announce)
    learned = [o.event for o in orders if isinstance(o, Report)]
    assert all(isinstance(e, RoutesLearned) and e.add_path for e in learned)
    assert {(pid, p.next_hop) for p_, pid, p in n.rib_in.paths} == {
        (7, BACKENDS["node-a"]),
        (8, BACKENDS["node-b"]),
    }
    assert n.rib_in.routes[VIP].next_hop == BACKENDS["node-a"]  # the lowest identifier
    orders = n.data_received(link, pack_update(pack_path_prefix(7, VIP), b"", b""))
    reports = [o.event for o in orders if isinstance(o, Report)]
    (gone,) = [e for e in reports if isinstance(e, RoutesWithdrawn)]
    assert gone.prefixes == (VIP,)
    assert [(pid, p.next_hop) for _, pid, p in n.rib_in.paths] == [(8, BACKENDS["node-b"])]
    assert n.rib_in.get(VIP) is not None


def test_mp_unreach_with_path_identifiers_withdraws_one_ipv6_path() -> None:
    value = pack_mp_unreach_value(IPV6_UNICAST, pack_path_prefix(3, VIP6))
    body = pack_update(b"", pack_attribute(0x80, 15, value), b"")[19:]
    (gone,) = decode_update_routes(body, Context(add_path=BOTH)).unreach
    assert [decode_path(e, 2) for e in gone.encodings] == [(3, VIP6)]


# --- two of our speakers over loopback --------------------------------------------------------


async def test_our_speakers_exchange_every_path_and_withdraw_one_over_loopback() -> None:
    receiver = Speaker(
        local_as=65002, router_id="192.0.2.2", listen_address="127.0.0.1", listen_port=0
    )
    sender = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    await receiver.start()
    await sender.start()
    try:
        receiver.add_peer(
            PeerConfig("127.0.0.1", 65001, passive=True, add_path=AddPathMode.RECEIVE)
        )
        sender.add_peer(
            PeerConfig(
                "127.0.0.1",
                65002,
                port=receiver.listen_port or 0,
                connect_retry=0.2,
                families=V4_ONLY,
                add_path=AddPathMode.SEND,
            )
        )
        sender.set_routes({VIP: paths(BACKENDS)})
        rib_in = receiver.peer("127.0.0.1").rib_in

        def hops() -> set[object]:
            return {p.next_hop for prefix, _, p in rib_in.paths if prefix == VIP}

        await wait_for_async(
            lambda: hops() == set(BACKENDS.values()), within=15, what="three paths received"
        )
        sender.set_routes({VIP: paths({k: a for k, a in BACKENDS.items() if k != "node-c"})})
        await wait_for_async(
            lambda: hops() == {BACKENDS["node-a"], BACKENDS["node-b"]},
            within=15,
            what="the node-c path withdrawn, the others kept",
        )
        negotiated = receiver.peer("127.0.0.1").negotiated
        assert negotiated is not None and negotiated.add_path_receive == V4_ONLY
    finally:
        await sender.shutdown()
        await receiver.shutdown()


def test_stale_paths_go_when_the_restarted_peer_no_longer_sends_add_path() -> None:
    """Graceful restart (RFC 4724) keeps the peer's paths as stale, keyed with their Path
    Identifiers; a new session without ADD-PATH could never refresh them: they go at once."""
    n = Neighbor(
        PeerConfig("192.0.2.1", 65000, add_path=AddPathMode.RECEIVE), local_as=65001, router_id=US
    )
    (dial,) = [o for o in n.start() if isinstance(o, Dial)]
    n.connection_made(dial.link, US)
    gr = GracefulRestart(120, families=(GracefulRestartFamily(IPV4_UNICAST, True),))
    with_paths = Open.build(
        65000,
        90,
        THEM,
        (
            Multiprotocol(IPV4_UNICAST),
            gr,
            AddPath((AddPathFamily(IPV4_UNICAST, AddPathMode.SEND),)),
        ),
    )
    n.data_received(dial.link, with_paths.pack() + Keepalive().pack())
    attrs = Origin(0).pack() + AsPath.sequence(65000).pack() + NextHop(THEM).pack()
    n.data_received(dial.link, pack_update(b"", attrs, pack_path_prefix(7, VIP)))
    assert [pid for _, pid, _ in n.rib_in.paths] == [7]
    (adopt,) = [o for o in n.accepted(US) if isinstance(o, Adopt)]  # the peer restarted
    assert n.rib_in.stale == {VIP}
    plain = Open.build(65000, 90, THEM, (Multiprotocol(IPV4_UNICAST), gr))
    orders = n.data_received(adopt.link, plain.pack() + Keepalive().pack())
    assert n.state == State.ESTABLISHED and n.rib_in.add_path == frozenset()
    reports = [o.event for o in orders if isinstance(o, Report)]
    (gone,) = [e for e in reports if isinstance(e, RoutesWithdrawn)]
    assert gone.prefixes == (VIP,)
    assert gone.reason == "ADD-PATH negotiated differently" and len(n.rib_in) == 0
