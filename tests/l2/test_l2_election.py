"""L2 owner election: deterministic, spread by IP, and explained."""

from __future__ import annotations

from ipaddress import IPv4Address, ip_address

from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.announce.election import (
    EXCLUDE_LABEL,
    Node,
    NodeSelector,
    Operator,
    Requirement,
    ServiceIP,
    elect,
    ranking,
)

NODES = [
    Node("node-a", {"zone": "z1"}),
    Node("node-b", {"zone": "z2"}),
    Node("node-c", {"zone": "z1"}),
]
ALL = {"node-a", "node-b", "node-c"}
IP = ServiceIP(IPv4Address("192.0.2.100"))


def test_every_speaker_computes_the_same_owner_whatever_the_order_of_nodes() -> None:
    assert elect(IP, NODES, ALL).owner == elect(IP, list(reversed(NODES)), ALL).owner


def test_the_owner_is_the_first_live_node_in_hash_order() -> None:
    order = ranking(IP.ip, ALL)
    assert elect(IP, NODES, ALL).owner == order[0]
    assert elect(IP, NODES, ALL - {order[0]}).owner == order[1]


def test_ips_spread_over_the_nodes() -> None:
    owners = [elect(ServiceIP(IPv4Address(f"192.0.2.{i}")), NODES, ALL).owner for i in range(100)]
    assert all(owners.count(n) >= 15 for n in ALL)


@given(st.integers(0, 255), st.sampled_from(sorted(ALL)))
def test_losing_a_node_that_does_not_own_an_ip_never_moves_it(last: int, gone: str) -> None:
    svc = ServiceIP(IPv4Address(f"198.51.100.{last}"))
    owner = elect(svc, NODES, ALL).owner
    if gone != owner:
        assert elect(svc, NODES, ALL - {gone}).owner == owner


def test_non_owners_are_told_who_owns_it() -> None:
    result = elect(IP, NODES, ALL)
    loser = result.candidates[1]
    assert result.reason(loser) == f"not elected: owner is {result.owner} (rank 2 of 3)"
    assert result.reason(result.owner or "") == "elected"


def test_excluded_and_unavailable_nodes_are_not_candidates() -> None:
    nodes = [
        Node("node-a", {EXCLUDE_LABEL: ""}),
        Node("node-b", network_unavailable=True),
        Node("node-c"),
    ]
    result = elect(IP, nodes, ALL)
    assert result.owner == "node-c"
    assert result.reason("node-a").startswith("excluded")
    assert "NetworkUnavailable" in result.reason("node-b")


def test_dead_speakers_are_not_candidates() -> None:
    result = elect(IP, NODES, {"node-b"})
    assert result.owner == "node-b"
    assert result.reason("node-a") == "speaker not alive"


def test_node_selectors_restrict_the_candidates() -> None:
    svc = ServiceIP(IP.ip, node_selectors=(NodeSelector({"zone": "z2"}),))
    assert elect(svc, NODES, ALL).owner == "node-b"
    expr = NodeSelector(
        match_expressions=(Requirement("zone", Operator.NOT_IN, frozenset({"z2"})),)
    )
    result = elect(ServiceIP(IP.ip, node_selectors=(expr,)), NODES, ALL)
    assert result.owner in {"node-a", "node-c"}
    assert result.reason("node-b").startswith("not selected")


def test_local_traffic_policy_needs_a_ready_local_endpoint() -> None:
    svc = ServiceIP(IP.ip, local_traffic_policy=True, ready_nodes=frozenset({"node-c"}))
    result = elect(svc, NODES, ALL)
    assert result.owner == "node-c"
    assert result.reason("node-a").startswith("no local endpoint")
    empty = elect(ServiceIP(IP.ip, local_traffic_policy=True), NODES, ALL)
    assert empty.owner is None


def test_equivalent_ipv6_spellings_rank_the_same() -> None:
    assert ranking(ip_address("2001:db8::100"), ALL) == ranking(
        ip_address("2001:0db8:0:0::0100"), ALL
    )
