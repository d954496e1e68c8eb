"""The network side's Adj-RIB-Out diffs only the prefixes the relay's table says changed:
after any sequence of tenant announcements, withdrawals and sessions going, what it has
sent (and what a router applying its UPDATEs holds) equals what a from-scratch diff of
the whole table gives, with and without ADD-PATH."""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address, ip_network
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.relay.builders import ASN, OPTIONS, path, policies

from teapot_lb.bgp.policy import Filter, PrefixIn, PrefixSet, reject
from teapot_lb.bgp.rib import AdjRibOut, CompiledRoutes, ExportContext, encode_prefix
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    Context,
    MessageReader,
    MessageType,
    decode_update_routes,
)
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.relay.relay import Relay, RelayConfig
from teapot_lb.relay.rib import RelayRib

A, B = ASN["acme"], ASN["bolt"]
ACME = ("192.0.2.11", "192.0.2.12", "192.0.2.13")
BOLT = "192.0.2.71"
SESSIONS = (*ACME, BOLT)
# Acme's (accepted from acme), bolt's (accepted from bolt), and one nobody holds.
PREFIXES = [encode_prefix(ip_network(f"198.51.100.{n}/32")) for n in (1, 2, 3, 5, 9, 20, 21, 70)]
V4 = frozenset({IPV4_UNICAST})
US = IPv4Address("192.0.2.2")
PLAIN = ExportContext(local_as=64500, peer_as=64496, next_hop_v4=US, families=V4)
ADD_PATH = ExportContext(local_as=64500, peer_as=64496, next_hop_v4=US, families=V4, add_path=V4)

# An export filter holding one prefix back: the incremental diff applies it as the full one.
HOLD_BACK = Filter((reject("held back", PrefixIn(PrefixSet.of("198.51.100.2/32"))),))
RIBS = [(PLAIN, None), (ADD_PATH, None), (ADD_PATH, HOLD_BACK), (PLAIN, HOLD_BACK)]

op = st.one_of(
    st.tuples(
        st.just("learn"),
        st.sampled_from(SESSIONS),
        st.lists(st.sampled_from(PREFIXES), min_size=1, max_size=4),
        st.sampled_from(ACME),  # the next hop (the announcing node's or another node's)
        st.sampled_from((64601 << 16 | 100, 0)),  # a community kept, or none
    ),
    st.tuples(
        st.just("withdraw"),
        st.sampled_from(SESSIONS),
        st.lists(st.sampled_from(PREFIXES), min_size=1, max_size=4),
    ),
    st.tuples(st.just("drop"), st.sampled_from(SESSIONS)),
)


def apply(r: RelayRib, step: tuple) -> None:  # type: ignore[type-arg]
    kind, session = step[0], step[1]
    if kind == "learn":
        asn = B if session == BOLT else A
        hop = step[3] if session != BOLT else BOLT
        communities = (step[4],) if step[4] else ()
        r.learn(session, IPV4_UNICAST, step[2], path(hop, asn, communities=communities))
    elif kind == "withdraw":
        r.withdraw(session, IPV4_UNICAST, step[2])
    else:
        r.drop_session(session)
        r.open_session(session, "bolt" if session == BOLT else "acme")


def applied(held: dict[bytes, object], messages: list[bytes], export: ExportContext) -> None:
    """What a router holds after these UPDATEs (key → next hop)."""
    reader = MessageReader()
    reader.feed(b"".join(messages))
    ctx = Context(add_path=export.add_path)
    for mtype, body in reader.frames():
        assert mtype == MessageType.UPDATE
        routes = decode_update_routes(body, ctx)
        for gone in routes.unreach:
            for key in gone.encodings:
                assert held.pop(key, None) is not None, "withdrawn what was never sent"
        for reach in routes.reach:
            held.update(dict.fromkeys(reach.encodings, reach.next_hops[0]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(op, min_size=1, max_size=6), min_size=1, max_size=8))
def test_incremental_adj_rib_out_equals_the_from_scratch_one(batches: list[list[tuple]]) -> None:  # type: ignore[type-arg]
    r = RelayRib(OPTIONS, policies())
    for s in SESSIONS:
        r.open_session(s, "bolt" if s == BOLT else "acme")
    outs = [(export, f, AdjRibOut(f) if f else AdjRibOut(), {}) for export, f in RIBS]
    for batch in batches:
        for step in batch:
            apply(r, step)
        changes = r.take_changes()
        for export, f, out, router in outs:
            out.set_desired(r.compiled(), changes)
            applied(router, out.updates(export), export)
            scratch = AdjRibOut(f) if f else AdjRibOut()
            scratch.set_desired(r.compiled())
            scratch.updates(export)
            want = scratch.advertised(IPV4_UNICAST)
            assert out.advertised(IPV4_UNICAST) == want
            assert router == {k: a.next_hop for k, a in want.items()}
    assert r.path_count() == sum(len(r.paths_of(p)) for p in _prefixes())


def _prefixes() -> list:  # type: ignore[type-arg]
    return [ip_network(f"198.51.100.{n}/32") for n in (1, 2, 3, 5, 9, 20, 21, 70)]


def test_a_change_costs_a_diff_of_that_prefix_only() -> None:
    """After the first full diff, an announcement of one prefix yields UPDATEs for that
    prefix alone, though the table holds many (the relay at 200,000 paths)."""
    r = RelayRib(OPTIONS, policies())
    r.open_session(ACME[0], "acme")
    r.learn(ACME[0], IPV4_UNICAST, PREFIXES[:4], path(ACME[0], A))
    out = AdjRibOut()
    out.set_desired(r.compiled(), r.take_changes())
    out.updates(ADD_PATH)
    r.open_session(ACME[1], "acme")
    r.learn(ACME[1], IPV4_UNICAST, PREFIXES[:1], path(ACME[1], A))
    changes = r.take_changes()
    assert changes[IPV4_UNICAST] == {PREFIXES[0]}
    out.set_desired(r.compiled(), changes)
    held: dict[bytes, object] = {}
    applied(held, out.updates(ADD_PATH), ADD_PATH)
    assert {k[4:] for k in held} == {PREFIXES[0]}
    assert out.sent_count() == 5


def flushing_relay(**flush: Any) -> Relay:
    """A relay with acme's first node's session open and the flush settings given."""
    relay = Relay(RelayConfig(local_as=64500, router_id="192.0.2.2", options=OPTIONS, **flush))
    relay.rib = RelayRib(OPTIONS, policies())
    relay.rib.open_session(ACME[0], "acme")
    return relay


def announce(relay: Relay, *encs: bytes) -> None:
    """Acme's first node announces ``encs``, handled as the relay handles an UPDATE."""
    relay._handle(relay.rib.learn(ACME[0], IPV4_UNICAST, encs, path(ACME[0], A)))


async def test_a_burst_is_flushed_at_a_small_first_batch_then_at_growing_ones() -> None:
    """The relay hands the routers its table as soon as ``flush_first`` prefixes changed,
    then at twice as many each time up to ``flush_batch`` (the burst's later flushes
    coalesce more); fewer changes wait for the coalescing delay, after which a burst
    starts small again."""
    relay = flushing_relay(flush_first=2, flush_batch=3, flush_delay=3600)

    announce(relay, PREFIXES[0])
    assert relay.rib.pending_changes() == 1 and relay._flush_pending is not None
    announce(relay, PREFIXES[1])
    assert relay.rib.pending_changes() == 0 and relay._flush_pending is None
    announce(relay, PREFIXES[2])
    announce(relay, PREFIXES[3])
    assert relay.rib.pending_changes() == 2  # the next batch is 3
    announce(relay, PREFIXES[4])
    assert relay.rib.pending_changes() == 0
    assert relay.metrics.paths._value.get() == 5
    relay._handle(relay.rib.withdraw(ACME[0], IPV4_UNICAST, PREFIXES[:1]))
    relay._flush()  # the coalescing delay: the next burst starts at 2 again
    relay._handle(relay.rib.withdraw(ACME[0], IPV4_UNICAST, PREFIXES[1:3]))
    assert relay.rib.pending_changes() == 0
    assert relay.metrics.paths._value.get() == 2


async def test_the_coalescing_delay_waits_while_changes_come_but_not_past_the_longest() -> None:
    relay = flushing_relay(flush_delay=0.05, flush_max_delay=0.5)
    announce(relay, PREFIXES[0])
    now = asyncio.get_running_loop().time()
    relay._changed_at = now  # a change just came: the flush waits for a pause
    relay._due(now - 0.1)
    assert relay.rib.pending_changes() == 1 and relay._flush_pending is not None
    relay._due(now - 0.6)  # the first change waited longer than flush_max_delay
    assert relay.rib.pending_changes() == 0 and relay._flush_pending is None


async def test_a_burst_flushed_for_the_longest_delay_keeps_its_grown_batch() -> None:
    """Only a pause starts the next burst small: a flush forced by the longest delay
    while changes still come (a burst read slowly) keeps the batch the burst reached."""
    relay = flushing_relay(flush_first=1, flush_batch=8, flush_delay=0.05)

    announce(relay, PREFIXES[0])  # the first batch (1): flushed, the next batch is 2
    announce(relay, PREFIXES[1])
    now = asyncio.get_running_loop().time()
    relay._changed_at = now
    relay._due(now - 0.6)  # still changing, but waited the longest delay: flushed
    assert relay.rib.pending_changes() == 0
    announce(relay, PREFIXES[2])
    assert relay.rib.pending_changes() == 1  # the batch stayed at 2, not back to 1
    announce(relay, PREFIXES[3])
    assert relay.rib.pending_changes() == 0


class Routers:
    """The network side as the relay hands it its flushes: one Adj-RIB-Out (ADD-PATH),
    the prefixes of each handing over, and what a router applying the UPDATEs holds."""

    def __init__(self, relay: Relay, monkeypatch: pytest.MonkeyPatch) -> None:
        self.out = AdjRibOut()
        self.out.set_desired(relay.rib.compiled())  # the session's first, empty diff
        self.out.updates(ADD_PATH)
        self.handed: list[list[bytes]] = []
        self.held: dict[bytes, object] = {}
        monkeypatch.setattr(relay.network_side, "set_compiled", self.take)

    def take(self, routes: CompiledRoutes, changed: dict[Any, list[bytes]]) -> None:
        self.handed.append([enc for encs in changed.values() for enc in encs])
        self.out.set_desired(routes, changed)
        applied(self.held, self.out.updates(ADD_PATH), ADD_PATH)

    def prefixes(self) -> set[bytes]:
        return {key[4:] for key in self.held}  # past the Path Identifier


async def handed_over(relay: Relay) -> None:
    """Let the event loop turn until the relay has handed over every flush."""
    await wait_for_async(
        lambda: relay._sending is None and relay._flush_next is None,
        within=5,
        what="the relay's flushes handed over",
        every=0,
    )


async def test_a_flush_reaches_the_routers_a_chunk_per_turn_of_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first chunk's UPDATEs leave at once, the rest one chunk per turn (the tenant
    side reads in between); every prefix once, in address order."""
    relay = flushing_relay(flush_chunk=2, flush_first=100, flush_delay=3600)
    routers = Routers(relay, monkeypatch)
    announce(relay, *reversed(PREFIXES[:5]))

    relay._flush()
    assert routers.prefixes() == set(sorted(PREFIXES[:5])[:2])
    assert relay._sending is not None  # three prefixes to go
    await asyncio.sleep(0)
    assert routers.prefixes() == set(sorted(PREFIXES[:5])[:4])
    await handed_over(relay)
    assert routers.handed == [sorted(PREFIXES[:5])[i : i + 2] for i in (0, 2, 4)]
    assert routers.prefixes() == set(PREFIXES[:5])
    assert relay.metrics.paths._value.get() == 5


async def test_a_flush_asked_for_while_one_is_handed_over_follows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch filled (or a delay passed) while a flush is still handed over waits for it,
    then goes at once: one flush at a time, nothing lost."""
    relay = flushing_relay(flush_chunk=2, flush_first=4, flush_batch=4, flush_delay=3600)
    routers = Routers(relay, monkeypatch)
    announce(relay, *PREFIXES[:4])  # the first batch: its first chunk leaves
    assert len(routers.handed) == 1
    announce(relay, PREFIXES[4])
    relay._flush("longest")  # asked for meanwhile
    assert len(routers.handed) == 1 and relay._flush_next == "longest"

    await handed_over(relay)
    assert routers.handed[1:] == [sorted(PREFIXES[:4])[2:], [PREFIXES[4]]]
    assert routers.prefixes() == set(PREFIXES[:5])
    assert relay.rib.pending_changes() == 0


async def test_a_prefix_withdrawn_before_its_chunk_is_handed_over_never_reaches_the_routers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each chunk is diffed against the relay's table as it is when the chunk goes, not
    as it was when the flush began: the routers get no announcement to withdraw later."""
    relay = flushing_relay(flush_chunk=2, flush_first=100, flush_delay=0.01)
    routers = Routers(relay, monkeypatch)
    announce(relay, *PREFIXES[:4])
    relay._flush()
    last = sorted(PREFIXES[:4])[-1]
    relay._handle(relay.rib.withdraw(ACME[0], IPV4_UNICAST, [last]))

    await handed_over(relay)
    assert routers.prefixes() == set(PREFIXES[:4]) - {last}
    await wait_for_async(  # the coalescing delay's flush: nothing left to send
        lambda: relay.rib.pending_changes() == 0 and relay._sending is None,
        within=5,
        what="the withdrawal's own flush",
    )
    assert routers.prefixes() == set(PREFIXES[:4]) - {last}
    assert len(routers.out.advertised(IPV4_UNICAST)) == 3
