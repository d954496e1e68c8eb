"""This node's network interfaces: listed over netlink, and the default placement of an IP.

The speaker's L2 and VIP backends answer or run an IP on the interfaces an advertisement
names, or else on those whose connected subnet holds the IP (:func:`default_interfaces`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_interface

from pyroute2 import AsyncIPRoute

from teapot_lb.l2 import wire
from teapot_lb.l2.responder import InterfaceInfo

__all__ = ["InterfaceInfo", "Listing", "TimedListing", "default_interfaces", "interfaces"]


async def interfaces() -> dict[str, InterfaceInfo]:
    """The Ethernet interfaces of this network namespace, read over netlink."""
    out: dict[str, InterfaceInfo] = {}
    async with AsyncIPRoute() as ipr:
        links = {
            link["index"]: (link.get_attr("IFLA_IFNAME"), link.get_attr("IFLA_ADDRESS"))
            async for link in await ipr.get_links()
        }
        nets: dict[int, list[IPv4Network | IPv6Network]] = {i: [] for i in links}
        lls: dict[int, IPv6Address] = {}
        async for addr in await ipr.get_addr():
            idx, text = addr["index"], addr.get_attr("IFA_ADDRESS")
            if idx not in links or text is None:
                continue
            iface = ip_interface(f"{text}/{addr['prefixlen']}")
            if iface.ip.is_link_local and isinstance(iface.ip, IPv6Address):
                lls.setdefault(idx, iface.ip)
            else:
                nets[idx].append(iface.network)
    for idx, (name, mac_text) in links.items():
        if not mac_text or mac_text == "00:00:00:00:00:00" or mac_text.count(":") != 5:
            continue
        out[name] = InterfaceInfo(
            name, idx, wire.parse_mac(mac_text), lls.get(idx), tuple(nets[idx])
        )
    return out


def default_interfaces(ip: IPv4Address | IPv6Address, infos: dict[str, InterfaceInfo]) -> list[str]:
    """The interfaces whose connected subnets contain ``ip`` (the default placement)."""
    return sorted(
        name
        for name, info in infos.items()
        if any(ip.version == net.version and ip in net for net in info.networks)
    )


# How long a listing of this node's interfaces is used before the kernel is asked again:
# reading every link and address over netlink costs 5 - 25 ms, once per step per backend,
# and at 100k Services that was most of a step after one change (issue 19). An address or
# interface added or removed is seen by the first step this long after the last listing.
LISTING_TTL_S = 1.0

Listing = Callable[[], Awaitable[dict[str, InterfaceInfo]]]


class TimedListing:
    """A :data:`Listing` asked again only after `ttl_s` (by `clock`)."""

    def __init__(
        self,
        listing: Listing,
        ttl_s: float = LISTING_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listing = listing
        self.ttl_s = ttl_s
        self._clock = clock
        self._held: tuple[float, dict[str, InterfaceInfo]] | None = None

    async def __call__(self) -> dict[str, InterfaceInfo]:
        now = self._clock()
        if self._held is None or now - self._held[0] >= self.ttl_s:
            self._held = (now, await self._listing())
        return self._held[1]
