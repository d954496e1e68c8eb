"""AddressPool: the addresses LoadBalancer Services may get, and who may get them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PrivateAttr, WithJsonSchema

from teapot_lb.addresses import AddressRange as AddressRange
from teapot_lb.addresses import IPAddress, count_with_low_octet
from teapot_lb.addresses import is_buggy as is_buggy
from teapot_lb.addresses import parse_address_entry as parse_address_entry
from teapot_lb.model.common import (
    Condition,
    Identified,
    KubeModel,
    LabelSelector,
    ObjectMeta,
)


def _check_address_entry(text: str) -> str:
    parse_address_entry(text)
    return text


AddressEntry = Annotated[
    str,
    AfterValidator(_check_address_entry),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 100}),
]


class ServiceAllocation(KubeModel):
    """Which Services may get addresses from the pool, and in which order pools are tried."""

    priority: int | None = Field(default=None, ge=0, le=2147483647)
    """Lower numbers are tried first; pools without a priority come after all that have one."""
    namespaces: list[str] = []
    """Services in these namespaces may use the pool."""
    namespace_selectors: list[LabelSelector] = []
    """Services in namespaces matching any of these selectors may use the pool."""
    service_selectors: list[LabelSelector] = []
    """Only Services matching any of these selectors may use the pool."""


class AddressPoolSpec(KubeModel):
    """The pool's addresses and allocation rules."""

    addresses: list[AddressEntry]
    """CIDRs (192.0.2.0/25, 2001:db8::/120) and inclusive ranges (192.0.2.10-192.0.2.20)."""
    auto_assign: bool = True
    """When false, addresses are only given to Services that ask for this pool or an IP in it."""
    avoid_buggy_ips: bool = Field(default=False, alias="avoidBuggyIPs")
    """Never hand out IPv4 addresses ending in .0 or .255."""
    service_allocation: ServiceAllocation | None = None
    """Limits on which Services may use the pool, and its priority."""


class AddressPoolStatus(KubeModel):
    """Usage of the pool, written by the controller. Counts saturate at 2^63-1."""

    assigned_ipv4: int = Field(default=0, ge=0, alias="assignedIPv4")
    """IPv4 addresses currently assigned to Services."""
    available_ipv4: int = Field(default=0, ge=0, alias="availableIPv4")
    """IPv4 addresses still free."""
    assigned_ipv6: int = Field(default=0, ge=0, alias="assignedIPv6")
    """IPv6 addresses currently assigned to Services."""
    available_ipv6: int = Field(default=0, ge=0, alias="availableIPv6")
    """IPv6 addresses still free."""
    conditions: list[Condition] = []
    """Current conditions (e.g. Valid)."""


class AddressPool(Identified, KubeModel):
    """A pool of addresses for LoadBalancer Services (MetalLB: IPAddressPool)."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["AddressPool"] = "AddressPool"
    metadata: ObjectMeta
    spec: AddressPoolSpec
    status: AddressPoolStatus | None = None

    # Parsed once: the IPAM and validation ask for the ranges for every address they test.
    _ranges: tuple[AddressRange, ...] = PrivateAttr(default=())

    def model_post_init(self, context: Any, /) -> None:
        self._ranges = tuple(parse_address_entry(entry) for entry in self.spec.addresses)

    def address_ranges(self) -> list[AddressRange]:
        """The pool's addresses as inclusive `(first, last)` ranges, in spec order."""
        return list(self._ranges)

    def address_count(self, version: int) -> int:
        """How many addresses of one family the pool can hand out (after avoidBuggyIPs)."""
        total = 0
        for rng in self.address_ranges():
            if rng.version != version:
                continue
            total += rng.size
            if self.spec.avoid_buggy_ips and version == 4:
                total -= count_with_low_octet(rng, 0) + count_with_low_octet(rng, 255)
        return total

    def families(self) -> set[int]:
        """IP versions (4, 6) the pool has addresses of."""
        return {rng.version for rng in self.address_ranges()}

    def contains(self, ip: IPAddress) -> bool:
        """Whether the pool may hand out `ip` (in a range and not avoided as buggy)."""
        if self.avoids(ip):
            return False
        return any(ip in rng for rng in self._ranges)

    def avoids(self, ip: IPAddress) -> bool:
        """Whether the pool never hands out `ip`, even within its ranges (avoidBuggyIPs)."""
        return self.spec.avoid_buggy_ips and is_buggy(ip)

    def serves(
        self,
        namespace: str,
        service_labels: Mapping[str, str],
        namespace_labels: Mapping[str, str] | None = None,
    ) -> bool:
        """Whether a Service in `namespace` with `service_labels` may use the pool.

        `namespace_labels=None` means the namespace's labels are unknown: namespace
        selectors then count as matching (this cannot prove the Service is excluded).
        """
        scope = self.spec.service_allocation
        if scope is None:
            return True
        if scope.namespaces or scope.namespace_selectors:
            by_name = namespace in scope.namespaces
            by_labels = bool(scope.namespace_selectors) and (
                namespace_labels is None
                or any(s.matches(namespace_labels) for s in scope.namespace_selectors)
            )
            if not (by_name or by_labels):
                return False
        return not scope.service_selectors or any(
            s.matches(service_labels) for s in scope.service_selectors
        )

    @property
    def priority(self) -> int | None:
        scope = self.spec.service_allocation
        return scope.priority if scope else None


class PoolSelection(KubeModel):
    """What every advertisement kind shares: which pools, announced from which nodes."""

    address_pools: list[str] = []
    """Names of AddressPools (same namespace) announced this way."""
    address_pool_selectors: list[LabelSelector] = []
    """AddressPools whose labels match any of these selectors are announced this way too."""
    node_selectors: list[LabelSelector] = []
    """Only nodes matching any of these selectors announce; empty means all nodes."""

    def selects_pool(self, pool: AddressPool) -> bool:
        """Whether the advertisement covers `pool`; with no pools nor selectors it covers all."""
        if not self.address_pools and not self.address_pool_selectors:
            return True
        return pool.name in self.address_pools or any(
            s.matches(pool.metadata.labels) for s in self.address_pool_selectors
        )
