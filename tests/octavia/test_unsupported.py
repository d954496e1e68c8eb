"""Every option the teapot provider does not support is refused with its name; flavors."""

from __future__ import annotations

from typing import Any

import pytest

from teapot_lb.octavia.flavor import SUPPORTED, FlavorError, flavor_mode
from teapot_lb.octavia.tree import Mode, load_balancer_from_provider
from teapot_lb.octavia.unsupported import (
    ObjectKind,
    refusals,
    refusals_in_load_balancer,
    tree_refusals,
)

from .builders import listener, load_balancer, member, pool

REFUSED: list[tuple[ObjectKind, str, dict[str, Any]]] = [
    (ObjectKind.LOADBALANCER, "vip_qos_policy_id", load_balancer(vip_qos_policy_id="q")),
    (ObjectKind.LOADBALANCER, "vip_sg_ids", load_balancer(vip_sg_ids=["sg"])),
    (ObjectKind.LOADBALANCER, "additional_vips", load_balancer(additional_vips=[{"a": 1}])),
    (ObjectKind.LOADBALANCER, "availability_zone", load_balancer(availability_zone={"z": 1})),
    (ObjectKind.LISTENER, "protocol", listener(protocol="PROMETHEUS")),
    (ObjectKind.LISTENER, "connection_limit", listener(connection_limit=100)),
    (ObjectKind.LISTENER, "allowed_cidrs", listener(allowed_cidrs=["192.0.2.0/24"])),
    (ObjectKind.LISTENER, "insert_headers", listener(insert_headers={"X-Forwarded-For": "true"})),
    (ObjectKind.LISTENER, "client_ca_tls_container_ref", listener(client_ca_tls_container_ref="r")),
    (ObjectKind.LISTENER, "client_crl_container_ref", listener(client_crl_container_ref="r")),
    (ObjectKind.LISTENER, "client_authentication", listener(client_authentication="MANDATORY")),
    (ObjectKind.POOL, "protocol", pool(protocol="PROXY")),
    (ObjectKind.POOL, "lb_algorithm", pool(lb_algorithm="LEAST_CONNECTIONS")),
    (ObjectKind.POOL, "lb_algorithm", pool(lb_algorithm="SOURCE_IP")),
    (ObjectKind.POOL, "session_persistence", pool(session_persistence={"type": "SOURCE_IP"})),
    (ObjectKind.POOL, "tls_enabled", pool(tls_enabled=True)),
    (ObjectKind.POOL, "tls_container_ref", pool(tls_container_ref="r")),
    (ObjectKind.POOL, "ca_tls_container_ref", pool(ca_tls_container_ref="r")),
    (ObjectKind.POOL, "crl_container_ref", pool(crl_container_ref="r")),
    (ObjectKind.MEMBER, "backup", member(0, backup=True)),
    (ObjectKind.MEMBER, "monitor_address", member(0, monitor_address="192.0.2.99")),
    (ObjectKind.MEMBER, "monitor_port", member(0, monitor_port=9000)),
]


@pytest.mark.parametrize(("kind", "option", "obj"), REFUSED, ids=lambda v: str(v)[:30])
def test_each_unsupported_option_is_refused_with_its_name(
    kind: ObjectKind, option: str, obj: dict[str, Any]
) -> None:
    [refused] = refusals(kind, obj, Mode.ROUTE)
    assert refused.option == option
    assert f"option {option}=" in str(refused)
    assert kind.singular in str(refused)


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        (ObjectKind.LOADBALANCER, load_balancer()),
        (ObjectKind.LISTENER, listener()),
        (ObjectKind.LISTENER, listener(protocol="UDP")),
        (ObjectKind.POOL, pool(lb_algorithm="SOURCE_IP_PORT")),
        (ObjectKind.MEMBER, member(0)),
    ],
)
def test_what_is_supported_passes(kind: ObjectKind, obj: dict[str, Any]) -> None:
    assert refusals(kind, obj, Mode.ROUTE) == []


def test_a_graph_create_is_checked_object_by_object() -> None:
    lb = load_balancer(
        listeners=0,
        pools=[pool([member(0, backup=True)], lb_algorithm="LEAST_CONNECTIONS")],
    )
    lb["listeners"] = [listener(protocol="PROMETHEUS", default_pool=None)]
    found = {(r.kind, r.option) for r in refusals_in_load_balancer(lb, Mode.ROUTE)}
    assert found == {
        (ObjectKind.LISTENER, "protocol"),
        (ObjectKind.POOL, "lb_algorithm"),
        (ObjectKind.MEMBER, "backup"),
    }


def test_route_mode_needs_members_on_the_listeners_port() -> None:
    lb = load_balancer_from_provider(
        load_balancer(pools=[pool([member(0, port=8080)])]), Mode.ROUTE
    )
    [refused] = tree_refusals(lb)
    assert (refused.kind, refused.option, refused.value) == (
        ObjectKind.MEMBER,
        "protocol_port",
        8080,
    )
    proxied = lb.model_copy(update={"mode": Mode.PROXY})
    assert tree_refusals(proxied) == []


def test_proxy_mode_needs_one_member_port_per_pool() -> None:
    members = [member(0, port=8080), member(1, port=8081)]
    lb = load_balancer_from_provider(load_balancer(pools=[pool(members)]), Mode.PROXY)
    [refused] = tree_refusals(lb)
    assert (refused.kind, refused.option) == (ObjectKind.POOL, "members.protocol_port")


def test_members_of_another_family_than_the_vip_are_refused() -> None:
    lb = load_balancer_from_provider(
        load_balancer(pools=[pool([member(0, address="2001:db8:a::1")])]), Mode.ROUTE
    )
    assert [(r.option, r.value) for r in tree_refusals(lb)] == [("address", "2001:db8:a::1")]


def test_route_mode_listeners_must_reach_the_same_members() -> None:
    second_pool = pool([member(5)], pool_id="66666666-6666-4666-8666-666666666666")
    second = listener(
        listener_id="77777777-7777-4777-8777-777777777777",
        protocol_port=80,
        protocol="UDP",
        default_pool_id=second_pool["pool_id"],
    )
    lb = load_balancer(pools=[pool(), second_pool])
    lb["listeners"].append(second)
    tree = load_balancer_from_provider(lb, Mode.ROUTE)
    [refused] = tree_refusals(tree)
    assert (refused.kind, refused.option) == (ObjectKind.LOADBALANCER, "pools.members")


def test_flavor_mode_route_by_default_proxy_on_request_and_errors_name_the_key() -> None:
    assert flavor_mode({}) is Mode.ROUTE
    assert flavor_mode(None) is Mode.ROUTE
    assert flavor_mode({"mode": "proxy"}) is Mode.PROXY
    assert set(SUPPORTED) == {"mode"}
    with pytest.raises(FlavorError, match="mode='bridge'"):
        flavor_mode({"mode": "bridge"})
    with pytest.raises(FlavorError, match="compute_flavor"):
        flavor_mode({"compute_flavor": "x"})
