"""This node's network interfaces: listed over netlink, and the default placement of an IP.

The speaker's L2 and VIP backends answer or run an IP on the interfaces an advertisement
names, or else on those whose connected subnet holds the IP (:func:`default_interfaces`).
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_interface

from pyroute2 import AsyncIPRoute

from teapot_lb.l2 import wire
from teapot_lb.l2.responder import InterfaceInfo

__all__ = ["InterfaceInfo", "default_interfaces", "interfaces"]


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
