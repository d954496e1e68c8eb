"""BGP-4 wire codec: typed frozen dataclasses with ``pack`` / ``unpack`` (no I/O).

Messages: :class:`Open`, :class:`Update`, :class:`Notification`, :class:`Keepalive`,
:class:`RouteRefreshMessage`; framing with :class:`MessageReader` and
:func:`decode_message`. Every decoding failure raises :class:`CodecError` carrying
the NOTIFICATION (code, subcode, data) the RFCs require.
"""

from .aspath import (
    Aggregator,
    As4Aggregator,
    As4Path,
    AsPath,
    Segment,
    SegmentType,
    merge_as4_path,
)
from .attribute import (
    DEFAULT_CONTEXT,
    Attribute,
    AttrType,
    Context,
    ErrorAction,
    UnknownAttribute,
    pack_attribute,
)
from .capability import (
    AS_TRANS,
    Capability,
    CapabilityCode,
    EnhancedRouteRefresh,
    FourOctetAS,
    GracefulRestart,
    GracefulRestartFamily,
    Multiprotocol,
    RouteRefresh,
    UnknownCapability,
)
from .community import (
    BLACKHOLE,
    GRACEFUL_SHUTDOWN,
    NO_ADVERTISE,
    NO_EXPORT,
    Communities,
    ExtendedCommunities,
    LargeCommunities,
    LargeCommunity,
    community,
    format_community,
)
from .errors import (
    CeaseSubcode,
    CodecError,
    ErrorCode,
    FsmSubcode,
    HeaderSubcode,
    OpenSubcode,
    RouteRefreshSubcode,
    UpdateSubcode,
    describe_error,
)
from .family import AFI, IPV4_UNICAST, IPV6_UNICAST, SAFI, Address, Family, Prefix, family_of
from .header import MAX_MESSAGE_LENGTH, MessageReader, MessageType, frame
from .keepalive import KEEPALIVE_BYTES, Keepalive
from .message import Message, decode_message, decode_stream
from .mp import MpReachNlri, MpUnreachNlri
from .nlri import pack_prefix, pack_prefixes, unpack_prefixes
from .notification import Notification
from .open import Open
from .path import AtomicAggregate, LocalPref, MultiExitDisc, NextHop, Origin, OriginCode
from .route_refresh import RefreshSubtype, RouteRefreshMessage
from .update import ATTRIBUTES, UPDATE_ROOM, Update, pack_update

__all__ = [
    "AFI",
    "AS_TRANS",
    "ATTRIBUTES",
    "BLACKHOLE",
    "DEFAULT_CONTEXT",
    "GRACEFUL_SHUTDOWN",
    "IPV4_UNICAST",
    "IPV6_UNICAST",
    "KEEPALIVE_BYTES",
    "MAX_MESSAGE_LENGTH",
    "NO_ADVERTISE",
    "NO_EXPORT",
    "SAFI",
    "UPDATE_ROOM",
    "Address",
    "Aggregator",
    "As4Aggregator",
    "As4Path",
    "AsPath",
    "AtomicAggregate",
    "AttrType",
    "Attribute",
    "Capability",
    "CapabilityCode",
    "CeaseSubcode",
    "CodecError",
    "Communities",
    "Context",
    "EnhancedRouteRefresh",
    "ErrorAction",
    "ErrorCode",
    "ExtendedCommunities",
    "Family",
    "FourOctetAS",
    "FsmSubcode",
    "GracefulRestart",
    "GracefulRestartFamily",
    "HeaderSubcode",
    "Keepalive",
    "LargeCommunities",
    "LargeCommunity",
    "LocalPref",
    "Message",
    "MessageReader",
    "MessageType",
    "MpReachNlri",
    "MpUnreachNlri",
    "MultiExitDisc",
    "Multiprotocol",
    "NextHop",
    "Notification",
    "Open",
    "OpenSubcode",
    "Origin",
    "OriginCode",
    "Prefix",
    "RefreshSubtype",
    "RouteRefresh",
    "RouteRefreshMessage",
    "RouteRefreshSubcode",
    "Segment",
    "SegmentType",
    "UnknownAttribute",
    "UnknownCapability",
    "Update",
    "UpdateSubcode",
    "community",
    "decode_message",
    "decode_stream",
    "describe_error",
    "family_of",
    "format_community",
    "frame",
    "merge_as4_path",
    "pack_attribute",
    "pack_prefix",
    "pack_prefixes",
    "pack_update",
    "unpack_prefixes",
]
