"""What a policy rule tests of a route (all must hold): its prefix, next hop, AS path,
origin and communities, each a small frozen class judged on the route's encoding."""

from __future__ import annotations

from dataclasses import dataclass

from ..attributes import Path
from ..wire import LargeCommunity, OriginCode, Prefix, community
from ..wire.community import format_community
from ..wire.family import IPV4_UNICAST, Family
from .prefixes import PrefixSet

# ---------------------------------------------------------------------------- the route judged


@dataclass(frozen=True, slots=True)
class RouteKey:
    """A prefix as integers: its width in bits, its value (host bits clear), its length."""

    bits: int
    value: int
    plen: int

    @classmethod
    def of(cls, prefix: Prefix) -> RouteKey:
        return cls(prefix.max_prefixlen, int(prefix.network_address), prefix.prefixlen)

    @classmethod
    def from_encoding(cls, family: Family, enc: bytes) -> RouteKey:
        """From an NLRI encoding (length octet, then the significant octets)."""
        bits = 32 if family == IPV4_UNICAST else 128
        return cls(bits, int.from_bytes(enc[1:], "big") << (bits - 8 * (len(enc) - 1)), enc[0])


# ---------------------------------------------------------------------------- conditions


class Condition:
    """Base of the rule conditions. ``ON_PREFIX``: reads the prefix (else only the path)."""

    __slots__ = ()
    ON_PREFIX = False

    def on_path(self, path: Path) -> bool:
        """The condition, for conditions on the path only."""
        raise NotImplementedError

    def on_route(self, key: RouteKey, path: Path) -> bool:
        return self.on_path(path)

    def prefix_test(self) -> tuple[PrefixSet, bool] | None:
        """For a test of the prefix against a set alone: the set, and whether the test is
        negated (the interpreter then calls :meth:`PrefixSet.holds` directly)."""
        return None


@dataclass(frozen=True, slots=True)
class PrefixIn(Condition):
    """The prefix is in the set (length ranges included)."""

    ON_PREFIX = True
    prefixes: PrefixSet

    def on_route(self, key: RouteKey, path: Path) -> bool:
        return self.prefixes.holds(key.bits, key.value, key.plen)

    def prefix_test(self) -> tuple[PrefixSet, bool] | None:
        return self.prefixes, False

    def __str__(self) -> str:
        return f"net ~ {self.prefixes}"


@dataclass(frozen=True, slots=True)
class NextHopIn(Condition):
    """The next hop is one of these addresses or inside these networks."""

    addresses: PrefixSet

    def on_path(self, path: Path) -> bool:
        nh = path.next_hop
        if nh is None:
            return False
        bits = nh.max_prefixlen
        return self.addresses.holds(bits, int(nh), bits)

    def __str__(self) -> str:
        return f"next hop ~ {self.addresses}"


@dataclass(frozen=True, slots=True)
class AsPathIs(Condition):
    """The AS path is exactly this sequence (``()``: a locally originated route)."""

    asns: tuple[int, ...]

    def on_path(self, path: Path) -> bool:
        return path.as_path == self.asns

    def __str__(self) -> str:
        return f"bgp_path = {' '.join(map(str, self.asns)) or '(empty)'}"


@dataclass(frozen=True, slots=True)
class AsPathOnly(Condition):
    """The AS path is not empty and holds only these ASNs (an origin's own prepends)."""

    asns: frozenset[int]

    def on_path(self, path: Path) -> bool:
        asns = path.as_path
        return bool(asns) and self.asns.issuperset(asns)

    def __str__(self) -> str:
        return f"bgp_path ~ [= {sorted(self.asns)}+ =]"


@dataclass(frozen=True, slots=True)
class AsPathHasSet(Condition):
    """The AS path holds an AS_SET or AS_CONFED_SET segment (RFC 6472 deprecates them)."""

    def on_path(self, path: Path) -> bool:
        return path.has_as_set

    def __str__(self) -> str:
        return "bgp_path has AS_SET"


@dataclass(frozen=True, slots=True)
class AsPathHasConfed(Condition):
    """The AS path holds an AS_CONFED_SEQUENCE or AS_CONFED_SET segment (RFC 5065): from a
    peer outside our confederation that makes the AS_PATH malformed (§5)."""

    def on_path(self, path: Path) -> bool:
        return path.has_confed

    def __str__(self) -> str:
        return "bgp_path has AS_CONFED segment"


@dataclass(frozen=True, slots=True)
class AsPathContains(Condition):
    """Any of these ASNs appears in the AS path."""

    asns: frozenset[int]

    def on_path(self, path: Path) -> bool:
        return not self.asns.isdisjoint(path.as_path)

    def __str__(self) -> str:
        return f"bgp_path contains any of {sorted(self.asns)}"


@dataclass(frozen=True, slots=True)
class AsPathLength(Condition):
    """The AS path has ``min_len`` to ``max_len`` ASNs."""

    min_len: int = 0
    max_len: int = 255

    def on_path(self, path: Path) -> bool:
        return self.min_len <= len(path.as_path) <= self.max_len

    def __str__(self) -> str:
        return f"bgp_path.len in {self.min_len}..{self.max_len}"


@dataclass(frozen=True, slots=True)
class OriginAsIn(Condition):
    """The route was originated by one of these ASNs (the last in the path)."""

    asns: frozenset[int]

    def on_path(self, path: Path) -> bool:
        asns = path.as_path
        return bool(asns) and asns[-1] in self.asns

    def __str__(self) -> str:
        return f"bgp_path.last in {sorted(self.asns)}"


@dataclass(frozen=True, slots=True)
class HasCommunity(Condition):
    """Any of these communities (RFC 1997) is attached."""

    values: frozenset[int]

    @classmethod
    def of(cls, *texts: str) -> HasCommunity:
        return cls(frozenset(parse_community(t) for t in texts))

    def on_path(self, path: Path) -> bool:
        return not self.values.isdisjoint(path.communities)

    def __str__(self) -> str:
        return f"bgp_community ~ [{', '.join(map(format_community, sorted(self.values)))}]"


@dataclass(frozen=True, slots=True)
class HasLargeCommunity(Condition):
    """Any of these large communities (RFC 8092) is attached."""

    values: frozenset[LargeCommunity]

    def on_path(self, path: Path) -> bool:
        return not self.values.isdisjoint(path.large_communities)

    def __str__(self) -> str:
        return f"bgp_large_community ~ {sorted(map(str, self.values))}"


@dataclass(frozen=True, slots=True)
class OriginIs(Condition):
    """The ORIGIN attribute is this code."""

    code: OriginCode

    def on_path(self, path: Path) -> bool:
        return path.origin == self.code

    def __str__(self) -> str:
        return f"bgp_origin = {self.code.name}"


@dataclass(frozen=True, slots=True)
class Not(Condition):
    """The condition does not hold."""

    condition: Condition

    @property
    def ON_PREFIX(self) -> bool:  # type: ignore[override]
        return self.condition.ON_PREFIX

    def on_path(self, path: Path) -> bool:
        return not self.condition.on_path(path)

    def on_route(self, key: RouteKey, path: Path) -> bool:
        return not self.condition.on_route(key, path)

    def prefix_test(self) -> tuple[PrefixSet, bool] | None:
        inner = self.condition.prefix_test()
        return None if inner is None else (inner[0], not inner[1])

    def __str__(self) -> str:
        return f"!({self.condition})"


def parse_community(text: str) -> int:
    """``"65000:1"`` → the 32-bit community."""
    asn, _, value = text.partition(":")
    try:
        a, v = int(asn), int(value)
    except ValueError:
        raise ValueError(f"community {text!r}: expected ASN:VALUE") from None
    if not (0 <= a <= 0xFFFF and 0 <= v <= 0xFFFF):
        raise ValueError(f"community {text!r}: both halves must be 0..65535")
    return community(a, v)
