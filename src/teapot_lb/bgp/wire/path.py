"""ORIGIN, NEXT_HOP, MULTI_EXIT_DISC, LOCAL_PREF, ATOMIC_AGGREGATE (RFC 4271 §5.1)."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import ClassVar

from .attribute import OPTIONAL, TRANSITIVE, Attribute, AttrType, Context, ErrorAction, Malformed
from .errors import UpdateSubcode


class OriginCode(enum.IntEnum):
    IGP = 0
    EGP = 1
    INCOMPLETE = 2


@dataclass(frozen=True, slots=True)
class Origin(Attribute):
    TYPE: ClassVar[int] = AttrType.ORIGIN
    FLAGS: ClassVar[int] = TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 7606 §7.1
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.INVALID_ORIGIN_ATTRIBUTE
    value: int = OriginCode.IGP

    def pack_value(self, ctx: Context) -> bytes:
        return bytes((self.value,))

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> Origin:
        if len(data) != 1:
            raise Malformed(f"ORIGIN of length {len(data)}", UpdateSubcode.ATTRIBUTE_LENGTH_ERROR)
        if data[0] > 2:
            raise Malformed(f"ORIGIN value {data[0]}")
        return cls(OriginCode(data[0]))


@dataclass(frozen=True, slots=True)
class NextHop(Attribute):
    TYPE: ClassVar[int] = AttrType.NEXT_HOP
    FLAGS: ClassVar[int] = TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 7606 §7.3
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.INVALID_NEXT_HOP_ATTRIBUTE
    address: IPv4Address

    def pack_value(self, ctx: Context) -> bytes:
        return self.address.packed

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> NextHop:
        if len(data) != 4:
            raise Malformed(f"NEXT_HOP of length {len(data)}", UpdateSubcode.ATTRIBUTE_LENGTH_ERROR)
        return cls(IPv4Address(data))


class _U32(Attribute):
    __slots__ = ()
    value: int

    def pack_value(self, ctx: Context) -> bytes:
        return struct.pack("!I", self.value)


@dataclass(frozen=True, slots=True)
class MultiExitDisc(_U32):
    TYPE: ClassVar[int] = AttrType.MULTI_EXIT_DISC
    FLAGS: ClassVar[int] = OPTIONAL
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 7606 §7.4
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    value: int

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> MultiExitDisc:
        if len(data) != 4:
            raise Malformed(f"MED of length {len(data)}", UpdateSubcode.ATTRIBUTE_LENGTH_ERROR)
        return cls(struct.unpack("!I", data)[0])


@dataclass(frozen=True, slots=True)
class LocalPref(_U32):
    TYPE: ClassVar[int] = AttrType.LOCAL_PREF
    FLAGS: ClassVar[int] = TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 7606 §7.5
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.ATTRIBUTE_LENGTH_ERROR
    value: int

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> LocalPref:
        if len(data) != 4:
            raise Malformed(
                f"LOCAL_PREF of length {len(data)}", UpdateSubcode.ATTRIBUTE_LENGTH_ERROR
            )
        return cls(struct.unpack("!I", data)[0])


@dataclass(frozen=True, slots=True)
class AtomicAggregate(Attribute):
    TYPE: ClassVar[int] = AttrType.ATOMIC_AGGREGATE
    FLAGS: ClassVar[int] = TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.ATTRIBUTE_DISCARD  # RFC 7606 §7.6
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.ATTRIBUTE_LENGTH_ERROR

    def pack_value(self, ctx: Context) -> bytes:
        return b""

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> AtomicAggregate:
        if data:
            raise Malformed(f"ATOMIC_AGGREGATE of length {len(data)}")
        return cls()
