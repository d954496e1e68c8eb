"""Heartbeat liveness core: timing of suspicion and death, restarts, authentication."""

from __future__ import annotations

import contextlib

from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.membership.core import (
    Heartbeat,
    HeartbeatError,
    Membership,
    MemberState,
    Timing,
    decode,
    encode,
)

T = Timing(interval=0.02, suspect_after=3, dead_after=6)
KEY = b"shared-secret"


def pair(key: bytes | None = None) -> tuple[Membership, Membership]:
    return Membership("a", 1, timing=T, key=key), Membership("b", 1, (b"\x02" * 6,), T, key)


def test_a_peer_is_alive_once_heard_and_dead_after_the_detection_interval() -> None:
    a, b = pair()
    beat = b.poll(0.0)
    assert beat is not None
    (change,) = a.receive(beat, 0.0)
    assert change.new is MemberState.ALIVE and a.alive() == {"a", "b"}
    assert a.tick(0.059) == []
    assert [c.new for c in a.tick(0.06)] == [MemberState.SUSPECT]
    assert a.alive() == {"a", "b"}  # suspicion does not move IPs
    assert [c.new for c in a.tick(0.12)] == [MemberState.DEAD]
    assert a.alive() == {"a"}


def test_waking_at_the_next_deadline_always_changes_state() -> None:
    a, b = pair()
    a.receive(b.poll(0.1) or b"", 0.1)
    a._next_send = 1e9  # only member deadlines matter here
    for expected in (MemberState.SUSPECT, MemberState.DEAD):
        assert [c.new for c in a.tick(a.next_deadline())] == [expected]


def test_heartbeats_keep_a_peer_alive() -> None:
    a, b = pair()
    for i in range(100):
        now = i * 0.02
        beat = b.poll(now)
        if beat:
            a.receive(beat, now)
        a.tick(now)
    assert a.members["b"].state is MemberState.ALIVE


def test_heartbeats_are_due_once_per_interval() -> None:
    a, _ = pair()
    assert a.poll(0.0) is not None
    assert a.poll(0.01) is None
    assert a.poll(0.02) is not None


def test_a_leaving_peer_is_dead_at_once() -> None:
    a, b = pair()
    a.receive(b.poll(0.0) or b"", 0.0)
    (change,) = a.receive(b.goodbye(), 0.001)
    assert change.new is MemberState.DEAD and change.reason == "left"


def test_a_restarted_peer_with_a_new_incarnation_is_accepted_and_old_beats_are_not() -> None:
    a, b = pair()
    old = b.poll(0.0) or b""
    a.receive(old, 0.0)
    a.tick(1.0)
    restarted = Membership("b", 2, timing=T)
    (change,) = a.receive(restarted.poll(1.0) or b"", 1.0)
    assert change.new is MemberState.ALIVE
    assert a.receive(old, 1.01) == [] and a.counters.rejected == 1


def test_with_a_key_forged_and_unauthenticated_heartbeats_are_rejected() -> None:
    a, b = pair(KEY)
    good = b.poll(0.0) or b""
    forged = encode(Heartbeat("b", 5, 5), b"wrong-key")
    plain = encode(Heartbeat("b", 6, 6))
    assert a.receive(forged, 0.0) == [] and a.receive(plain, 0.0) == []
    assert a.counters.rejected == 2
    assert a.receive(good, 0.0)[0].new is MemberState.ALIVE


def test_the_sender_macs_map_back_to_the_node() -> None:
    a, b = pair()
    a.receive(b.poll(0.0) or b"", 0.0)
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
