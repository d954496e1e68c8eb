"""Configurations that are valid are accepted: no false alarms for legitimate setups."""

from __future__ import annotations

from typing import Any

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

V4 = pool("v4", "192.0.2.0/24")


def ok(id: str, *documents: dict[str, Any]) -> Any:
    return pytest.param(list(documents), id=id)


VALID = [
    ok("adjacent-pools", V4, pool("next", "198.51.100.0/24"), pool("after", "192.0.3.0-192.0.3.9")),
    ok("dual-stack-pool", pool("dual", "192.0.2.0/28", "2001:db8::/124")),
    ok("well-known-and-large-communities",
       bgp_advertisement("ad", communities=["no-export", "NO-ADVERTISE", "65535:65281", "0:0"],
                         largeCommunities=["4294967295:0:4294967295"])),
    ok("same-router-from-disjoint-racks",
       peer("a", nodeSelectors=[zone("rack1")]), peer("b", nodeSelectors=[zone("rack2")])),
    ok("same-router-in-and-notin-disjoint",
       peer("a", nodeSelectors=[expression("zone", "In", "r1")]),
       peer("b", nodeSelectors=[expression("zone", "NotIn", "r1")])),
    ok("same-router-other-port", peer("a"), peer("b", peerPort=1179)),
    ok("hold-time-zero-without-keepalive", peer("r", holdTime="0s")),
    ok("hold-time-three-seconds", peer("r", holdTime="3s", keepaliveTime="1s")),
    ok("peer-with-bfd-profile", bfd_profile("fast", receiveInterval=50, transmitInterval=50),
       peer("r", bfdProfile="fast")),
    ok("bfd-profile-of-metallb-with-echo-off",
       bfd_profile("full", receiveInterval=380, transmitInterval=270, detectMultiplier=37,
                   echoInterval=62, echoMode=False, passiveMode=True, minimumTtl=32),
       peer("r", bfdProfile="full", ebgpMultiHop=True)),
    ok("bfd-profile-with-defaults-unused", bfd_profile("spare")),
    ok("bfd-profile-with-extreme-values",
       bfd_profile("edge", receiveInterval=10, transmitInterval=60000, detectMultiplier=255,
                   minimumTtl=1)),
    ok("dynamic-asn", peer("r", peerASN=None, dynamicASN="internal")),
    ok("ibgp-local-pref", V4, peer("r", peerASN=64512), bgp_advertisement("ad", localPref=100)),
    ok("aggregation-equal-to-pool", V4, bgp_advertisement("ad", "v4", aggregationLength=24)),
    ok("aggregation-covered-by-range",
       pool("r", "192.0.2.0-192.0.2.255"), bgp_advertisement("ad", aggregationLength=24)),
    ok("aggregation-v6-within-pool",
       pool("v6", "2001:db8::/64"), bgp_advertisement("ad", aggregationLengthV6=64)),
    ok("l2-and-vip-on-disjoint-nodes", V4,
       l2_advertisement("l2", "v4", nodeSelectors=[zone("a")]),
       vip_advertisement("vip", "v4", nodeSelectors=[zone("b")])),
    ok("vrid-ranges-on-different-interfaces",
       vip_advertisement("a", interface="eth0", vridRange={"start": 1, "end": 10}),
       vip_advertisement("b", interface="eth1", vridRange={"start": 1, "end": 10})),
    ok("vip-interval-in-centiseconds", vip_advertisement("a", advertisementInterval="1.25s")),
    ok("pool-selected-by-labels",
       pool("p", "192.0.2.0/24", labels={"exposure": "public"}),
       l2_advertisement("l2", addressPoolSelectors=[labels_selector({"exposure": "public"})])),
    ok("requested-ip-in-scoped-pool",
       pool("team", "192.0.2.0/24", serviceAllocation={"namespaces": ["team-a"]}),
       service("s", namespace="team-a", ips="192.0.2.7")),
    ok("namespace-selector-with-namespace-labels",
       pool("gold", "192.0.2.0/24",
            serviceAllocation={"namespaceSelectors": [labels_selector({"tier": "gold"})]}),
       namespace("shop", tier="gold"), service("s", namespace="shop", pool="gold")),
    ok("request-only-pool-by-name",
       pool("r", "192.0.2.0/24", autoAssign=False), service("s", pool="r")),
    ok("dual-stack-request", V4, pool("v6", "2001:db8::/120"),
       service("s", ips="192.0.2.5, 2001:db8::5", ipFamilyPolicy="RequireDualStack")),
    ok("require-dual-stack-with-both-pools", V4, pool("v6", "2001:db8::/120"),
       service("s", ipFamilyPolicy="RequireDualStack")),
    ok("sharing-cluster-policy-distinct-ports", V4,
       service("a", "53/UDP", ips="192.0.2.5", sharing_key="dns"),
       service("b", "53/TCP", ips="192.0.2.5", sharing_key="dns")),
    ok("sharing-local-policy-same-pods", V4,
       service("a", "80", ips="192.0.2.5", sharing_key="k", externalTrafficPolicy="Local",
               selector={"app": "x"}),
       service("b", "443", ips="192.0.2.5", sharing_key="k", externalTrafficPolicy="Local",
               selector={"app": "x"})),
    ok("other-load-balancer-class-is-not-ours", V4,
       service("s", ips="203.0.113.9", loadBalancerClass="example.com/other")),
    ok("cluster-ip-service-is-ignored", V4, service("s", ips="203.0.113.9", type="ClusterIP")),
    ok("services-alone-skip-pool-checks", service("s", ips="203.0.113.9")),
]  # fmt: skip


@pytest.mark.parametrize("documents", VALID)
def test_valid_configuration_has_no_problems(documents: list[dict[str, Any]]) -> None:
    assert [str(p) for p in problems_of(*documents)] == []
