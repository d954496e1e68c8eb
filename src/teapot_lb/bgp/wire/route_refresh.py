"""The ROUTE-REFRESH message (RFC 2918, subtypes RFC 7313)."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import ClassVar

from .errors import CodecError, ErrorCode, RouteRefreshSubcode
from .family import Family
from .header import MessageType, frame


class RefreshSubtype(enum.IntEnum):
    REQUEST = 0
    BEGIN = 1  # BoRR
    END = 2  # EoRR


@dataclass(frozen=True, slots=True)
class RouteRefreshMessage:
    TYPE: ClassVar[int] = MessageType.ROUTE_REFRESH
    family: Family
    subtype: int = RefreshSubtype.REQUEST

    def pack(self) -> bytes:
        return frame(
            MessageType.ROUTE_REFRESH,
            struct.pack("!HBB", self.family.afi, self.subtype, self.family.safi),
        )

    @classmethod
    def unpack(cls, body: bytes) -> RouteRefreshMessage:
        if len(body) != 4:
            raise CodecError(
                ErrorCode.ROUTE_REFRESH,
                RouteRefreshSubcode.INVALID_MESSAGE_LENGTH,
                body,
                reason=f"ROUTE-REFRESH body of {len(body)} bytes",
            )
        afi, subtype, safi = struct.unpack("!HBB", body)
        return cls(Family(afi, safi), subtype)
