"""The KEEPALIVE message (RFC 4271 §4.4): a bare header."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from .errors import CodecError, ErrorCode, HeaderSubcode
from .header import MessageType, frame

KEEPALIVE_BYTES = frame(MessageType.KEEPALIVE, b"")


@dataclass(frozen=True, slots=True)
class Keepalive:
    TYPE: ClassVar[int] = MessageType.KEEPALIVE

    def pack(self) -> bytes:
        return KEEPALIVE_BYTES

    @classmethod
    def unpack(cls, body: bytes) -> Keepalive:
        if body:
            raise CodecError(
                ErrorCode.MESSAGE_HEADER,
                HeaderSubcode.BAD_MESSAGE_LENGTH,
                struct.pack("!H", 19 + len(body)),
            )
        return cls()
