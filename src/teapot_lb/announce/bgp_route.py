"""A Service IP's BGP route to one peer, as a BGPAdvertisement asks for it (pure): the prefix
(the host's or an aggregate), the communities and the local preference (iBGP only)."""

from __future__ import annotations

from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network

from teapot_lb.announce.announcement import BGPRoute
from teapot_lb.bgp.attributes import RouteAttributes
from teapot_lb.bgp.wire import LargeCommunity
from teapot_lb.model import (
    BGPAdvertisement,
    BGPPeer,
    IPAddress,
    parse_community,
    parse_large_community,
)


def route_of(
    ip: IPAddress, adv: BGPAdvertisement, peer: BGPPeer, ip_text: str | None = None
) -> BGPRoute:
    """`ip_text`: `str(ip)` when the caller has it (an IPv6 address's text is slow to make,
    and a replan makes every Service's routes to every peer)."""
    spec = adv.spec
    return BGPRoute(
        peer=peer.name,
        prefix=_prefix(ip, adv, ip_text),
        attributes=_attributes(
            tuple(spec.communities),
            tuple(spec.large_communities),
            spec.local_pref if peer.is_ibgp() else None,
        ),
    )


def _prefix(ip: IPAddress, adv: BGPAdvertisement, ip_text: str | None) -> str:
    if ip.version == 4:
        length = adv.spec.aggregation_length if adv.spec.aggregation_length is not None else 32
    else:
        v6 = adv.spec.aggregation_length_v6
        length = v6 if v6 is not None else 128
    if length == ip.max_prefixlen:
        return host_prefix(ip, ip_text)
    shift = ip.max_prefixlen - length
    return _aggregate(ip.version, int(ip) >> shift << shift, length)


def host_prefix(ip: IPAddress, ip_text: str | None = None) -> str:
    """The IP's own prefix (/32, /128), in the network's canonical text: the address's
    (`ip_text`: `str(ip)`, when the caller has it)."""
    return f"{ip if ip_text is None else ip_text}/{ip.max_prefixlen}"


# Planning runs on every change for every Service: parse each aggregate and community list
# once, not once per Service, peer and plan. Keyed by numbers, not by the Service's parsed
# IP (a cache of 65,536 IP objects held ~16 MB at 100k Services); a host prefix is the
# IP's text and needs no cache.
@lru_cache(maxsize=4096)
def _aggregate(version: int, network: int, length: int) -> str:
    net = IPv4Network((network, length)) if version == 4 else IPv6Network((network, length))
    return str(net)


@lru_cache(maxsize=4096)
def _communities(texts: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(sorted({parse_community(c) for c in texts}))


@lru_cache(maxsize=4096)
def _large_communities(texts: tuple[str, ...]) -> tuple[LargeCommunity, ...]:
    return tuple(sorted({LargeCommunity(*parse_large_community(c)) for c in texts}))


# One attributes object per advertisement and peer kind, shared by every route made with
# it: routes of 100k Services do not hold 100k equal copies.
@lru_cache(maxsize=4096)
def _attributes(
    communities: tuple[str, ...], large: tuple[str, ...], local_pref: int | None
) -> RouteAttributes:
    return RouteAttributes(
        communities=_communities(communities),
        large_communities=_large_communities(large),
        local_pref=local_pref,
    )
