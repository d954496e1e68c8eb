"""Two of our own speakers peering over loopback (no root needed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from ipaddress import IPv4Network, IPv6Address, IPv6Network
from types import SimpleNamespace

import pytest

from teapot_lb.bgp.fsm import RoutesFiltered, RoutesLearned, RoutesWithdrawn, State, StateChanged
from teapot_lb.bgp.peer import DELIVERY_SLICE, Peer
from teapot_lb.bgp.policy import Filter, Not, PrefixIn, PrefixSet, reject
from teapot_lb.bgp.rib import RouteAttributes
from teapot_lb.bgp.speaker import PeerConfig, Speaker, _Inbox
from teapot_lb.bgp.wire import LargeCommunity, community

V4 = IPv4Network("198.51.100.7/32")
V6 = IPv6Network("2001:db8:7::1/128")


async def until(cond: Callable[[], bool], what: str, within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def listening_speaker(events: list[object]) -> Speaker:
    """AS 65002 on 127.0.0.1 (an ephemeral port), recording its events."""
    b = Speaker(
        local_as=65002,
        router_id="192.0.2.2",
        listen_address="127.0.0.1",
        listen_port=0,
        on_event=lambda peer, ev: events.append(ev),
    )
    await b.start()
    return b


@pytest.fixture
async def pair() -> AsyncIterator[tuple[Speaker, Speaker]]:
    """Speaker a (AS 65001, active) and b (AS 65002, passive), eBGP over 127.0.0.1."""
    b = Speaker(local_as=65002, router_id="192.0.2.2", listen_address="127.0.0.1", listen_port=0)
    await b.start()
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    await a.start()
    b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, hold_time=9))
    a.add_peer(
        PeerConfig(
            "127.0.0.1",
            65002,
            port=b.listen_port or 0,
            hold_time=30,
            next_hop_v6=IPv6Address("2001:db8::1"),
            connect_retry=0.2,
        )
    )
    try:
        yield a, b
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_speakers_establish_and_exchange_v4_and_v6_routes(
    pair: tuple[Speaker, Speaker],
) -> None:
    a, b = pair
    attrs = RouteAttributes(
        communities=(community(65001, 7),), large_communities=(LargeCommunity(65001, 1, 2),)
    )
    a.set_routes({V4: attrs, V6: attrs})
    await a.peer("127.0.0.1").wait_established(15)
    await until(lambda: len(b.routes_in("127.0.0.1")) == 2, "both routes at b")
    routes = b.routes_in("127.0.0.1")
    assert routes[V4].as_path == (65001,)
    assert str(routes[V4].next_hop) == "127.0.0.1"
    assert routes[V6].next_hop == IPv6Address("2001:db8::1")
    assert routes[V4].communities == (community(65001, 7),)
    assert routes[V6].large_communities == (LargeCommunity(65001, 1, 2),)
    negotiated = a.peer("127.0.0.1").negotiated
    assert negotiated is not None and negotiated.hold_time == 9


async def test_withdrawn_route_disappears_at_the_peer(pair: tuple[Speaker, Speaker]) -> None:
    a, b = pair
    a.set_routes({V4: None, V6: None})
    await until(lambda: len(b.routes_in("127.0.0.1")) == 2, "both routes at b")
    a.set_routes({V6: None})
    await until(lambda: set(b.routes_in("127.0.0.1")) == {V6}, "v4 route withdrawn at b")


async def test_shutdown_sends_cease_with_the_communication(pair: tuple[Speaker, Speaker]) -> None:
    a, b = pair
    await a.peer("127.0.0.1").wait_established(15)
    await until(lambda: b.peer("127.0.0.1").state == State.ESTABLISHED, "b established")
    await a.shutdown("maintenance window")
    peer_at_b = b.peer("127.0.0.1")
    await until(lambda: peer_at_b.state != State.ESTABLISHED, "b notices the shutdown")
    assert peer_at_b.last_error == (
        'peer sent NOTIFICATION Cease/Administrative Shutdown "maintenance window"'
    )


async def test_after_the_peer_drops_us_we_reconnect_and_re_announce(
    pair: tuple[Speaker, Speaker],
) -> None:
    a, b = pair
    a.set_routes({V4: None})
    await until(lambda: V4 in b.routes_in("127.0.0.1"), "route at b")
    await b.remove_peer("127.0.0.1", "reconfiguring")
    await until(lambda: a.peer("127.0.0.1").state != State.ESTABLISHED, "a notices")
    b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, hold_time=9))
    await until(lambda: V4 in b.routes_in("127.0.0.1"), "route re-announced after reconnect")
    assert a.peer("127.0.0.1").counters.established == 2


async def test_events_report_state_changes_and_routes_learned_and_lost() -> None:
    events: list[object] = []
    b = await listening_speaker(events)
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True))
        a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0))
        a.set_routes({V4: None})
        await a.start()
        await until(lambda: any(isinstance(e, RoutesLearned) for e in events), "routes learned")
        await a.shutdown("bye")
        await until(
            lambda: any(isinstance(e, RoutesWithdrawn) and V4 in e.prefixes for e in events),
            "routes of the closed session withdrawn",
        )
        ups = [e for e in events if isinstance(e, StateChanged) and e.new == State.ESTABLISHED]
        assert len(ups) == 1
    finally:
        await a.shutdown()
        await b.shutdown()


def test_peer_config_refuses_what_no_session_could_use() -> None:
    with pytest.raises(ValueError, match="hold time"):
        PeerConfig("192.0.2.1", 65000, hold_time=2)
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
        PeerConfig("router-1", 65000)
    with pytest.raises(ValueError, match="80 bytes"):
        PeerConfig("192.0.2.1", 65000, password="x" * 81)


async def test_changes_within_one_loop_iteration_are_sent_as_one_diff(
    pair: tuple[Speaker, Speaker],
) -> None:
    a, b = pair
    a.set_routes({V4: None})
    await until(lambda: V4 in b.routes_in("127.0.0.1"), "route at b")
    sender = a.peer("127.0.0.1")
    before = sender.counters.updates_sent
    a.set_routes({V4: None, IPv4Network("198.51.100.8/32"): None})
    a.set_routes({V4: None})  # back where we were before the loop ran: nothing to send
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sender.counters.updates_sent == before


async def test_import_filter_keeps_rejected_routes_out_and_reports_why() -> None:
    events: list[object] = []
    allocation = PrefixSet.of("198.51.100.0/30+")
    tenant = Filter((reject("outside the allocation", Not(PrefixIn(allocation))),), name="t")
    b = await listening_speaker(events)
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    inside = IPv4Network("198.51.100.1/32")
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, import_filter=tenant))
        a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0))
        a.set_routes({inside: None, V4: None})
        await a.start()
        await until(lambda: any(isinstance(e, RoutesFiltered) for e in events), "a reject")
        await until(lambda: inside in b.routes_in("127.0.0.1"), "the allocated route")
        peer = b.peer("127.0.0.1")
        assert set(b.routes_in("127.0.0.1")) == {inside}
        assert peer.counters.prefixes_rejected == 1
        (filtered,) = [e for e in events if isinstance(e, RoutesFiltered)]
        assert filtered.prefixes == (V4,) and filtered.rejected.reason == "outside the allocation"
        learned = [p for e in events if isinstance(e, RoutesLearned) for p in e.prefixes]
        assert learned == [inside]
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_deliveries_are_handled_in_order_and_a_turn_bounds_how_many_per_loop_turn() -> None:
    """With a turn of 0 s one delivery is handled per turn of the event loop, so what else
    the loop has to do (a buffered write towards a router) runs between them."""
    seen: list[object] = []
    inbox = _Inbox(turn=0.0)
    for n in range(3):
        inbox.put("peer", lambda n=n: seen.append(n))
    asyncio.get_running_loop().call_soon(seen.append, "the loop's other work")
    await until(lambda: len(seen) == 4, "every delivery handled")
    assert seen == [0, "the loop's other work", 1, 2]


async def test_without_a_turn_each_delivery_is_handled_as_it_comes() -> None:
    seen: list[int] = []
    _Inbox(turn=None).put("peer", lambda: seen.append(1))
    assert seen == [1]


async def test_a_peers_backlog_delays_another_peers_delivery_by_one_of_its_own() -> None:
    """A noisy peer's 1,000 deliveries queued first, then a quiet peer's: the peers take
    turns, each peer's in its own order (its bytes, then its close)."""
    seen: list[str] = []
    inbox = _Inbox(turn=0.0)
    for n in range(1000):
        inbox.put("noisy", lambda n=n: seen.append(f"noisy {n}"))
    inbox.put("quiet", lambda: seen.append("quiet update"))
    inbox.put("quiet", lambda: seen.append("quiet close"))
    await until(lambda: len(seen) == 1002, "every delivery handled")
    assert seen[:4] == ["noisy 0", "quiet update", "noisy 1", "quiet close"]
    assert [s for s in seen if s.startswith("noisy")] == [f"noisy {n}" for n in range(1000)]


async def test_a_large_read_is_handed_over_in_slices_between_other_peers_deliveries() -> None:
    """A 64 KiB read of one session becomes 16 KiB deliveries, in order, with another
    peer's delivery served after the first slice, not after the whole read."""
    seen: list[tuple[str, int]] = []
    inbox = _Inbox(turn=0.0)

    class Noisy:  # what Peer._received uses of a peer: its speaker's inbox, its _take
        speaker = SimpleNamespace(_inbox=inbox)

        def _take(self, conn: object, data: bytes) -> None:
            seen.append(("noisy", len(data)))

    noisy = Noisy()
    read = bytes(range(256)) * (4 * DELIVERY_SLICE // 256)
    Peer._received(noisy, None, read)  # type: ignore[arg-type]
    inbox.put("quiet", lambda: seen.append(("quiet", 1)))
    await until(lambda: len(seen) == 5, "every delivery handled")
    assert seen == [("noisy", DELIVERY_SLICE), ("quiet", 1), *[("noisy", DELIVERY_SLICE)] * 3]
