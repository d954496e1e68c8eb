"""The BFD control packet codec (RFC 5880 §4.1, §6.8.6 reception checks)."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.bfd.wire import (
    ControlPacket,
    Diagnostic,
    Malformed,
    MalformedReason,
    State,
    decode,
    encode,
)

U32 = st.integers(1, 0xFFFFFFFF)


def a_packet(**changes: object) -> ControlPacket:
    base = ControlPacket(
        state=State.UP,
        my_discriminator=7,
        your_discriminator=9,
        desired_min_tx=300_000,
        required_min_rx=200_000,
        detect_mult=3,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@st.composite
def packets(draw: st.DrawFn) -> ControlPacket:
    state = draw(st.sampled_from(State))
    poll = draw(st.booleans())
    return ControlPacket(
        state=state,
        my_discriminator=draw(U32),
        your_discriminator=draw(
            st.integers(0 if state in (State.DOWN, State.ADMIN_DOWN) else 1, 0xFFFFFFFF)
        ),
        desired_min_tx=draw(st.integers(0, 0xFFFFFFFF)),
        required_min_rx=draw(st.integers(0, 0xFFFFFFFF)),
        detect_mult=draw(st.integers(1, 255)),
        diagnostic=draw(st.sampled_from(Diagnostic) | st.integers(9, 31)),
        poll=poll,
        final=False if poll else draw(st.booleans()),
        control_plane_independent=draw(st.booleans()),
        demand=draw(st.booleans()),
        required_min_echo_rx=draw(st.integers(0, 0xFFFFFFFF)),
        auth=draw(
            st.none()
            | st.binary(min_size=1, max_size=26).map(lambda b: b[:1] + bytes([len(b) + 1]) + b[1:])
        ),
    )


@given(packets())
def test_every_valid_packet_survives_a_round_trip(packet: ControlPacket) -> None:
    assert decode(encode(packet)) == packet


@given(st.binary(max_size=80))
def test_decoding_garbage_never_raises(data: bytes) -> None:
    assert isinstance(decode(data), ControlPacket | Malformed)


def test_the_mandatory_section_is_24_bytes_with_intervals_in_microseconds() -> None:
    data = encode(a_packet(diagnostic=Diagnostic.NEIGHBOR_SIGNALED_SESSION_DOWN, poll=True))
    assert data.hex() == "23e003180000000700000009000493e000030d4000000000"


def test_a_wrong_version_is_discarded() -> None:
    data = bytearray(encode(a_packet()))
    data[0] = 2 << 5
    assert decode(bytes(data)) == Malformed(MalformedReason.BAD_VERSION, "version 2")


def check(reason: MalformedReason, data: bytes) -> None:
    result = decode(data)
    assert isinstance(result, Malformed) and result.reason is reason, result


def test_reception_checks_of_section_6_8_6() -> None:
    check(MalformedReason.TRUNCATED, encode(a_packet())[:23])
    check(MalformedReason.ZERO_DETECT_MULT, encode(a_packet(detect_mult=0)))
    check(MalformedReason.ZERO_MY_DISCRIMINATOR, encode(a_packet(my_discriminator=0)))
    check(MalformedReason.ZERO_YOUR_DISCRIMINATOR, encode(a_packet(your_discriminator=0)))
    check(MalformedReason.POLL_AND_FINAL, encode(a_packet(poll=True, final=True)))
    multipoint = bytearray(encode(a_packet()))
    multipoint[1] |= 0x01
    check(MalformedReason.MULTIPOINT, bytes(multipoint))
    long = bytearray(encode(a_packet()))
    long[3] = 30
    check(MalformedReason.BAD_LENGTH, bytes(long))


def test_your_discriminator_may_be_zero_while_down() -> None:
    packet = a_packet(state=State.DOWN, your_discriminator=0)
    assert decode(encode(packet)) == packet


def test_bytes_beyond_the_length_field_are_ignored() -> None:
    assert decode(encode(a_packet()) + b"\0\0") == a_packet()
