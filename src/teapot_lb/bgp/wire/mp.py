"""MP_REACH_NLRI and MP_UNREACH_NLRI (RFC 4760) for IPv4/IPv6 unicast.

Other AFI/SAFI pairs decode as :class:`~.attribute.UnknownAttribute` (they are
optional non-transitive, so they are never forwarded).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import ClassVar

from .attribute import OPTIONAL, Attribute, AttrType, Context, ErrorAction, Malformed
from .errors import CodecError, UpdateSubcode
from .family import AFI, KNOWN_FAMILIES, Address, Family, Prefix
from .nlri import decode_nlri, pack_prefixes, split_prefixes


@dataclass(frozen=True, slots=True)
class MpReachNlri(Attribute):
    TYPE: ClassVar[int] = AttrType.MP_REACH_NLRI
    FLAGS: ClassVar[int] = OPTIONAL
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.SESSION_RESET  # RFC 7606 §7.11
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    family: Family
    next_hops: tuple[Address, ...]  # IPv6: global, then optionally link-local (RFC 2545)
    nlri: tuple[Prefix, ...] = ()

    def pack_value(self, ctx: Context) -> bytes:
        return pack_mp_reach_value(
            self.family, b"".join(a.packed for a in self.next_hops), pack_prefixes(self.nlri)
        )

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> MpReachNlri:
        """Path Identifiers (ADD-PATH) are dropped in this typed form; the receive path
        (:func:`unpack_mp_reach`) keeps them."""
        reach = unpack_mp_reach(data, ctx.add_path)
        fam = reach.family
        return cls(fam, reach.next_hops, decode_nlri(reach.encodings, fam.afi, fam in ctx.add_path))


@dataclass(frozen=True, slots=True)
class Reach:
    """Prefixes of one family announced with one next hop, in NLRI encoding (the receive
    path's form of MP_REACH_NLRI and of the classic NLRI field)."""

    family: Family
    next_hops: tuple[Address, ...]
    encodings: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Unreach:
    """Prefixes of one family withdrawn, in NLRI encoding."""

    family: Family
    encodings: tuple[bytes, ...]


def unpack_mp_reach(data: bytes, add_path: frozenset[Family] = frozenset()) -> Reach:
    """An MP_REACH_NLRI value with its prefixes left encoded (with their Path Identifiers
    for the families in ``add_path``); raises :class:`Malformed`."""
    if len(data) < 5:
        raise Malformed(f"MP_REACH_NLRI of length {len(data)}")
    afi, safi, nhlen = struct.unpack_from("!HBB", data)
    fam = Family(afi, safi)
    if 4 + nhlen + 1 > len(data):
        raise Malformed("MP_REACH_NLRI next hop overruns the attribute")
    nh = data[4 : 4 + nhlen]
    hops: tuple[Address, ...]
    if afi == AFI.IPV4 and nhlen == 4:
        hops = (IPv4Address(nh),)
    elif afi == AFI.IPV6 and nhlen == 16:
        hops = (IPv6Address(nh),)
    elif afi == AFI.IPV6 and nhlen == 32:
        hops = (IPv6Address(nh[:16]), IPv6Address(nh[16:]))
    else:
        raise Malformed(f"MP_REACH_NLRI next hop of length {nhlen} for {fam}")
    # One reserved octet (was SNPA count, RFC 4760 §3), then the NLRI.
    try:
        encs = split_prefixes(
            data[5 + nhlen :], afi, UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR, fam in add_path
        )
    except CodecError as exc:
        raise Malformed(f"MP_REACH_NLRI: {exc}") from None
    return Reach(fam, hops, tuple(encs))


def unpack_mp_unreach(data: bytes, add_path: frozenset[Family] = frozenset()) -> Unreach:
    """An MP_UNREACH_NLRI value with its prefixes left encoded; raises :class:`Malformed`."""
    if len(data) < 3:
        raise Malformed(f"MP_UNREACH_NLRI of length {len(data)}")
    afi, safi = struct.unpack_from("!HB", data)
    fam = Family(afi, safi)
    try:
        encs = split_prefixes(
            data[3:], afi, UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR, fam in add_path
        )
    except CodecError as exc:
        raise Malformed(f"MP_UNREACH_NLRI: {exc}") from None
    return Unreach(fam, tuple(encs))


def pack_mp_reach_value(family: Family, next_hop: bytes, nlri: bytes) -> bytes:
    return struct.pack("!HBB", family.afi, family.safi, len(next_hop)) + next_hop + b"\0" + nlri


def pack_mp_unreach_value(family: Family, nlri: bytes) -> bytes:
    return struct.pack("!HB", family.afi, family.safi) + nlri


@dataclass(frozen=True, slots=True)
class MpUnreachNlri(Attribute):
    TYPE: ClassVar[int] = AttrType.MP_UNREACH_NLRI
    FLAGS: ClassVar[int] = OPTIONAL
    ON_ERROR: ClassVar[ErrorAction] = ErrorAction.SESSION_RESET  # RFC 7606 §7.11
    ERROR_SUBCODE: ClassVar[int] = UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR
    family: Family
    withdrawn: tuple[Prefix, ...] = ()

    def pack_value(self, ctx: Context) -> bytes:
        return pack_mp_unreach_value(self.family, pack_prefixes(self.withdrawn))

    @classmethod
    def unpack_value(cls, data: bytes, ctx: Context) -> MpUnreachNlri:
        unreach = unpack_mp_unreach(data, ctx.add_path)
        fam = unreach.family
        return cls(fam, decode_nlri(unreach.encodings, fam.afi, fam in ctx.add_path))


def is_known_family(data: bytes) -> bool:
    """Whether an MP attribute value is for a family we decode (peek at AFI/SAFI)."""
    if len(data) < 3:
        return True  # let the decoder report it as malformed
    afi, safi = struct.unpack_from("!HB", data)
    return Family(afi, safi) in KNOWN_FAMILIES
