"""BFDProfile: how fast BFD (RFC 5880) detects that a BGP router is gone, named by BGPPeers.

Field names and semantics follow MetalLB's BFDProfile, so that its profiles read the same
here; echo mode is the exception (not implemented, so refused by validation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from teapot_lb.model.common import (
    ConditionsStatus,
    Identified,
    KubeModel,
    ObjectMeta,
    none_as_empty,
)

# RFC 5881 §5: a single-hop session accepts only packets sent with TTL 255 (GTSM, RFC 5082).
SINGLE_HOP_TTL = 255

IntervalMs = Annotated[int, Field(ge=10, le=60000)]


class BFDProfileSpec(KubeModel):
    """BFD timers and modes of the sessions of the BGPPeers that name this profile."""

    receive_interval: IntervalMs = 300
    """Shortest interval, in milliseconds, at which this node can receive BFD control
    packets (Required Min RX Interval, RFC 5880 §6.8.1), 10-60000."""
    transmit_interval: IntervalMs = 300
    """Shortest interval, in milliseconds, at which this node wants to send BFD control
    packets (Desired Min TX Interval, RFC 5880 §6.8.1), 10-60000. The interval used is the
    slower of this and the router's receive interval."""
    detect_multiplier: int = Field(default=3, ge=2, le=255)
    """Missed packets before the session is down (Detect Mult, RFC 5880 §6.8.1), 2-255. The
    detection time is about the negotiated interval times this."""
    echo_interval: IntervalMs | None = None
    """Accepted for MetalLB profiles; no effect, since echo mode is not implemented."""
    echo_mode: bool = False
    """Echo function (RFC 5880 §6.4): not implemented; must be false."""
    passive_mode: bool = False
    """Wait for the router to send the first BFD packet instead of starting the session
    (Passive role, RFC 5880 §6.1)."""
    minimum_ttl: int = Field(default=254, ge=1, le=254)
    """Multihop sessions (BGPPeers with ebgpMultiHop) only: the lowest TTL a BFD packet may
    arrive with, 1-254. Single-hop sessions always require 255 (RFC 5881 §5)."""


class BFDProfile(Identified, KubeModel):
    """BFD parameters for the BGP sessions of the BGPPeers whose bfdProfile names it."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["BFDProfile"] = "BFDProfile"
    metadata: ObjectMeta
    spec: Annotated[BFDProfileSpec, BeforeValidator(none_as_empty)] = Field(
        default_factory=BFDProfileSpec
    )
    status: ConditionsStatus | None = None

    def parameters(self, *, multihop: bool) -> BFDParameters:
        """What a BFD session with this profile runs with (multihop: the peer's ebgpMultiHop)."""
        spec = self.spec
        return BFDParameters(
            desired_min_tx_us=spec.transmit_interval * 1000,
            required_min_rx_us=spec.receive_interval * 1000,
            detect_multiplier=spec.detect_multiplier,
            passive=spec.passive_mode,
            minimum_ttl=spec.minimum_ttl if multihop else SINGLE_HOP_TTL,
            multihop=multihop,
        )


@dataclass(frozen=True)
class BFDParameters:
    """A BFD session's settings, resolved from a BFDProfile for one BGPPeer.

    Intervals are in microseconds, as BFD control packets carry them (RFC 5880 §4.1); the
    `*_seconds` properties give them for timers.
    """

    desired_min_tx_us: int
    """Desired Min TX Interval: the profile's transmitInterval."""
    required_min_rx_us: int
    """Required Min RX Interval: the profile's receiveInterval."""
    detect_multiplier: int
    """Detect Mult."""
    passive: bool
    """Do not send until the router has (RFC 5880 §6.1)."""
    minimum_ttl: int
    """Lowest TTL (hop limit) a received packet may have: 255 on a single hop (RFC 5881 §5),
    the profile's minimumTtl on a multihop session (RFC 5883)."""
    multihop: bool
    """A multihop session (RFC 5883, UDP port 4784) rather than single-hop (RFC 5881, 3784):
    the BGPPeer has ebgpMultiHop."""

    @property
    def desired_min_tx_seconds(self) -> float:
        return self.desired_min_tx_us / 1_000_000

    @property
    def required_min_rx_seconds(self) -> float:
        return self.required_min_rx_us / 1_000_000
