"""Import and export policy as data, evaluated by one small interpreter (BIRD filters).

A :class:`Filter` is a list of :class:`Rule`\\ s. A rule has conditions (all must hold; none:
every route) and actions: changes to the route (:class:`SetLocalPref`,
:class:`StripCommunities`, ...) and at most one verdict, last: :class:`Accept` or
:class:`Reject` with a reason. Rules are tried in order; a rule whose conditions hold applies
its changes, and its verdict (if it has one) decides. A route no rule decides gets the
filter's ``default``. A reject carries its reason and the rule's position, for ``explain``,
logs and metrics.

A relay's per-tenant import filter reads like this::

    Filter((
        reject("bogon", PrefixIn(BOGONS)),
        reject("prefix outside the tenant's allocation",
               Not(PrefixIn(PrefixSet.of("203.0.113.0/24{24,32}")))),
        reject("next hop is not a tenant node", Not(NextHopIn(PrefixSet.of("192.0.2.11")))),
        reject("AS path is not the tenant's ASN only", Not(AsPathIs((64512,)))),
        accept(then=(StripCommunities(), StripLargeCommunities())),
    ), name="tenant-a")

Routes are judged in batches (all prefixes of one UPDATE share their path): conditions on
the path are evaluated once per batch, conditions on the prefix once per prefix, on
integers taken from the NLRI encoding; no ``ipaddress`` object is built.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address, ip_network
from typing import Generic, TypeAlias, TypeVar

from .attributes import Path
from .wire import LargeCommunity, OriginCode, Prefix, community
from .wire.community import format_community
from .wire.family import IPV4_UNICAST, Address, Family

P = TypeVar("P", bound=Path)
_KeyOf: TypeAlias = Callable[[bytes], "RouteKey"]
_Holds: TypeAlias = Callable[[int, int, int], bool]
_SEEN_MAX = 1 << 16  # regions' verdicts a filter remembers (then it starts over)

# ---------------------------------------------------------------------------- prefix sets

_RANGE = re.compile(
    r"^(?P<net>[^{+\-]+)(?:(?P<plus>\+)|(?P<minus>-)|\{(?P<lo>\d+),(?P<hi>\d+)\})?$"
)


@dataclass(frozen=True, slots=True)
class PrefixRange:
    """A network and the prefix lengths accepted inside it (BIRD's ``net{lo,hi}``).

    Text forms: ``203.0.113.0/24`` (exactly), ``203.0.113.0/24+`` (it and every
    more-specific), ``203.0.113.0/24-`` (it and every less-specific),
    ``203.0.113.0/24{25,32}`` (lengths 25 to 32 inside it). As in BIRD, a prefix is in
    range when its length is and its first min(its length, the net's length) bits equal
    the net's.
    """

    network: Prefix
    min_len: int
    max_len: int
    _bits: int = field(init=False, repr=False, compare=False)
    _value: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bits = self.network.max_prefixlen
        if not 0 <= self.min_len <= self.max_len <= bits:
            raise ValueError(
                f"prefix range {self.network}{{{self.min_len},{self.max_len}}}: lengths must "
                f"satisfy 0 <= low <= high <= {bits}"
            )
        object.__setattr__(self, "_bits", bits)
        object.__setattr__(self, "_value", int(self.network.network_address))

    @classmethod
    def parse(cls, text: str) -> PrefixRange:
        m = _RANGE.match(text.replace(" ", ""))
        if m is None:
            raise ValueError(
                f"prefix range {text!r}: expected NET/LEN, NET/LEN+, NET/LEN-, or NET/LEN{{LO,HI}}"
            )
        try:
            net = ip_network(m["net"])  # strict: host bits set is an error worth reporting
        except ValueError as exc:
            raise ValueError(f"prefix range {text!r}: {exc}") from None
        if m["plus"]:
            return cls(net, net.prefixlen, net.max_prefixlen)
        if m["minus"]:
            return cls(net, 0, net.prefixlen)
        if m["lo"] is not None:
            return cls(net, int(m["lo"]), int(m["hi"]))
        return cls(net, net.prefixlen, net.prefixlen)

    def holds(self, bits: int, value: int, plen: int) -> bool:
        """Whether the prefix ``value/plen`` (``bits`` wide, as an integer) is in range."""
        if bits != self._bits or not self.min_len <= plen <= self.max_len:
            return False
        # The first min(plen, len) bits agree: inside the network, or covering it.
        common = min(plen, self.network.prefixlen)
        return (value ^ self._value) >> (bits - common) == 0

    def __str__(self) -> str:
        net, lo, hi = self.network, self.min_len, self.max_len
        if lo == hi == net.prefixlen:
            return str(net)
        if lo == net.prefixlen and hi == net.max_prefixlen:
            return f"{net}+"
        if lo == 0 and hi == net.prefixlen:
            return f"{net}-"
        return f"{net}{{{lo},{hi}}}"


@dataclass(frozen=True, slots=True)
class PrefixSet:
    """Prefix ranges, IPv4 and IPv6 mixed (BIRD's ``prefix set``)."""

    ranges: tuple[PrefixRange, ...]
    # Per width (32, 128): (value, length, low, high) of each range, for the hot loop.
    _by_bits: dict[int, tuple[tuple[int, int, int, int], ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        by_bits: dict[int, list[tuple[int, int, int, int]]] = {}
        for r in self.ranges:
            by_bits.setdefault(r._bits, []).append(
                (r._value, r.network.prefixlen, r.min_len, r.max_len)
            )
        object.__setattr__(self, "_by_bits", {b: tuple(v) for b, v in by_bits.items()})

    @classmethod
    def of(cls, *texts: str | Address | Prefix) -> PrefixSet:
        """From text ranges (see :class:`PrefixRange`), networks, or addresses (host routes)."""
        out: list[PrefixRange] = []
        for t in texts:
            if isinstance(t, str) and "/" not in t:
                t = ip_address(t)
            if isinstance(t, str):
                out.append(PrefixRange.parse(t))
            else:
                net = ip_network(t)
                out.append(PrefixRange(net, net.prefixlen, net.prefixlen))
        return cls(tuple(out))

    def holds(self, bits: int, value: int, plen: int) -> bool:
        # PrefixRange.holds, inlined over the ranges of the prefix's width (the receive
        # path runs this once per prefix and rule).
        for net, net_len, lo, hi in self._by_bits.get(bits, ()):
            if lo <= plen <= hi:
                common = plen if plen < net_len else net_len
                if (value ^ net) >> (bits - common) == 0:
                    return True
        return False

    def without(self, *texts: str) -> PrefixSet:
        """The set less these ranges (as written in it)."""
        drop = {PrefixRange.parse(t) for t in texts}
        missing = drop - set(self.ranges)
        if missing:
            raise ValueError(f"prefix set has no range {', '.join(map(str, missing))}")
        return PrefixSet(tuple(r for r in self.ranges if r not in drop))

    def __contains__(self, item: Prefix | Address) -> bool:
        net = ip_network(item)
        return self.holds(net.max_prefixlen, int(net.network_address), net.prefixlen)

    def __str__(self) -> str:
        return "[" + ", ".join(map(str, self.ranges)) + "]"


# Never routed on the Internet (RFC 6890 and friends); a relay rejects them.
BOGONS = PrefixSet.of(
    "0.0.0.0/8+",
    "10.0.0.0/8+",
    "100.64.0.0/10+",
    "127.0.0.0/8+",
    "169.254.0.0/16+",
    "172.16.0.0/12+",
    "192.0.0.0/24+",
    "192.0.2.0/24+",
    "192.168.0.0/16+",
    "198.18.0.0/15+",
    "198.51.100.0/24+",
    "203.0.113.0/24+",
    "224.0.0.0/3+",
    "::/8+",
    "100::/64+",
    "2001:db8::/32+",
    "fc00::/7+",
    "fe80::/10+",
    "ff00::/8+",
)


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


# ---------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Accept:
    """Verdict: the route passes (with the changes made so far)."""

    def __str__(self) -> str:
        return "accept"


@dataclass(frozen=True, slots=True)
class Reject:
    """Verdict: the route is dropped, for ``reason`` (shown by explain, logs, metrics)."""

    reason: str

    def __str__(self) -> str:
        return f'reject "{self.reason}"'


Verdict: TypeAlias = Accept | Reject


class Change:
    """Base of the actions that change a route."""

    __slots__ = ()

    def apply(self, path: P) -> P:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class SetLocalPref(Change):
    value: int

    def apply(self, path: P) -> P:
        return path.evolve(local_pref=self.value)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_local_pref = {self.value}"


@dataclass(frozen=True, slots=True)
class SetMed(Change):
    value: int | None  # None removes it

    def apply(self, path: P) -> P:
        return path.evolve(med=self.value)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_med = {self.value}"


@dataclass(frozen=True, slots=True)
class SetOrigin(Change):
    code: OriginCode

    def apply(self, path: P) -> P:
        return path.evolve(origin=self.code)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_origin = {self.code.name}"


@dataclass(frozen=True, slots=True)
class SetNextHop(Change):
    address: Address

    def apply(self, path: P) -> P:
        return path.evolve(next_hop=self.address)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_next_hop = {self.address}"


@dataclass(frozen=True, slots=True)
class AddCommunities(Change):
    values: tuple[int, ...]

    def apply(self, path: P) -> P:
        have = path.communities
        added = tuple(v for v in self.values if v not in have)
        return path.evolve(communities=have + added) if added else path  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_community.add({', '.join(map(format_community, self.values))})"


@dataclass(frozen=True, slots=True)
class StripCommunities(Change):
    """Remove these communities; none given: all of them."""

    values: frozenset[int] = frozenset()

    def apply(self, path: P) -> P:
        have = path.communities
        if not have:
            return path
        keep = tuple(c for c in have if self.values and c not in self.values)
        return path.evolve(communities=keep)  # type: ignore[return-value]

    def __str__(self) -> str:
        which = ", ".join(map(format_community, sorted(self.values))) or "all"
        return f"bgp_community.delete({which})"


@dataclass(frozen=True, slots=True)
class StripLargeCommunities(Change):
    """Remove these large communities; none given: all of them."""

    values: frozenset[LargeCommunity] = frozenset()

    def apply(self, path: P) -> P:
        have = path.large_communities
        if not have:
            return path
        keep = tuple(c for c in have if self.values and c not in self.values)
        return path.evolve(large_communities=keep)  # type: ignore[return-value]

    def __str__(self) -> str:
        which = ", ".join(sorted(map(str, self.values))) or "all"
        return f"bgp_large_community.delete({which})"


@dataclass(frozen=True, slots=True)
class KeepCommunities(Change):
    """Remove every community and large community but these (allowlists; empty: all go)."""

    values: frozenset[int] = frozenset()
    large: frozenset[LargeCommunity] = frozenset()

    def apply(self, path: P) -> P:
        have, have_large = path.communities, path.large_communities
        keep = tuple(c for c in have if c in self.values)
        keep_large = tuple(c for c in have_large if c in self.large)
        if len(keep) == len(have) and len(keep_large) == len(have_large):
            return path
        return path.evolve(communities=keep, large_communities=keep_large)  # type: ignore[return-value]

    def __str__(self) -> str:
        which = ", ".join(map(format_community, sorted(self.values)))
        large = ", ".join(sorted(map(str, self.large)))
        return f"bgp_community.keep({which}); bgp_large_community.keep({large})"


Action: TypeAlias = Change | Accept | Reject


# ---------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class Rule:
    """If every condition in ``when`` holds: apply ``then`` (changes, then at most one
    verdict, last). Without a verdict evaluation goes on to the next rule."""

    when: tuple[Condition, ...] = ()
    then: tuple[Action, ...] = ()
    _changes: tuple[Change, ...] = field(init=False, repr=False, compare=False)
    _verdict: Verdict | None = field(init=False, repr=False, compare=False)
    _on_path: tuple[Condition, ...] = field(init=False, repr=False, compare=False)
    _on_prefix: tuple[Condition, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        verdicts = [i for i, a in enumerate(self.then) if isinstance(a, Accept | Reject)]
        if verdicts and verdicts != [len(self.then) - 1]:
            raise ValueError(f"rule {self}: at most one verdict (accept/reject), and last")
        last = self.then[-1] if verdicts else None
        changes = tuple(a for a in self.then if isinstance(a, Change))
        object.__setattr__(self, "_changes", changes)
        object.__setattr__(self, "_verdict", last)
        object.__setattr__(self, "_on_path", tuple(c for c in self.when if not c.ON_PREFIX))
        object.__setattr__(self, "_on_prefix", tuple(c for c in self.when if c.ON_PREFIX))

    def __str__(self) -> str:
        cond = " && ".join(map(str, self.when)) or "true"
        return f"if {cond} then {{ {'; '.join(map(str, self.then))} }}"


def reject(reason: str, *when: Condition) -> Rule:
    """A rule rejecting, for ``reason``, what matches all of ``when``."""
    return Rule(tuple(when), (Reject(reason),))


def accept(*when: Condition, then: Sequence[Change] = ()) -> Rule:
    """A rule accepting what matches all of ``when``, after ``then``'s changes."""
    return Rule(tuple(when), (*then, Accept()))


def modify(*when: Condition, then: Sequence[Change]) -> Rule:
    """A rule changing what matches all of ``when``; evaluation goes on."""
    return Rule(tuple(when), tuple(then))


# ---------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Accepted(Generic[P]):
    path: P


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: str
    rule: int | None  # position in the filter; None: the filter's default
    filter: str = ""

    def __str__(self) -> str:
        where = f"rule {self.rule + 1}" if self.rule is not None else "default"
        name = f"filter {self.filter!r} " if self.filter else ""
        return f"rejected by {name}{where}: {self.reason}"


@dataclass(slots=True)
class Judged(Generic[P]):
    """A batch's outcome: accepted encodings grouped by their (possibly changed) path, and
    rejected encodings grouped by their rejection."""

    accepted: list[tuple[P, list[bytes]]] = field(default_factory=list)
    rejected: list[tuple[Rejected, list[bytes]]] = field(default_factory=list)

    def accepted_count(self) -> int:
        return sum(len(e) for _, e in self.accepted)

    def rejected_count(self) -> int:
        return sum(len(e) for _, e in self.rejected)


# ---------------------------------------------------------------------------- the interpreter


@dataclass(frozen=True, slots=True)
class Filter:
    """A rule list; routes no rule decides get ``default``."""

    rules: tuple[Rule, ...] = ()
    default: Verdict = Accept()
    name: str = ""
    # The leading rules that reject on prefix sets alone: their verdict is the prefix's,
    # whatever the path. Per rule: (PrefixSet.holds, negated)s.
    _lead: tuple[tuple[tuple[_Holds, bool], ...], ...] = field(
        init=False, repr=False, compare=False
    )
    # Their verdict is kept per *region*: a prefix range test reads a prefix's length and
    # at most its first ``net_len`` bits, so prefixes of one length that agree on their
    # first min(length, deepest range's length) bits get the same verdict from every
    # leading rule. A tenant's 1,000 host routes inside its /118 are one region: judged
    # once, then one dict lookup per prefix (not a walk over the rules).
    _depth: dict[int, int] = field(init=False, repr=False, compare=False)  # by width
    _cuts: dict[tuple[Family, int], tuple[tuple[int, int], ...]] = field(
        init=False, repr=False, compare=False
    )
    _seen: dict[Family, dict[object, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lead: list[tuple[tuple[_Holds, bool], ...]] = []
        depth: dict[int, int] = {}
        for rule in self.rules:
            tests = [c.prefix_test() for c in rule._on_prefix]
            if rule._on_path or not tests or rule._changes or not isinstance(rule._verdict, Reject):
                break
            if any(t is None for t in tests):
                break
            lead.append(tuple((t[0].holds, t[1]) for t in tests if t is not None))
            for test in tests:
                assert test is not None
                for bits, ranges in test[0]._by_bits.items():
                    deepest = max(net_len for _, net_len, _, _ in ranges)
                    depth[bits] = max(depth.get(bits, 0), deepest)
        object.__setattr__(self, "_lead", tuple(lead))
        object.__setattr__(self, "_depth", depth)
        object.__setattr__(self, "_cuts", {})
        object.__setattr__(self, "_seen", {})

    def _cut(self, family: Family, strip: int) -> tuple[tuple[int, int], ...]:
        """Per prefix length (0-255, the encoding's first octet): where a region key ends
        in the encoding (octets, from ``strip`` on) and how far to shift the partial
        octet after it (0: none)."""
        have = self._cuts.get((family, strip))
        if have is None:
            bits = 32 if family == IPV4_UNICAST else 128
            deepest = self._depth.get(bits, 0)
            out = []
            for plen in range(256):
                k = min(plen, deepest, bits)
                out.append((strip + 1 + k // 8, 8 - k % 8 if k % 8 else 0))
            have = self._cuts[(family, strip)] = tuple(out)
        return have

    @property
    def accepts_all(self) -> bool:
        return not self.rules and isinstance(self.default, Accept)

    def judge(self, prefix: Prefix, path: P) -> Accepted[P] | Rejected:
        """One route (explain, tests)."""
        judged = self._run(lambda enc: RouteKey.of(prefix), [b""], path)
        if judged.accepted:
            return Accepted(judged.accepted[0][0])
        return judged.rejected[0][0]

    def judge_batch(
        self, family: Family, encodings: Iterable[bytes], path: P, *, add_path: bool = False
    ) -> Judged[P]:
        """Prefixes in NLRI encoding sharing ``path`` (the receive path, the Adj-RIB-Out);
        ``add_path``: each encoding starts with a 4-octet Path Identifier (RFC 7911)."""
        encs = encodings if isinstance(encodings, list) else list(encodings)
        if add_path:
            key_of: _KeyOf = lambda enc: RouteKey.from_encoding(family, enc[4:])  # noqa: E731
            return self._run(key_of, encs, path, (family, 4))
        return self._run(lambda enc: RouteKey.from_encoding(family, enc), encs, path, (family, 0))

    def _leading(
        self, key_of: _KeyOf, encs: list[bytes], memo: tuple[Family, int], out: Judged[P]
    ) -> list[bytes]:
        """The leading prefix-set rules (:attr:`_lead`) over ``encs``, each prefix's verdict
        remembered per family; returns the encodings none of them rejects."""
        family, strip = memo
        seen = self._seen.setdefault(family, {})
        if len(seen) > _SEEN_MAX:
            seen.clear()
        cut = self._cut(family, strip)
        by_rule: dict[int, list[bytes]] = {}
        passing: list[bytes] = []
        for enc in encs:
            end, shift = cut[enc[strip]]
            region = (enc[strip:end], enc[end] >> shift) if shift else enc[strip:end]
            hit = seen.get(region)
            if hit is None:
                key = key_of(enc)
                bits, value, plen = key.bits, key.value, key.plen
                hit = -1
                for index, tests in enumerate(self._lead):
                    if len(tests) == 1:  # the usual case, without all()
                        holds, negated = tests[0]
                        if holds(bits, value, plen) is not negated:
                            hit = index
                            break
                    elif all(holds(bits, value, plen) is not neg for holds, neg in tests):
                        hit = index
                        break
                seen[region] = hit
            if hit < 0:
                passing.append(enc)
            else:
                by_rule.setdefault(hit, []).append(enc)
        for index in sorted(by_rule):
            verdict = self.rules[index]._verdict
            assert isinstance(verdict, Reject)
            out.rejected.append((Rejected(verdict.reason, index, self.name), by_rule[index]))
        return passing

    def _run(
        self, key_of: _KeyOf, encs: list[bytes], path: P, memo: tuple[Family, int] | None = None
    ) -> Judged[P]:
        """``memo``: the family, and how many octets of an encoding precede the prefix (the
        Path Identifier's); None: the encodings are not prefixes (nothing is remembered)."""
        out: Judged[P] = Judged()
        if self.accepts_all:
            out.accepted.append((path, encs))
            return out
        keys: dict[bytes, RouteKey] = {}
        start = 0
        if memo is not None and self._lead:
            encs = self._leading(key_of, encs, memo, out)
            start = len(self._lead)
        # Groups of routes that took the same way through the rules so far: same path.
        groups: list[tuple[P, list[bytes]]] = [(path, encs)] if encs else []
        for index, rule in enumerate(self.rules):
            if index < start:
                continue
            if not groups:
                return out
            nxt: list[tuple[P, list[bytes]]] = []
            for gpath, genc in groups:
                if not all(c.on_path(gpath) for c in rule._on_path):
                    nxt.append((gpath, genc))
                    continue
                if rule._on_prefix:
                    hit, miss = [], []
                    conds = rule._on_prefix
                    only = conds[0] if len(conds) == 1 else None  # the usual case, no all()
                    test = only.prefix_test() if only is not None else None
                    if test is not None:  # the hottest case: one prefix set, called directly
                        holds, negated = test[0].holds, test[1]
                        for enc in genc:
                            key = keys.get(enc)
                            if key is None:
                                key = keys[enc] = key_of(enc)
                            if holds(key.bits, key.value, key.plen) is not negated:
                                hit.append(enc)
                            else:
                                miss.append(enc)
                    else:
                        for enc in genc:
                            key = keys.get(enc)
                            if key is None:
                                key = keys[enc] = key_of(enc)
                            if (
                                only.on_route(key, gpath)
                                if only is not None
                                else all(c.on_route(key, gpath) for c in conds)
                            ):
                                hit.append(enc)
                            else:
                                miss.append(enc)
                    if miss:
                        nxt.append((gpath, miss))
                    if not hit:
                        continue
                else:
                    hit = genc
                changed = gpath
                for change in rule._changes:
                    changed = change.apply(changed)
                verdict = rule._verdict
                if verdict is None:
                    nxt.append((changed, hit))
                elif isinstance(verdict, Accept):
                    out.accepted.append((changed, hit))
                else:
                    out.rejected.append((Rejected(verdict.reason, index, self.name), hit))
            groups = nxt
            if not groups:
                return out
        for gpath, genc in groups:
            if isinstance(self.default, Accept):
                out.accepted.append((gpath, genc))
            else:
                out.rejected.append((Rejected(self.default.reason, None, self.name), genc))
        return out

    def __str__(self) -> str:
        lines = [f"filter {self.name or '(unnamed)'} {{"]
        lines += [f"  {rule};" for rule in self.rules]
        lines.append(f"  {self.default};")
        return "\n".join(lines) + "\n}"


ACCEPT_ALL = Filter()
