"""The BFD control packet (RFC 5880 §4.1), sans I/O.

:func:`decode` never raises: garbage gives a :class:`Malformed` with the §6.8.6 rule it
broke, so the adapter can count and log it and the session never sees it. Intervals are
in microseconds, as on the wire.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

VERSION = 1
HEADER_LENGTH = 24  # without an authentication section
_HEADER = struct.Struct("!BBBBIIIII")
_FLAG_POLL = 0x20
_FLAG_FINAL = 0x10
_FLAG_CPI = 0x08
_FLAG_AUTH = 0x04
_FLAG_DEMAND = 0x02
_FLAG_MULTIPOINT = 0x01
U32_MAX = 0xFFFFFFFF


class State(enum.IntEnum):
    """bfd.SessionState (§4.1 "Sta")."""

    ADMIN_DOWN = 0
    DOWN = 1
    INIT = 2
    UP = 3


class Diagnostic(enum.IntEnum):
    """bfd.LocalDiag (§4.1 "Diag"): why the session last left Up."""

    NONE = 0
    CONTROL_DETECTION_TIME_EXPIRED = 1
    ECHO_FUNCTION_FAILED = 2
    NEIGHBOR_SIGNALED_SESSION_DOWN = 3
    FORWARDING_PLANE_RESET = 4
    PATH_DOWN = 5
    CONCATENATED_PATH_DOWN = 6
    ADMINISTRATIVELY_DOWN = 7
    REVERSE_CONCATENATED_PATH_DOWN = 8


_DIAGNOSTICS = frozenset(int(d) for d in Diagnostic)


@dataclass(frozen=True, slots=True)
class ControlPacket:
    """One BFD control packet; ``auth`` is the raw authentication section, if any."""

    state: State
    my_discriminator: int
    your_discriminator: int
    desired_min_tx: int  # µs
    required_min_rx: int  # µs
    detect_mult: int
    diagnostic: Diagnostic | int = Diagnostic.NONE
    poll: bool = False
    final: bool = False
    control_plane_independent: bool = False
    demand: bool = False
    required_min_echo_rx: int = 0  # µs; we have no echo function
    auth: bytes | None = None


class MalformedReason(enum.Enum):
    """Which reception check of RFC 5880 §6.8.6 (or of the format, §4.1) failed."""

    TRUNCATED = "shorter than the mandatory section"
    BAD_VERSION = "version is not 1"
    BAD_LENGTH = "length field below the minimum or beyond the payload"
    ZERO_DETECT_MULT = "detect mult is zero"
    MULTIPOINT = "multipoint bit set"
    ZERO_MY_DISCRIMINATOR = "my discriminator is zero"
    ZERO_YOUR_DISCRIMINATOR = "your discriminator is zero outside Down and AdminDown"
    BAD_AUTH_SECTION = "authentication section length inconsistent"
    POLL_AND_FINAL = "both poll and final bits set"


@dataclass(frozen=True, slots=True)
class Malformed:
    """A packet to discard, and why."""

    reason: MalformedReason
    detail: str = ""


def encode(packet: ControlPacket) -> bytes:
    """The packet on the wire (§4.1). Fields must fit their widths."""
    flags = (
        packet.state << 6
        | (_FLAG_POLL if packet.poll else 0)
        | (_FLAG_FINAL if packet.final else 0)
        | (_FLAG_CPI if packet.control_plane_independent else 0)
        | (_FLAG_AUTH if packet.auth is not None else 0)
        | (_FLAG_DEMAND if packet.demand else 0)
    )
    auth = packet.auth or b""
    return (
        _HEADER.pack(
            VERSION << 5 | packet.diagnostic,
            flags,
            packet.detect_mult,
            HEADER_LENGTH + len(auth),
            packet.my_discriminator,
            packet.your_discriminator,
            packet.desired_min_tx,
            packet.required_min_rx,
            packet.required_min_echo_rx,
        )
        + auth
    )


def decode(data: bytes) -> ControlPacket | Malformed:
    """The packet in ``data``, or why it must be discarded (§6.8.6, format checks)."""
    if len(data) < HEADER_LENGTH:
        return Malformed(MalformedReason.TRUNCATED, f"{len(data)} bytes")
    vers_diag, flags, mult, length, my, your, tx, rx, echo = _HEADER.unpack_from(data)
    if vers_diag >> 5 != VERSION:
        return Malformed(MalformedReason.BAD_VERSION, f"version {vers_diag >> 5}")
    has_auth = bool(flags & _FLAG_AUTH)
    if length < HEADER_LENGTH + (2 if has_auth else 0) or length > len(data):
        return Malformed(MalformedReason.BAD_LENGTH, f"length {length}, payload {len(data)}")
    if mult == 0:
        return Malformed(MalformedReason.ZERO_DETECT_MULT)
    if flags & _FLAG_MULTIPOINT:
        return Malformed(MalformedReason.MULTIPOINT)
    if my == 0:
        return Malformed(MalformedReason.ZERO_MY_DISCRIMINATOR)
    state = State(flags >> 6)
    if your == 0 and state not in (State.DOWN, State.ADMIN_DOWN):
        return Malformed(MalformedReason.ZERO_YOUR_DISCRIMINATOR, state.name)
    if flags & _FLAG_POLL and flags & _FLAG_FINAL:
        return Malformed(MalformedReason.POLL_AND_FINAL)
    code = vers_diag & 0x1F
    # Codes 9-31 are reserved: kept as numbers, never a reason to discard.
    diagnostic: Diagnostic | int = Diagnostic(code) if code in _DIAGNOSTICS else code
    auth: bytes | None = None
    if has_auth:
        auth = bytes(data[HEADER_LENGTH:length])
        if auth[1] != len(auth):  # Auth Len covers the whole section (§4.2)
            return Malformed(MalformedReason.BAD_AUTH_SECTION, f"auth len {auth[1]}")
    return ControlPacket(
        state=state,
        my_discriminator=my,
        your_discriminator=your,
        desired_min_tx=tx,
        required_min_rx=rx,
        detect_mult=mult,
        diagnostic=diagnostic,
        poll=bool(flags & _FLAG_POLL),
        final=bool(flags & _FLAG_FINAL),
        control_plane_independent=bool(flags & _FLAG_CPI),
        demand=bool(flags & _FLAG_DEMAND),
        required_min_echo_rx=echo,
        auth=auth,
    )
