"""Message header framing (RFC 4271 §4.1, §6.1) and an incremental reader."""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator

from .errors import CodecError, ErrorCode, HeaderSubcode

MARKER = b"\xff" * 16
HEADER_LENGTH = 19
MAX_MESSAGE_LENGTH = 4096
_LEN_TYPE = struct.Struct("!HB")


class MessageType(enum.IntEnum):
    OPEN = 1
    UPDATE = 2
    NOTIFICATION = 3
    KEEPALIVE = 4
    ROUTE_REFRESH = 5


# RFC 4271 §6.1: per-type length bounds (ROUTE-REFRESH: RFC 2918 §3, exactly 23).
_LENGTH_BOUNDS = {
    MessageType.OPEN: (29, MAX_MESSAGE_LENGTH),
    MessageType.UPDATE: (23, MAX_MESSAGE_LENGTH),
    MessageType.NOTIFICATION: (21, MAX_MESSAGE_LENGTH),
    MessageType.KEEPALIVE: (19, 19),
    MessageType.ROUTE_REFRESH: (23, 23),
}


def frame(msg_type: int, body: bytes) -> bytes:
    """A whole message: marker, length, type, body."""
    length = HEADER_LENGTH + len(body)
    if length > MAX_MESSAGE_LENGTH:
        raise ValueError(f"message of {length} bytes exceeds the {MAX_MESSAGE_LENGTH} limit")
    return MARKER + _LEN_TYPE.pack(length, msg_type) + body


def check_header(header: bytes | bytearray | memoryview) -> tuple[int, int]:
    """Validate a 19-byte header; returns (length, type) or raises :class:`CodecError`."""
    if header[:16] != MARKER:
        raise CodecError(
            ErrorCode.MESSAGE_HEADER,
            HeaderSubcode.CONNECTION_NOT_SYNCHRONIZED,
            reason="marker is not all ones",
        )
    length, msg_type = _LEN_TYPE.unpack_from(header, 16)
    bounds = _LENGTH_BOUNDS.get(msg_type)
    if bounds is None:
        if not HEADER_LENGTH <= length <= MAX_MESSAGE_LENGTH:
            raise _bad_length(length)
        raise CodecError(
            ErrorCode.MESSAGE_HEADER,
            HeaderSubcode.BAD_MESSAGE_TYPE,
            bytes((msg_type,)),
            reason=f"unknown message type {msg_type}",
        )
    if not bounds[0] <= length <= bounds[1]:
        raise _bad_length(length)
    return length, msg_type


def _bad_length(length: int) -> CodecError:
    return CodecError(
        ErrorCode.MESSAGE_HEADER,
        HeaderSubcode.BAD_MESSAGE_LENGTH,
        struct.pack("!H", length),
        reason=f"bad message length {length}",
    )


class MessageReader:
    """Cut a byte stream into whole messages.

    Feed arbitrary chunks with :meth:`feed`, then take ``(type, body)`` frames from
    :meth:`frames`. A header error raises :class:`CodecError`; the reader is then
    unusable (the session must be reset anyway).
    """

    __slots__ = ("_buf", "_failed")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._failed = False

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """Yield every complete message in the buffer, leaving a partial one in place."""
        if self._failed:
            return
        buf = self._buf
        pos = 0
        try:
            while len(buf) - pos >= HEADER_LENGTH:
                try:
                    length, msg_type = check_header(bytes(buf[pos : pos + HEADER_LENGTH]))
                except CodecError:
                    self._failed = True
                    raise
                if len(buf) - pos < length:
                    break
                body = bytes(buf[pos + HEADER_LENGTH : pos + length])
                pos += length
                yield msg_type, body
        finally:
            if pos:
                del buf[:pos]
