"""Heartbeat liveness core: timing of suspicion and death, restarts, authentication."""

from __future__ import annotations

import contextlib

from hypothesis import given
from hypothesis import strategies as st
from timer_clock import TimerClock

from teapot_lb.membership.core import (
    Beat,
    MemberChanged,
    Membership,
    MemberState,
    Output,
    SendTimer,
    SilenceTimer,
    Timing,
    Unauthenticated,
)
from teapot_lb.membership.wire import Heartbeat, HeartbeatError, decode, encode
from teapot_lb.timers import ArmTimer, CancelTimer

T = Timing(interval=0.02, suspect_after=3, dead_after=6)
KEY = b"shared-secret"


def pair(key: bytes | None = None) -> tuple[Membership, Membership]:
    return Membership("a", 1, timing=T, key=key), Membership("b", 1, (b"\x02" * 6,), T, key)


def beat(m: Membership) -> bytes:
    """``m``'s next heartbeat."""
    (data,) = [o.data for o in m.timer_expired(SendTimer.HEARTBEAT) if isinstance(o, Beat)]
    return data


def changes(outputs: list[Output]) -> list[MemberState]:
    return [o.new for o in outputs if isinstance(o, MemberChanged)]


def clock_of(core: Membership) -> TimerClock:
    return TimerClock(lambda timer, now: core.timer_expired(timer))


def receive(clock: TimerClock, core: Membership, data: bytes) -> list[Output]:
    return clock.apply(core.receive(data, clock.now))


def test_a_peer_is_alive_once_heard_and_dead_after_the_detection_interval() -> None:
    a, b = pair()
    clock = clock_of(a)
    assert changes(receive(clock, a, beat(b))) == [MemberState.ALIVE]
    assert a.alive() == {"a", "b"}
    assert changes(clock.advance(0.059)) == []
    assert changes(clock.advance(0.06)) == [MemberState.SUSPECT]
    assert a.alive() == {"a", "b"}  # suspicion does not move IPs
    assert changes(clock.advance(0.119)) == []
    assert changes(clock.advance(0.12)) == [MemberState.DEAD]
    assert a.alive() == {"a"}


def test_a_heartbeat_restarts_the_silence_timer() -> None:
    a, b = pair()
    clock = clock_of(a)
    receive(clock, a, beat(b))
    clock.advance(0.05)
    receive(clock, a, beat(b))
    assert changes(clock.advance(0.109)) == []
    assert changes(clock.advance(0.11)) == [MemberState.SUSPECT]


def test_heartbeats_keep_a_peer_alive() -> None:
    a, b = pair()
    sender, receiver = clock_of(b), clock_of(a)
    sender.apply(b.start())
    for i in range(1, 100):
        now = i * 0.02
        for out in sender.advance(now):
            if isinstance(out, Beat):
                receiver.advance(now)
                receive(receiver, a, out.data)
        receiver.advance(now)
    assert a.members["b"].state is MemberState.ALIVE


def test_heartbeats_are_due_once_per_interval() -> None:
    a, _ = pair()
    first = a.start()
    assert isinstance(first[0], Beat) and ArmTimer(SendTimer.HEARTBEAT, 0.02) in first
    again = a.timer_expired(SendTimer.HEARTBEAT)
    assert isinstance(again[0], Beat) and ArmTimer(SendTimer.HEARTBEAT, 0.02) in again


def test_a_leaving_peer_is_dead_at_once() -> None:
    a, b = pair()
    a.receive(beat(b), 0.0)
    out = a.receive(b.goodbye(), 0.001)
    assert CancelTimer(SilenceTimer("b")) in out
    (change,) = [o for o in out if isinstance(o, MemberChanged)]
    assert change.new is MemberState.DEAD and change.reason == "left"


def test_a_restarted_peer_with_a_new_incarnation_is_accepted_and_old_beats_are_not() -> None:
    a, b = pair()
    old = beat(b)
    clock = clock_of(a)
    receive(clock, a, old)
    clock.advance(1.0)
    restarted = Membership("b", 2, timing=T)
    assert changes(receive(clock, a, beat(restarted))) == [MemberState.ALIVE]
    assert a.receive(old, 1.01) == [] and a.counters.rejected == 1


def test_with_a_key_forged_and_unauthenticated_heartbeats_are_rejected() -> None:
    a, b = pair(KEY)
    good = beat(b)
    forged = encode(Heartbeat("b", 5, 5), b"wrong-key")
    plain = encode(Heartbeat("b", 6, 6))
    assert a.receive(forged, 0.0) == [Unauthenticated("heartbeat authentication tag mismatch")]
    assert a.receive(plain, 0.0) == [
        Unauthenticated("heartbeat is not authenticated and a key is configured")
    ]
    assert a.counters.rejected == a.counters.unauthenticated == 2
    assert a.alive() == {"a"}
    assert changes(a.receive(good, 0.0)) == [MemberState.ALIVE]


def test_a_replay_is_rejected_but_not_counted_as_unauthenticated() -> None:
    a, b = pair(KEY)
    good = beat(b)
    a.receive(good, 0.0)
    assert a.receive(good, 0.01) == []
    assert (a.counters.rejected, a.counters.unauthenticated) == (1, 0)


def test_without_a_key_authenticated_heartbeats_are_accepted() -> None:
    """A node not yet given the key still hears keyed peers (they do not hear it)."""
    a, _ = pair()
    _, b = pair(KEY)
    assert changes(a.receive(beat(b), 0.0)) == [MemberState.ALIVE]


def test_the_sender_macs_map_back_to_the_node() -> None:
    a, b = pair()
    a.receive(beat(b), 0.0)
    assert a.node_of_mac(b"\x02" * 6) == "b"
    assert a.node_of_mac(b"\x03" * 6) is None


@given(st.binary(max_size=80))
def test_random_bytes_decode_or_raise_heartbeat_error_only(data: bytes) -> None:
    with contextlib.suppress(HeartbeatError):
        decode(data)
    with contextlib.suppress(HeartbeatError):
        decode(data, KEY)


@given(
    st.text(min_size=1, max_size=60),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.booleans(),
)
def test_heartbeats_round_trip(name: str, inc: int, seq: int, leaving: bool) -> None:
    hb = Heartbeat(name, inc, seq, (b"\x01" * 6,), leaving)
    assert decode(encode(hb, KEY), KEY) == hb
    assert decode(encode(hb)) == hb
