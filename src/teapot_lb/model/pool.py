"""AddressPool: the addresses LoadBalancer Services may get, and who may get them."""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import (
    IPv4Network,
    IPv6Network,
    ip_network,
    summarize_address_range,
)
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import AfterValidator, Field, PrivateAttr, WithJsonSchema

from teapot_lb.model.common import (
    Condition,
    IPAddress,
    KubeModel,
    LabelSelector,
    ObjectMeta,
    ObjectRef,
    parse_ip,
)

IPNetwork = IPv4Network | IPv6Network


class AddressRange(NamedTuple):
    """An inclusive range of addresses of one family: `(first, last)`."""

    first: IPAddress
    last: IPAddress

    @property
    def version(self) -> int:
        return self.first.version

    @property
    def size(self) -> int:
        return int(self.last) - int(self.first) + 1

    def __contains__(self, ip: object) -> bool:
        if not isinstance(ip, IPAddress):
            return False
        return ip.version == self.version and int(self.first) <= int(ip) <= int(self.last)

    def cidrs(self) -> list[IPNetwork]:
        """The fewest CIDR blocks that exactly cover the range."""
        return list(summarize_address_range(self.first, self.last))

    def overlap(self, other: AddressRange) -> AddressRange | None:
        """The addresses both ranges hold, if any."""
        if self.version != other.version:
            return None
        first = self.first if int(self.first) >= int(other.first) else other.first
        last = self.last if int(self.last) <= int(other.last) else other.last
        return AddressRange(first, last) if int(first) <= int(last) else None

    def __str__(self) -> str:
        blocks = self.cidrs()
        if len(blocks) == 1:
            return str(blocks[0])
        return f"{self.first}-{self.last}"


def parse_address_entry(text: str) -> AddressRange:
    """One `spec.addresses` entry, a CIDR or an `a-b` range; ValueError says what is wrong."""
    entry = text.strip()
    if "-" in entry:
        start_text, _, end_text = (part.strip() for part in entry.partition("-"))
        if "/" in start_text or "/" in end_text:
            raise ValueError(f"{text!r}: the ends of a range are addresses, not CIDRs")
        if not start_text or not end_text:
            raise ValueError(f"{text!r}: a range needs two addresses, first-last")
        first, last = parse_ip(start_text), parse_ip(end_text)
        if first.version != last.version:
            raise ValueError(f"{text!r} mixes IPv4 and IPv6; a range must be of one family")
        if int(first) > int(last):
            raise ValueError(f"{text!r} starts after it ends ({first} > {last})")
        return AddressRange(first, last)
    if "/" in entry:
        try:
            net = ip_network(entry, strict=True)
        except ValueError as err:
            try:
                loose = ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{text!r} is not a valid CIDR ({err})") from None
            raise ValueError(f"{text!r} has host bits set; the network would be {loose}") from None
        return AddressRange(net.network_address, net.broadcast_address)
    try:
        single = parse_ip(entry)
    except ValueError:
        raise ValueError(f"{text!r} is neither a CIDR nor an a-b range") from None
    suffix = 32 if single.version == 4 else 128
    raise ValueError(f"{text!r} is a single address; write it as a CIDR ({single}/{suffix})")


def _check_address_entry(text: str) -> str:
    parse_address_entry(text)
    return text


AddressEntry = Annotated[
    str,
    AfterValidator(_check_address_entry),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 100}),
]


def _count_with_low_octet(rng: AddressRange, octet: int) -> int:
    """How many addresses in an IPv4 range end in `octet` (numbers congruent mod 256)."""
    a, b = int(rng.first), int(rng.last)
    return (b - octet) // 256 - (a - 1 - octet) // 256


def is_buggy(ip: IPAddress) -> bool:
    """IPv4 addresses ending in .0 or .255, which some old clients mistake for broadcast."""
    return ip.version == 4 and int(ip) % 256 in (0, 255)


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


class AddressPool(KubeModel):
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

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind, self.metadata.namespace, self.metadata.name)

    @property
    def name(self) -> str:
        return self.metadata.name

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
                total -= _count_with_low_octet(rng, 0) + _count_with_low_octet(rng, 255)
        return total

    def families(self) -> set[int]:
        """IP versions (4, 6) the pool has addresses of."""
        return {rng.version for rng in self.address_ranges()}

    def contains(self, ip: IPAddress) -> bool:
        """Whether the pool may hand out `ip` (in a range and not avoided as buggy)."""
        if self.spec.avoid_buggy_ips and is_buggy(ip):
            return False
        return any(ip in rng for rng in self._ranges)

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
