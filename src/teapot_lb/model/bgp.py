"""BGPPeer and BGPAdvertisement: whom nodes speak BGP to, and what they announce."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from teapot_lb.model.common import (
    ConditionsStatus,
    Duration,
    Identified,
    InterfaceName,
    IPAddressField,
    KubeModel,
    LabelSelector,
    ObjectMeta,
    none_as_empty,
    parse_duration,
)
from teapot_lb.model.pool import PoolSelection

MAX_ASN = 4294967295
AS_TRANS = 23456  # RFC 6793 §9: stands in for a 4-byte ASN towards old speakers.


def check_asn(asn: int) -> int:
    """A usable 4-byte AS number; ValueError names the RFC that reserves it otherwise."""
    if asn == 0:
        raise ValueError("AS 0 is reserved and may not be used (RFC 7607)")
    if asn == AS_TRANS:
        raise ValueError("AS 23456 is AS_TRANS, reserved for 2-byte compatibility (RFC 6793)")
    if asn in (65535, MAX_ASN):
        raise ValueError(f"AS {asn} is reserved (RFC 7300)")
    if not 0 < asn <= MAX_ASN:
        raise ValueError(f"AS {asn} is out of range; AS numbers are 1-{MAX_ASN}")
    return asn


ASN = Annotated[
    int,
    AfterValidator(check_asn),
    WithJsonSchema({"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ASN}),
]

# RFC 1997, 3765, 7611, 7999, 8326 and the LLGR draft (RFC 9494): well-known communities.
WELL_KNOWN_COMMUNITIES: dict[str, int] = {
    "graceful-shutdown": 0xFFFF0000,
    "accept-own": 0xFFFF0001,
    "llgr-stale": 0xFFFF0006,
    "no-llgr": 0xFFFF0007,
    "blackhole": 0xFFFF029A,
    "no-export": 0xFFFFFF01,
    "no-advertise": 0xFFFFFF02,
    "no-export-subconfed": 0xFFFFFF03,
    "no-peer": 0xFFFFFF04,
}

_COMMUNITY_RE = re.compile(r"^(\d+):(\d+)$")
_LARGE_COMMUNITY_RE = re.compile(r"^(\d+):(\d+):(\d+)$")


def parse_community(text: str) -> int:
    """A standard community (RFC 1997) as its 32-bit value: `65000:100` or a well-known name."""
    named = WELL_KNOWN_COMMUNITIES.get(text.lower())
    if named is not None:
        return named
    if _LARGE_COMMUNITY_RE.match(text):
        raise ValueError(f"{text!r} is a large community; list it under largeCommunities")
    match = _COMMUNITY_RE.match(text)
    if not match:
        names = ", ".join(WELL_KNOWN_COMMUNITIES)
        raise ValueError(
            f"{text!r} is not a community; write ASN:value (65000:100) or one of {names}"
        )
    high, low = int(match[1]), int(match[2])
    if high > 0xFFFF or low > 0xFFFF:
        raise ValueError(f"{text!r}: both halves of a standard community must be 0-65535")
    return high << 16 | low


def parse_large_community(text: str) -> tuple[int, int, int]:
    """A large community (RFC 8092) `global:local1:local2`, each part 0-4294967295."""
    match = _LARGE_COMMUNITY_RE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a large community; write a:b:c (64512:1:2)")
    parts = (int(match[1]), int(match[2]), int(match[3]))
    if any(p > MAX_ASN for p in parts):
        raise ValueError(f"{text!r}: each part of a large community must be 0-{MAX_ASN}")
    return parts


def _check_community(text: str) -> str:
    parse_community(text)
    return text


def _check_large_community(text: str) -> str:
    parse_large_community(text)
    return text


Community = Annotated[
    str,
    AfterValidator(_check_community),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 32}),
]
LargeCommunity = Annotated[
    str,
    AfterValidator(_check_large_community),
    WithJsonSchema({"type": "string", "pattern": r"^[0-9]+:[0-9]+:[0-9]+$", "maxLength": 32}),
]


class AddressFamily(StrEnum):
    IPV4_UNICAST = "ipv4-unicast"
    IPV6_UNICAST = "ipv6-unicast"


class AddPathSetting(StrEnum):
    """ADD-PATH (RFC 7911) on a session: which way several paths per prefix may go."""

    OFF = "off"
    SEND = "send"
    RECEIVE = "receive"
    BOTH = "both"


class DynamicASN(StrEnum):
    INTERNAL = "internal"
    EXTERNAL = "external"


class SecretReference(KubeModel):
    """A Secret holding the TCP-MD5 password under the key `password`."""

    name: str = Field(min_length=1, max_length=253)
    """Secret name."""
    namespace: str | None = None
    """Secret namespace; defaults to the BGPPeer's."""


class BGPPeerSpec(KubeModel):
    """One BGP session per selected node to a router."""

    my_asn: ASN = Field(alias="myASN")
    """The AS number nodes use for this session."""
    peer_asn: ASN | None = Field(default=None, alias="peerASN")
    """The router's AS number (or set dynamicASN)."""
    dynamic_asn: DynamicASN | None = Field(default=None, alias="dynamicASN")
    """Accept whatever ASN the router sends: internal (same as myASN) or external."""
    peer_address: IPAddressField | None = None
    """The router's address (or set interface for unnumbered BGP)."""
    interface: InterfaceName | None = None
    """Unnumbered BGP over this interface (reserved: not implemented yet)."""
    source_address: IPAddressField | None = None
    """Local address the session is opened from; same family as peerAddress."""
    peer_port: int = Field(default=179, ge=1, le=65535)
    """TCP port of the router."""
    hold_time: Duration | None = None
    """Proposed hold time: 0 or at least 3s (RFC 4271 §4.2), whole seconds. Default 90s."""
    keepalive_time: Duration | None = None
    """Keepalive interval. Default: a third of the negotiated hold time, which is also the
    most it can be (RFC 4271 §10): a longer value is lowered to it (and logged)."""
    connect_time: Duration | None = None
    """Fixed time between connection attempts (ConnectRetryTimer, RFC 4271 §8), at least 1s.
    Default: 2s, doubling after each failed attempt up to 60s."""
    router_id: IPAddressField | None = Field(default=None, alias="routerID")
    """BGP identifier (IPv4 dotted quad); defaults to the node's IPv4 address."""
    node_selectors: list[LabelSelector] = []
    """Nodes that peer with this router; empty means all nodes."""
    password: str | None = Field(default=None, min_length=1, max_length=80)
    """TCP-MD5 password (RFC 2385), in clear; prefer passwordSecret."""
    password_secret: SecretReference | None = None
    """Secret holding the TCP-MD5 password."""
    ebgp_multi_hop: bool = False
    """Allow an eBGP router that is not directly connected (TTL 255)."""
    enable_graceful_restart: bool = False
    """Advertise the Graceful Restart capability (RFC 4724)."""
    bfd_profile: str | None = Field(default=None, min_length=1, max_length=253)
    """Name of a BFDProfile in this namespace: run BFD (RFC 5880) on the session, which goes
    down as soon as BFD detects the router gone. Default: no BFD."""
    vrf: InterfaceName | None = None
    """Open the session in this VRF (reserved: not implemented yet)."""
    families: list[AddressFamily] = []
    """Address families to offer (RFC 4760); empty offers both IPv4 and IPv6 unicast. IPv6
    routes over an IPv4 session use the node's IPv6 InternalIP as next hop."""
    add_path: AddPathSetting = AddPathSetting.OFF
    """ADD-PATH (RFC 7911) for the offered families: `send` lets the router have every path
    of a prefix (one per next hop, for ECMP), where it answers `receive`; `off`: one path
    per prefix."""


class BGPPeer(Identified, KubeModel):
    """A BGP router the nodes peer with."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["BGPPeer"] = "BGPPeer"
    metadata: ObjectMeta
    spec: BGPPeerSpec
    status: ConditionsStatus | None = None

    def hold_time_seconds(self) -> float:
        spec = self.spec
        return 90.0 if spec.hold_time is None else parse_duration(spec.hold_time)

    def keepalive_time_seconds(self) -> float:
        spec = self.spec
        if spec.keepalive_time is not None:
            return parse_duration(spec.keepalive_time)
        return self.hold_time_seconds() / 3

    def connect_time_seconds(self) -> float:
        """connectTime, else 120s (MetalLB's figure). The speaker does not use the fallback:
        without connectTime it backs off from 2s to 60s (see connectTime)."""
        spec = self.spec
        return 120.0 if spec.connect_time is None else parse_duration(spec.connect_time)

    def is_ibgp(self) -> bool:
        spec = self.spec
        if spec.dynamic_asn is not None:
            return spec.dynamic_asn is DynamicASN.INTERNAL
        return spec.peer_asn == spec.my_asn


class BGPAdvertisementSpec(PoolSelection):
    """How the selected pools' addresses are announced over BGP."""

    peers: list[str] = []
    """Names of BGPPeers to announce to; empty means all peers of the node."""
    aggregation_length: int | None = Field(default=None, ge=0, le=32)
    """Prefix length announced for IPv4 addresses (default 32); not shorter than the pool's."""
    aggregation_length_v6: int | None = Field(default=None, ge=0, le=128)
    """Prefix length announced for IPv6 addresses (default 128); not shorter than the pool's."""
    local_pref: int | None = Field(default=None, ge=0, le=4294967295)
    """LOCAL_PREF attribute (iBGP sessions only)."""
    communities: list[Community] = []
    """Standard communities: 65000:100 or well-known names such as no-export."""
    large_communities: list[LargeCommunity] = []
    """Large communities (RFC 8092): 64512:1:2."""


class BGPAdvertisement(Identified, KubeModel):
    """Announce pools' addresses over BGP, with path attributes."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["BGPAdvertisement"] = "BGPAdvertisement"
    metadata: ObjectMeta
    spec: Annotated[BGPAdvertisementSpec, BeforeValidator(none_as_empty)] = Field(
        default_factory=BGPAdvertisementSpec
    )
    status: ConditionsStatus | None = None
