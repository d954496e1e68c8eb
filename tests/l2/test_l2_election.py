"""L2 election order: deterministic, spread by IP, stable when a non-owner goes.

Which nodes are candidates (exclusion label, NetworkUnavailable, node selectors, Local
traffic policy, live speakers) is the plan's decision: tests/announce/test_plan.py.
"""

from __future__ import annotations

from ipaddress import IPv4Address, ip_address

from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.announce.election import ranking

ALL = {"node-a", "node-b", "node-c"}
IP = IPv4Address("192.0.2.100")


def owner(ip: IPv4Address, live: set[str]) -> str:
    return ranking(ip, live)[0]


def test_every_speaker_computes_the_same_order_whatever_the_order_of_nodes() -> None:
    assert ranking(IP, sorted(ALL)) == ranking(IP, sorted(ALL, reverse=True))


def test_the_owner_is_the_first_live_node_in_hash_order() -> None:
    order = ranking(IP, ALL)
    assert owner(IP, ALL - {order[0]}) == order[1]


def test_ips_spread_over_the_nodes() -> None:
    owners = [owner(IPv4Address(f"192.0.2.{i}"), ALL) for i in range(100)]
    assert all(owners.count(n) >= 15 for n in ALL)


@given(st.integers(0, 255), st.sampled_from(sorted(ALL)))
def test_losing_a_node_that_does_not_own_an_ip_never_moves_it(last: int, gone: str) -> None:
    ip = IPv4Address(f"198.51.100.{last}")
    if gone != owner(ip, ALL):
        assert owner(ip, ALL - {gone}) == owner(ip, ALL)


def test_equivalent_ipv6_spellings_rank_the_same() -> None:
    assert ranking(ip_address("2001:db8::100"), ALL) == ranking(
        ip_address("2001:0db8:0:0::0100"), ALL
    )
