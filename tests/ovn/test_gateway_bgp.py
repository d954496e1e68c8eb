"""OVN mode with BGP: only the node whose chassis holds the gateway port announces (pure)."""

from __future__ import annotations

from typing import Any

from model.builders import bgp_advertisement, peer
from ovn.builders import POOL, ovn, view, web
from speaker.builders import node
from teapot_lb.announce.announcement import BGPRoute, Mode
from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.plan import PlanOptions, explain, plan
from teapot_lb.ovn.gateways import NOT_READ, GatewayPort, Gateways

VIP = "203.0.113.1"
NODES = [node(f"node-{i}", f"192.0.2.2{i}") for i in (1, 2, 3)]
CHASSIS = (("chassis-1", "node-1"), ("chassis-2", "node-2"), ("chassis-3", "node-3"))


def on(chassis: str | None) -> Gateways:
    """lr0's gateway port cr-lr0-ext on `chassis`."""
    return Gateways((GatewayPort("lr0", "cr-lr0-ext", chassis),), CHASSIS)


def world(*extra: dict[str, Any], routers: Any = None) -> Any:
    adv = ovn(gatewayRouters=routers or [{"name": "lr0"}])
    return view(POOL, adv, bgp_advertisement("bgp", "public"), peer("up"), web(VIP), *NODES,
                *extra)  # fmt: skip


def announcing(gateways: Gateways | None) -> set[str]:
    v = world()
    return {
        n
        for n in v.nodes
        if any(
            isinstance(a, BGPRoute)
            for a in plan(v, n, PlanOptions(ovn_gateways=gateways)).announcements
        )
    }


def test_only_the_node_of_the_chassis_holding_the_gateway_port_announces() -> None:
    assert announcing(on("chassis-1")) == {"node-1"}
    assert announcing(on("chassis-2")) == {"node-2"}


def test_an_unbound_port_or_an_unread_southbound_announces_nowhere() -> None:
    assert announcing(on(None)) == set()
    assert announcing(Gateways(synced=False)) == set()


def test_without_the_southbound_every_selected_node_announces_as_before() -> None:
    assert announcing(None) == {"node-1", "node-2", "node-3"}


def test_explain_names_the_active_chassis_and_why_a_node_does_not_announce() -> None:
    decisions = {
        d.node: d
        for d in explain(world(), "default/web", PlanOptions(ovn_gateways=on("chassis-2")))
        if d.mode is Mode.BGP
    }
    active = "router lr0: cr-lr0-ext on chassis chassis-2 (node node-2)"
    assert decisions["node-2"].announces and active in decisions["node-2"].reason
    assert not decisions["node-1"].announces
    assert "not the active OVN gateway chassis' node" in decisions["node-1"].reason
    assert active in decisions["node-1"].reason
    unread = explain(world(), "default/web", PlanOptions(ovn_gateways=Gateways(synced=False)))
    assert all(NOT_READ in d.reason for d in unread if d.mode is Mode.BGP)


def test_a_gateway_router_with_a_node_is_that_nodes_whatever_the_chassis_hostname() -> None:
    gateways = Gateways((GatewayPort("GR_a", "rtoe-GR_a", "sys-id-7"),), (("sys-id-7", "h"),))
    v = world(routers=[{"name": "GR_a", "node": "node-3"}])
    options = PlanOptions(ovn_gateways=gateways)
    assert [n for n in v.nodes if plan(v, n, options).of_mode(Mode.BGP)] == ["node-3"]


def test_a_moved_gateway_port_replans_through_the_cache() -> None:
    v, cache = world(), PlanCache()
    first = plan(v, "node-1", PlanOptions(ovn_gateways=on("chassis-1")), cache=cache)
    moved = plan(v, "node-1", PlanOptions(ovn_gateways=on("chassis-2")), cache=cache)
    assert first.of_mode(Mode.BGP) and not moved.of_mode(Mode.BGP)


def test_a_pool_without_an_ovn_advertisement_is_not_gated() -> None:
    v = view(POOL, bgp_advertisement("bgp", "public"), peer("up"), web(VIP), *NODES)
    options = PlanOptions(ovn_gateways=on("chassis-1"))
    assert all(plan(v, n, options).of_mode(Mode.BGP) for n in v.nodes)


def test_gateway_routers_on_several_nodes_are_announced_from_each_for_ecmp() -> None:
    ports = (GatewayPort("GR_1", "rtoe-GR_1", "chassis-1"), GatewayPort("GR_3", "p", "chassis-3"))
    gateways = Gateways(ports, CHASSIS)
    v = world(routers=[{"name": "GR_1"}, {"name": "GR_3"}])
    options = PlanOptions(ovn_gateways=gateways)
    assert [n for n in v.nodes if plan(v, n, options).of_mode(Mode.BGP)] == ["node-1", "node-3"]


def test_a_chassis_whose_hostname_is_no_node_announces_nowhere_and_says_so() -> None:
    gateways = Gateways((GatewayPort("lr0", "cr-lr0-ext", "chassis-9"),), (("chassis-9", "h9"),))
    decisions = explain(world(), "default/web", PlanOptions(ovn_gateways=gateways))
    bgp = [d for d in decisions if d.mode is Mode.BGP]
    assert bgp and not any(d.announces for d in bgp)
    assert "on chassis chassis-9 (hostname h9: no such node)" in bgp[0].reason
