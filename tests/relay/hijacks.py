"""The hijack attempts of a hostile tenant (acme, AS 64601, speaking from 192.0.2.13 /
2001:db8::d) against another (bolt), as raw UPDATEs, with what the relay must make of each.

Shared by the hijack suite (tests/relay/test_relay_hijack.py) and the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_address, ip_network

from teapot_lb.bgp.wire import (
    IPV6_UNICAST,
    AsPath,
    Communities,
    Context,
    MpReachNlri,
    MpUnreachNlri,
    NextHop,
    Origin,
    OriginCode,
    Update,
    pack_update,
)
from teapot_lb.bgp.wire.aspath import Segment, SegmentType
from teapot_lb.model.bgp import WELL_KNOWN_COMMUNITIES

ACME, BOLT = 64601, 64602
SELF4, SELF6 = "192.0.2.13", "2001:db8::d"
CTX = Context(four_octet_as=True)


def announce(
    prefix: str,
    next_hop: str | None = None,
    path: tuple[int, ...] = (ACME,),
    *,
    sets: tuple[int, ...] = (),
    communities: tuple[int, ...] = (),
    confed: SegmentType | None = None,
) -> bytes:
    """``confed``: a confederation segment of that type, holding the tenant's ASN, leads
    the path (where a confederation member puts it, RFC 5065 §4.1)."""
    net = ip_network(prefix)
    v6 = net.version == 6
    hop = ip_address(next_hop or (SELF6 if v6 else SELF4))
    segs = [Segment(confed, (ACME,))] if confed else []
    segs.append(Segment(SegmentType.AS_SEQUENCE, path))
    if sets:
        segs.append(Segment(SegmentType.AS_SET, sets))
    attrs: list[object] = [Origin(OriginCode.IGP), AsPath(tuple(segs))]
    if communities:
        attrs.append(Communities(communities))
    if v6:
        attrs.append(MpReachNlri(IPV6_UNICAST, (hop,), (net,)))  # type: ignore[arg-type]
        return Update(attributes=tuple(attrs)).pack(CTX)  # type: ignore[arg-type]
    attrs.append(NextHop(hop))  # type: ignore[arg-type]
    return Update(attributes=tuple(attrs), nlri=(net,)).pack(CTX)  # type: ignore[arg-type]


def withdraw(prefix: str) -> bytes:
    net = ip_network(prefix)
    if net.version == 6:
        return Update(attributes=(MpUnreachNlri(IPV6_UNICAST, (net,)),)).pack(CTX)
    return Update(withdrawn=(net,)).pack(CTX)


def malformed_origin(prefix: str) -> bytes:
    """ORIGIN 7 (only 0..2 exist): RFC 7606 §7.1, treat-as-withdraw."""
    net = ip_network(prefix)
    attrs = (
        b"\x40\x01\x01\x07" + AsPath.sequence(ACME).pack(CTX) + NextHop(ip_address(SELF4)).pack(CTX)  # type: ignore[arg-type]
    )
    nlri = bytes((net.prefixlen,)) + net.network_address.packed[: (net.prefixlen + 7) // 8]
    return pack_update(b"", attrs, nlri)


def malformed_as_path(prefix: str) -> bytes:
    """An AS_PATH segment of type 9 beside an MP_REACH: RFC 7606 §7.2, treat-as-withdraw."""
    net = ip_network(prefix)
    reach = MpReachNlri(IPV6_UNICAST, (ip_address(SELF6),), (net,))  # type: ignore[arg-type]
    attrs = (
        Origin(OriginCode.IGP).pack(CTX)
        + b"\x40\x02\x06\x09\x01"
        + ACME.to_bytes(4, "big")
        + reach.pack(CTX)
    )
    return pack_update(b"", attrs, b"")


@dataclass(frozen=True)
class Hijack:
    """One attempt: the UPDATE, the prefix it names, the reason the relay must give."""

    name: str
    message: bytes
    prefix: str
    reason: str


BLACKHOLE = WELL_KNOWN_COMMUNITIES["blackhole"]
NO_EXPORT = WELL_KNOWN_COMMUNITIES["no-export"]
OUT, AGG, NH_OUT = "outside-allocation", "aggregate-not-held", "next-hop-outside-node-networks"
PROT, PATH = "next-hop-protected", "as-path-not-tenant"
NOT_NODE = "next-hop-not-registered-node"
CONFED = "as-confed-segment"  # RFC 5065 §5: malformed from a non-member, treat-as-withdraw


def _h(name: str, prefix: str, reason: str, **kw: object) -> Hijack:
    return Hijack(name, announce(prefix, **kw), prefix, reason)  # type: ignore[arg-type]


# Rejected routes: each names its own prefix, so explain tells them apart.
ROUTE_HIJACKS = (
    _h("v4-another-tenants-prefix", "203.0.113.20/32", OUT),
    _h("v4-more-specific-of-another-tenants", "203.0.113.24/30", OUT),
    _h("v4-covering-aggregate", "203.0.113.0/24", AGG),
    _h("v4-default-route", "0.0.0.0/0", "default-route"),
    _h("v4-bogon-rfc1918", "10.0.0.0/8", "bogon"),
    _h("v4-bogon-192-168", "192.168.1.0/24", "bogon"),
    _h("v4-next-hop-another-tenants-node", "203.0.113.1/32", NH_OUT, next_hop="192.0.2.17"),
    _h("v4-next-hop-the-router", "203.0.113.2/32", PROT, next_hop="192.0.2.1"),
    _h("v4-next-hop-a-management-node", "203.0.113.3/32", PROT, next_hop="192.0.2.60"),
    # Inside acme's node networks but no registered node's: an unused address, and the
    # router's own leg there (not a BGPPeer address, nobody listed it in --protect).
    _h("v4-next-hop-an-unregistered-address", "203.0.113.13/32", NOT_NODE, next_hop="192.0.2.49"),
    _h("v4-next-hop-the-routers-leg", "203.0.113.15/32", NOT_NODE, next_hop="192.0.2.50"),
    _h("v4-foreign-asn-in-path", "203.0.113.4/32", PATH, path=(ACME, BOLT)),
    _h("v4-prepends-of-another", "203.0.113.6/32", PATH, path=(ACME, BOLT, BOLT)),
    _h("v4-private-asn-behind", "203.0.113.7/32", PATH, path=(ACME, 65001)),
    _h("v4-as-set", "203.0.113.8/32", "as-set", sets=(ACME, BOLT)),
    _h("v4-own-aggregate-not-a-host-route", "203.0.113.8/30", "host-routes-only"),
    _h("v6-another-tenants-prefix", "2001:db8:100::14/128", OUT),
    _h("v6-more-specific-of-another-tenants", "2001:db8:100::18/126", OUT),
    _h("v6-covering-aggregate", "2001:db8:100::/120", AGG),
    _h("v6-default-route", "::/0", "default-route"),
    _h("v6-bogon-ula", "fc00::/7", "bogon"),
    _h("v6-next-hop-another-tenants-node", "2001:db8:100::1/128", NH_OUT, next_hop="2001:db8::11"),
    _h("v6-next-hop-the-router", "2001:db8:100::2/128", PROT, next_hop="2001:db8::1"),
    _h("v6-next-hop-a-management-node", "2001:db8:100::3/128", PROT, next_hop="2001:db8::60"),
    _h("v6-next-hop-unregistered", "2001:db8:100::c/128", NOT_NODE, next_hop="2001:db8::31"),
    _h("v6-next-hop-the-routers-leg", "2001:db8:100::d/128", NOT_NODE, next_hop="2001:db8::32"),
    _h("v6-foreign-asn-in-path", "2001:db8:100::4/128", PATH, path=(ACME, BOLT)),
    _h("v6-as-set", "2001:db8:100::6/128", "as-set", sets=(BOLT,)),
    _h("v4-as-confed-sequence", "203.0.113.11/32", CONFED, confed=SegmentType.AS_CONFED_SEQUENCE),
    _h("v6-as-confed-set", "2001:db8:100::9/128", CONFED, confed=SegmentType.AS_CONFED_SET),
    _h("v4-as-path-longer-than-32", "203.0.113.12/32", "as-path-too-long", path=(ACME,) * 33),
    _h("v6-as-path-longer-than-32", "2001:db8:100::a/128", "as-path-too-long",
       path=(ACME,) * 40),
)  # fmt: skip

# Accepted, the communities a tenant must not set removed (BLACKHOLE without RTBH), those
# that only narrow a route's reach passed on to the routers (NO_EXPORT: the default).
SCRUBBED = (
    Hijack(
        "v4-blackhole-community",
        announce("203.0.113.9/32", communities=(BLACKHOLE,)),
        "203.0.113.9/32",
        "scrubbed",
    ),
)
PASSED = (
    Hijack("v6-no-export-community", announce("2001:db8:100::7/128", communities=(NO_EXPORT,)),
           "2001:db8:100::7/128", "passed"),
)  # fmt: skip

# Changes nothing, counted by reason.
COUNTED = (
    Hijack("v4-withdraw-another-tenants-route", withdraw("203.0.113.20/32"), "203.0.113.20/32",
           "withdraw-not-sent"),
    Hijack("v6-withdraw-another-tenants-route", withdraw("2001:db8:100::14/128"),
           "2001:db8:100::14/128", "withdraw-not-sent"),
    Hijack("v4-malformed-origin", malformed_origin("203.0.113.10/32"), "203.0.113.10/32",
           "malformed-treat-as-withdraw"),
    Hijack("v6-malformed-as-path", malformed_as_path("2001:db8:100::8/128"),
           "2001:db8:100::8/128", "malformed-treat-as-withdraw"),
)  # fmt: skip
