"""The per-interface announcer: answers only owned IPs, announces on takeover, reports claims."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

from timer_clock import TimerClock

from teapot_lb.l2 import wire
from teapot_lb.l2.announcer import DEFAULT_SCHEDULE, Announcer, AnnounceTimer, Claim, Output
from teapot_lb.timers import CancelTimer

MAC = bytes.fromhex("020000000001")
OTHER = bytes.fromhex("020000000002")
CLIENT = bytes.fromhex("020000000099")
LL = IPv6Address("fe80::1")
VIP4, VIP6 = IPv4Address("192.0.2.100"), IPv6Address("2001:db8::100")
CLIENT4, CLIENT6 = IPv4Address("192.0.2.10"), IPv6Address("2001:db8::10")


def who_has(ip: IPv4Address) -> bytes:
    return wire.encode(wire.arp_request(CLIENT, CLIENT4, ip))


def solicit(ip: IPv6Address) -> bytes:
    return wire.encode(wire.neighbor_solicitation(CLIENT, CLIENT6, ip))


def decoded(frames: tuple[bytes, ...] | list[bytes]) -> list[wire.Frame]:
    return [wire.decode(f) for f in frames]


def frames(outputs: list[Output]) -> list[bytes]:
    """The frames to send among an announcer's outputs (the rest are timer orders)."""
    return [o for o in outputs if isinstance(o, bytes)]


def clock_of(a: Announcer, now: float = 0.0) -> TimerClock:
    return TimerClock(a.timer_expired, now)


def test_an_arp_request_for_an_owned_ip_gets_a_reply_with_our_mac() -> None:
    a = Announcer(MAC, LL)
    a.acquire(VIP4, 0.0)
    (reply,) = decoded(a.receive(who_has(VIP4), 0.1).send)
    assert isinstance(reply, wire.ArpFrame)
    assert reply.arp.op is wire.ArpOp.REPLY and reply.arp.sender_mac == MAC
    assert reply.arp.sender_ip == VIP4 and reply.eth_dst == CLIENT
    assert (a.counters.requests_seen, a.counters.replies_sent) == (1, 1)


def test_requests_for_ips_we_do_not_own_get_no_answer() -> None:
    a = Announcer(MAC, LL)
    a.acquire(VIP4, 0.0)
    assert a.receive(who_has(IPv4Address("192.0.2.101")), 0.1).send == ()
    assert a.receive(solicit(VIP6), 0.1).send == ()
    assert a.counters.replies_sent == 0


def test_a_released_ip_is_no_longer_answered_and_its_announcements_stop() -> None:
    a = Announcer(MAC, LL)
    a.acquire(VIP4, 0.0)
    assert a.release(VIP4) == [CancelTimer(AnnounceTimer(VIP4))]
    assert a.receive(who_has(VIP4), 0.1).send == ()
    assert a.timer_expired(AnnounceTimer(VIP4), 10.0) == []


def test_malformed_and_foreign_frames_are_ignored_and_counted() -> None:
    a = Announcer(MAC, LL)
    a.acquire(VIP4, 0.0)
    assert a.receive(b"\x00" * 5, 0.1) == a.receive(who_has(VIP4)[:20], 0.1)
    assert a.counters.malformed == 2
    assert a.receive(b"\xff" * 12 + b"\x08\x00" + b"\x00" * 46, 0.1).send == ()
    assert a.counters.ignored == 1


def test_acquiring_announces_at_once_then_on_the_schedule() -> None:
    a = Announcer(MAC, LL)
    clock = clock_of(a, now=10.0)
    (first,) = decoded(frames(clock.apply(a.acquire(VIP4, 10.0))))
    assert isinstance(first, wire.ArpFrame) and first.arp.is_gratuitous
    assert len(frames(clock.run_out())) == len(DEFAULT_SCHEDULE) - 1
    times = [round(at - 10.0, 6) for at, _ in clock.fired]
    assert times == list(DEFAULT_SCHEDULE[1:])
    assert a.counters.gratuitous_sent == len(DEFAULT_SCHEDULE)


def test_periodic_refresh_keeps_announcing_after_the_schedule() -> None:
    a = Announcer(MAC, LL, schedule=(0.0,), refresh=5.0)
    clock = clock_of(a)
    clock.apply(a.acquire(VIP4, 0.0))
    assert clock.next_due() == 5.0
    assert len(frames(clock.advance(5.0))) == 1
    assert clock.next_due() == 10.0


def test_ipv6_takeover_sends_an_unsolicited_override_advertisement_to_all_nodes() -> None:
    a = Announcer(MAC, LL)
    (na,) = decoded(frames(a.acquire(VIP6, 0.0)))
    assert isinstance(na, wire.NdpFrame) and na.dst_ip == wire.ALL_NODES and na.src_ip == LL
    assert isinstance(na.message, wire.NeighborAdvertisement)
    assert na.message.override and not na.message.solicited
    assert na.message.target == VIP6 and na.message.target_lladdr == MAC


def test_a_solicitation_for_an_owned_ipv6_gets_a_solicited_advertisement() -> None:
    a = Announcer(MAC, LL)
    a.acquire(VIP6, 0.0)
    (na,) = decoded(a.receive(solicit(VIP6), 0.1).send)
    assert isinstance(na, wire.NdpFrame) and na.dst_ip == CLIENT6 and na.eth_dst == CLIENT
    assert isinstance(na.message, wire.NeighborAdvertisement)
    assert na.message.solicited and na.message.override


def test_ndp_not_from_the_link_is_ignored() -> None:
    a = Announcer(MAC, LL)
    a.acquire(VIP6, 0.0)
    ns = wire.neighbor_solicitation(CLIENT, CLIENT6, VIP6)
    forwarded = wire.NdpFrame(ns.eth_dst, ns.eth_src, ns.src_ip, ns.dst_ip, ns.message, 254)
    assert a.receive(wire.encode(forwarded), 0.1).send == ()
    assert a.counters.malformed == 1


def test_another_station_announcing_a_watched_ip_is_reported_as_a_claim() -> None:
    a = Announcer(MAC, LL)
    a.watch({VIP4, VIP6})
    garp = wire.encode(wire.gratuitous_arp(OTHER, VIP4))
    na = wire.encode(wire.unsolicited_advertisement(OTHER, IPv6Address("fe80::2"), VIP6))
    assert a.receive(garp, 0.0).claims == (Claim(VIP4, OTHER),)
    assert a.receive(na, 0.0).claims == (Claim(VIP6, OTHER),)
    own = wire.encode(wire.gratuitous_arp(MAC, VIP4))
    assert a.receive(own, 0.0).claims == ()


def test_defending_re_announces_periodically_until_the_deadline() -> None:
    a = Announcer(MAC, LL, schedule=(0.0,))
    clock = clock_of(a)
    clock.apply(a.acquire(VIP4, 0.0))
    clock.now = 1.0
    assert len(frames(clock.apply(a.defend(VIP4, 1.0, until=3.5, every=1.0)))) == 1
    clock.run_out()
    assert [at for at, _ in clock.fired] == [2.0, 3.0]


def test_keep_defending_extends_the_defence_without_an_extra_frame() -> None:
    a = Announcer(MAC, LL, schedule=(0.0,))
    clock = clock_of(a)
    clock.apply(a.acquire(VIP4, 0.0))
    clock.now = 1.0
    clock.apply(a.defend(VIP4, 1.0, until=2.5, every=1.0))
    clock.now = 1.5
    assert frames(clock.apply(a.keep_defending(VIP4, 1.5, until=4.5, every=1.0))) == []
    clock.run_out()
    assert [at for at, _ in clock.fired] == [2.0, 3.0, 4.0]
    clock.now = 10.0
    clock.apply(a.keep_defending(VIP4, 10.0, until=12.0, every=1.0))
    assert clock.next_due() == 11.0
