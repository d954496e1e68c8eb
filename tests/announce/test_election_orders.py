"""The L2 election orders are ranked when read, and say what ranking every IP says."""

from __future__ import annotations

from ipaddress import ip_address

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.announce.cache import OrdersTable
from teapot_lb.announce.election import ranking
from teapot_lb.announce.fleet import ElectionOrders

_nodes = st.lists(st.sampled_from([f"n{i}" for i in range(12)]), unique=True, max_size=12)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.integers(0, 3000), _nodes, max_size=40))
def test_each_order_is_the_ranking_of_its_candidates(by_host: dict[int, list[str]]) -> None:
    candidates = {str(ip_address(0xC0000200 + h)): nodes for h, nodes in by_host.items()}
    orders = ElectionOrders(candidates)
    assert list(orders) == list(candidates)
    expected = {ip: ranking(ip_address(ip), nodes) for ip, nodes in candidates.items()}
    assert dict(orders.items()) == expected
    assert dict(orders.items()) == expected  # read again (kept)


def test_orders_read_past_the_kept_few_are_ranked_again_the_same() -> None:
    nodes = [f"n{i}" for i in range(5)]
    ips = [f"2001:db8::{i:x}" for i in range(ElectionOrders._KEEP + 10)]
    orders = ElectionOrders(dict.fromkeys(ips, nodes))
    first = orders[ips[0]]
    for ip in ips:
        orders[ip]
    assert orders[ips[0]] == first == ranking(ip_address(ips[0]), nodes)
    assert ips[0] in orders and "192.0.2.1" not in orders and len(orders) == len(ips)


def test_an_ip_services_share_has_the_greatest_key_s_candidates_and_passes_on() -> None:
    """As a walk of the Services in key order leaves it; deleting the holder hands the IP
    to the next, deleting the last one removes it."""
    table = OrdersTable()
    table.replace("ns/b", None, (("192.0.2.1", ("n2",)),))
    table.replace("ns/a", None, (("192.0.2.1", ("n1",)), ("192.0.2.2", ("n1",))))
    assert table.candidates == {"192.0.2.1": ("n2",), "192.0.2.2": ("n1",)}
    table.replace("ns/c", None, (("192.0.2.1", ("n3",)),))
    assert table.candidates["192.0.2.1"] == ("n3",)
    table.replace("ns/c", (("192.0.2.1", ("n3",)),), None)
    assert table.candidates["192.0.2.1"] == ("n2",)
    table.replace("ns/b", (("192.0.2.1", ("n2",)),), (("192.0.2.3", ("n2",)),))
    assert table.candidates == {"192.0.2.1": ("n1",), "192.0.2.2": ("n1",), "192.0.2.3": ("n2",)}
    table.replace("ns/a", (("192.0.2.1", ("n1",)), ("192.0.2.2", ("n1",))), None)
    assert table.candidates == {"192.0.2.3": ("n2",)}
