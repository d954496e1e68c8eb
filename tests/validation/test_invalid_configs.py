"""Every invalid configuration is rejected with a message naming the object, the field and why.

Each case is a small manifest (built with the builders) and what the problem must say.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from model.builders import (
    bfd_profile,
    bgp_advertisement,
    expression,
    l2_advertisement,
    labels_selector,
    namespace,
    peer,
    pool,
    problems_of,
    service,
    vip_advertisement,
    zone,
)


class Expect(NamedTuple):
    where: str  # "Kind/name: field"
    fragment: str  # part of the reason


def case(id: str, documents: list[dict[str, Any]], where: str, fragment: str) -> Any:
    return pytest.param(documents, Expect(where, fragment), id=id)


V4 = pool("v4", "192.0.2.0/24")
V6 = pool("v6", "2001:db8::/120")
TEAM = pool("team", "198.51.100.0/24", serviceAllocation={"namespaces": ["team-a"]})

POOL_CASES = [
    case(
        "range-reversed",
        [pool("p", "192.0.2.10-192.0.2.1")],
        "AddressPool/p: spec.addresses[0]",
        "starts after it ends (192.0.2.10 > 192.0.2.1)",
    ),
    case(
        "range-mixed-family",
        [pool("p", "192.0.2.1-2001:db8::1")],
        "AddressPool/p: spec.addresses[0]",
        "mixes IPv4 and IPv6",
    ),
    case(
        "cidr-host-bits",
        [pool("p", "192.0.2.7/24")],
        "AddressPool/p: spec.addresses[0]",
        "host bits set; the network would be 192.0.2.0/24",
    ),
    case(
        "cidr-bad-prefix",
        [pool("p", "192.0.2.0/33")],
        "AddressPool/p: spec.addresses[0]",
        "not a valid CIDR",
    ),
    case(
        "bare-address",
        [pool("p", "192.0.2.0/24", "198.51.100.7")],
        "AddressPool/p: spec.addresses[1]",
        "single address; write it as a CIDR (198.51.100.7/32)",
    ),
    case(
        "range-of-cidrs",
        [pool("p", "192.0.2.0/25-192.0.2.128/25")],
        "AddressPool/p: spec.addresses[0]",
        "ends of a range are addresses, not CIDRs",
    ),
    case(
        "not-an-address",
        [pool("p", "pool.example.com")],
        "AddressPool/p: spec.addresses[0]",
        "neither a CIDR nor an a-b range",
    ),
    case("empty-pool", [pool("p")], "AddressPool/p: spec.addresses", "the pool is empty"),
    case(
        "missing-addresses",
        [{**pool("p"), "spec": {"autoAssign": True}}],
        "AddressPool/p: spec.addresses",
        "required field is missing",
    ),
    case(
        "only-buggy-addresses",
        [pool("p", "192.0.2.255/32", avoidBuggyIPs=True)],
        "AddressPool/p: spec.addresses",
        "no usable address: avoidBuggyIPs",
    ),
    case(
        "overlapping-pools",
        [V4, pool("w", "192.0.2.128/25")],
        "AddressPool/w: spec.addresses[0]",
        "overlaps AddressPool 'v4' spec.addresses[0] (192.0.2.0/24) at 192.0.2.128/25",
    ),
    case(
        "overlapping-v6-pools",
        [V6, pool("w", "2001:db8::ff-2001:db8::1:0")],
        "AddressPool/w: spec.addresses[0]",
        "overlaps AddressPool 'v6' spec.addresses[0]",
    ),
    case(
        "overlap-within-pool",
        [pool("p", "192.0.2.0/28", "192.0.2.10-192.0.2.20")],
        "AddressPool/p: spec.addresses[1]",
        "overlaps spec.addresses[0] (192.0.2.0/28) of the same pool at 192.0.2.10-192.0.2.15",
    ),
    case(
        "unknown-field-typo",
        [pool("p", "192.0.2.0/24", autoAsign=False)],
        "AddressPool/p: spec.autoAsign",
        "unknown field 'autoAsign'; did you mean 'autoAssign'?",
    ),
    case(
        "wrong-type",
        [pool("p", "192.0.2.0/24", autoAssign="sometimes")],
        "AddressPool/p: spec.autoAssign",
        "valid boolean",
    ),
    case(
        "negative-priority",
        [pool("p", "192.0.2.0/24", serviceAllocation={"priority": -1})],
        "AddressPool/p: spec.serviceAllocation.priority",
        "greater than or equal to 0",
    ),
    case(
        "selector-bad-operator",
        [
            pool(
                "p",
                "192.0.2.0/24",
                serviceAllocation={"serviceSelectors": [expression("app", "Equals", "x")]},
            )
        ],
        "AddressPool/p: spec.serviceAllocation.serviceSelectors[0].matchExpressions[0].operator",
        "'In', 'NotIn', 'Exists' or 'DoesNotExist'",
    ),
    case(
        "selector-in-without-values",
        [
            pool(
                "p",
                "192.0.2.0/24",
                serviceAllocation={"serviceSelectors": [expression("app", "In")]},
            )
        ],
        "AddressPool/p: spec.serviceAllocation.serviceSelectors[0].matchExpressions[0].values",
        "operator In needs at least one value",
    ),
    case(
        "selector-exists-with-values",
        [
            pool(
                "p",
                "192.0.2.0/24",
                serviceAllocation={"namespaceSelectors": [expression("team", "Exists", "a")]},
            )
        ],
        "AddressPool/p: spec.serviceAllocation.namespaceSelectors[0].matchExpressions[0].values",
        "operator Exists takes no values",
    ),
    case(
        "selector-bad-label-key",
        [
            pool(
                "p",
                "192.0.2.0/24",
                serviceAllocation={"serviceSelectors": [labels_selector({"bad key!": "x"})]},
            )
        ],
        "AddressPool/p: spec.serviceAllocation.serviceSelectors[0].matchLabels[bad key!]",
        "label key 'bad key!'",
    ),
    case(
        "name-not-dns",
        [pool("Public_Pool", "192.0.2.0/24")],
        "AddressPool/Public_Pool: metadata.name",
        "'Public_Pool' is not a valid name",
    ),
    case(
        "scope-namespace-not-dns",
        [pool("p", "192.0.2.0/24", serviceAllocation={"namespaces": ["Team A"]})],
        "AddressPool/p: spec.serviceAllocation.namespaces[0]",
        "'Team A' is not a namespace name",
    ),
    case(
        "wrong-api-version",
        [{**V4, "apiVersion": "lb.teapot.io/v1"}],
        "AddressPool/v4: apiVersion",
        "AddressPool is lb.teapot.io/v1alpha1, not 'lb.teapot.io/v1'",
    ),
    case(
        "unknown-kind",
        [{**V4, "kind": "IPAddressPool"}],
        "IPAddressPool/v4: kind",
        "not a kind teapot-lb reads",
    ),
]

PEER_CASES = [
    case("asn-zero", [peer("r", myASN=0)], "BGPPeer/r: spec.myASN", "AS 0 is reserved"),
    case(
        "asn-too-big",
        [peer("r", peerASN=4294967296)],
        "BGPPeer/r: spec.peerASN",
        "out of range; AS numbers are 1-4294967295",
    ),
    case("asn-as-trans", [peer("r", myASN=23456)], "BGPPeer/r: spec.myASN", "AS_TRANS"),
    case("asn-last-reserved", [peer("r", peerASN=65535)], "BGPPeer/r: spec.peerASN", "RFC 7300"),
    case(
        "asn-missing",
        [peer("r", peerASN=None)],
        "BGPPeer/r: spec.peerASN",
        "required field is missing (or set dynamicASN)",
    ),
    case(
        "asn-and-dynamic",
        [peer("r", dynamicASN="external")],
        "BGPPeer/r: spec.dynamicASN",
        "either peerASN or dynamicASN",
    ),
    case(
        "dynamic-asn-bad",
        [peer("r", peerASN=None, dynamicASN="any")],
        "BGPPeer/r: spec.dynamicASN",
        "'internal' or 'external'",
    ),
    case(
        "peer-address-bad",
        [peer("r", "192.0.2.300")],
        "BGPPeer/r: spec.peerAddress",
        "'192.0.2.300' is not an IPv4 or IPv6 address",
    ),
    case(
        "peer-address-unspecified",
        [peer("r", "0.0.0.0")],
        "BGPPeer/r: spec.peerAddress",
        "not a usable unicast address",
    ),
    case(
        "source-family-mismatch",
        [peer("r", sourceAddress="2001:db8::1")],
        "BGPPeer/r: spec.sourceAddress",
        "is IPv6 but peerAddress 192.0.2.254 is IPv4",
    ),
    case(
        "peer-port-zero",
        [peer("r", peerPort=0)],
        "BGPPeer/r: spec.peerPort",
        "greater than or equal to 1",
    ),
    case(
        "hold-time-too-short",
        [peer("r", holdTime="2s")],
        "BGPPeer/r: spec.holdTime",
        "must be 0 or at least 3s",
    ),
    case(
        "hold-time-fractional",
        [peer("r", holdTime="1500ms")],
        "BGPPeer/r: spec.holdTime",
        "not whole seconds",
    ),
    case(
        "hold-time-not-duration",
        [peer("r", holdTime="ninety")],
        "BGPPeer/r: spec.holdTime",
        "is not a duration",
    ),
    case(
        "keepalive-not-below-hold",
        [peer("r", holdTime="9s", keepaliveTime="9s")],
        "BGPPeer/r: spec.keepaliveTime",
        "must be shorter than holdTime (9s)",
    ),
    case(
        "keepalive-without-hold",
        [peer("r", holdTime="0s", keepaliveTime="30s")],
        "BGPPeer/r: spec.keepaliveTime",
        "must be 0 when holdTime is 0",
    ),
    case(
        "connect-time-zero",
        [peer("r", connectTime="0s")],
        "BGPPeer/r: spec.connectTime",
        "must be 1s-65535s",
    ),
    case(
        "router-id-ipv6",
        [peer("r", routerID="2001:db8::1")],
        "BGPPeer/r: spec.routerID",
        "RFC 6286",
    ),
    case(
        "password-twice",
        [peer("r", password="x", passwordSecret={"name": "s"})],
        "BGPPeer/r: spec.passwordSecret",
        "either password or passwordSecret",
    ),
    case(
        "password-too-long",
        [peer("r", password="x" * 81)],
        "BGPPeer/r: spec.password",
        "at most 80 characters",
    ),
    case(
        "multihop-ibgp",
        [peer("r", peerASN=64512, ebgpMultiHop=True)],
        "BGPPeer/r: spec.ebgpMultiHop",
        "applies to eBGP only",
    ),
    case(
        "family-unknown",
        [peer("r", families=["ipv4-multicast"])],
        "BGPPeer/r: spec.families[0]",
        "'ipv4-unicast' or 'ipv6-unicast'",
    ),
    case(
        "family-twice",
        [peer("r", families=["ipv4-unicast", "ipv4-unicast"])],
        "BGPPeer/r: spec.families[1]",
        "listed twice",
    ),
    case(
        "bfd-profile-unknown",
        [bfd_profile("slow"), peer("r", bfdProfile="fast")],
        "BGPPeer/r: spec.bfdProfile",
        "no BFDProfile named 'fast' in namespace lb-system (known: slow)",
    ),
    case(
        "duplicate-peer-all-nodes",
        [peer("a"), peer("b")],
        "BGPPeer/b: spec.nodeSelectors",
        "duplicates BGPPeer 'a' (same peer 192.0.2.254 port 179)",
    ),
    case(
        "duplicate-peer-overlapping-selectors",
        [
            peer("a", nodeSelectors=[zone("rack1")]),
            peer(
                "b",
                nodeSelectors=[expression("topology.kubernetes.io/zone", "In", "rack1", "rack2")],
            ),
        ],
        "BGPPeer/b: spec.nodeSelectors",
        "duplicates BGPPeer 'a'",
    ),
]

BGP_ADVERTISEMENT_CASES = [
    case(
        "community-half-too-big",
        [bgp_advertisement("ad", communities=["65536:1"])],
        "BGPAdvertisement/ad: spec.communities[0]",
        "both halves of a standard community must be 0-65535",
    ),
    case(
        "community-unknown-name",
        [bgp_advertisement("ad", communities=["no-exports"])],
        "BGPAdvertisement/ad: spec.communities[0]",
        "'no-exports' is not a community",
    ),
    case(
        "community-large-in-standard",
        [bgp_advertisement("ad", communities=["64512:1:2"])],
        "BGPAdvertisement/ad: spec.communities[0]",
        "is a large community; list it under largeCommunities",
    ),
    case(
        "large-community-two-parts",
        [bgp_advertisement("ad", largeCommunities=["64512:1"])],
        "BGPAdvertisement/ad: spec.largeCommunities[0]",
        "not a large community",
    ),
    case(
        "large-community-part-too-big",
        [bgp_advertisement("ad", largeCommunities=["64512:1:4294967296"])],
        "BGPAdvertisement/ad: spec.largeCommunities[0]",
        "each part of a large community",
    ),
    case(
        "aggregation-shorter-than-pool",
        [V4, bgp_advertisement("ad", "v4", aggregationLength=16)],
        "BGPAdvertisement/ad: spec.aggregationLength",
        "/16 is shorter than the block 192.0.2.0/24 of AddressPool 'v4'",
    ),
    case(
        "aggregation-shorter-than-range",
        [pool("r", "192.0.2.10-192.0.2.20"), bgp_advertisement("ad", aggregationLength=28)],
        "BGPAdvertisement/ad: spec.aggregationLength",
        "use 31 or more",
    ),
    case(
        "aggregation-v6-shorter-than-pool",
        [V6, bgp_advertisement("ad", "v6", aggregationLengthV6=64)],
        "BGPAdvertisement/ad: spec.aggregationLengthV6",
        "the aggregate 2001:db8::/64",
    ),
    case(
        "aggregation-over-32",
        [bgp_advertisement("ad", aggregationLength=33)],
        "BGPAdvertisement/ad: spec.aggregationLength",
        "less than or equal to 32",
    ),
    case(
        "unknown-pool",
        [V4, bgp_advertisement("ad", "v4", "nope")],
        "BGPAdvertisement/ad: spec.addressPools[1]",
        "no AddressPool named 'nope' (known: v4)",
    ),
    case(
        "unknown-peer",
        [peer("r"), bgp_advertisement("ad", peers=["r", "s"])],
        "BGPAdvertisement/ad: spec.peers[1]",
        "no BGPPeer named 's' (known: r)",
    ),
    case(
        "local-pref-negative",
        [bgp_advertisement("ad", localPref=-1)],
        "BGPAdvertisement/ad: spec.localPref",
        "greater than or equal to 0",
    ),
]

BFD_CASES = [
    case(
        "bfd-echo-mode",
        [bfd_profile("fast", echoMode=True)],
        "BFDProfile/fast: spec.echoMode",
        "echo mode is not implemented",
    ),
    case(
        "bfd-receive-interval-too-short",
        [bfd_profile("fast", receiveInterval=5)],
        "BFDProfile/fast: spec.receiveInterval",
        "greater than or equal to 10",
    ),
    case(
        "bfd-transmit-interval-too-long",
        [bfd_profile("slow", transmitInterval=60001)],
        "BFDProfile/slow: spec.transmitInterval",
        "less than or equal to 60000",
    ),
    case(
        "bfd-detect-multiplier-one",
        [bfd_profile("fast", detectMultiplier=1)],
        "BFDProfile/fast: spec.detectMultiplier",
        "greater than or equal to 2",
    ),
    case(
        "bfd-minimum-ttl-255",
        [bfd_profile("fast", minimumTtl=255)],
        "BFDProfile/fast: spec.minimumTtl",
        "less than or equal to 254",
    ),
    case(
        "bfd-interval-in-seconds",
        [bfd_profile("fast", receiveInterval="300ms")],
        "BFDProfile/fast: spec.receiveInterval",
        "valid integer",
    ),
]

L2_VIP_CASES = [
    case(
        "interface-with-slash",
        [l2_advertisement("l2", interfaces=["eth0/1"])],
        "L2Advertisement/l2: spec.interfaces[0]",
        "may not be '.', '..' or contain '/'",
    ),
    case(
        "interface-too-long",
        [l2_advertisement("l2", interfaces=["enp0s31f6-uplink0"])],
        "L2Advertisement/l2: spec.interfaces[0]",
        "must be 1-15 bytes long",
    ),
    case(
        "interface-twice",
        [l2_advertisement("l2", interfaces=["eth0", "eth0"])],
        "L2Advertisement/l2: spec.interfaces[1]",
        "listed twice",
    ),
    case(
        "l2-unknown-pool",
        [l2_advertisement("l2", "v4")],
        "L2Advertisement/l2: spec.addressPools[0]",
        "no AddressPool named 'v4' (known: none)",
    ),
    case(
        "vrid-reversed",
        [vip_advertisement("vip", vridRange={"start": 20, "end": 10})],
        "VIPAdvertisement/vip: spec.vridRange",
        "start 20 is after end 10",
    ),
    case(
        "vrid-too-big",
        [vip_advertisement("vip", vridRange={"start": 1, "end": 256})],
        "VIPAdvertisement/vip: spec.vridRange.end",
        "less than or equal to 255",
    ),
    case(
        "vrid-zero",
        [vip_advertisement("vip", vridRange={"start": 0, "end": 9})],
        "VIPAdvertisement/vip: spec.vridRange.start",
        "greater than or equal to 1",
    ),
    case(
        "vip-interval-too-short",
        [vip_advertisement("vip", advertisementInterval="5ms")],
        "VIPAdvertisement/vip: spec.advertisementInterval",
        "10ms-40.95s in steps of 10ms",
    ),
    case(
        "vip-interface-bad",
        [vip_advertisement("vip", interface="eth 0")],
        "VIPAdvertisement/vip: spec.interface",
        "interface name 'eth 0'",
    ),
    case(
        "vrid-ranges-overlap",
        [
            vip_advertisement("a", vridRange={"start": 1, "end": 10}),
            vip_advertisement("b", vridRange={"start": 5, "end": 20}),
        ],
        "VIPAdvertisement/b: spec.vridRange",
        "VRIDs 5-10 are also used by VIPAdvertisement 'a'",
    ),
    case(
        "vip-and-l2-same-pool",
        [V4, l2_advertisement("l2", "v4"), vip_advertisement("vip", "v4")],
        "VIPAdvertisement/vip: spec.addressPools",
        "AddressPool 'v4' is also announced by L2Advertisement 'l2'",
    ),
]

IPS = "metadata.annotations[lb.teapot.io/ips]"
POOL = "metadata.annotations[lb.teapot.io/pool]"

SERVICE_CASES = [
    case(
        "ip-outside-every-pool",
        [V4, service("s", ips="203.0.113.5")],
        "Service/s: " + IPS,
        "203.0.113.5 is in no AddressPool",
    ),
    case(
        "load-balancer-ip-outside-every-pool",
        [V4, service("s", loadBalancerIP="203.0.113.5")],
        "Service/s: spec.loadBalancerIP",
        "203.0.113.5 is in no AddressPool",
    ),
    case(
        "ip-not-an-address",
        [V4, service("s", ips="192.0.2.5,192.0.2.x")],
        "Service/s: " + IPS,
        "'192.0.2.x' is not an IPv4 or IPv6 address",
    ),
    case(
        "ip-in-pool-not-serving-namespace",
        [TEAM, service("s", ips="198.51.100.5")],
        "Service/s: " + IPS,
        "198.51.100.5 is in AddressPool 'team', which does not serve",
    ),
    case(
        "ip-outside-requested-pool",
        [V4, TEAM, service("s", namespace="team-a", ips="192.0.2.5", pool="team")],
        "Service/s: " + IPS,
        "192.0.2.5 is in AddressPool 'v4', not in the requested pool 'team'",
    ),
    case(
        "ip-avoided-as-buggy",
        [pool("p", "192.0.2.0/24", avoidBuggyIPs=True), service("s", ips="192.0.2.255")],
        "Service/s: " + IPS,
        "192.0.2.255 is avoided by AddressPool 'p'",
    ),
    case(
        "unknown-pool-requested",
        [V4, service("s", pool="gold")],
        "Service/s: " + POOL,
        "no AddressPool named 'gold' (known: v4)",
    ),
    case(
        "pool-requested-out-of-scope",
        [TEAM, service("s", namespace="team-b", pool="team")],
        "Service/s: " + POOL,
        "AddressPool 'team' does not serve Services in namespace 'team-b'",
    ),
    case(
        "pool-scoped-by-namespace-labels",
        [
            pool(
                "p",
                "192.0.2.0/24",
                serviceAllocation={"namespaceSelectors": [labels_selector({"tier": "gold"})]},
            ),
            namespace("bronze-ns", tier="bronze"),
            service("s", namespace="bronze-ns", pool="p"),
        ],
        "Service/s: " + POOL,
        "does not serve Services in namespace 'bronze-ns'",
    ),
    case(
        "two-ipv4-requested",
        [V4, service("s", ips="192.0.2.5,192.0.2.6")],
        "Service/s: " + IPS,
        "requests 2 IPv4 addresses (192.0.2.5, 192.0.2.6); at most one per family",
    ),
    case(
        "single-stack-two-families",
        [V4, V6, service("s", ips="192.0.2.5,2001:db8::5", ipFamilyPolicy="SingleStack")],
        "Service/s: " + IPS,
        "requests IPv4 and IPv6 addresses but ipFamilyPolicy is SingleStack",
    ),
    case(
        "ip-family-not-enabled",
        [V6, service("s", ips="2001:db8::5", ipFamilies=["IPv4"])],
        "Service/s: " + IPS,
        "requests 2001:db8::5 but ipFamilies is [IPv4]",
    ),
    case(
        "ip-families-twice",
        [service("s", ipFamilies=["IPv4", "IPv4"])],
        "Service/s: spec.ipFamilies",
        "IPv4 is listed twice",
    ),
    case(
        "require-dual-stack-without-v6-pool",
        [V4, service("s", ipFamilyPolicy="RequireDualStack")],
        "Service/s: spec.ipFamilyPolicy",
        "no eligible AddressPool has IPv6 addresses",
    ),
    case(
        "ip-requested-twice-ways",
        [V4, service("s", ips="192.0.2.5", loadBalancerIP="192.0.2.5")],
        "Service/s: spec.loadBalancerIP",
        "either loadBalancerIP or lb.teapot.io/ips, not both",
    ),
    case(
        "shared-ip-without-key",
        [V4, service("a", ips="192.0.2.5"), service("b", "443", ips="192.0.2.5")],
        "Service/b: " + IPS,
        "needs the same lb.teapot.io/sharing-key",
    ),
    case(
        "shared-ip-port-clash",
        [
            V4,
            service("a", "53/UDP", ips="192.0.2.5", sharing_key="k"),
            service("b", "53/UDP", ips="192.0.2.5", sharing_key="k"),
        ],
        "Service/b: " + IPS,
        "192.0.2.5 is also requested by Service default/a, and they cannot share it:"
        " both use port 53/UDP",
    ),
    case(
        "shared-ip-local-different-pods",
        [
            V4,
            service(
                "a",
                "80",
                ips="192.0.2.5",
                sharing_key="k",
                externalTrafficPolicy="Local",
                selector={"app": "a"},
            ),
            service(
                "b",
                "443",
                ips="192.0.2.5",
                sharing_key="k",
                externalTrafficPolicy="Local",
                selector={"app": "b"},
            ),
        ],
        "Service/b: " + IPS,
        "must select the same pods",
    ),
]

ALL_CASES = (
    POOL_CASES + PEER_CASES + BGP_ADVERTISEMENT_CASES + BFD_CASES + L2_VIP_CASES + SERVICE_CASES
)


@pytest.mark.parametrize(("documents", "expect"), ALL_CASES)
def test_invalid_configuration_is_reported_with_object_field_and_reason(
    documents: list[dict[str, Any]], expect: Expect
) -> None:
    problems = problems_of(*documents)
    matching = [
        p
        for p in problems
        if f"{p.kind}/{p.name}: {p.field}" == expect.where and expect.fragment in p.message
    ]
    assert matching, f"expected {expect}, got:\n" + "\n".join(str(p) for p in problems)


def test_there_are_at_least_thirty_distinct_invalid_inputs() -> None:
    assert len({p.id for p in ALL_CASES}) == len(ALL_CASES) >= 30
