"""VIPAdvertisement: keepalived (VRRPv3) instances on the nodes elect who holds each address."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from teapot_lb.model.common import (
    ConditionsStatus,
    Duration,
    Identified,
    InterfaceName,
    KubeModel,
    ObjectMeta,
    none_as_empty,
    parse_duration,
)
from teapot_lb.model.pool import PoolSelection

# What the speaker renders when advertisementInterval is unset (vrrp.group has the same
# value; tests/model/test_kinds.py keeps the two equal).
DEFAULT_ADVERT_INTERVAL_S = 0.1


class VRIDRange(KubeModel):
    """Inclusive range of VRRP router IDs (RFC 5798 §5.2.3: 1-255) this advertisement may use."""

    start: int = Field(ge=1, le=255)
    """First VRID."""
    end: int = Field(ge=1, le=255)
    """Last VRID (not below start)."""

    def __contains__(self, vrid: object) -> bool:
        return isinstance(vrid, int) and self.start <= vrid <= self.end

    @property
    def size(self) -> int:
        return self.end - self.start + 1


class VIPAdvertisementSpec(PoolSelection):
    """How keepalived announces the selected pools' addresses."""

    interface: InterfaceName | None = None
    """Interface the VRRP instances run on; default: the one whose subnet holds the address."""
    advertisement_interval: Duration | None = None
    """VRRP advertisement interval, 10ms-40.95s in 10ms steps (RFC 5798 §5.2.7). Default 100ms."""
    vrid_range: VRIDRange | None = Field(default=None, alias="vridRange")
    """VRIDs to use; must not overlap another VIPAdvertisement on the same link. Default 1-255."""
    unicast_peers: bool = False
    """Send VRRP advertisements by unicast to the other selected nodes instead of multicast."""


class VIPAdvertisement(Identified, KubeModel):
    """Announce pools' addresses as keepalived virtual IPs."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["VIPAdvertisement"] = "VIPAdvertisement"
    metadata: ObjectMeta
    spec: Annotated[VIPAdvertisementSpec, BeforeValidator(none_as_empty)] = Field(
        default_factory=VIPAdvertisementSpec
    )
    status: ConditionsStatus | None = None

    def vrids(self) -> range:
        rng = self.spec.vrid_range
        return range(1, 256) if rng is None else range(rng.start, rng.end + 1)

    def advertisement_interval_seconds(self) -> float:
        interval = self.spec.advertisement_interval
        return DEFAULT_ADVERT_INTERVAL_S if interval is None else parse_duration(interval)
