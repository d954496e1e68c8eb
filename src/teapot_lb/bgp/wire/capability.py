"""OPEN capabilities (RFC 5492): one class per capability code, unknown ones kept raw."""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, TypeAlias

from .errors import CodecError, ErrorCode, OpenSubcode
from .family import Family

AS_TRANS = 23456  # RFC 6793


class CapabilityCode(enum.IntEnum):
    MULTIPROTOCOL = 1  # RFC 4760
    ROUTE_REFRESH = 2  # RFC 2918
    GRACEFUL_RESTART = 64  # RFC 4724
    FOUR_OCTET_AS = 65  # RFC 6793
    ADD_PATH = 69  # RFC 7911
    ENHANCED_ROUTE_REFRESH = 70  # RFC 7313


def _malformed(reason: str) -> CodecError:
    return CodecError(ErrorCode.OPEN_MESSAGE, OpenSubcode.UNSPECIFIC, reason=reason)


@dataclass(frozen=True, slots=True)
class Multiprotocol:
    CODE: ClassVar[int] = CapabilityCode.MULTIPROTOCOL
    family: Family

    def pack_value(self) -> bytes:
        return struct.pack("!HBB", self.family.afi, 0, self.family.safi)

    @classmethod
    def unpack_value(cls, data: bytes) -> Multiprotocol:
        if len(data) != 4:
            raise _malformed(f"multiprotocol capability of length {len(data)}")
        afi, _, safi = struct.unpack("!HBB", data)
        return cls(Family(afi, safi))


@dataclass(frozen=True, slots=True)
class RouteRefresh:
    CODE: ClassVar[int] = CapabilityCode.ROUTE_REFRESH

    def pack_value(self) -> bytes:
        return b""

    @classmethod
    def unpack_value(cls, data: bytes) -> RouteRefresh:
        if data:
            raise _malformed("route refresh capability with a value")
        return cls()


@dataclass(frozen=True, slots=True)
class EnhancedRouteRefresh:
    CODE: ClassVar[int] = CapabilityCode.ENHANCED_ROUTE_REFRESH

    def pack_value(self) -> bytes:
        return b""

    @classmethod
    def unpack_value(cls, data: bytes) -> EnhancedRouteRefresh:
        if data:
            raise _malformed("enhanced route refresh capability with a value")
        return cls()


@dataclass(frozen=True, slots=True)
class FourOctetAS:
    CODE: ClassVar[int] = CapabilityCode.FOUR_OCTET_AS
    asn: int

    def pack_value(self) -> bytes:
        return struct.pack("!I", self.asn)

    @classmethod
    def unpack_value(cls, data: bytes) -> FourOctetAS:
        if len(data) != 4:
            raise _malformed(f"4-octet AS capability of length {len(data)}")
        return cls(struct.unpack("!I", data)[0])


@dataclass(frozen=True, slots=True)
class GracefulRestartFamily:
    family: Family
    forwarding_preserved: bool = False  # the F bit


@dataclass(frozen=True, slots=True)
class GracefulRestart:
    """RFC 4724 §3: restart flags, restart time (12 bits) and per-family F bits."""

    CODE: ClassVar[int] = CapabilityCode.GRACEFUL_RESTART
    restart_time: int
    restarting: bool = False  # the R bit
    notification: bool = False  # the N bit (RFC 8538)
    families: tuple[GracefulRestartFamily, ...] = ()

    def pack_value(self) -> bytes:
        if not 0 <= self.restart_time <= 0xFFF:
            raise ValueError(f"restart time {self.restart_time} does not fit in 12 bits")
        flags = (0x8 if self.restarting else 0) | (0x4 if self.notification else 0)
        out = [struct.pack("!H", (flags << 12) | self.restart_time)]
        for f in self.families:
            out.append(
                struct.pack(
                    "!HBB", f.family.afi, f.family.safi, 0x80 if f.forwarding_preserved else 0
                )
            )
        return b"".join(out)

    @classmethod
    def unpack_value(cls, data: bytes) -> GracefulRestart:
        if len(data) < 2 or (len(data) - 2) % 4:
            raise _malformed(f"graceful restart capability of length {len(data)}")
        (head,) = struct.unpack_from("!H", data)
        flags = head >> 12
        fams = tuple(
            GracefulRestartFamily(Family(afi, safi), bool(fl & 0x80))
            for afi, safi, fl in struct.iter_unpack("!HBB", data[2:])
        )
        return cls(head & 0xFFF, bool(flags & 0x8), bool(flags & 0x4), fams)


class AddPathMode(enum.IntFlag):
    """RFC 7911 §4 Send/Receive: whether a speaker can receive, send, or both, several
    paths per prefix (each NLRI with a 4-octet Path Identifier). ``OFF``: not advertised."""

    OFF = 0
    RECEIVE = 1
    SEND = 2
    BOTH = 3


@dataclass(frozen=True, slots=True)
class AddPathFamily:
    family: Family
    mode: AddPathMode


@dataclass(frozen=True, slots=True)
class AddPath:
    """RFC 7911 §4: (AFI, SAFI, Send/Receive) per family."""

    CODE: ClassVar[int] = CapabilityCode.ADD_PATH
    families: tuple[AddPathFamily, ...]

    def pack_value(self) -> bytes:
        return b"".join(
            struct.pack("!HBB", f.family.afi, f.family.safi, f.mode) for f in self.families
        )

    @classmethod
    def unpack_value(cls, data: bytes) -> AddPath:
        if len(data) % 4:
            raise _malformed(f"ADD-PATH capability of length {len(data)}")
        fams = []
        for afi, safi, mode in struct.iter_unpack("!HBB", data):
            if mode not in (1, 2, 3):
                # §4: any other value: treat the capability as not understood (ignore it).
                return cls(())
            fams.append(AddPathFamily(Family(afi, safi), AddPathMode(mode)))
        return cls(tuple(fams))

    def mode(self, family: Family) -> AddPathMode:
        """What this speaker said about ``family`` (OFF when it did not mention it)."""
        for f in self.families:
            if f.family == family:
                return f.mode
        return AddPathMode.OFF


@dataclass(frozen=True, slots=True)
class UnknownCapability:
    code: int
    value: bytes

    def pack_value(self) -> bytes:
        return self.value


Capability: TypeAlias = (
    Multiprotocol
    | RouteRefresh
    | EnhancedRouteRefresh
    | FourOctetAS
    | GracefulRestart
    | AddPath
    | UnknownCapability
)

CAPABILITIES: Mapping[int, Callable[[bytes], Capability]] = MappingProxyType(
    {
        cls.CODE: cls.unpack_value
        for cls in (
            Multiprotocol,
            RouteRefresh,
            EnhancedRouteRefresh,
            FourOctetAS,
            GracefulRestart,
            AddPath,
        )
    }
)


def capability_code(cap: Capability) -> int:
    return cap.code if isinstance(cap, UnknownCapability) else cap.CODE


def pack_capability(cap: Capability) -> bytes:
    value = cap.pack_value()
    if len(value) > 255:
        raise ValueError(f"capability {capability_code(cap)} value is {len(value)} bytes")
    return bytes((capability_code(cap), len(value))) + value


def unpack_capabilities(data: bytes) -> list[Capability]:
    """The capabilities of one Capabilities optional parameter (RFC 5492 §4)."""
    out: list[Capability] = []
    pos = 0
    while pos < len(data):
        if pos + 2 > len(data):
            raise _malformed("truncated capability header")
        code, length = data[pos], data[pos + 1]
        value = data[pos + 2 : pos + 2 + length]
        if len(value) != length:
            raise _malformed(f"capability {code} overruns its parameter")
        pos += 2 + length
        unpack = CAPABILITIES.get(code)
        out.append(unpack(value) if unpack else UnknownCapability(code, value))
    return out
