"""The UPDATE message (RFC 4271 §4.3), the attribute registry and RFC 7606 handling.

Decoding never loses the session for what RFC 7606 lets it survive: malformed attributes
are discarded, or the whole UPDATE is marked ``treat_as_withdraw`` (its prefixes are to
be withdrawn), and only the errors the RFC lists as session-reset raise
:class:`~.errors.CodecError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from .aspath import Aggregator, As4Aggregator, As4Path, AsPath
from .attribute import (
    DEFAULT_CONTEXT,
    EXTENDED_LENGTH,
    OPTIONAL,
    TRANSITIVE,
    Attribute,
    AttrType,
    Context,
    ErrorAction,
    Malformed,
    UnknownAttribute,
)
from .community import Communities, ExtendedCommunities, LargeCommunities
from .errors import CodecError, ErrorCode, UpdateSubcode
from .family import IPV4_UNICAST, Family, Prefix
from .header import MessageType, frame
from .mp import (
    MpReachNlri,
    MpUnreachNlri,
    Reach,
    Unreach,
    is_known_family,
    unpack_mp_reach,
    unpack_mp_unreach,
)
from .nlri import decode_nlri, pack_prefixes, split_prefixes
from .path import AtomicAggregate, LocalPref, MultiExitDisc, NextHop, Origin

ATTRIBUTES: Mapping[int, Any] = MappingProxyType(
    {
        cls.TYPE: cls
        for cls in (
            Origin,
            AsPath,
            NextHop,
            MultiExitDisc,
            LocalPref,
            AtomicAggregate,
            Aggregator,
            Communities,
            MpReachNlri,
            MpUnreachNlri,
            ExtendedCommunities,
            As4Path,
            As4Aggregator,
            LargeCommunities,
        )
    }
)

A = TypeVar("A", bound=Attribute)
_U16 = struct.Struct("!H")


def pack_update(withdrawn: bytes, attributes: bytes, nlri: bytes) -> bytes:
    """A whole UPDATE from already-encoded parts (the fast path of the Adj-RIB-Out)."""
    return frame(
        MessageType.UPDATE,
        b"".join(
            (_U16.pack(len(withdrawn)), withdrawn, _U16.pack(len(attributes)), attributes, nlri)
        ),
    )


# Room for withdrawn + attributes + NLRI in one UPDATE: 4096 - header - two lengths.
UPDATE_ROOM = 4096 - 19 - 4


@dataclass(frozen=True, slots=True)
class Update:
    TYPE: ClassVar[int] = MessageType.UPDATE
    withdrawn: tuple[IPv4Network, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    nlri: tuple[IPv4Network, ...] = ()
    # Outcome of RFC 7606 handling on decode; never encoded, not part of equality.
    treat_as_withdraw: bool = field(default=False, compare=False)
    problems: tuple[str, ...] = field(default=(), compare=False)

    def get(self, cls: type[A]) -> A | None:
        for a in self.attributes:
            if type(a) is cls:
                return a
        return None

    def reachable(self) -> tuple[Prefix, ...]:
        """Every prefix announced, classic NLRI and MP_REACH."""
        mp = self.get(MpReachNlri)
        return (*self.nlri, *mp.nlri) if mp else self.nlri

    def unreachable(self) -> tuple[Prefix, ...]:
        """Every prefix withdrawn, classic and MP_UNREACH."""
        mp = self.get(MpUnreachNlri)
        return (*self.withdrawn, *mp.withdrawn) if mp else self.withdrawn

    def end_of_rib(self) -> Family | None:
        """The family this End-of-RIB marker is for, else None (RFC 4724 §2)."""
        if self.withdrawn or self.nlri:
            return None
        if not self.attributes:
            return IPV4_UNICAST
        if len(self.attributes) == 1:
            a = self.attributes[0]
            if isinstance(a, MpUnreachNlri) and not a.withdrawn:
                return a.family
        return None

    @classmethod
    def end_of_rib_for(cls, family: Family) -> Update:
        if family == IPV4_UNICAST:
            return cls()
        return cls(attributes=(MpUnreachNlri(family, ()),))

    def pack(self, ctx: Context = DEFAULT_CONTEXT) -> bytes:
        return pack_update(
            pack_prefixes(self.withdrawn),
            b"".join(a.pack(ctx) for a in self.attributes),
            pack_prefixes(self.nlri),
        )

    @classmethod
    def unpack(cls, body: bytes, ctx: Context = DEFAULT_CONTEXT) -> Update:
        """The typed form (tests, tools): Path Identifiers (ADD-PATH) are dropped; the
        receive path (:func:`decode_update_routes`) keeps them."""
        wdata, adata, ndata = _split_body(body)
        add_path = IPV4_UNICAST in ctx.add_path
        subcode = UpdateSubcode.INVALID_NETWORK_FIELD
        withdrawn = decode_nlri(split_prefixes(wdata, 1, subcode, add_path), 1, add_path)
        nlri = decode_nlri(split_prefixes(ndata, 1, subcode, add_path), 1, add_path)
        attrs, taw, problems = decode_attributes(adata, ctx)
        if (nlri or any(type(a) is MpReachNlri for a in attrs)) and not taw:
            missing = _missing_mandatory(attrs, bool(nlri))
            if missing:
                taw = True
                problems.append(f"missing well-known attribute {missing}")  # RFC 7606 §3(d)
        return cls(withdrawn, tuple(attrs), nlri, taw, tuple(problems))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class UpdateRoutes:
    """An UPDATE as the receive path uses it: prefixes left in NLRI encoding, next to the
    decoded attributes (MP_REACH_NLRI / MP_UNREACH_NLRI taken out into ``reach`` /
    ``unreach``; the classic fields are IPv4 unicast entries there). Building 100,000
    ``ipaddress`` objects cost more than everything else on the receive path together."""

    attributes: tuple[Attribute, ...]
    reach: tuple[Reach, ...] = ()
    unreach: tuple[Unreach, ...] = ()
    treat_as_withdraw: bool = False
    problems: tuple[str, ...] = ()

    def get(self, cls: type[A]) -> A | None:
        for a in self.attributes:
            if type(a) is cls:
                return a
        return None

    def end_of_rib(self) -> Family | None:
        """The family this End-of-RIB marker is for, else None (RFC 4724 §2)."""
        if self.reach or self.attributes:
            return None
        if not self.unreach:
            return IPV4_UNICAST
        if len(self.unreach) == 1 and not self.unreach[0].encodings:
            return self.unreach[0].family  # an empty MP_UNREACH_NLRI alone
        return None


def decode_update_routes(body: bytes, ctx: Context = DEFAULT_CONTEXT) -> UpdateRoutes:
    """Decode an UPDATE body for the receive path (same checks as :meth:`Update.unpack`)."""
    wdata, adata, ndata = _split_body(body)
    subcode = UpdateSubcode.INVALID_NETWORK_FIELD
    add_path = IPV4_UNICAST in ctx.add_path  # RFC 7911 §3: the classic fields too
    withdrawn = split_prefixes(wdata, 1, subcode, add_path)
    nlri = split_prefixes(ndata, 1, subcode, add_path)
    mp: list[Reach | Unreach] = []
    attrs, taw, problems = decode_attributes(adata, ctx, mp)
    reach = [m for m in mp if isinstance(m, Reach)]
    unreach = [m for m in mp if isinstance(m, Unreach)]
    if (nlri or reach) and not taw:
        missing = _missing_mandatory(attrs, bool(nlri))
        if missing:
            taw = True
            problems.append(f"missing well-known attribute {missing}")  # RFC 7606 §3(d)
    if nlri:
        nh = next((a for a in attrs if type(a) is NextHop), None)
        hops = (nh.address,) if isinstance(nh, NextHop) else ()
        reach.insert(0, Reach(IPV4_UNICAST, hops, tuple(nlri)))
    if withdrawn:
        unreach.insert(0, Unreach(IPV4_UNICAST, tuple(withdrawn)))
    return UpdateRoutes(tuple(attrs), tuple(reach), tuple(unreach), taw, tuple(problems))


def _split_body(body: bytes) -> tuple[bytes, bytes, bytes]:
    """Withdrawn routes, path attributes, NLRI (RFC 4271 §4.3), lengths checked."""
    n = len(body)
    if n < 4:
        raise _attr_list_error("UPDATE shorter than its length fields")
    (wlen,) = _U16.unpack_from(body)
    if 2 + wlen + 2 > n:
        raise _attr_list_error(f"withdrawn routes length {wlen} overruns the message")
    (alen,) = _U16.unpack_from(body, 2 + wlen)
    astart = 4 + wlen
    if astart + alen > n:
        raise _attr_list_error(f"total path attribute length {alen} overruns the message")
    return body[2 : 2 + wlen], body[astart : astart + alen], body[astart + alen :]


def _attr_list_error(reason: str) -> CodecError:
    return CodecError(
        ErrorCode.UPDATE_MESSAGE, UpdateSubcode.MALFORMED_ATTRIBUTE_LIST, reason=reason
    )


def _missing_mandatory(attrs: list[Attribute], classic_nlri: bool) -> str | None:
    have = {type(a) for a in attrs}
    needed: tuple[type[Attribute], ...] = (
        (Origin, AsPath, NextHop)
        if classic_nlri
        else (
            Origin,
            AsPath,
        )
    )
    for cls in needed:
        if cls not in have:
            return AttrType(cls.TYPE).name
    return None


def decode_attributes(
    data: bytes, ctx: Context, mp: list[Reach | Unreach] | None = None
) -> tuple[list[Attribute], bool, list[str]]:
    """Attributes, whether to treat-as-withdraw, and what was wrong (RFC 7606).

    With ``mp`` given, MP_REACH_NLRI / MP_UNREACH_NLRI go there with their prefixes left
    encoded (:class:`~.mp.Reach`, :class:`~.mp.Unreach`) instead of into the attributes.
    """
    out: list[Attribute] = []
    seen: set[int] = set()
    problems: list[str] = []
    taw = False
    pos = 0
    n = len(data)
    while pos < n:
        start = pos
        if pos + 3 > n:
            problems.append("attribute header overruns the attribute list")
            taw = True  # RFC 7606 §4
            break
        flags, tcode = data[pos], data[pos + 1]
        if flags & EXTENDED_LENGTH:
            if pos + 4 > n:
                problems.append("attribute header overruns the attribute list")
                taw = True
                break
            (length,) = _U16.unpack_from(data, pos + 2)
            pos += 4
        else:
            length = data[pos + 2]
            pos += 3
        end = pos + length
        if end > n:
            problems.append(f"attribute {tcode} overruns the attribute list")
            taw = True
            break
        value = data[pos:end]
        pos = end
        cls = ATTRIBUTES.get(tcode)
        if tcode in (AttrType.MP_REACH_NLRI, AttrType.MP_UNREACH_NLRI):
            if tcode in seen:
                # RFC 7606 §3(g): a repeated MP attribute resets the session.
                raise _attr_list_error(f"attribute {tcode} repeated")
            if not is_known_family(value):
                cls = None
                afi, safi = struct.unpack_from("!HB", value)
                name = "MP_REACH_NLRI" if tcode == AttrType.MP_REACH_NLRI else "MP_UNREACH_NLRI"
                problems.append(
                    f"{name} of an address family we do not know (AFI {afi}, SAFI {safi})"
                    " ignored: its prefixes are not used"
                )
        if cls is None:
            if not flags & OPTIONAL:
                raise CodecError(
                    ErrorCode.UPDATE_MESSAGE,
                    UpdateSubcode.UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE,
                    data[start:end],
                    reason=f"unrecognized well-known attribute {tcode}",
                )
            seen.add(tcode)
            out.append(UnknownAttribute(tcode, flags & 0xE0, value))
            continue
        if tcode in seen:
            problems.append(f"attribute {tcode} repeated; later copies discarded")
            continue  # RFC 7606 §3(g)
        seen.add(tcode)
        if ctx.four_octet_as and tcode in (AttrType.AS4_PATH, AttrType.AS4_AGGREGATOR):
            problems.append(f"{AttrType(tcode).name} from a 4-octet speaker discarded")
            continue  # RFC 6793 §4.2.2
        try:
            if flags & (OPTIONAL | TRANSITIVE) != cls.FLAGS:
                raise Malformed(
                    f"flags {flags:#04x} for attribute {tcode}", UpdateSubcode.ATTRIBUTE_FLAGS_ERROR
                )
            if mp is not None and tcode == AttrType.MP_REACH_NLRI:
                mp.append(unpack_mp_reach(value, ctx.add_path))
            elif mp is not None and tcode == AttrType.MP_UNREACH_NLRI:
                mp.append(unpack_mp_unreach(value, ctx.add_path))
            else:
                out.append(cls.unpack_value(value, ctx))
        except Malformed as err:
            action: ErrorAction = cls.ON_ERROR
            if action == ErrorAction.SESSION_RESET:
                raise CodecError(
                    ErrorCode.UPDATE_MESSAGE,
                    err.subcode or cls.ERROR_SUBCODE,
                    data[start:end],
                    reason=err.reason,
                ) from None
            verb = "treat-as-withdraw" if action == ErrorAction.TREAT_AS_WITHDRAW else "discarded"
            problems.append(f"{err.reason} ({verb})")
            taw = taw or action == ErrorAction.TREAT_AS_WITHDRAW
    return out, taw, problems
