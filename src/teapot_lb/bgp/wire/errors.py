"""NOTIFICATION codes (RFC 4271 §4.5, RFC 4486, RFC 6608, RFC 7313) and the codec's one error.

Every decoding failure raises :class:`CodecError`, which carries the (code, subcode, data)
of the NOTIFICATION the RFCs require, so the state machine never has to guess.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    MESSAGE_HEADER = 1
    OPEN_MESSAGE = 2
    UPDATE_MESSAGE = 3
    HOLD_TIMER_EXPIRED = 4
    FSM = 5
    CEASE = 6
    ROUTE_REFRESH = 7  # RFC 7313


class HeaderSubcode(enum.IntEnum):
    UNSPECIFIC = 0
    CONNECTION_NOT_SYNCHRONIZED = 1
    BAD_MESSAGE_LENGTH = 2
    BAD_MESSAGE_TYPE = 3


class OpenSubcode(enum.IntEnum):
    UNSPECIFIC = 0
    UNSUPPORTED_VERSION_NUMBER = 1
    BAD_PEER_AS = 2
    BAD_BGP_IDENTIFIER = 3
    UNSUPPORTED_OPTIONAL_PARAMETER = 4
    AUTHENTICATION_FAILURE = 5  # deprecated by RFC 4271
    UNACCEPTABLE_HOLD_TIME = 6
    UNSUPPORTED_CAPABILITY = 7  # RFC 5492
    ROLE_MISMATCH = 11  # RFC 9234


class UpdateSubcode(enum.IntEnum):
    UNSPECIFIC = 0
    MALFORMED_ATTRIBUTE_LIST = 1
    UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE = 2
    MISSING_WELL_KNOWN_ATTRIBUTE = 3
    ATTRIBUTE_FLAGS_ERROR = 4
    ATTRIBUTE_LENGTH_ERROR = 5
    INVALID_ORIGIN_ATTRIBUTE = 6
    AS_ROUTING_LOOP = 7  # deprecated by RFC 4271
    INVALID_NEXT_HOP_ATTRIBUTE = 8
    OPTIONAL_ATTRIBUTE_ERROR = 9
    INVALID_NETWORK_FIELD = 10
    MALFORMED_AS_PATH = 11


class FsmSubcode(enum.IntEnum):  # RFC 6608
    UNSPECIFIED = 0
    UNEXPECTED_MESSAGE_IN_OPENSENT = 1
    UNEXPECTED_MESSAGE_IN_OPENCONFIRM = 2
    UNEXPECTED_MESSAGE_IN_ESTABLISHED = 3


class CeaseSubcode(enum.IntEnum):  # RFC 4486, RFC 8538
    UNSPECIFIC = 0
    MAXIMUM_PREFIXES_REACHED = 1
    ADMINISTRATIVE_SHUTDOWN = 2
    PEER_DECONFIGURED = 3
    ADMINISTRATIVE_RESET = 4
    CONNECTION_REJECTED = 5
    OTHER_CONFIGURATION_CHANGE = 6
    CONNECTION_COLLISION_RESOLUTION = 7
    OUT_OF_RESOURCES = 8
    HARD_RESET = 9
    BFD_DOWN = 10  # RFC 9384


class RouteRefreshSubcode(enum.IntEnum):  # RFC 7313
    RESERVED = 0
    INVALID_MESSAGE_LENGTH = 1


_SUBCODES: dict[int, type[enum.IntEnum]] = {
    ErrorCode.MESSAGE_HEADER: HeaderSubcode,
    ErrorCode.OPEN_MESSAGE: OpenSubcode,
    ErrorCode.UPDATE_MESSAGE: UpdateSubcode,
    ErrorCode.FSM: FsmSubcode,
    ErrorCode.CEASE: CeaseSubcode,
    ErrorCode.ROUTE_REFRESH: RouteRefreshSubcode,
}

_CODE_NAMES = {
    ErrorCode.MESSAGE_HEADER: "Message Header Error",
    ErrorCode.OPEN_MESSAGE: "OPEN Message Error",
    ErrorCode.UPDATE_MESSAGE: "UPDATE Message Error",
    ErrorCode.HOLD_TIMER_EXPIRED: "Hold Timer Expired",
    ErrorCode.FSM: "Finite State Machine Error",
    ErrorCode.CEASE: "Cease",
    ErrorCode.ROUTE_REFRESH: "ROUTE-REFRESH Message Error",
}


def describe_error(code: int, subcode: int) -> str:
    """Human text for a NOTIFICATION code pair, e.g. ``OPEN Message Error/Bad Peer AS``."""
    try:
        name = _CODE_NAMES[ErrorCode(code)]
    except ValueError:
        return f"unknown error code {code}/{subcode}"
    subs = _SUBCODES.get(code)
    if subs is None:
        return name if subcode == 0 else f"{name}/{subcode}"
    try:
        sub = subs(subcode).name.replace("_", " ").title().replace("As", "AS")
    except ValueError:
        sub = f"subcode {subcode}"
    return f"{name}/{sub.replace('Bgp', 'BGP').replace('Nlri', 'NLRI')}"


class CodecError(Exception):
    """A message could not be decoded; carries the NOTIFICATION the RFC requires."""

    def __init__(self, code: int, subcode: int, data: bytes = b"", reason: str = "") -> None:
        self.code = int(code)
        self.subcode = int(subcode)
        self.data = bytes(data)
        self.reason = reason
        text = describe_error(self.code, self.subcode)
        super().__init__(f"{text}: {reason}" if reason else text)
