"""Path attribute framing (RFC 4271 §4.3) and RFC 7606 error classes.

Each attribute family lives in its own module (``path``, ``aspath``, ``community``,
``mp``) as frozen dataclasses with ``pack_value(ctx)`` / ``unpack_value(data, ctx)``;
``update`` holds the registry by type code.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import ClassVar

from .family import Family

OPTIONAL = 0x80
TRANSITIVE = 0x40
PARTIAL = 0x20
EXTENDED_LENGTH = 0x10


class AttrType(enum.IntEnum):
    ORIGIN = 1
    AS_PATH = 2
    NEXT_HOP = 3
    MULTI_EXIT_DISC = 4
    LOCAL_PREF = 5
    ATOMIC_AGGREGATE = 6
    AGGREGATOR = 7
    COMMUNITIES = 8  # RFC 1997
    MP_REACH_NLRI = 14  # RFC 4760
    MP_UNREACH_NLRI = 15
    EXTENDED_COMMUNITIES = 16  # RFC 4360
    AS4_PATH = 17  # RFC 6793
    AS4_AGGREGATOR = 18
    LARGE_COMMUNITIES = 32  # RFC 8092


class ErrorAction(enum.IntEnum):
    """What RFC 7606 §2 says to do with a malformed attribute, mildest first."""

    ATTRIBUTE_DISCARD = 1
    TREAT_AS_WITHDRAW = 2
    SESSION_RESET = 3


@dataclass(frozen=True, slots=True)
class Context:
    """What decoding and encoding depend on, as negotiated in the OPEN exchange.

    ``add_path``: the families whose received NLRI carry Path Identifiers (RFC 7911 §3).
    """

    four_octet_as: bool = True
    add_path: frozenset[Family] = frozenset()


DEFAULT_CONTEXT = Context()


class Malformed(Exception):
    """Raised by ``unpack_value``; the update decoder maps it to an RFC 7606 action."""

    def __init__(self, reason: str, subcode: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.subcode = subcode


class Attribute:
    """Base of the typed attributes: class-level type code, flags and RFC 7606 action."""

    __slots__ = ()
    TYPE: ClassVar[int]
    FLAGS: ClassVar[int]  # OPTIONAL / TRANSITIVE as the RFC defines them
    ON_ERROR: ClassVar[ErrorAction]
    ERROR_SUBCODE: ClassVar[int]  # the RFC 4271 §6.3 subcode when it must reset

    def pack_value(self, ctx: Context) -> bytes:
        raise NotImplementedError

    def flags(self) -> int:
        return self.FLAGS

    def type_code(self) -> int:
        return self.TYPE

    def pack(self, ctx: Context = DEFAULT_CONTEXT) -> bytes:
        return pack_attribute(self.flags(), self.type_code(), self.pack_value(ctx))


def pack_attribute(flags: int, type_code: int, value: bytes) -> bytes:
    """Flags, type, length (extended when over 255 bytes, RFC 4271 §4.3) and value."""
    n = len(value)
    if n > 255:
        return struct.pack("!BBH", (flags | EXTENDED_LENGTH) & 0xF0, type_code, n) + value
    return struct.pack("!BBB", flags & 0xE0, type_code, n) + value


@dataclass(frozen=True, slots=True)
class UnknownAttribute(Attribute):
    """An attribute we do not implement, kept with its flags (RFC 4271 §5, §9.1.2.2)."""

    type: int
    attr_flags: int
    value: bytes

    def flags(self) -> int:
        return self.attr_flags & 0xE0

    def type_code(self) -> int:
        return self.type

    def pack_value(self, ctx: Context) -> bytes:
        return self.value

    def forwarded(self) -> UnknownAttribute | None:
        """As passed on to another peer: transitive ones with Partial set, others dropped."""
        if not self.attr_flags & TRANSITIVE:
            return None
        return UnknownAttribute(self.type, self.attr_flags | PARTIAL, self.value)
