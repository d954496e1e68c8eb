"""The gateway's reconcile over HTTP, with the real tenant agent: a tenant's Ingress and
HTTPRoute become the data plane's config and get their status back in the tenant cluster;
an object written while the webhook was down is refused at reconcile (condition or
annotation, Event) and nothing of the other tenant is disturbed."""

from __future__ import annotations

import base64
import contextlib
import copy
from collections.abc import AsyncIterator
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.config import GatewayConfig
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.control.l7mirror import ANNOTATION_REFUSED
from teapot_lb.gateway.control.l7services import ANNOTATION_ADDRESS_FOR, LABEL_ADDRESS_OF
from teapot_lb.kube.resources import INGRESSES, TENANT_LOAD_BALANCERS
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.model.ingress import GATEWAY_CONTROLLER
from teapot_lb.tenancy.l7address import ANNOTATION_DEDICATED_ADDRESS
from tenancy.builders import pool_body, tenant_body, tlb_body

from .builders import DOMAINS, make_certificate
from .tenant_world import (
    NS,
    TenantWorld,
    gateway,
    gateway_class,
    http_route,
    ingress,
    service,
    slice_of,
    tenant_world,
)

WITHIN = 15.0
GATEWAY_IP = "203.0.113.10"
# The shared gateway's Service (deploy/teapot/gateway-node.yaml's shape).
GATEWAY_SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "teapot-lb-gateway", "namespace": "teapot-lb-system",
                 "annotations": {"lb.teapot.io/ips": GATEWAY_IP}},
    "spec": {
        "type": "LoadBalancer", "loadBalancerClass": "lb.teapot.io/teapot",
        "externalTrafficPolicy": "Local",
        "selector": {"app.kubernetes.io/component": "gateway"},
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"},
                  {"name": "https", "port": 443, "protocol": "TCP"}],
    },
}  # fmt: skip


def tenants() -> list[dict[str, Any]]:
    out = []
    for name in ("acme", "bolt"):
        body = tenant_body(
            name, dnsDomains=[*DOMAINS[name], "apps.example"], modes=["Route", "Gateway"]
        )
        out.append(body)
    return out


@contextlib.asynccontextmanager
async def with_control(
    world: TenantWorld, **options: Any
) -> AsyncIterator[tuple[GatewayControl, list[GatewayConfig]]]:
    configs: list[GatewayConfig] = []

    async def applied(config: GatewayConfig) -> None:
        configs.append(config)

    control = GatewayControl(
        world.admin, [ip_address(GATEWAY_IP)], on_config=applied, watch_timeout_s=30, **options
    )
    async with running(control):
        yield control, configs


def seed() -> list[dict[str, Any]]:
    return [
        service("web"),
        service("api", node_port=30081),
        slice_of("web", ["10.1.0.1"]),
        slice_of("api", ["10.1.0.3"]),
        ingress("shop", "www.apps.example"),
        gateway_class("teapot-gw"),
        gateway("gw", "teapot-gw"),
        http_route("store", "gw", ["store.acme.example"]),
    ]


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    return make_certificate(tmp_path_factory.mktemp("control-certs"), "www.acme.example")


async def test_a_tenants_objects_are_served_and_their_status_comes_back(tmp_path: Path) -> None:
    async with tenant_world(tmp_path, *seed()) as world:
        for body in tenants():
            world.management.seed(body)
        async with with_control(world) as (control, configs):
            ip = await wait_for_async(
                lambda: ((world.tenant.get("ingresses", "shop", "web") or {}).get("status", {})
                         .get("loadBalancer", {}).get("ingress")),
                within=WITHIN, what="the gateway's IP in the tenant Ingress's status",
            )  # fmt: skip
            assert ip == [{"ip": GATEWAY_IP}]
            parents = await wait_for_async(
                lambda: (
                    (world.tenant.get("httproutes", "store", "web") or {})
                    .get("status", {})
                    .get("parents")
                ),
                within=WITHIN,
                what="the route's parent status in the tenant cluster",
            )
            (ours,) = [p for p in parents if p["controllerName"] == GATEWAY_CONTROLLER]
            conditions = {c["type"]: (c["status"], c["reason"]) for c in ours["conditions"]}
            assert conditions == {
                "Accepted": ("True", "Accepted"),
                "ResolvedRefs": ("True", "ResolvedRefs"),
            }
            gw_status = await wait_for_async(
                lambda: (
                    (world.tenant.get("gateways", "gw", "web") or {})
                    .get("status", {})
                    .get("addresses")
                ),
                within=WITHIN,
                what="the Gateway's addresses in the tenant cluster",
            )
            assert gw_status == [{"type": "IPAddress", "value": GATEWAY_IP}]

            def served_hosts() -> set[str] | None:
                config = control.config
                if config is None:
                    return None
                hosts = {h for r in config.http_routes for h in r.hostnames}
                return hosts if hosts == {"www.apps.example", "store.acme.example"} else None

            await wait_for_async(served_hosts, within=WITHIN, what="both hostnames in the config")
            backends = {
                b.owner.name: [str(e.address) for e in b.endpoints] for b in control.config.backends
            }  # type: ignore[union-attr]
            # NodePorts (the Tenant's default): the tenant's nodes at the Services' nodePorts.
            assert backends == {
                "web": ["192.0.2.11", "192.0.2.12"],
                "api": ["192.0.2.11", "192.0.2.12"],
            }
            assert configs and configs[-1] == control.config


async def test_an_object_written_while_the_webhook_was_down_is_refused_at_reconcile(
    tmp_path: Path,
) -> None:
    async with tenant_world(tmp_path, *seed()) as world:
        for body in tenants():
            world.management.seed(body)
        async with with_control(world) as (control, _):
            await wait_for_async(
                lambda: world.management.get("ingresses", "c1.web.shop", NS),
                within=WITHIN,
                what="the mirror",
            )
            theft = copy.deepcopy(ingress("steal", "www.apps.example"))
            theft["metadata"] = {"name": "steal", "namespace": "tenant-bolt"}
            world.management.seed(theft)
            refused = await wait_for_async(
                lambda: (
                    (world.management.get("ingresses", "steal", "tenant-bolt") or {})
                    .get("metadata", {})
                    .get("annotations", {})
                    .get(ANNOTATION_REFUSED)
                ),
                within=WITHIN,
                what="the refusal annotation",
            )
            assert refused.startswith("HostnameTaken: spec.rules[0].host")
            events = await wait_for_async(
                lambda: [e for e in world.management.list("events", "tenant-bolt")
                         if e.get("reason") == "HostnameTaken"],
                within=WITHIN, what="the refusal Event",
            )  # fmt: skip
            assert events[0]["involvedObject"]["name"] == "steal"
            stolen = world.management.get("ingresses", "steal", "tenant-bolt") or {}
            assert not stolen.get("status", {}).get("loadBalancer", {}).get("ingress")
            # Nothing of acme is disturbed: still served, still its IP, no annotation.
            assert control.config is not None
            owners = {
                r.owner.namespace
                for r in control.config.http_routes
                if "www.apps.example" in r.hostnames
            }
            assert owners == {NS}
            refused = control.registry.get_sample_value(
                "teapot_lb_gateway_objects",
                {"tenant": "bolt", "kind": "Ingress", "state": "HostnameTaken"},
            )
            assert refused == 1
            mirror = world.management.get("ingresses", "c1.web.shop", NS) or {}
            assert ANNOTATION_REFUSED not in (mirror.get("metadata", {}).get("annotations") or {})
            assert mirror["status"]["loadBalancer"]["ingress"] == [{"ip": GATEWAY_IP}]


async def test_the_webhook_check_refuses_a_theft_and_admits_the_owner(tmp_path: Path) -> None:
    from teapot_lb.model import parse_object

    async with tenant_world(tmp_path, *seed()) as world:
        for body in tenants():
            world.management.seed(body)
        # Before its caches have synced, the check refuses (it cannot tell whose a name is).
        cold = GatewayControl(world.admin, [ip_address(GATEWAY_IP)])
        early = ingress("early", "www.bolt.example")
        early["metadata"] = {"name": "early", "namespace": "tenant-bolt"}
        parsed_early, _ = parse_object(early)
        assert parsed_early is not None
        (waiting,) = cold.admission(parsed_early)
        assert "not synced yet" in waiting.message
        async with with_control(world) as (control, _):
            await wait_for_async(
                lambda: control.translation and control.translation.config.http_routes,
                within=WITHIN,
                what="the first translation",
            )
            theft = ingress("steal", "www.apps.example")
            theft["metadata"] = {"name": "steal", "namespace": "tenant-bolt"}
            parsed, _ = parse_object(theft)
            assert parsed is not None
            (problem,) = control.admission(parsed)
            assert "HostnameTaken" in problem.message and problem.field == "spec.rules[0].host"
            own = world.management.get("ingresses", "c1.web.shop", NS)
            parsed_own, _ = parse_object(own)
            assert parsed_own is not None and control.admission(parsed_own) == []


async def test_an_ingress_rule_without_host_is_left_out_with_an_event_and_the_rest_served(
    tmp_path: Path,
) -> None:
    """Issue 34, 7(a), in Kubernetes mode: the Ingress keeps its address (its hosted rule
    is served), the annotation and a Warning Event name the rule left out."""
    async with tenant_world(tmp_path, *seed()) as world:
        for body in tenants():
            world.management.seed(body)
        async with with_control(world) as (control, _):
            mixed = copy.deepcopy(ingress("mixed", "www.bolt.example"))
            mixed["metadata"] = {"name": "mixed", "namespace": "tenant-bolt"}
            mixed["spec"]["rules"].append({"http": mixed["spec"]["rules"][0]["http"]})
            world.management.seed(mixed)

            def annotation() -> str | None:
                raw = world.management.get("ingresses", "mixed", "tenant-bolt") or {}
                return (raw.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_REFUSED)

            left_out = await wait_for_async(annotation, within=WITHIN, what="the annotation")
            assert left_out.startswith("HostnameNotAllowed: spec.rules[1].host")
            events = await wait_for_async(
                lambda: [e for e in world.management.list("events", "tenant-bolt")
                         if e.get("reason") == "HostnameNotAllowed"],
                within=WITHIN, what="the Event",
            )  # fmt: skip
            assert events[0]["involvedObject"]["name"] == "mixed"
            assert "spec.rules[1].host" in events[0]["message"]
            raw = world.management.get("ingresses", "mixed", "tenant-bolt") or {}
            assert raw["status"]["loadBalancer"]["ingress"] == [{"ip": GATEWAY_IP}]
            assert control.config is not None
            assert any("www.bolt.example" in r.hostnames for r in control.config.http_routes)


async def test_a_dedicated_address_reaches_the_tenants_ingress_and_a_refusal_is_told(
    tmp_path: Path,
) -> None:
    """Issue 34, 7(b) through the agent: an Ingress asking for any address of its tenant's
    allocation gets the first one its TenantLoadBalancers do not hold (read from the
    management cluster's AddressPools and requests), in its status in the tenant cluster,
    and a copy of the shared gateway's Service with that address pinned, which the
    speakers announce like the shared one (gone with the Ingress); one asking for another
    tenant's address is told why (annotation, Event)."""
    own = ingress("own", "own.apps.example")
    own["metadata"]["annotations"][ANNOTATION_DEDICATED_ADDRESS] = "true"
    stolen = ingress("stolen", "stolen.apps.example")
    stolen["metadata"]["annotations"][ANNOTATION_DEDICATED_ADDRESS] = "198.51.100.20"  # bolt's
    async with tenant_world(tmp_path, service("web"), slice_of("web", ["10.1.0.1"]),
                            own, stolen) as world:  # fmt: skip
        for body in [*tenants(), pool_body("shared-v4", ["198.51.100.0/26"])]:
            world.management.seed(body)
        held = tlb_body("acme", "lb")
        held["status"] = {"addresses": ["198.51.100.0"]}
        world.management.seed(held)
        proxied = tlb_body("acme", "proxied", mode="Gateway")  # served by the gateway
        proxied["status"] = {"addresses": ["198.51.100.2"]}
        world.management.seed(proxied)
        world.management.seed(GATEWAY_SERVICE)
        async with with_control(world, address_service="teapot-lb-system/teapot-lb-gateway"):
            ip = await wait_for_async(
                lambda: ((world.tenant.get("ingresses", "own", "web") or {}).get("status", {})
                         .get("loadBalancer", {}).get("ingress")),
                within=WITHIN, what="the dedicated address in the tenant Ingress's status",
            )  # fmt: skip
            assert ip == [{"ip": "198.51.100.1"}]
            refused = await wait_for_async(
                lambda: (
                    (world.management.get("ingresses", "c1.web.stolen", NS) or {})
                    .get("metadata", {})
                    .get("annotations", {})
                    .get(ANNOTATION_REFUSED)
                ),
                within=WITHIN,
                what="the refusal annotation",
            )
            assert refused.startswith(
                f"AddressNotUsable: metadata.annotations[{ANNOTATION_DEDICATED_ADDRESS}]"
            )
            assert "outside the allocation of Tenant acme" in refused
            await wait_for_async(
                lambda: [e for e in world.management.list("events", NS)
                         if e.get("reason") == "AddressNotUsable"],
                within=WITHIN, what="the refusal Event",
            )  # fmt: skip
            copy_ = await address_service(world, "198-51-100-1", "the dedicated address")
            assert copy_["metadata"]["annotations"] == {"lb.teapot.io/ips": "198.51.100.1"}
            assert copy_["metadata"]["labels"][LABEL_ADDRESS_OF] == "acme"
            spec = copy_["spec"]
            assert (spec["type"], spec["externalTrafficPolicy"]) == ("LoadBalancer", "Local")
            assert spec["selector"] == GATEWAY_SERVICE["spec"]["selector"]
            assert [p["port"] for p in spec["ports"]] == [80, 443]
            await world.client.delete(INGRESSES, "own", "web")
            await address_service(world, "198-51-100-1", "the Ingress", gone=True)
            assert world.management.get("services", "teapot-lb-gateway", "teapot-lb-system")

            # A Gateway-mode request's address is announced the same way, its copy naming it
            # (the manager's book holds the address for the request: no second claim).
            request_copy = await address_service(world, "198-51-100-2", "the request's address")
            assert request_copy["metadata"]["annotations"] == {
                "lb.teapot.io/ips": "198.51.100.2", ANNOTATION_ADDRESS_FOR: "tenant-acme/proxied",
            }  # fmt: skip
            assert request_copy["metadata"]["labels"][LABEL_ADDRESS_OF] == "acme"
            assert request_copy["spec"]["selector"] == GATEWAY_SERVICE["spec"]["selector"]
            assert world.management.get(  # the route request's address is not the gateway's
                "services", "teapot-lb-gateway-198-51-100-0", "teapot-lb-system"
            ) is None  # fmt: skip
            await world.admin.delete(TENANT_LOAD_BALANCERS, "proxied", NS)
            await address_service(world, "198-51-100-2", "the request", gone=True)


async def address_service(world: TenantWorld, address: str, of: str, *, gone: bool = False) -> Any:
    """Wait for the Service announcing `address` (dashed) for `of` (or, `gone`, with it)."""
    name = f"teapot-lb-gateway-{address}"

    def now() -> Any:
        found = world.management.get("services", name, "teapot-lb-system")
        return (found is None or None) if gone else found

    what = f"the Service gone with {of}" if gone else f"the Service of {of}"
    return await wait_for_async(now, within=WITHIN, what=what)


def tls_secret(namespace: str, name: str, cert: bytes, key: bytes) -> dict[str, Any]:
    data = {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


async def test_the_gateways_own_certificate_follows_its_secret(tmp_path: Path) -> None:
    """`--default-certificate-secret`: the Secret's certificate is the config's default
    one; while the Secret is missing or unusable, none (the gateway's generated one)."""
    mine = make_certificate(tmp_path, "gateway.operator.example")
    other = make_certificate(tmp_path, "other.operator.example")
    where = ("teapot-lb-system", "gateway-tls")
    async with tenant_world(tmp_path, *seed()) as world:
        for body in tenants():
            world.management.seed(body)
        control = GatewayControl(
            world.admin,
            [ip_address(GATEWAY_IP)],
            watch_timeout_s=30,
            default_certificate=where,
        )
        async with running(control):

            def default_pem() -> str | None:
                config = control.config
                if config is None or config.default_certificate is None:
                    return None
                return config.default_certificate.cert_pem

            await wait_for_async(lambda: control.config, within=WITHIN, what="a config")
            assert default_pem() is None  # no Secret yet: the generated one
            world.management.seed(tls_secret(*where, *mine))
            await wait_for_async(
                lambda: default_pem() == mine[0].decode(), within=WITHIN, what="the Secret's"
            )
            # A key that is not the certificate's: not used (the log says why).
            world.management.put(tls_secret(*where, mine[0], other[1]))
            await wait_for_async(
                lambda: control.config is not None and control.config.default_certificate is None,
                within=WITHIN,
                what="the broken Secret dropped",
            )
            world.management.put(tls_secret(*where, *other))
            await wait_for_async(
                lambda: default_pem() == other[0].decode(), within=WITHIN, what="the rotated one"
            )
