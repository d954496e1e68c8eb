"""What the IPAM is asked: one Service's needs, and what a Service already holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from teapot_lb.addresses import IPAddress as IPAddress
from teapot_lb.addresses import IPFamily as IPFamily
from teapot_lb.addresses import IPFamilyPolicy as IPFamilyPolicy

# (protocol, port), e.g. ("TCP", 443). Two Services sharing an IP must not both use one.
Port = tuple[str, int]

_EMPTY: Mapping[str, str] = MappingProxyType({})


def _no_labels() -> Mapping[str, str]:
    return _EMPTY


class TrafficPolicy(StrEnum):
    """`Service.spec.externalTrafficPolicy`."""

    CLUSTER = "Cluster"
    LOCAL = "Local"


@dataclass(frozen=True, slots=True)
class ServiceRequest:
    """Everything about one LoadBalancer Service that decides which IPs it may get.

    `labels` are the Service's own labels (for pools' serviceSelectors),
    `namespace_labels` those of its namespace (for namespaceSelectors), `selector` its pod
    selector (two `Local` Services may share an IP only when they select the same pods).
    `requested_ips` come from `lb.teapot.io/ips` or `spec.loadBalancerIP`,
    `requested_pool` from `lb.teapot.io/pool`, `sharing_key` from `lb.teapot.io/sharing-key`.
    """

    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=_no_labels)
    namespace_labels: Mapping[str, str] = field(default_factory=_no_labels)
    ip_family_policy: IPFamilyPolicy = IPFamilyPolicy.SINGLE_STACK
    ip_families: tuple[IPFamily, ...] = (IPFamily.V4,)
    requested_ips: tuple[IPAddress, ...] = ()
    requested_pool: str | None = None
    sharing_key: str | None = None
    ports: frozenset[Port] = frozenset()
    external_traffic_policy: TrafficPolicy = TrafficPolicy.CLUSTER
    selector: Mapping[str, str] = field(default_factory=_no_labels)
    # `namespace/name`; a caller holding that string already (a Store's key) passes it, so
    # that 100k requests do not each hold a copy.
    key: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def families(self) -> tuple[IPFamily, ...]:
        """The families this Service wants, primary first (dual-stack: both)."""
        primary = self.ip_families[0] if self.ip_families else IPFamily.V4
        if self.ip_family_policy is IPFamilyPolicy.SINGLE_STACK:
            return (primary,)
        return (primary, primary.other)


@dataclass(frozen=True, slots=True)
class Holding:
    """What a Service already holds (its `status.loadBalancer.ingress`), for rebuilds."""

    request: ServiceRequest
    ips: tuple[IPAddress, ...]
