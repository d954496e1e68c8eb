"""Bounded ECMP (``BGPAdvertisement.spec.maxNodesPerIP``): at most k nodes announce an IP,
chosen by rendezvous hashing, so a node joining or leaving moves only the IPs it enters or
leaves."""

from __future__ import annotations

from ipaddress import IPv4Address

from hypothesis import given, settings
from hypothesis import strategies as st

from announce.test_plan import assigned, node, view
from model.builders import bgp_advertisement, parse, peer, pool, service
from teapot_lb.announce.announcement import BGPRoute, Mode
from teapot_lb.announce.election import chosen, ranking
from teapot_lb.announce.plan import PlanOptions, explain, plan
from teapot_lb.cluster import ClusterView
from teapot_lb.model.manifest import parse_object
from teapot_lb.validation import ConfigSet, validate

IPS = [IPv4Address("198.51.100.0") + i for i in range(64)]
names = st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=24, unique=True)


@settings(max_examples=60, deadline=None)
@given(nodes=names, k=st.integers(1, 10))
def test_at_most_k_nodes_are_chosen_and_they_lead_the_election_order(
    nodes: list[str], k: int
) -> None:
    for ip in IPS[:8]:
        picked = chosen(ip, nodes, k)
        assert len(picked) == min(k, len(nodes))
        assert picked == ranking(ip, nodes)[:k]


@settings(max_examples=60, deadline=None)
@given(nodes=names, newcomer=st.text("xyz", min_size=1, max_size=3), k=st.integers(1, 6))
def test_a_node_joining_moves_only_the_ips_that_gain_it(
    nodes: list[str], newcomer: str, k: int
) -> None:
    for ip in IPS:
        before = set(chosen(ip, nodes, k))
        after = set(chosen(ip, [*nodes, newcomer], k))
        if newcomer in after:
            assert len(before - after) <= 1  # it displaced at most the k-th node
        else:
            assert after == before


@settings(max_examples=60, deadline=None)
@given(nodes=names, k=st.integers(1, 6), data=st.data())
def test_a_node_leaving_moves_only_the_ips_that_lose_it(
    nodes: list[str], k: int, data: st.DataObject
) -> None:
    gone = data.draw(st.sampled_from(nodes))
    rest = [n for n in nodes if n != gone]
    for ip in IPS:
        before = set(chosen(ip, nodes, k))
        after = set(chosen(ip, rest, k))
        if gone in before:
            assert before - {gone} <= after and len(after - before) <= 1
        else:
            assert after == before


NODES = [node(f"node-{i}") for i in range(10)]
POOL = pool("public", "192.0.2.0/28")


def bounded_view(k: int | None) -> ClusterView:
    adv = bgp_advertisement("bgp", "public", maxNodesPerIP=k)
    return view(*NODES, POOL, peer("tor"), adv, assigned(service("web"), "192.0.2.1"))


def announcing(v: ClusterView, options: PlanOptions | None = None) -> set[str]:
    route = BGPRoute("tor", "192.0.2.1/32")
    return {f"node-{i}" for i in range(10) if route in plan(v, f"node-{i}", options).announcements}


def test_without_the_option_every_eligible_node_announces() -> None:
    assert len(announcing(bounded_view(None))) == 10


def test_the_first_k_nodes_of_the_ip_s_hash_order_announce_it() -> None:
    expected = set(ranking(IPv4Address("192.0.2.1"), [f"node-{i}" for i in range(10)])[:3])
    assert announcing(bounded_view(3)) == expected


def test_a_dead_speaker_is_replaced_by_the_next_in_order() -> None:
    order = ranking(IPv4Address("192.0.2.1"), [f"node-{i}" for i in range(10)])
    live = set(order) - {order[0]}
    assert announcing(bounded_view(3), PlanOptions(live_speakers=live)) == set(order[1:4])


def test_explain_names_k_the_chosen_nodes_and_why_others_are_not() -> None:
    order = ranking(IPv4Address("192.0.2.1"), [f"node-{i}" for i in range(10)])
    decisions = {d.node: d for d in explain(bounded_view(2), "default/web")}
    chosen_text = f"{order[0]}, {order[1]}"
    yes, no = decisions[order[0]], decisions[order[5]]
    assert yes.announces and yes.mode is Mode.BGP
    assert "maxNodesPerIP 2 of bgp" in yes.reason and chosen_text in yes.reason
    assert not no.announces and no.reason.startswith("not chosen:")
    assert f"{order[5]} is not among the 2 node(s) {chosen_text}" in no.reason
    assert "from the eligible live nodes with a session" in no.reason


def test_max_nodes_per_ip_with_an_aggregate_is_refused_naming_the_field() -> None:
    adv = bgp_advertisement("bgp", "public", maxNodesPerIP=4, aggregationLength=28)
    problems = validate(ConfigSet.of([parse(POOL), parse(adv)]))
    (p,) = [p for p in problems if p.field == "spec.maxNodesPerIP"]
    assert "aggregationLength 28" in p.message


def test_max_nodes_per_ip_below_one_is_a_problem_naming_the_field() -> None:
    _, problems = parse_object(bgp_advertisement("bgp", "public", maxNodesPerIP=0))
    (p,) = problems
    assert p.field == "spec.maxNodesPerIP" and "greater than or equal to 1" in p.message
