"""Address families (RFC 4760): the AFI/SAFI pairs the speaker knows."""

from __future__ import annotations

import enum
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import NamedTuple, TypeAlias

Prefix: TypeAlias = IPv4Network | IPv6Network
Address: TypeAlias = IPv4Address | IPv6Address


class AFI(enum.IntEnum):
    IPV4 = 1
    IPV6 = 2


class SAFI(enum.IntEnum):
    UNICAST = 1


class Family(NamedTuple):
    afi: int
    safi: int

    def __str__(self) -> str:
        try:
            return f"{AFI(self.afi).name.lower()}-{SAFI(self.safi).name.lower()}"
        except ValueError:
            return f"afi{self.afi}-safi{self.safi}"


IPV4_UNICAST = Family(AFI.IPV4, SAFI.UNICAST)
IPV6_UNICAST = Family(AFI.IPV6, SAFI.UNICAST)
KNOWN_FAMILIES = frozenset({IPV4_UNICAST, IPV6_UNICAST})


def family_of(prefix: Prefix) -> Family:
    return IPV4_UNICAST if prefix.version == 4 else IPV6_UNICAST
