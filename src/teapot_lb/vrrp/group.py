"""What VIP mode renders from: one :class:`VipGroup` per Service and VIP advertisement (pure).

A group is validated when built (:class:`InvalidVipGroup` says which field is wrong);
:mod:`teapot_lb.vrrp.instances` groups them into VRRP instances and
:mod:`teapot_lb.vrrp.render` writes one node's keepalived.conf from them.
"""

from __future__ import annotations

import enum
import ipaddress
import math
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

VRID_MIN = 1
VRID_MAX = 255
# VRRPv3 carries the advertisement interval in centiseconds in 12 bits.
ADVERT_CENTIS_MIN = 1
ADVERT_CENTIS_MAX = 4095
DEFAULT_ADVERT_INTERVAL_S = 0.1


class Family(enum.IntEnum):
    V4 = 4
    V6 = 6


class VipConfigError(ValueError):
    """A VIP-mode configuration problem the operator can act on; ``groups`` names the VIP
    groups it concerns (their VIPs are reported as not run here)."""

    groups: tuple[str, ...] = ()


class InvalidVipGroup(VipConfigError):
    def __init__(self, group: str, field_name: str, problem: str) -> None:
        self.group = group
        self.groups = (group,)
        self.field_name = field_name
        self.problem = problem
        super().__init__(f"VIP group {group!r}: field {field_name!r}: {problem}")


@dataclass(frozen=True)
class VipGroup:
    """The VIPs of one Service under one VIP advertisement, as the renderer needs them.

    ``candidate_nodes`` are the nodes allowed to hold the VIPs (node selectors and
    exclusions applied). For ``local_traffic_policy`` Services these are still all
    eligible nodes; which of them have ready endpoints is runtime state written to
    the instance's track file (:attr:`InstancePlan.track_file`), not configuration.
    """

    name: str
    interface: str
    vips: tuple[IPAddress, ...]
    candidate_nodes: tuple[str, ...]
    advert_interval_s: float = DEFAULT_ADVERT_INTERVAL_S
    vrid_range: tuple[int, int] = (VRID_MIN, VRID_MAX)
    unicast: bool = False
    vrid: int | None = None
    local_traffic_policy: bool = False
    preempt: bool = True

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() or c in '"{}' for c in self.name):
            raise InvalidVipGroup(self.name, "name", "must be non-empty, without spaces or quotes")
        if not self.interface or any(c.isspace() or c in '/"{}' for c in self.interface):
            raise InvalidVipGroup(self.name, "interface", f"invalid name {self.interface!r}")
        if not self.vips:
            raise InvalidVipGroup(self.name, "vips", "at least one address is required")
        if len({type(v) for v in self.vips}) > 1:
            raise InvalidVipGroup(self.name, "vips", "mixes IPv4 and IPv6; use one group each")
        if not self.candidate_nodes:
            raise InvalidVipGroup(self.name, "candidate_nodes", "no candidate node")
        if any(not n or any(c.isspace() or c in '/,"{}' for c in n) for n in self.candidate_nodes):
            raise InvalidVipGroup(
                self.name, "candidate_nodes", "node names must be non-empty DNS-style names"
            )
        centis = self.advert_interval_s * 100
        if not (
            ADVERT_CENTIS_MIN <= round(centis) <= ADVERT_CENTIS_MAX
            and math.isclose(centis, round(centis), abs_tol=1e-6)
        ):
            raise InvalidVipGroup(
                self.name,
                "advert_interval_s",
                f"{self.advert_interval_s} is not a multiple of 0.01 s in 0.01-40.95 s (VRRPv3)",
            )
        lo, hi = self.vrid_range
        if not VRID_MIN <= lo <= hi <= VRID_MAX:
            raise InvalidVipGroup(
                self.name, "vrid_range", f"{lo}-{hi} is not a range within {VRID_MIN}-{VRID_MAX}"
            )
        if self.vrid is not None and not VRID_MIN <= self.vrid <= VRID_MAX:
            raise InvalidVipGroup(self.name, "vrid", f"{self.vrid} is not in 1-255")

    @property
    def family(self) -> Family:
        return Family.V6 if self.vips[0].version == 6 else Family.V4

    @property
    def advert_centis(self) -> int:
        return round(self.advert_interval_s * 100)
