"""Gateway-mode TenantLoadBalancers (provider proxy, issue 38) translated into the
gateway's config: each port on each assigned address is a TCP or UDP listener proxying
to the tenant's nodes at the nodePort; what the gateway cannot serve is refused with the
field named; a socket someone older holds is refused to the younger request."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from teapot_lb.gateway.config import GatewayConfig, Protocol, problems
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.tenancy.l7vet import L7Object, L7World
from tenancy.builders import pools

from .builders import gateway, listener, proxy_request, tenant

GATEWAY = ip_address("203.0.113.10")
VIP = "198.51.100.5"
NODES = ["192.0.2.11", "192.0.2.12", "192.0.2.13"]  # acme's (tenancy.builders)


def run(
    *requests: TenantLoadBalancer, objects: tuple[L7Object, ...] = (), **tenant_spec: Any
) -> Translation:
    tenants = [tenant("acme", **tenant_spec), tenant("bolt")]
    world = L7World(tenants, list(objects), {}, pools=pools())
    result = translate(world, [], [GATEWAY], requests)
    assert problems(result.config) == []
    return result


def stream(config: GatewayConfig, protocol: Protocol) -> dict[str, list[str]]:
    """Per listener `address:port` of `protocol`, its backend's endpoints."""
    routes = config.tcp_routes if protocol is Protocol.TCP else config.udp_routes
    out = {}
    for route in routes:
        backend = config.backend(route.backends[0].backend)
        assert backend is not None
        for name in route.listeners:
            x = config.listener(name)
            assert x is not None and x.protocol is protocol
            out[f"{x.address}:{x.port}"] = [f"{e.address}:{e.port}" for e in backend.endpoints]
    return out


def the(result: Translation, request: TenantLoadBalancer) -> Any:
    return result.load_balancers[request.ref]


def test_each_port_on_each_address_is_a_listener_to_the_nodes_at_the_node_port() -> None:
    web = proxy_request(
        "acme", "web", [VIP, "2001:db8:100::5"], ipFamilyPolicy="RequireDualStack",
        ports=[{"protocol": "TCP", "port": 80, "nodePort": 30080},
               {"name": "dns", "protocol": "UDP", "port": 53, "nodePort": 30053}],
    )  # fmt: skip
    result = run(web)
    tcp, udp = stream(result.config, Protocol.TCP), stream(result.config, Protocol.UDP)
    assert tcp == {f"{VIP}:80": [f"{n}:30080" for n in NODES],
                   "2001:db8:100::5:80": [f"{n}:30080" for n in NODES]}  # fmt: skip
    assert udp == {f"{VIP}:53": [f"{n}:30053" for n in NODES],
                   "2001:db8:100::5:53": [f"{n}:30053" for n in NODES]}  # fmt: skip
    assert the(result, web).served == [
        f"{VIP}:80/TCP",
        "2001:db8:100::5:80/TCP",
        f"{VIP}:53/UDP",
        "2001:db8:100::5:53/UDP",
    ]
    assert the(result, web).refusals == []


def test_cluster_traffic_policy_sends_to_every_node_while_one_holds_a_ready_endpoint() -> None:
    one_ready = proxy_request("acme", "web", [VIP], backends=[
        {"node": "n0", "addresses": [NODES[0]], "ready": True},
        {"node": "n1", "addresses": [NODES[1]], "ready": False},
    ])  # fmt: skip
    assert stream(run(one_ready).config, Protocol.TCP) == {
        f"{VIP}:80": [f"{NODES[0]}:30080", f"{NODES[1]}:30080"]
    }
    none_ready = proxy_request("acme", "web", [VIP], ready=False)
    assert stream(run(none_ready).config, Protocol.TCP) == {f"{VIP}:80": []}


def test_local_traffic_policy_sends_to_the_nodes_holding_a_ready_endpoint_only() -> None:
    web = proxy_request("acme", "web", [VIP], externalTrafficPolicy="Local", backends=[
        {"node": "n0", "addresses": [NODES[0]], "ready": True},
        {"node": "n1", "addresses": [NODES[1]], "ready": False},
    ])  # fmt: skip
    assert stream(run(web).config, Protocol.TCP) == {f"{VIP}:80": [f"{NODES[0]}:30080"]}


def test_a_node_outside_the_tenants_node_networks_is_not_served_and_said() -> None:
    web = proxy_request("acme", "web", [VIP], backends=[
        {"node": "n0", "addresses": [NODES[0]], "ready": True},
        {"node": "evil", "addresses": ["192.0.2.71"], "ready": True},  # bolt's network
    ])  # fmt: skip
    result = run(web)
    assert stream(result.config, Protocol.TCP) == {f"{VIP}:80": [f"{NODES[0]}:30080"]}
    (note,) = the(result, web).notes
    assert "spec.backends: node address 192.0.2.71 is outside the node networks" in note


def test_sctp_and_a_port_without_node_port_are_refused_naming_the_field() -> None:
    web = proxy_request("acme", "web", [VIP], ports=[
        {"protocol": "TCP", "port": 80, "nodePort": 30080},
        {"protocol": "SCTP", "port": 9, "nodePort": 30009},
        {"protocol": "TCP", "port": 81},
    ])  # fmt: skip
    result = run(web)
    assert list(stream(result.config, Protocol.TCP)) == [f"{VIP}:80"]
    refusals = the(result, web).refusals
    assert [(r.field, r.reason) for r in refusals] == [
        ("spec.ports[1].protocol", "UnsupportedProtocol"),
        ("spec.ports[2].nodePort", "NoNodePort"),
    ]
    assert "SCTP is not served by the shared gateway (TCP and UDP only)" in str(refusals[0])


def test_requests_of_another_provider_or_without_addresses_are_not_served() -> None:
    route = proxy_request("acme", "routed", [VIP], provider="route")
    waiting = proxy_request("acme", "waiting", [])
    result = run(route, waiting)
    assert result.load_balancers == {}
    assert result.config.tcp_routes == ()


def test_an_address_of_the_gateway_itself_is_refused() -> None:
    web = proxy_request("acme", "web", [str(GATEWAY)])
    result = run(web)
    (refusal,) = the(result, web).refusals
    assert (refusal.field, refusal.reason) == ("status.addresses[0]", "AddressNotUsable")
    assert "is a shared address of the gateway" in refusal.message
    assert result.config.tcp_routes == ()


def test_the_older_request_keeps_a_shared_ip_and_port_the_younger_is_refused() -> None:
    older = proxy_request("acme", "older", [VIP], age=1)
    younger = proxy_request("acme", "younger", [VIP], age=2)
    result = run(younger, older)
    assert the(result, older).served == [f"{VIP}:80/TCP"]
    (refusal,) = the(result, younger).refusals
    assert refusal.field == "status.addresses[0]"
    assert f"{VIP}:80/TCP is taken by TenantLoadBalancer tenant-acme/older" in refusal.message
    assert len(result.config.tcp_routes) == 1


def test_a_gateway_listener_on_the_same_address_and_port_keeps_it() -> None:
    # The address layer gives a Gateway no address a request holds; were both there (a
    # view not yet caught up), the Gateway's listener is kept and the request refused.
    gw = gateway("acme", "gw", [listener("db", "TCP", 80)], age=0,
                 addresses=[{"type": "IPAddress", "value": VIP}])  # fmt: skip
    web = proxy_request("acme", "web", [VIP], age=5)
    result = run(web, objects=(gw,))
    assert result.results[gw.ref].accepted and result.results[gw.ref].address == ip_address(VIP)
    (refusal,) = the(result, web).refusals
    assert refusal.reason == "PortUnavailable"
    assert "is taken by an Ingress or Gateway of the tenant" in refusal.message


def test_a_tenant_not_allowed_provider_proxy_is_refused() -> None:
    web = proxy_request("acme", "web", [VIP], provider="proxy")
    result = run(web, providers=["route"])
    (refusal,) = the(result, web).refusals
    assert (refusal.field, refusal.reason) == ("spec.provider", "ProviderNotAllowed")


def test_an_address_outside_the_tenants_allocation_is_not_served() -> None:
    web = proxy_request("acme", "web", ["198.51.100.20"])  # bolt's
    result = run(web)
    (refusal,) = the(result, web).refusals
    assert refusal.reason == "AddressNotUsable"
    assert "is outside the allocation of Tenant acme" in refusal.message
    assert result.config.tcp_routes == ()


def test_a_request_limiting_its_clients_is_not_served_open_but_refused() -> None:
    # The gateway cannot filter sources (and the tenant's kube-proxy sees the gateway, not
    # the clients): a request with loadBalancerSourceRanges the manager let through (an
    # older one) is still served nowhere, and says why.
    web = proxy_request("acme", "web", [VIP], loadBalancerSourceRanges=["203.0.113.0/24"])
    result = run(web)
    (refusal,) = the(result, web).refusals
    assert (refusal.field, refusal.reason) == (
        "spec.loadBalancerSourceRanges",
        "UnsupportedSourceRanges",
    )
    assert "use provider route" in refusal.message
    assert the(result, web).served == [] and result.config.tcp_routes == ()
