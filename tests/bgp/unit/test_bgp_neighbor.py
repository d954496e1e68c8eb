"""The sans-I/O neighbor: events in, orders out; no sockets, no clock."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from teapot_lb.bgp.config import PeerConfig
from teapot_lb.bgp.fsm import RoutesFiltered, RoutesLearned, RoutesWithdrawn, State, Timer
from teapot_lb.bgp.neighbor import Neighbor
from teapot_lb.bgp.neighbor_orders import (
    Adopt,
    Close,
    Dial,
    NeighborTimer,
    Order,
    Refuse,
    Release,
    Report,
    Transmit,
)
from teapot_lb.bgp.policy import Filter, HasCommunity, reject
from teapot_lb.bgp.rib import RouteAttributes, compile_routes
from teapot_lb.bgp.wire import (
    AsPath,
    Communities,
    GracefulRestart,
    GracefulRestartFamily,
    Keepalive,
    Message,
    MpReachNlri,
    Multiprotocol,
    NextHop,
    Notification,
    Open,
    Origin,
    Update,
    decode_stream,
)
from teapot_lb.bgp.wire.family import IPV4_UNICAST, IPV6_UNICAST
from teapot_lb.timers import ArmTimer, CancelTimer

US = IPv4Address("192.0.2.10")
LOW_ID, HIGH_ID = IPv4Address("192.0.2.1"), IPv4Address("192.0.2.99")
V4 = IPv4Network("198.51.100.7/32")


def neighbor(**kw: object) -> Neighbor:
    fields: dict[str, object] = {"address": "192.0.2.1", "peer_as": 65000}
    fields.update(kw)
    return Neighbor(PeerConfig(**fields), local_as=65001, router_id=US)  # type: ignore[arg-type]


def their_open(bgp_id: IPv4Address = LOW_ID, gr: bool = False) -> bytes:
    restart = GracefulRestart(120, families=(GracefulRestartFamily(IPV4_UNICAST),))
    caps = (Multiprotocol(IPV4_UNICAST), *((restart,) if gr else ()))
    return Open.build(65000, 90, bgp_id, caps).pack()


def sent(orders: list[Order], link: int | None = None) -> list[Message]:
    return [
        m
        for o in orders
        if isinstance(o, Transmit) and (link is None or o.link == link)
        for m in decode_stream(o.data)
    ]


def up(n: Neighbor, gr: bool = False) -> list[Order]:
    """Dial, connect, exchange OPEN and KEEPALIVE: Established on the main link."""
    (dial,) = [o for o in n.start() if isinstance(o, Dial)]
    n.connection_made(dial.link, US)
    orders = n.data_received(dial.link, their_open(gr=gr) + Keepalive().pack())
    assert n.state == State.ESTABLISHED
    return orders


def routes(*nlri: IPv4Network, communities: tuple[int, ...] = ()) -> bytes:
    attrs = [Origin(0), AsPath.sequence(65000), NextHop(LOW_ID)]
    if communities:
        attrs.append(Communities(communities))
    return Update(attributes=tuple(attrs), nlri=nlri).pack()  # type: ignore[arg-type]


def reports(orders: list[Order], kind: type) -> list[object]:
    return [o.event for o in orders if isinstance(o, Report) and isinstance(o.event, kind)]


def test_start_dials_and_arms_the_main_links_connect_retry() -> None:
    n = neighbor(connect_retry=3.0)
    orders = n.start()
    link = n.main.id
    assert Dial(link) in orders and ArmTimer((link, Timer.CONNECT_RETRY), 3.0) in orders


def test_established_session_gets_the_desired_routes_then_end_of_rib() -> None:
    n = neighbor()
    n.set_desired(compile_routes({V4: RouteAttributes()}))
    msgs = [m for m in sent(up(n)) if isinstance(m, Update)]
    assert msgs[0].nlri == (V4,) and msgs[-1].end_of_rib() == IPV4_UNICAST
    assert msgs[0].get(NextHop) == NextHop(US)  # next-hop self: our address on the link


def test_route_changes_are_coalesced_into_one_flush() -> None:
    n = neighbor()
    up(n)
    first = n.set_desired(compile_routes({V4: None}))
    again = n.set_desired(compile_routes({}))
    assert first == [ArmTimer(NeighborTimer.FLUSH, 0.0)] and again == []
    assert sent(n.timer_expired(NeighborTimer.FLUSH)) == []  # back where it was: nothing


def test_a_connection_from_the_neighbor_while_connecting_is_adopted() -> None:
    n = neighbor()
    n.start()
    orders = n.accepted(US)
    assert orders[0] == Adopt(n.main.id)
    assert isinstance(sent(orders, n.main.id)[0], Open)
    assert not n.main.outgoing


def both_connections(n: Neighbor, bgp_id: IPv4Address) -> tuple[int, int]:
    """Ours in OpenConfirm, and the neighbor's accepted (OpenSent): the links' ids."""
    (dial,) = [o for o in n.start() if isinstance(o, Dial)]
    n.connection_made(dial.link, US)
    n.data_received(dial.link, their_open(bgp_id))
    (adopt,) = [o for o in n.accepted(US) if isinstance(o, Adopt)]
    return dial.link, adopt.link


def test_collision_keeps_the_connection_of_the_higher_identifier() -> None:
    """§6.8: the neighbor outranks us, so its connection survives and ours is closed."""
    n = neighbor()
    ours, theirs = both_connections(n, HIGH_ID)
    orders = n.data_received(theirs, their_open(HIGH_ID))
    assert Close(ours, "connection collision resolution") in orders
    assert Release(ours) in orders
    assert n.main.id == theirs


def test_collision_keeps_our_connection_when_we_outrank_the_neighbor() -> None:
    n = neighbor()
    ours, theirs = both_connections(n, LOW_ID)
    orders = n.data_received(theirs, their_open(LOW_ID))
    assert Close(theirs, "connection collision resolution") in orders
    assert n.main.id == ours


def test_a_connection_while_established_is_refused_without_graceful_restart() -> None:
    n = neighbor()
    up(n)
    (refuse,) = n.accepted(US)
    assert isinstance(refuse, Refuse)
    (note,) = decode_stream(refuse.data)
    assert isinstance(note, Notification) and (note.code, note.subcode) == (6, 5)


def test_a_reconnect_while_established_is_the_neighbors_graceful_restart() -> None:
    n = neighbor()
    up(n, gr=True)
    n.data_received(n.main.id, routes(V4))
    old = n.main.id
    orders = n.accepted(US)
    assert Close(old, "peer reconnected (restarted)") in orders
    assert ArmTimer(NeighborTimer.STALE, 120) in orders
    assert n.rib_in.stale == {V4}  # kept, stale, until End-of-RIB or the timer
    expired = n.timer_expired(NeighborTimer.STALE)
    assert [e.prefixes for e in reports(expired, RoutesWithdrawn)] == [(V4,)]  # type: ignore[attr-defined]
    assert len(n.rib_in) == 0


def test_import_filter_rejects_are_reported_with_their_reason() -> None:
    n = neighbor(import_filter=Filter((reject("tagged", HasCommunity.of("0:7")),)))
    up(n)
    orders = n.data_received(n.main.id, routes(V4, communities=(7,)))
    (filtered,) = reports(orders, RoutesFiltered)
    assert filtered.rejected.reason == "tagged"  # type: ignore[attr-defined]
    assert reports(orders, RoutesLearned) == [] and len(n.rib_in) == 0


def test_stop_closes_with_cease_and_releases_every_link() -> None:
    n = neighbor()
    up(n)
    orders = n.stop(None, "shutdown")
    (note,) = [m for m in sent(orders) if isinstance(m, Notification)]
    assert (note.code, note.subcode) == (6, 2)  # Cease/Administrative Shutdown
    assert Release(n.main.id) in orders and CancelTimer(NeighborTimer.STALE) in orders


def test_bfd_down_ends_the_session_at_once_with_cease_bfd_down() -> None:
    n = neighbor()
    up(n, gr=True)
    n.data_received(n.main.id, routes(V4))
    orders = n.bfd_down("CONTROL_DETECTION_TIME_EXPIRED")
    (note,) = [m for m in sent(orders) if isinstance(m, Notification)]
    assert (note.code, note.subcode) == (6, 10)  # Cease/BFD Down (RFC 9384)
    assert any(isinstance(o, Close) for o in orders)
    assert n.state == State.IDLE
    # Not a graceful restart: the peer's routes go at once (a NOTIFICATION ends GR).
    assert reports(orders, RoutesWithdrawn)
    # The session tries again as after any error, with no Release: it stays configured.
    assert not any(isinstance(o, Release) for o in orders)


def test_bfd_down_before_the_session_is_connected_changes_nothing() -> None:
    n = neighbor()
    n.start()
    assert sent(n.bfd_down("CONTROL_DETECTION_TIME_EXPIRED")) == []


def test_routes_keeping_their_next_hops_carry_ipv6_over_an_ipv4_session() -> None:
    # RFC 4760: IPv6 NLRI in MP_REACH_NLRI over a session on IPv4 transport, with the
    # route's own next hop (a route server's: it never rewrites one).
    v6, hop = IPv6Network("2001:db8:100::5/128"), IPv6Address("2001:db8::9")
    both = (Multiprotocol(IPV4_UNICAST), Multiprotocol(IPV6_UNICAST))
    for unchanged, want in ((True, [(hop,)]), (False, [])):
        n = neighbor(next_hop_unchanged=unchanged)
        n.set_desired(compile_routes({v6: RouteAttributes(next_hop=hop)}))
        (dial,) = [o for o in n.start() if isinstance(o, Dial)]
        n.connection_made(dial.link, US)
        opened = Open.build(65000, 90, LOW_ID, both).pack() + Keepalive().pack()
        updates = [m for m in sent(n.data_received(dial.link, opened)) if isinstance(m, Update)]
        reach = [u.get(MpReachNlri) for u in updates if u.get(MpReachNlri)]
        assert [r.next_hops for r in reach if r is not None and r.nlri] == want
