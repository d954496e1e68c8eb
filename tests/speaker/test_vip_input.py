"""VIP renderer input from the cluster view (pure): the same on every node."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from teapot_lb.cluster import Kind
from teapot_lb.speaker.vip_backend import (
    cluster_vip_input,
    failed_vips,
    node_addresses,
    vip_groups,
)
from teapot_lb.standalone.assign import Assignment
from teapot_lb.vrrp.group import VipGroup
from teapot_lb.vrrp.render import InterfaceMissing

from .builders import lb_service, node, ours, put, remove, store_of


def vip_docs(*extra: dict[str, object]) -> list[dict[str, object]]:
    return [
        node("n1", "192.0.2.11"),
        node("n2", "192.0.2.12"),
        node("n3", "192.0.2.13", role="storage"),
        ours("AddressPool", "vip", {"addresses": ["192.0.2.224/28"]}),
        ours(
            "VIPAdvertisement",
            "vip",
            {
                "addressPools": ["vip"],
                "interface": "eth0",
                "nodeSelectors": [
                    {"matchExpressions": [{"key": "role", "operator": "DoesNotExist"}]}
                ],
            },
        ),
        *extra,  # type: ignore[list-item]
    ]


def eps(svc: str, *nodes: str) -> dict[str, object]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{svc}-1",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": svc},
        },
        "endpoints": [
            {"addresses": ["10.0.0.1"], "nodeName": n, "conditions": {"ready": True}} for n in nodes
        ],
    }


def with_vrids(doc: dict[str, Any], vrids: str) -> dict[str, Any]:
    """A Service as the controller leaves it: with its `lb.teapot.io/vrids` annotation."""
    doc["metadata"]["annotations"] = {"lb.teapot.io/vrids": vrids}
    return doc


def test_every_node_gets_the_same_groups_with_selected_candidates() -> None:
    view = store_of(*vip_docs(with_vrids(lb_service("dns", "192.0.2.230"), "vip=7"))).view()
    inp = cluster_vip_input(view)
    (m,) = inp.memberships
    assert m.candidates == ("n1", "n2")
    groups, errors = vip_groups(inp, {})
    assert errors == []
    (g,) = groups
    assert g.name == "vip/192.0.2.230" and g.interface == "eth0" and not g.local_traffic_policy
    assert g.vrid == 7  # the controller's, so every node runs the same instance


def test_ips_and_vrids_assigned_in_the_process_are_read_in_place_of_status_and_annotation() -> None:
    # teapot-lb run: the Service as its manifest has it (a status and annotation of its own),
    # and beside it what the standalone controller assigned.
    store = store_of(*vip_docs(with_vrids(lb_service("dns", "192.0.2.229"), "vip=3")))
    store.assign(
        "default/dns", Assignment("default/dns", (ip_address("192.0.2.230"),), vrids="vip=7")
    )
    inp = cluster_vip_input(store.view())
    (m,) = inp.memberships
    assert m.ip == "192.0.2.230"
    (g,) = vip_groups(inp, {})[0]
    assert g.vrid == 7
    store.assign("default/dns", None)  # nothing assigned here: the Service's own again
    (m,) = cluster_vip_input(store.view()).memberships
    assert m.ip == "192.0.2.229"


def test_an_ip_without_a_vrid_from_the_controller_is_not_run_and_says_why() -> None:
    view = store_of(*vip_docs(lb_service("dns", "192.0.2.230"))).view()
    groups, errors = vip_groups(cluster_vip_input(view), {})
    assert groups == []
    (error,) = errors
    assert error.startswith("192.0.2.230: VIP group vip/192.0.2.230: no virtual router ID")
    assert "lb.teapot.io/vrids" in error


def test_a_local_service_keeps_every_eligible_node_and_records_who_has_endpoints() -> None:
    docs = vip_docs(
        with_vrids(lb_service("web", "192.0.2.231", externalTrafficPolicy="Local"), "vip=9"),
        eps("web", "n2"),
    )
    inp = cluster_vip_input(store_of(*docs).view())
    (m,) = inp.memberships
    assert m.candidates == ("n1", "n2")  # not only n2: endpoints move by track file
    assert inp.local == {"192.0.2.231": frozenset({"n2"})}
    (g,) = vip_groups(inp, {})[0]
    assert g.local_traffic_policy


def test_no_vip_advertisement_no_work() -> None:
    view = store_of(node("n1", "192.0.2.11"), lb_service("dns", "192.0.2.230")).view()
    assert cluster_vip_input(view).memberships == frozenset()


def test_an_ip_without_interface_or_subnet_is_an_error_not_a_crash() -> None:
    docs = vip_docs(with_vrids(lb_service("dns", "192.0.2.230"), "vip=7"))
    docs[4] = ours("VIPAdvertisement", "vip", {"addressPools": ["vip"]})
    groups, errors = vip_groups(cluster_vip_input(store_of(*docs).view()), {})
    assert groups == []
    assert errors == ["192.0.2.230: no interface's subnet contains it; set interface"]


def test_a_renderer_error_fails_exactly_the_vips_of_the_groups_it_names() -> None:
    a = VipGroup("svc-a", "eth1", (ip_address("192.0.2.225"),), ("n1", "n2"))
    b = VipGroup("svc-b", "eth0", (ip_address("192.0.2.226"),), ("n1", "n2"))
    missing = InterfaceMissing("n1", "eth1", ["svc-a"])
    failed = failed_vips([a, b], ["192.0.2.227: no VIPAdvertisement selects it"], [missing])
    assert failed == {
        "192.0.2.225": str(missing),
        "192.0.2.227": "192.0.2.227: no VIPAdvertisement selects it",
    }


def test_node_addresses_are_parsed_again_only_for_nodes_that_changed() -> None:
    store = store_of(*vip_docs())
    known: dict[str, Any] = {}
    first = node_addresses(store.view(), known)
    assert first == {f"n{i}": (ip_address(f"192.0.2.1{i}"),) for i in (1, 2, 3)}
    kept = {name: hit for name, hit in known.items()}
    put(store, node("n2", "192.0.2.22"))
    remove(store, Kind.NODE, "n3")
    again = node_addresses(store.view(), known)
    assert again == {"n1": (ip_address("192.0.2.11"),), "n2": (ip_address("192.0.2.22"),)}
    assert known["n1"] is kept["n1"]  # the same Node: not parsed again
    assert "n3" not in known
