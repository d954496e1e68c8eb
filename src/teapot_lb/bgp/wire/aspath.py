"""AS_PATH, AS4_PATH, AGGREGATOR, AS4_AGGREGATOR (RFC 4271 §5.1.2, RFC 6793).

AS_PATH is encoded with 2- or 4-octet ASNs depending on the negotiated capability
(:class:`~.attribute.Context`). Values are kept as received; :func:`merge_as4_path`
reconstructs the real path from a 2-octet AS_PATH and an AS4_PATH (RFC 6793 §4.2.3).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import ClassVar

from .attribute import OPTIONAL, TRANSITIVE, Attribute, AttrType, Context, ErrorAction, Malformed
from .capability import AS_TRANS
from .errors import UpdateSubcode


class SegmentType(enum.IntEnum):
    AS_SET = 1
    AS_SEQUENCE = 2
    AS_CONFED_SEQUENCE = 3  # RFC 5065
    AS_CONFED_SET = 4


_CONFED = (SegmentType.AS_CONFED_SEQUENCE, SegmentType.AS_CONFED_SET)


@dataclass(frozen=True, slots=True)
class Segment:
    type: int
    asns: tuple[int, ...]


def _pack_segments(segments: tuple[Segment, ...], four: bool) -> bytes:
    out = []
    for seg in segments:
        if not 1 <= len(seg.asns) <= 255:
            raise ValueError(f"AS path segment of {len(seg.asns)} ASNs")
        out.append(bytes((seg.type, len(seg.asns))))
        if four:
            out.append(struct.pack(f"!{len(seg.asns)}I", *seg.asns))
        else:
            out.append(
                struct.pack(
                    f"!{len(seg.asns)}H", *(a if a <= 0xFFFF else AS_TRANS for a in seg.asns)
                )
            )
    return b"".join(out)


def _unpack_segments(data: bytes, four: bool, what: str) -> tuple[Segment, ...]:
    width = 4 if four else 2
    segs = []
    pos = 0
    while pos < len(data):
        if pos + 2 > len(data):
            raise Malformed(f"{what}: truncated segment header", UpdateSubcode.MALFORMED_AS_PATH)
        stype, count = data[pos], data[pos + 1]
        if stype not in (1, 2, 3, 4):
            raise Malformed(f"{what}: segment type {stype}", UpdateSubcode.MALFORMED_AS_PATH)
        if count == 0:
            raise Malformed(f"{what}: empty segment", UpdateSubcode.MALFORMED_AS_PATH)
        end = pos + 2 + count * width
        if end > len(data):
            raise Malformed(f"{what}: segment overruns", UpdateSubcode.MALFORMED_AS_PATH)
        asns = struct.unpack_from(f"!{count}{'I' if four else 'H'}", data, pos + 2)
        segs.append(Segment(stype, asns))
        pos = end
    return tuple(segs)


@dataclass(frozen=True, slots=True)
class AsPath(Attribute):
    TYPE: ClassVar[int] = AttrType.AS_PATH
    FLAGS: ClassVar[int] = TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.TREAT_AS_WITHDRAW  # RFC 7606 §7.2
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.MALFORMED_AS_PATH
    segments: tuple[Segment, ...] = ()

    @classmethod
    def sequence(cls, *asns: int) -> AsPath:
        return cls((Segment(SegmentType.AS_SEQUENCE, asns),) if asns else ())

    def pack_value(self, ctx: Context) -> bytes:
        return _pack_segments(self.segments, ctx.four_octet_as)

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> AsPath:
        return cls(_unpack_segments(data, ctx.four_octet_as, "AS_PATH"))

    def needs_as4_path(self) -> bool:
        return any(a > 0xFFFF for s in self.segments for a in s.asns)

    def length(self) -> int:
        """Path length for route selection (RFC 4271 §9.1.2.2: a set counts 1)."""
        n = 0
        for s in self.segments:
            if s.type == SegmentType.AS_SEQUENCE:
                n += len(s.asns)
            elif s.type == SegmentType.AS_SET:
                n += 1
        return n

    def asns(self) -> tuple[int, ...]:
        return tuple(a for s in self.segments for a in s.asns)

    def has_confed(self) -> bool:
        """Whether a confederation segment is in the path: only a member of the same
        confederation may send one (RFC 5065 §5)."""
        return any(s.type in _CONFED for s in self.segments)


@dataclass(frozen=True, slots=True)
class As4Path(Attribute):
    TYPE: ClassVar[int] = AttrType.AS4_PATH
    FLAGS: ClassVar[int] = OPTIONAL | TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.ATTRIBUTE_DISCARD  # RFC 6793 §6
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    segments: tuple[Segment, ...] = ()

    def pack_value(self, ctx: Context) -> bytes:
        return _pack_segments(self.segments, True)

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> As4Path:
        segs = _unpack_segments(data, True, "AS4_PATH")
        if any(s.type in _CONFED for s in segs):
            raise Malformed("AS4_PATH with confederation segments")  # RFC 6793 §6
        return cls(segs)


def merge_as4_path(as_path: AsPath, as4_path: As4Path | None) -> AsPath:
    """The real path from a 2-octet AS_PATH and an AS4_PATH (RFC 6793 §4.2.3)."""
    if as4_path is None:
        return as_path
    n_old, n_new = as_path.length(), _len(as4_path.segments)
    if n_old < n_new:
        return as_path  # AS4_PATH ignored
    # Keep the leading (n_old - n_new) ASNs of AS_PATH, then the whole AS4_PATH.
    keep = n_old - n_new
    head: list[Segment] = []
    for seg in as_path.segments:
        if keep <= 0:
            break
        if seg.type == SegmentType.AS_SEQUENCE:
            take = seg.asns[:keep]
            head.append(Segment(seg.type, take))
            keep -= len(take)
        elif seg.type == SegmentType.AS_SET:
            head.append(seg)
            keep -= 1
        else:
            head.append(seg)  # confederation segments do not count (RFC 5065)
    return AsPath((*head, *as4_path.segments))


def _len(segments: tuple[Segment, ...]) -> int:
    return AsPath(segments).length()


@dataclass(frozen=True, slots=True)
class Aggregator(Attribute):
    TYPE: ClassVar[int] = AttrType.AGGREGATOR
    FLAGS: ClassVar[int] = OPTIONAL | TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.ATTRIBUTE_DISCARD  # RFC 7606 §7.7
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    asn: int
    address: IPv4Address

    def pack_value(self, ctx: Context) -> bytes:
        if ctx.four_octet_as:
            return struct.pack("!I", self.asn) + self.address.packed
        return struct.pack("!H", self.asn if self.asn <= 0xFFFF else AS_TRANS) + self.address.packed

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> Aggregator:
        width = 4 if ctx.four_octet_as else 2
        if len(data) != width + 4:
            raise Malformed(f"AGGREGATOR of length {len(data)}")
        asn = int.from_bytes(data[:width], "big")
        return cls(asn, IPv4Address(data[width:]))


@dataclass(frozen=True, slots=True)
class As4Aggregator(Attribute):
    TYPE: ClassVar[int] = AttrType.AS4_AGGREGATOR
    FLAGS: ClassVar[int] = OPTIONAL | TRANSITIVE
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.ATTRIBUTE_DISCARD  # RFC 6793 §6
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    asn: int
    address: IPv4Address

    def pack_value(self, ctx: Context) -> bytes:
        return struct.pack("!I", self.asn) + self.address.packed

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> As4Aggregator:
        if len(data) != 8:
            raise Malformed(f"AS4_AGGREGATOR of length {len(data)}")
        return cls(struct.unpack("!I", data[:4])[0], IPv4Address(data[4:]))
