"""Whom the relay takes a session from (no sockets: the decision the tenant side asks for
each connection): a registered node address of a Tenant only; an unused address of its
node networks is refused with its own reason and Event, and a Tenant with no registered
node at all is named as a configuration problem."""

from __future__ import annotations

from ipaddress import ip_address

from tests.relay.builders import OPTIONS, relay_tenant
from tests.tenancy.builders import parsed, pools

from teapot_lb.cluster import ClusterView
from teapot_lb.model.tenancy import Tenant, TenantNodes
from teapot_lb.relay.relay import Relay, RelayConfig, RelayEvent


async def relay_with(*published: TenantNodes, **tenants: Tenant) -> tuple[Relay, list[RelayEvent]]:
    events: list[RelayEvent] = []
    relay = Relay(RelayConfig(local_as=64500, router_id="192.0.2.2", options=OPTIONS),
                  on_event=events.append)  # fmt: skip
    view = ClusterView(
        pools={f"x/{n}": p for n, p in pools().items()},
        tenants=tenants,
        tenant_nodes={f"{o.namespace}/{o.name}": o for o in published},
    )
    await relay.apply(view)
    return relay, events


async def test_a_registered_node_address_gets_a_session_with_its_tenants_asn() -> None:
    relay, _ = await relay_with(acme=relay_tenant("acme"))
    for address in ("192.0.2.11", "2001:db8:a::11"):
        config = relay._resolve(ip_address(address))
        assert config is not None and config.peer_as == 64601


async def test_an_unregistered_address_in_the_node_networks_is_refused_with_its_reason() -> None:
    relay, events = await relay_with(acme=relay_tenant("acme"))
    assert relay._resolve(ip_address("192.0.2.40")) is None
    assert relay._resolve(ip_address("2001:db8:a::40")) is None
    assert [e.reason for e in events] == ["SessionRefusedUnregistered"] * 2
    assert "is in Tenant acme's node networks but no registered node" in events[0].message
    refused = relay.metrics.refused.labels("acme", "unregistered-address")
    assert refused._value.get() == 2


async def test_a_tenant_without_registered_nodes_is_a_configuration_problem() -> None:
    relay, _ = await relay_with(acme=relay_tenant("acme", nodes=[]))
    assert relay.problems == [
        "Tenant acme has no registered nodes: no session of its speakers is accepted"
        " (list them in the Tenant's spec.nodes, or run its clusters' tenant agents, which"
        " publish them as TenantNodes)"
    ]
    assert relay._resolve(ip_address("192.0.2.11")) is None


async def test_the_nodes_published_in_a_tenants_namespace_are_registered_beside_its_own() -> None:
    body = {
        "apiVersion": "lb.teapot.io/v1alpha1", "kind": "TenantNodes",
        "metadata": {"name": "c1", "namespace": "tenant-acme"},
        "spec": {"cluster": "c1", "nodes": [{"name": "n5", "addresses": ["192.0.2.40"]}]},
    }  # fmt: skip
    published = parsed(body)
    assert isinstance(published, TenantNodes)
    relay, events = await relay_with(published, acme=relay_tenant("acme"))
    assert relay._resolve(ip_address("192.0.2.40")) is not None  # c1/n5
    assert relay._resolve(ip_address("192.0.2.11")) is not None  # spec.nodes' n0
    assert relay.tenants["acme"].nodes[ip_address("192.0.2.40")] == "c1/n5"
    assert events == []
