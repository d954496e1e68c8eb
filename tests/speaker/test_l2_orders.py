"""The L2 election order every speaker agrees on, liveness ignored (for the arbiter)."""

from __future__ import annotations

from ipaddress import ip_address

from teapot_lb.announce.election import EXCLUDE_LABEL, ranking
from teapot_lb.announce.fleet import l2_election_orders
from teapot_lb.announce.plan import PlanOptions, plan

from .builders import lb_service, node, ours, store_of


def l2_docs(*extra: dict[str, object]) -> list[dict[str, object]]:
    return [
        node("n1", "192.0.2.11"),
        node("n2", "192.0.2.12"),
        node("n3", "192.0.2.13", **{EXCLUDE_LABEL: ""}),
        ours("AddressPool", "lan", {"addresses": ["192.0.2.200/29"]}),
        ours("L2Advertisement", "lan", {"addressPools": ["lan"]}),
        *extra,  # type: ignore[list-item]
    ]


def test_order_lists_allowed_nodes_in_election_order_excluding_excluded_ones() -> None:
    view = store_of(*l2_docs(lb_service("web", "192.0.2.200"))).view()
    orders = l2_election_orders(view)
    assert orders == {"192.0.2.200": ranking(ip_address("192.0.2.200"), ["n1", "n2"])}


def test_order_ignores_liveness_but_the_plan_does_not() -> None:
    view = store_of(*l2_docs(lb_service("web", "192.0.2.200"))).view()
    first, second = l2_election_orders(view)["192.0.2.200"]
    options = PlanOptions(live_speakers={second})
    assert l2_election_orders(view, options)["192.0.2.200"] == (first, second)
    assert plan(view, second, options).announcements  # the live one takes it


def test_local_policy_orders_only_nodes_with_ready_endpoints() -> None:
    eps = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-1",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "n2", "conditions": {"ready": True}}],
    }
    docs = l2_docs(lb_service("web", "192.0.2.200", externalTrafficPolicy="Local"), eps)
    assert l2_election_orders(store_of(*docs).view()) == {"192.0.2.200": ("n2",)}


def test_ips_of_pools_without_l2_advertisement_have_no_order() -> None:
    docs = [
        node("n1", "192.0.2.11"),
        ours("AddressPool", "public", {"addresses": ["203.0.113.0/29"]}),
        lb_service("web", "203.0.113.1"),
    ]
    assert l2_election_orders(store_of(*docs).view()) == {}
