"""IP addresses, families and inclusive address ranges: parsing and arithmetic (pure, no
pydantic).

Shared by the object model (validation of `spec.addresses`, `Service.spec.ipFamilies`), the
IPAM and the planners, so that every part reads an address entry and a family the same way.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from enum import StrEnum
from ipaddress import (
    IPv4Address,
    IPv4Network,
    IPv6Address,
    IPv6Network,
    ip_address,
    ip_network,
    summarize_address_range,
)
from typing import Generic, NamedTuple, TypeVar

IPAddress = IPv4Address | IPv6Address


def parse_ip(value: object) -> IPAddress:
    """An IPv4 or IPv6 address from its text; ValueError says what is wrong."""
    if isinstance(value, IPv4Address | IPv6Address):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an IP address as a string, got {type(value).__name__}")
    try:
        return ip_address(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 or IPv6 address") from None


IPNetwork = IPv4Network | IPv6Network


class IPFamily(StrEnum):
    """Spelled as in `Service.spec.ipFamilies`."""

    V4 = "IPv4"
    V6 = "IPv6"

    @classmethod
    def of(cls, ip: IPAddress) -> IPFamily:
        return cls.V4 if ip.version == 4 else cls.V6

    @property
    def version(self) -> int:
        return 4 if self is IPFamily.V4 else 6

    @property
    def other(self) -> IPFamily:
        return IPFamily.V6 if self is IPFamily.V4 else IPFamily.V4


class IPFamilyPolicy(StrEnum):
    """Spelled as in `Service.spec.ipFamilyPolicy`."""

    SINGLE_STACK = "SingleStack"
    PREFER_DUAL_STACK = "PreferDualStack"
    REQUIRE_DUAL_STACK = "RequireDualStack"


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


def count_with_low_octet(rng: AddressRange, octet: int) -> int:
    """How many addresses in an IPv4 range end in `octet` (numbers congruent mod 256)."""
    a, b = int(rng.first), int(rng.last)
    return (b - octet) // 256 - (a - 1 - octet) // 256


def is_buggy(ip: IPAddress) -> bool:
    """IPv4 addresses ending in .0 or .255, which some old clients mistake for broadcast."""
    return ip.version == 4 and int(ip) % 256 in (0, 255)


_T = TypeVar("_T")


class RangeIndex(Generic[_T]):
    """Which of many address ranges hold an address, found by a binary search on the ranges'
    first addresses (not a walk of every range: the planners ask for every Service IP).

    Made from `(range, value)` pairs in order of precedence; :meth:`holding` gives the
    values of the ranges that hold an address in that order (ranges may overlap)."""

    __slots__ = ("_families",)

    def __init__(self, entries: Iterable[tuple[AddressRange, _T]]) -> None:
        spans: dict[int, list[tuple[int, int, int, _T]]] = {}
        for rank, (rng, value) in enumerate(entries):
            spans.setdefault(rng.version, []).append((int(rng.first), int(rng.last), rank, value))
        # Per family: the spans by first address, and the greatest last address of each
        # prefix of them (a search walks back only while an earlier span can reach it).
        self._families: dict[int, tuple[list[int], list[tuple[int, int, int, _T]], list[int]]]
        self._families = {}
        for version, found in spans.items():
            found.sort(key=lambda span: (span[0], span[2]))
            reach: list[int] = []
            for _, last, _, _ in found:
                reach.append(max(last, reach[-1]) if reach else last)
            self._families[version] = ([span[0] for span in found], found, reach)

    def holding(self, ip: IPAddress) -> list[_T]:
        """The values of the ranges that hold `ip`, in the order they were given."""
        family = self._families.get(ip.version)
        if family is None:
            return []
        firsts, spans, reach = family
        n = int(ip)
        at = bisect_right(firsts, n)  # the spans before `at` start at or below n
        found: list[tuple[int, _T]] = []
        while at > 0 and reach[at - 1] >= n:
            at -= 1
            _, last, rank, value = spans[at]
            if last >= n:
                found.append((rank, value))
        if len(found) > 1:
            found.sort(key=lambda hit: hit[0])
        return [value for _, value in found]
