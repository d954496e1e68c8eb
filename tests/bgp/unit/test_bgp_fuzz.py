"""Random and mutated bytes into the decoder only ever raise the codec's own error."""

from __future__ import annotations

import contextlib

from bgp_strategies import opens, updates
from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    CodecError,
    Context,
    ErrorCode,
    MessageReader,
    Notification,
    decode_message,
    decode_update_routes,
)


def decode_all(data: bytes, ctx: Context) -> None:
    reader = MessageReader()
    reader.feed(data)
    try:
        for t, body in reader.frames():
            decode_message(t, body, ctx)
    except CodecError as err:
        # The error is always a NOTIFICATION we can send.
        assert err.code in set(ErrorCode)
        assert Notification.from_error(err).pack()


@settings(max_examples=300)
@given(st.binary(max_size=200), st.booleans())
def test_random_bodies_only_raise_codec_errors(body: bytes, four: bool) -> None:
    for t in range(1, 6):
        with contextlib.suppress(CodecError):
            decode_message(t, body, Context(four))


@settings(max_examples=300)
@given(st.one_of(opens, updates(True)), st.data())
def test_mutated_messages_only_raise_codec_errors(msg: object, data: st.DataObject) -> None:
    raw = bytearray(msg.pack())  # type: ignore[attr-defined]
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(16, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    decode_all(bytes(raw), Context(data.draw(st.booleans())))


@settings(max_examples=300)
@given(st.binary(max_size=200), st.sampled_from([IPV4_UNICAST, IPV6_UNICAST]))
def test_random_updates_with_path_identifiers_only_raise_codec_errors(
    body: bytes, family: object
) -> None:
    """ADD-PATH decoding (RFC 7911) on both the typed and the receive-path decoder."""
    ctx = Context(add_path=frozenset({IPV4_UNICAST, family}))  # type: ignore[arg-type]
    with contextlib.suppress(CodecError):
        decode_message(2, body, ctx)
    with contextlib.suppress(CodecError):
        decode_update_routes(body, ctx)


@settings(max_examples=300)
@given(updates(True))
def test_updates_read_as_if_they_carried_path_identifiers_only_raise_codec_errors(
    msg: object,
) -> None:
    """A peer that sends plain NLRI where ADD-PATH was negotiated (or the reverse): every
    length is misread, and the decoder must still answer with a NOTIFICATION."""
    body = msg.pack()[19:]  # type: ignore[attr-defined]
    ctx = Context(add_path=frozenset({IPV4_UNICAST, IPV6_UNICAST}))
    for decode in (lambda: decode_message(2, body, ctx), lambda: decode_update_routes(body, ctx)):
        try:
            decode()
        except CodecError as err:
            assert Notification.from_error(err).pack()
