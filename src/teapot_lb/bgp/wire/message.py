"""Decode a framed message by type code."""

from __future__ import annotations

from typing import TypeAlias

from .attribute import DEFAULT_CONTEXT, Context
from .errors import CodecError, ErrorCode, HeaderSubcode
from .header import MessageReader
from .keepalive import Keepalive
from .notification import Notification
from .open import Open
from .route_refresh import RouteRefreshMessage
from .update import Update

Message: TypeAlias = Open | Update | Notification | Keepalive | RouteRefreshMessage


def decode_message(msg_type: int, body: bytes, ctx: Context = DEFAULT_CONTEXT) -> Message:
    """One message body (as cut by :class:`~.header.MessageReader`) into its dataclass."""
    if msg_type == 2:
        return Update.unpack(body, ctx)
    if msg_type == 4:
        return Keepalive.unpack(body)
    if msg_type == 1:
        return Open.unpack(body)
    if msg_type == 3:
        return Notification.unpack(body)
    if msg_type == 5:
        return RouteRefreshMessage.unpack(body)
    raise CodecError(
        ErrorCode.MESSAGE_HEADER, HeaderSubcode.BAD_MESSAGE_TYPE, bytes((msg_type & 0xFF,))
    )


def decode_stream(data: bytes, ctx: Context = DEFAULT_CONTEXT) -> list[Message]:
    """Every message in ``data`` (must end on a message boundary); for tests and tools."""
    reader = MessageReader()
    reader.feed(data)
    out = [decode_message(t, b, ctx) for t, b in reader.frames()]
    if reader.buffered:
        raise CodecError(
            ErrorCode.MESSAGE_HEADER, HeaderSubcode.UNSPECIFIC, reason="trailing bytes"
        )
    return out
