"""The NOTIFICATION message (RFC 4271 §4.5) and the shutdown communication (RFC 9003)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from .errors import CeaseSubcode, CodecError, ErrorCode, describe_error
from .header import MessageType, frame

MAX_SHUTDOWN_COMMUNICATION = 255  # RFC 9003 (was 128 in RFC 8203)


@dataclass(frozen=True, slots=True)
class Notification:
    TYPE: ClassVar[int] = MessageType.NOTIFICATION
    code: int
    subcode: int = 0
    data: bytes = b""

    @classmethod
    def from_error(cls, err: CodecError) -> Notification:
        return cls(err.code, err.subcode, err.data)

    @classmethod
    def cease(cls, subcode: int, communication: str = "") -> Notification:
        """A Cease, with a shutdown communication for shutdown and reset (RFC 9003 §2)."""
        data = b""
        if communication and subcode in (
            CeaseSubcode.ADMINISTRATIVE_SHUTDOWN,
            CeaseSubcode.ADMINISTRATIVE_RESET,
        ):
            raw = communication.encode()
            while len(raw) > MAX_SHUTDOWN_COMMUNICATION:
                communication = communication[:-1]
                raw = communication.encode()
            data = bytes((len(raw),)) + raw
        return cls(ErrorCode.CEASE, subcode, data)

    @property
    def shutdown_communication(self) -> str | None:
        """The operator's message of a Cease shutdown/reset, when well formed."""
        if self.code != ErrorCode.CEASE or self.subcode not in (2, 4) or not self.data:
            return None
        n = self.data[0]
        if n + 1 > len(self.data):
            return None
        try:
            return self.data[1 : 1 + n].decode()
        except UnicodeDecodeError:
            return None

    def describe(self) -> str:
        text = describe_error(self.code, self.subcode)
        comm = self.shutdown_communication
        return f'{text} "{comm}"' if comm else text

    def pack(self) -> bytes:
        return frame(
            MessageType.NOTIFICATION, struct.pack("!BB", self.code, self.subcode) + self.data
        )

    @classmethod
    def unpack(cls, body: bytes) -> Notification:
        if len(body) < 2:
            raise CodecError(ErrorCode.MESSAGE_HEADER, 2, struct.pack("!H", len(body) + 19))
        return cls(body[0], body[1], body[2:])
