"""Announcement planning: who announces which Service IP, by which mode, and why not."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from model.builders import (
    bgp_advertisement,
    l2_advertisement,
    parse,
    peer,
    pool,
    service,
    vip_advertisement,
)
from teapot_lb.announce.announcement import BGPRoute, L2Claim, Mode, VIPMembership
from teapot_lb.announce.election import EXCLUDE_LABEL
from teapot_lb.announce.plan import PlanOptions, explain, plan
from teapot_lb.bgp import LargeCommunity, RouteAttributes
from teapot_lb.cluster import ClusterView, Store


def node(name: str, *, unavailable: bool = False, **labels: str) -> dict[str, Any]:
    status = (
        {"conditions": [{"type": "NetworkUnavailable", "status": "True"}]} if unavailable else {}
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": status,
    }


def endpoints(svc: str, ready: dict[str, bool], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{svc}-x",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": svc},
        },
        "endpoints": [
            {"addresses": ["192.0.2.200"], "nodeName": n, "conditions": {"ready": r}}
            for n, r in ready.items()
        ],
    }


def assigned(doc: dict[str, Any], *ips: str) -> dict[str, Any]:
    """The Service document with `ips` in status.loadBalancer.ingress."""
    return {**doc, "status": {"loadBalancer": {"ingress": [{"ip": ip} for ip in ips]}}}


def view(*documents: dict[str, Any]) -> ClusterView:
    store = Store()
    for d in documents:
        store.put_object(parse(d))
    return store.view()


NODES = [node("node-a"), node("node-b"), node("node-c")]
POOL = pool("public", "192.0.2.0/28", "2001:db8::/124")


def test_bgp_every_eligible_node_announces_the_host_route_to_its_peers() -> None:
    v = view(*NODES, POOL, peer("tor"), bgp_advertisement("bgp", "public"),
             assigned(service("web"), "192.0.2.1"))  # fmt: skip
    for name in ("node-a", "node-b", "node-c"):
        assert plan(v, name).announcements == {BGPRoute(peer="tor", prefix="192.0.2.1/32")}


def test_bgp_attributes_and_aggregation_come_from_the_advertisement() -> None:
    adv = bgp_advertisement(
        "bgp", "public", communities=["65000:100", "no-export"],
        largeCommunities=["64512:1:2"], aggregationLength=28, localPref=200,
    )  # fmt: skip
    v = view(*NODES, POOL, peer("tor"), adv, assigned(service("web"), "192.0.2.1"))
    (route,) = plan(v, "node-a").announcements
    assert route == BGPRoute(
        peer="tor",
        prefix="192.0.2.0/28",
        attributes=RouteAttributes(
            communities=(65000 * 65536 + 100, 0xFFFFFF01),
            large_communities=(LargeCommunity(64512, 1, 2),),
            local_pref=None,  # eBGP session: LOCAL_PREF is not sent
        ),
    )


def test_routes_of_one_advertisement_share_equal_attributes_per_peer_kind() -> None:
    # The planner shares one attributes object among the routes made with the same
    # advertisement and peer kind: each route's attributes are still what a route made
    # alone would get (eBGP without LOCAL_PREF, iBGP with it).
    adv = bgp_advertisement("bgp", "public", communities=["65000:100"], localPref=200)
    web, api = assigned(service("web"), "192.0.2.1"), assigned(service("api"), "192.0.2.2")
    v = view(*NODES, POOL, peer("tor"), peer("ibgp", peerASN=64512), adv, web, api)
    routes = [a for a in plan(v, "node-a").announcements if isinstance(a, BGPRoute)]
    by_peer = {p: [r.attributes for r in routes if r.peer == p] for p in ("tor", "ibgp")}
    communities = (65000 * 65536 + 100,)
    assert by_peer["tor"] == [RouteAttributes(communities=communities)] * 2
    assert by_peer["ibgp"] == [RouteAttributes(communities=communities, local_pref=200)] * 2
    assert by_peer["tor"][0] is by_peer["tor"][1]
    assert by_peer["ibgp"][0] is by_peer["ibgp"][1]


def test_local_pref_is_sent_on_ibgp_sessions_only() -> None:
    adv = bgp_advertisement("b", "public", localPref=50)
    v = view(*NODES, POOL, peer("ibgp", peerASN=64512), adv, assigned(service("web"), "192.0.2.1"))
    (route,) = plan(v, "node-a").announcements
    assert isinstance(route, BGPRoute) and route.attributes.local_pref == 50


def test_local_policy_announces_only_from_nodes_with_a_ready_endpoint() -> None:
    v = view(*NODES, POOL, peer("tor"), bgp_advertisement("bgp", "public"),
             assigned(service("web", externalTrafficPolicy="Local"), "192.0.2.1"),
             endpoints("web", {"node-a": True, "node-b": False}))  # fmt: skip
    assert plan(v, "node-a").announcements
    assert not plan(v, "node-b").announcements
    (why,) = plan(v, "node-c").decisions
    assert not why.announces and why.reason.startswith("no local endpoint")


def test_a_node_with_the_exclude_label_announces_nothing_and_says_so() -> None:
    v = view(node("node-a", **{EXCLUDE_LABEL: ""}), POOL, peer("tor"),
             bgp_advertisement("bgp", "public"), assigned(service("web"), "192.0.2.1"))  # fmt: skip
    p = plan(v, "node-a")
    assert not p.announcements
    assert p.decisions[0].reason.startswith("excluded")


def test_network_unavailable_nodes_are_excluded() -> None:
    v = view(node("node-a", unavailable=True), POOL, peer("tor"),
             bgp_advertisement("bgp", "public"), assigned(service("web"), "192.0.2.1"))  # fmt: skip
    assert not plan(v, "node-a").announcements


def test_peers_and_advertisements_respect_node_selectors() -> None:
    v = view(node("node-a", rack="r1"), node("node-b", rack="r2"), POOL,
             peer("tor-r1", nodeSelectors=[{"matchLabels": {"rack": "r1"}}]),
             bgp_advertisement("bgp", "public"), assigned(service("web"), "192.0.2.1"))  # fmt: skip
    assert plan(v, "node-a").announcements == {BGPRoute("tor-r1", "192.0.2.1/32")}
    (why,) = plan(v, "node-b").decisions
    assert why.reason == "no BGPPeer selects this node"


def test_l2_exactly_one_node_claims_each_ip_and_ips_spread() -> None:
    ips = [f"192.0.2.{i}" for i in range(1, 13)]
    docs = [assigned(service(f"s{i}"), ip) for i, ip in enumerate(ips)]
    v = view(*NODES, POOL, l2_advertisement("l2", "public"), *docs)
    owners: dict[str, list[str]] = {}
    for name in ("node-a", "node-b", "node-c"):
        for claim in plan(v, name).announcements:
            assert isinstance(claim, L2Claim)
            owners.setdefault(claim.ip, []).append(name)
    assert sorted(owners) == sorted(ips)
    assert all(len(o) == 1 for o in owners.values())
    assert len({o[0] for o in owners.values()}) > 1


def test_l2_owner_moves_when_its_speaker_is_not_alive() -> None:
    v = view(*NODES, POOL, l2_advertisement("l2", "public"), assigned(service("web"), "192.0.2.1"))
    all_live = {n: plan(v, n).announcements for n in ("node-a", "node-b", "node-c")}
    (owner,) = [n for n, a in all_live.items() if a]
    live = {"node-a", "node-b", "node-c"} - {owner}
    opts = PlanOptions(live_speakers=live)
    new_owners = [n for n in sorted(live) if plan(v, n, opts).announcements]
    assert len(new_owners) == 1
    (why,) = plan(v, owner, opts).decisions
    assert why.reason == "speaker not alive (membership)"


def test_l2_interfaces_come_from_the_advertisement() -> None:
    v = view(node("node-a"), POOL, l2_advertisement("l2", "public", interfaces=["eth1"]),
             assigned(service("web"), "192.0.2.1"))  # fmt: skip
    assert plan(v, "node-a").announcements == {L2Claim("192.0.2.1", ("eth1",))}


def test_vip_every_candidate_joins_the_instance_with_the_same_candidate_set() -> None:
    adv = vip_advertisement("vip", "public", interface="eth0", vridRange={"start": 10, "end": 20},
                            advertisementInterval="100ms")  # fmt: skip
    v = view(*NODES, POOL, adv, assigned(service("web"), "192.0.2.1"))
    expected = VIPMembership(
        ip="192.0.2.1", advertisement="vip", candidates=("node-a", "node-b", "node-c"),
        interface="eth0", advertisement_interval_s=0.1, vrid_range=(10, 20),
    )  # fmt: skip
    for name in ("node-a", "node-b", "node-c"):
        assert plan(v, name).announcements == {expected}


def test_an_ip_of_no_pool_or_without_advertisement_is_explained() -> None:
    v = view(*NODES, POOL, assigned(service("web"), "192.0.2.1"),
             assigned(service("other"), "203.0.113.9"))  # fmt: skip
    reasons = {(d.service, d.reason) for d in plan(v, "node-a").decisions}
    assert ("default/web", "no advertisement selects AddressPool public") in reasons
    assert ("default/other", "the IP is in no AddressPool") in reasons


def test_services_of_another_class_are_ignored() -> None:
    other = service("web", loadBalancerClass="example.com/other")
    v = view(
        *NODES, POOL, peer("tor"), bgp_advertisement("bgp", "public"), assigned(other, "192.0.2.1")
    )
    assert plan(v, "node-a").decisions == ()


def test_explain_gives_every_node_a_decision_per_mode() -> None:
    v = view(*NODES, POOL, peer("tor"), bgp_advertisement("bgp", "public"),
             l2_advertisement("l2", "public"), assigned(service("web"), "192.0.2.1"))  # fmt: skip
    decisions = explain(v, "default/web")
    assert {(d.node, d.mode) for d in decisions} == {
        (n, m) for n in ("node-a", "node-b", "node-c") for m in (Mode.BGP, Mode.L2)
    }
    assert sum(d.announces for d in decisions if d.mode is Mode.L2) == 1


def test_a_service_without_ip_is_explained_as_not_assigned() -> None:
    v = view(*NODES, POOL, peer("tor"), bgp_advertisement("bgp", "public"), service("web"))
    assert {d.reason for d in explain(v, "default/web")} == {"no IP assigned yet"}


# --- properties ---------------------------------------------------------------------------

NODE_NAMES = [f"n{i}" for i in range(5)]


@st.composite
def clusters(draw: st.DrawFn) -> ClusterView:
    docs: list[dict[str, Any]] = [POOL, peer("tor"), bgp_advertisement("bgp", "public"),
                                  l2_advertisement("l2", "public")]  # fmt: skip
    for name in NODE_NAMES:
        labels = {EXCLUDE_LABEL: ""} if draw(st.booleans()) and draw(st.booleans()) else {}
        docs.append(node(name, unavailable=draw(st.integers(0, 5)) == 0, **labels))
    for i in range(draw(st.integers(1, 6))):
        local = draw(st.booleans())
        svc = service(f"s{i}", externalTrafficPolicy="Local" if local else "Cluster")
        docs.append(assigned(svc, f"192.0.2.{i + 1}"))
        ready = draw(st.dictionaries(st.sampled_from(NODE_NAMES), st.booleans(), max_size=5))
        docs.append(endpoints(f"s{i}", ready))
    return view(*docs)


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_plans_are_deterministic(v: ClusterView) -> None:
    for name in NODE_NAMES:
        assert plan(v, name) == plan(v, name)


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_every_ip_is_announced_by_an_eligible_node_when_one_exists(v: ClusterView) -> None:
    plans = {n: plan(v, n) for n in NODE_NAMES}
    for key, svc in v.services.items():
        local = svc.spec.external_traffic_policy.value == "Local"
        ready = v.ready_endpoint_nodes(key)
        eligible = [
            n for n, nd in v.nodes.items()
            if EXCLUDE_LABEL not in nd.labels and not nd.network_unavailable
            and (not local or n in ready)
        ]  # fmt: skip
        for ip in svc.ingress_ips():
            bgp = [n for n, p in plans.items() if BGPRoute("tor", f"{ip}/32") in p.announcements]
            l2 = [n for n, p in plans.items() if L2Claim(str(ip)) in p.announcements]
            assert sorted(bgp) == sorted(eligible)
            assert len(l2) == (1 if eligible else 0)
            assert set(l2) <= set(eligible)


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_local_policy_never_announces_from_an_endpoint_less_node(v: ClusterView) -> None:
    for key, svc in v.services.items():
        if svc.spec.external_traffic_policy.value != "Local":
            continue
        ready = v.ready_endpoint_nodes(key)
        for name in NODE_NAMES:
            if name in ready:
                continue
            mine = [d for d in plan(v, name).decisions if d.service == key]
            assert not any(d.announces for d in mine)
