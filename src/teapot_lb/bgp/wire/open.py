"""The OPEN message (RFC 4271 §4.2) with capabilities (RFC 5492)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import ClassVar

from .capability import (
    AS_TRANS,
    AddPath,
    AddPathMode,
    Capability,
    FourOctetAS,
    GracefulRestart,
    Multiprotocol,
    RouteRefresh,
    pack_capability,
    unpack_capabilities,
)
from .errors import CodecError, ErrorCode, OpenSubcode
from .family import IPV4_UNICAST, Family
from .header import MessageType, frame

_FIXED = struct.Struct("!BHH4sB")
_CAPABILITIES_PARAM = 2


@dataclass(frozen=True, slots=True)
class Open:
    TYPE: ClassVar[int] = MessageType.OPEN
    my_as: int  # the 2-octet field as sent (AS_TRANS when the real ASN is larger)
    hold_time: int
    bgp_id: IPv4Address
    capabilities: tuple[Capability, ...] = ()
    version: int = 4

    @classmethod
    def build(
        cls,
        asn: int,
        hold_time: int,
        bgp_id: IPv4Address,
        capabilities: tuple[Capability, ...] = (),
    ) -> Open:
        """An OPEN for ``asn``: AS_TRANS in my-AS when it does not fit 2 octets (RFC 6793)."""
        caps = capabilities
        if not any(isinstance(c, FourOctetAS) for c in caps):
            caps = (*caps, FourOctetAS(asn))
        return cls(asn if asn <= 0xFFFF else AS_TRANS, hold_time, bgp_id, caps)

    @property
    def asn(self) -> int:
        """The speaker's real ASN: the 4-octet capability's when present (RFC 6793 §4.1)."""
        for c in self.capabilities:
            if isinstance(c, FourOctetAS):
                return c.asn
        return self.my_as

    @property
    def four_octet_as(self) -> bool:
        return any(isinstance(c, FourOctetAS) for c in self.capabilities)

    @property
    def route_refresh(self) -> bool:
        return any(isinstance(c, RouteRefresh) for c in self.capabilities)

    @property
    def families(self) -> frozenset[Family]:
        """Multiprotocol families; IPv4 unicast implied when none is advertised (RFC 4760)."""
        fams = frozenset(c.family for c in self.capabilities if isinstance(c, Multiprotocol))
        return fams or frozenset({IPV4_UNICAST})

    def add_path(self, family: Family) -> AddPathMode:
        """What the speaker's ADD-PATH capability says of ``family`` (RFC 7911 §4)."""
        for c in self.capabilities:
            if isinstance(c, AddPath):
                return c.mode(family)
        return AddPathMode.OFF

    @property
    def graceful_restart(self) -> GracefulRestart | None:
        for c in self.capabilities:
            if isinstance(c, GracefulRestart):
                return c
        return None

    def pack(self) -> bytes:
        params = b""
        if self.capabilities:
            caps = b"".join(pack_capability(c) for c in self.capabilities)
            if len(caps) > 253:
                raise ValueError("capabilities do not fit in one optional parameter")
            params = bytes((_CAPABILITIES_PARAM, len(caps))) + caps
        return frame(
            MessageType.OPEN,
            _FIXED.pack(self.version, self.my_as, self.hold_time, self.bgp_id.packed, len(params))
            + params,
        )

    @classmethod
    def unpack(cls, body: bytes) -> Open:
        if len(body) < _FIXED.size:
            raise CodecError(ErrorCode.MESSAGE_HEADER, 2, struct.pack("!H", len(body) + 19))
        version, my_as, hold, bgp_id, plen = _FIXED.unpack_from(body)
        if version != 4:
            # RFC 4271 §6.2: data is the largest supported version.
            raise CodecError(
                ErrorCode.OPEN_MESSAGE,
                OpenSubcode.UNSUPPORTED_VERSION_NUMBER,
                struct.pack("!H", 4),
                reason=f"version {version}",
            )
        params = body[_FIXED.size :]
        if len(params) != plen:
            raise CodecError(
                ErrorCode.OPEN_MESSAGE,
                OpenSubcode.UNSPECIFIC,
                reason=f"optional parameters length {plen} but {len(params)} bytes follow",
            )
        caps: list[Capability] = []
        pos = 0
        while pos < len(params):
            if pos + 2 > len(params):
                raise CodecError(
                    ErrorCode.OPEN_MESSAGE, OpenSubcode.UNSPECIFIC, reason="truncated parameter"
                )
            ptype, length = params[pos], params[pos + 1]
            value = params[pos + 2 : pos + 2 + length]
            if len(value) != length:
                raise CodecError(
                    ErrorCode.OPEN_MESSAGE,
                    OpenSubcode.UNSPECIFIC,
                    reason=f"optional parameter {ptype} overruns the message",
                )
            if ptype != _CAPABILITIES_PARAM:
                raise CodecError(
                    ErrorCode.OPEN_MESSAGE,
                    OpenSubcode.UNSUPPORTED_OPTIONAL_PARAMETER,
                    reason=f"optional parameter type {ptype}",
                )
            caps.extend(unpack_capabilities(value))
            pos += 2 + length
        return cls(my_as, hold, IPv4Address(bgp_id), tuple(caps), version)
