"""Prefix sets for policy conditions: ranges as BIRD writes them (`203.0.113.0/24{24,32}`,
`+`, `-`), matched on integers taken from the NLRI encoding, and the bogons."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import ip_address, ip_network

from ..wire import Prefix
from ..wire.family import Address

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
