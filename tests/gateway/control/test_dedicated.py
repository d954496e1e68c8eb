"""A tenant's dedicated gateway address (issue 34, 7(b)): how an Ingress or a Gateway asks
for one (Gateway `spec.addresses`, the Ingress annotation, the Tenant's default), which
address it gets from the tenant's allocation, what is refused with Gateway API's reasons
(UnsupportedAddress, AddressNotUsable, AddressNotAssigned), the quota, and what is served
there that the shared addresses refuse (host-less rules, defaultBackend, hostname-less
HTTPRoutes), for the tenant only; and the Service by which the speakers announce it.

acme's allocation is 198.51.100.0/28 (pool shared-v4), bolt's 198.51.100.16/28; the
shared gateway address is 203.0.113.10.
"""

from __future__ import annotations

from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.gateway import routing
from teapot_lb.gateway.config import GatewayConfig, Protocol, problems
from teapot_lb.gateway.control.l7services import address_services, differs
from teapot_lb.gateway.control.l7status import gateway_status, ingress_status
from teapot_lb.gateway.routing import Request
from teapot_lb.gateway.translate import ObjectResult, Translation, translate
from teapot_lb.model import dump
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.manifest import parse_object
from teapot_lb.model.tenancy import TenantLoadBalancer, TenantLoadBalancerStatus
from teapot_lb.tenancy.l7address import ANNOTATION_DEDICATED_ADDRESS, held_addresses
from teapot_lb.tenancy.l7vet import L7Object, L7Rule, L7World, vet_object
from tenancy.builders import parsed, pools, tlb

from . import builders
from .builders import backend, gateway, http_route, ingress, listener, tenant

SHARED = ip_address("203.0.113.10")
WEB, OTHER, BOLT_WEB = "192.0.2.11", "192.0.2.12", "192.0.2.71"
NOW = "2026-01-01T00:00:00Z"


def slices() -> list[dict[str, Any]]:
    return [
        builders.mirrored_slice("acme", "web", [WEB]),
        builders.mirrored_slice("acme", "other", [OTHER]),
        builders.mirrored_slice("bolt", "web", [BOLT_WEB]),
    ]


def holding(tenant_name: str, name: str, *ips: str) -> TenantLoadBalancer:
    """A TenantLoadBalancer of the tenant holding `ips` (its status, as the manager wrote)."""
    request = tlb(tenant_name, name)
    return request.model_copy(update={"status": TenantLoadBalancerStatus(addresses=list(ips))})


def run(
    *objects: L7Object,
    acme: dict[str, Any] | None = None,
    requests: tuple[TenantLoadBalancer, ...] = (),
    secrets: dict[str, dict[str, bytes]] | None = None,
) -> Translation:
    tenants = [tenant("acme", **(acme or {})), tenant("bolt")]
    world = L7World(
        tenants, list(objects), secrets or {}, pools=pools(), held=held_addresses(tenants, requests)
    )
    result = translate(world, slices(), [SHARED])
    assert problems(result.config) == []
    return result


def dedicated(address: str | bool) -> dict[str, str]:
    return {ANNOTATION_DEDICATED_ADDRESS: str(address).lower()}


def result_of(translation: Translation, obj: L7Object) -> ObjectResult:
    return translation.results[obj.ref]


def served(config: GatewayConfig, address: str, host: str, path: str = "/") -> str | None:
    """The endpoint the routing table of the HTTP listener on `address` picks (None: 404)."""
    http = next(
        x.name for x in config.listeners
        if x.protocol is Protocol.HTTP and str(x.address) == address
    )  # fmt: skip
    entry = routing.winner(routing.table(config, http), Request(host, path))
    if entry is None:
        return None
    found = config.backend(entry.rule.backends[0].backend)
    assert found is not None
    return str(found.endpoints[0].address)


def addresses_of(config: GatewayConfig) -> set[str]:
    """The addresses something is served on (the shared listeners are always bound)."""
    routes = (*config.http_routes, *config.tls_routes, *config.tcp_routes, *config.udp_routes)
    used = {name for r in routes for name in r.listeners}
    return {str(x.address) for x in config.listeners if x.name in used}


def host_less(tenant_name: str, name: str, **kwargs: Any) -> Ingress:
    """An Ingress with a hosted rule (www), a rule without host for /app, a defaultBackend."""
    body = builders.ingress_body(tenant_name, name, f"www.{tenant_name}.example",
                        defaultBackend=backend("other"), **kwargs)  # fmt: skip
    body["spec"]["rules"].append(
        {"http": {"paths": [{"path": "/app", "pathType": "Prefix", "backend": backend()}]}}
    )
    obj = parsed(body)
    assert isinstance(obj, Ingress)
    return obj


# --------------------------------------------------------------------------- asking


def test_an_ingress_with_an_address_of_its_allocation_is_served_there_host_less_parts_too() -> None:
    """The Ingress documentation's rules, on the tenant's own address: a rule without host
    takes every host, the defaultBackend every request no rule matches (a rule's host with
    a path it does not list included)."""
    obj = host_less("acme", "own", annotations=dedicated("198.51.100.5"))
    result = run(obj)
    r = result_of(result, obj)
    assert r.accepted and r.dropped == [] and str(r.address) == "198.51.100.5"
    config = result.config
    assert addresses_of(config) == {"198.51.100.5"}  # not on the shared address
    assert served(config, "198.51.100.5", "www.acme.example", "/") == WEB
    assert served(config, "198.51.100.5", "anything.example", "/app/x") == WEB
    assert served(config, "198.51.100.5", "anything.example", "/") == OTHER
    assert ingress_status(r, [SHARED]) == {"loadBalancer": {"ingress": [{"ip": "198.51.100.5"}]}}


def test_on_the_shared_addresses_the_same_ingress_loses_its_host_less_parts() -> None:
    obj = host_less("acme", "shared")
    r = result_of(run(obj), obj)
    assert r.address is None
    assert {d.field for d in r.dropped} == {"spec.rules[1].host", "spec.defaultBackend"}


def test_true_takes_an_address_of_the_allocation_and_the_tenant_keeps_one_for_all() -> None:
    """'any address': the first free one, not held by the tenant's load balancers; a second
    object asking for any gets the same (one address per tenant unless it names more)."""
    first = ingress("acme", "a", "a.acme.example", annotations=dedicated(True))
    second = ingress("acme", "b", "b.acme.example", age=1, annotations=dedicated(True))
    result = run(first, second, requests=(holding("acme", "lb", "198.51.100.0"),))
    got = {str(result_of(result, o).address) for o in (first, second)}
    assert got == {"198.51.100.1"}


def test_the_tenant_default_gives_every_object_its_address_unless_one_says_false() -> None:
    mine = ingress("acme", "mine", "a.acme.example")
    opted_out = ingress("acme", "out", "b.acme.example", annotations=dedicated(False))
    result = run(mine, opted_out, acme={"gateway": {"dedicatedAddress": True}})
    assert result_of(result, mine).address is not None
    assert result_of(result, opted_out).address is None


def test_a_gateway_with_an_address_serves_a_hostname_less_route_there() -> None:
    """Gateway API: a route without hostnames takes every hostname of its listener; on the
    Gateway's own address that is the tenant's, so it is attached (HostnameNotAllowed on
    the shared addresses)."""
    gw = gateway("acme", "gw", [listener("web", "HTTP", 80)],
                 addresses=[{"type": "IPAddress", "value": "198.51.100.6"}])  # fmt: skip
    route = http_route("acme", "all", [], age=1)
    result = run(gw, route)
    (parent,) = result_of(result, route).parents
    assert [(c.reason, c.status) for c in parent.conditions] == [("Accepted", True)]
    assert served(result.config, "198.51.100.6", "whatever.example") == WEB
    status = gateway_status(result_of(result, gw), [SHARED], NOW)
    assert status["addresses"] == [{"type": "IPAddress", "value": "198.51.100.6"}]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("Accepted", "True"), ("Programmed", "True")
    ]  # fmt: skip


def test_a_gateway_address_without_value_is_any_of_the_allocation() -> None:
    gw = gateway("acme", "gw", [listener("web", "HTTP", 80)], addresses=[{"type": "IPAddress"}])
    address = result_of(run(gw), gw).address
    assert address is not None and address in ip_network("198.51.100.0/28")


# --------------------------------------------------------------------------- refused


def _not_programmed(result: Translation, gw: L7Object) -> tuple[str, str]:
    status = gateway_status(result_of(result, gw), [SHARED], NOW)
    accepted, programmed = status["conditions"]
    assert accepted["status"] == "True" and programmed["status"] == "False"
    assert status["addresses"] == []
    return programmed["reason"], programmed["message"]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("198.51.100.20", "outside the allocation of Tenant acme"),  # bolt's
        ("203.0.113.10", "a shared address of the gateway"),
        ("198.51.100.3", "held by a TenantLoadBalancer of Tenant acme"),
    ],
    ids=["another tenant's", "the shared address", "held by its load balancer"],
)
def test_an_address_the_tenant_may_not_use_is_not_programmed_and_nothing_is_served(
    value: str, why: str
) -> None:
    gw = gateway("acme", "gw", [listener("web", "HTTP", 80)],
                 addresses=[{"type": "IPAddress", "value": value}])  # fmt: skip
    route = http_route("acme", "r", ["www.acme.example"], age=1)
    result = run(gw, route, requests=(holding("acme", "lb", "198.51.100.3"),))
    reason, message = _not_programmed(result, gw)
    assert reason == "AddressNotUsable" and why in message and "spec.addresses[0].value" in message
    assert result.config.http_routes == ()
    assert {str(x.address) for x in result.config.listeners} == {str(SHARED)}  # always bound
    (parent,) = result_of(result, route).parents
    assert parent.conditions[0].reason == "NoMatchingParent"
    assert "has no address" in parent.conditions[0].message
    # --check and the Event say the same (ObjectResult.problems)
    ((told, text),) = result_of(result, gw).problems()
    assert told == "AddressNotUsable" and text.startswith("spec.addresses[0].value: ")
    assert why in text


def test_an_address_held_by_another_tenants_gateway_is_not_usable() -> None:
    # (allocations of two Tenants never overlap; a hostile status is the only way to get
    # here: the older Gateway keeps it)
    older = gateway("acme", "gw", [listener("web", "HTTP", 80)],
                    addresses=[{"type": "IPAddress", "value": "198.51.100.4"}])  # fmt: skip
    bolt = ingress("bolt", "steal", "www.bolt.example", age=1,
                   annotations=dedicated("198.51.100.4"))  # fmt: skip
    result = run(older, bolt)
    assert str(result_of(result, older).address) == "198.51.100.4"
    (refusal,) = result_of(result, bolt).refusals
    assert refusal.rule is L7Rule.ADDRESS_NOT_USABLE


@pytest.mark.parametrize(
    ("addresses", "where"),
    [
        ([{"type": "Hostname", "value": "gw.acme.example"}], "spec.addresses[0].type"),
        (
            [
                {"type": "IPAddress", "value": "198.51.100.5"},
                {"type": "IPAddress", "value": "198.51.100.6"},
            ],
            "spec.addresses",
        ),
        ([{"type": "IPAddress", "value": "not-an-ip"}], "spec.addresses[0].value"),
    ],
    ids=["Hostname", "two addresses", "not an IP"],
)
def test_an_address_asked_in_a_way_not_served_refuses_the_gateway(
    addresses: list[dict[str, Any]], where: str
) -> None:
    """UnsupportedAddress (Accepted=False), in the webhook as at reconcile (a value that is
    no IP as stored past older CRDs: the upstream CRD refuses it first, below)."""
    gw = gateway("acme", "gw", [listener("web", "HTTP", 80)], addresses=addresses,
                 past_the_crd=True)  # fmt: skip
    world = L7World([tenant("acme"), tenant("bolt")], [gw])
    (refusal,) = vet_object(gw, world)
    assert (refusal.rule, refusal.field) == (L7Rule.UNSUPPORTED_ADDRESS, where)
    status = gateway_status(result_of(run(gw), gw), [SHARED], NOW)
    assert status["conditions"][0]["reason"] == "UnsupportedAddress"


def test_the_upstream_crd_refuses_an_address_value_that_is_no_ip_first() -> None:
    gw = gateway("acme", "gw", [listener("web", "HTTP", 80)], past_the_crd=True,
                 addresses=[{"type": "IPAddress", "value": "not-an-ip"}])  # fmt: skip
    obj, problems = parse_object(dump(gw))
    assert obj is None and [p.field for p in problems] == ["spec.addresses[0]"]


def test_an_ingress_annotation_that_is_no_address_is_refused() -> None:
    obj = ingress("acme", "web", annotations=dedicated("yes please"))
    (refusal,) = vet_object(obj, L7World([tenant("acme")], [obj]))
    assert refusal.rule is L7Rule.UNSUPPORTED_ADDRESS
    assert refusal.field == f"metadata.annotations[{ANNOTATION_DEDICATED_ADDRESS}]"


# --------------------------------------------------------------------------- quota


def test_the_address_counts_in_the_tenants_quota_with_its_load_balancers() -> None:
    """quotas.addresses 2: two load balancers hold 2 addresses, so a dedicated address is
    not assigned (AddressNotAssigned, naming the quota); the tenant's existing dedicated
    address is shared by its objects at no further cost; with a load balancer gone, the
    Gateway gets its address."""
    quota = {"quotas": {"addresses": 2}}
    gw = gateway("acme", "gw", [listener("web", "HTTP", 80)], addresses=[{"type": "IPAddress"}])
    full = (holding("acme", "a", "198.51.100.0"), holding("acme", "b", "198.51.100.1"))
    reason, message = _not_programmed(run(gw, acme=quota, requests=full), gw)
    assert reason == "AddressNotAssigned"
    assert "quota of 2 addresses of Tenant acme reached" in message

    one = full[:1]
    first = ingress("acme", "first", "a.acme.example", age=1, annotations=dedicated(True))
    named = ingress("acme", "named", "b.acme.example", age=2, annotations=dedicated("198.51.100.9"))
    result = run(gw, first, named, acme=quota, requests=one)
    assert str(result_of(result, gw).address) == "198.51.100.1"
    assert result_of(result, first).address == result_of(result, gw).address
    (refusal,) = result_of(result, named).refusals
    assert refusal.rule is L7Rule.ADDRESS_NOT_ASSIGNED
    assert ingress_status(result_of(result, named), [SHARED]) == {"loadBalancer": {"ingress": []}}


def test_no_free_address_in_the_allocation_is_not_assigned() -> None:
    # (both families of the allocation: 198.51.100.0/28 and 2001:db8:100::/124)
    everything = tuple(
        holding("acme", f"lb{i}", f"198.51.100.{i}", f"2001:db8:100::{i:x}") for i in range(16)
    )
    gw = gateway("acme", "gw", [listener("web", "HTTP", 80)], addresses=[{"type": "IPAddress"}])
    reason, message = _not_programmed(run(gw, acme={"quotas": {}}, requests=everything), gw)
    assert reason == "AddressNotAssigned" and "no free address" in message


# --------------------------------------------------------------------------- tenants apart


def test_the_dedicated_address_serves_its_tenant_only_and_its_certificates_only(
    tmp_path: Path,
) -> None:
    """bolt's hostname on acme's address is acme's to answer (its defaultBackend, or 404),
    never bolt's backend; acme's dedicated HTTPS listener offers acme's certificates only,
    the shared one every tenant's."""
    a_cert = builders.make_certificate(tmp_path, "www.acme.example")
    b_cert = builders.make_certificate(tmp_path, "www.bolt.example")
    secrets = {
        builders.secret_key("acme", "a-tls"): {"tls.crt": a_cert[0], "tls.key": a_cert[1]},
        builders.secret_key("bolt", "b-tls"): {"tls.crt": b_cert[0], "tls.key": b_cert[1]},
    }
    own = ingress("acme", "own", "www.acme.example", annotations=dedicated("198.51.100.5"),
                  tls=[{"hosts": ["www.acme.example"], "secretName": "a-tls"}])  # fmt: skip
    bolt = ingress("bolt", "web", "www.bolt.example", age=1,
                   tls=[{"hosts": ["www.bolt.example"], "secretName": "b-tls"}])  # fmt: skip
    config = run(own, bolt, secrets=secrets).config
    assert served(config, "198.51.100.5", "www.bolt.example") is None
    assert served(config, "203.0.113.10", "www.bolt.example") == BOLT_WEB
    assert served(config, "203.0.113.10", "www.acme.example") is None
    https = {
        str(x.address): x.certificates for x in config.listeners if x.protocol is Protocol.HTTPS
    }
    owners = {c.name: c.owner.namespace for c in config.certificates}
    assert {owners[c] for c in https["198.51.100.5"]} == {"tenant-acme"}
    assert {owners[c] for c in https["203.0.113.10"]} == {"tenant-bolt"}


# --------------------------------------------------------------------------- announced


def test_each_dedicated_address_gets_a_copy_of_the_gateway_service_with_it_pinned() -> None:
    """The Service the speakers announce the address by: the shared gateway Service's
    selector, ports, class and traffic policy, the address pinned, one family; what the API
    server adds (clusterIP, nodePorts) is no difference, a changed address is."""
    template = {
        "metadata": {"name": "teapot-lb-gateway", "namespace": "teapot-lb-system",
                     "annotations": {"lb.teapot.io/ips": "203.0.113.10"}, "uid": "u1"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "10.0.0.9",
                 "selector": {"app": "gw"}, "ipFamilies": ["IPv4"],
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 31000}]},
    }  # fmt: skip
    wanted = address_services(
        [(ip_address("198.51.100.5"), "acme"), (ip_address("2001:db8:100::5"), "acme")], template
    )
    v4 = wanted["teapot-lb-gateway-198-51-100-5"]
    assert v4["metadata"]["annotations"] == {"lb.teapot.io/ips": "198.51.100.5"}
    assert v4["spec"] == {
        "type": "LoadBalancer", "externalTrafficPolicy": "Local", "selector": {"app": "gw"},
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
    }  # fmt: skip
    assert wanted["teapot-lb-gateway-2001-db8-100--5"]["spec"]["ipFamilies"] == ["IPv6"]
    served = {**v4, "spec": {**v4["spec"], "clusterIP": "10.0.0.7",
                             "ports": [{**v4["spec"]["ports"][0], "nodePort": 31001}]}}  # fmt: skip
    assert not differs(served, v4)
    moved = address_services([(ip_address("198.51.100.6"), "acme")], template)
    assert differs(served, {**v4, "metadata": next(iter(moved.values()))["metadata"]})
