"""Random and mutated bytes into the decoder only ever raise the codec's own error."""

from __future__ import annotations

import contextlib

from bgp_strategies import opens, updates
from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.bgp.wire import (
    CodecError,
    Context,
    ErrorCode,
    MessageReader,
    Notification,
    decode_message,
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
