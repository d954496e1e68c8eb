"""COMMUNITIES (RFC 1997), EXTENDED_COMMUNITIES (RFC 4360), LARGE_COMMUNITIES (RFC 8092)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from .attribute import OPTIONAL, TRANSITIVE, Attribute, AttrType, Context, ErrorAction, Malformed
from .errors import UpdateSubcode

# Well-known communities (RFC 1997, RFC 7999, RFC 8326).
NO_EXPORT = 0xFFFFFF01
NO_ADVERTISE = 0xFFFFFF02
NO_EXPORT_SUBCONFED = 0xFFFFFF03
GRACEFUL_SHUTDOWN = 0xFFFF0000
BLACKHOLE = 0xFFFF029A


def community(asn: int, value: int) -> int:
    """The 32-bit community ``asn:value``."""
    return (asn << 16) | value


def format_community(c: int) -> str:
    return f"{c >> 16}:{c & 0xFFFF}"


@dataclass(frozen=True, slots=True)
class Communities(Attribute):
    TYPE: ClassVar[int] = AttrType.COMMUNITIES
    FLAGS: ClassVar[int] = OPTIONAL | TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 7606 §7.8
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    values: tuple[int, ...]

    def pack_value(self, ctx: Context) -> bytes:
        return struct.pack(f"!{len(self.values)}I", *self.values)

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> Communities:
        if not data or len(data) % 4:
            raise Malformed(f"COMMUNITIES of length {len(data)}")
        return cls(struct.unpack(f"!{len(data) // 4}I", data))


@dataclass(frozen=True, slots=True, order=True)
class LargeCommunity:
    """``global_admin:local1:local2`` (RFC 8092); ordered like the tuple, so merged sets
    of them sort."""

    global_admin: int
    local1: int
    local2: int

    def __str__(self) -> str:
        return f"{self.global_admin}:{self.local1}:{self.local2}"


@dataclass(frozen=True, slots=True)
class LargeCommunities(Attribute):
    TYPE: ClassVar[int] = AttrType.LARGE_COMMUNITIES
    FLAGS: ClassVar[int] = OPTIONAL | TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 8092 §6
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    values: tuple[LargeCommunity, ...]

    def pack_value(self, ctx: Context) -> bytes:
        return b"".join(
            struct.pack("!III", v.global_admin, v.local1, v.local2) for v in self.values
        )

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> LargeCommunities:
        if not data or len(data) % 12:
            raise Malformed(f"LARGE_COMMUNITIES of length {len(data)}")
        return cls(tuple(LargeCommunity(*t) for t in struct.iter_unpack("!III", data)))


@dataclass(frozen=True, slots=True)
class ExtendedCommunities(Attribute):
    """Kept as 8-byte values: parsed for validity, interpreted by whoever needs them."""

    TYPE: ClassVar[int] = AttrType.EXTENDED_COMMUNITIES
    FLAGS: ClassVar[int] = OPTIONAL | TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 7606 §7.14
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    values: tuple[bytes, ...]

    def pack_value(self, ctx: Context) -> bytes:
        return b"".join(self.values)

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> ExtendedCommunities:
        if not data or len(data) % 8:
            raise Malformed(f"EXTENDED_COMMUNITIES of length {len(data)}")
        return cls(tuple(data[i : i + 8] for i in range(0, len(data), 8)))
