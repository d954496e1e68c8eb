"""The tenant agent as the Teapot ingress controller, over two fake API servers: what it
mirrors into the tenant's management namespace, what it leaves alone, what comes back."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.gateway.control.l7mirror import (
    ANNOTATION_REFUSED,
    LABEL_BACKENDS,
    MCS_SERVICE_NAME,
    MCS_SOURCE_CLUSTER,
)
from teapot_lb.kube.resources import HTTP_ROUTES, INGRESSES
from teapot_lb.kube.status import patch_status
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.model.ingress import GATEWAY_CONTROLLER
from teapot_lb.tenancy.request import LABEL_CLUSTER

from .builders import make_certificate
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
    tls_secret,
)

WITHIN = 15.0


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    return make_certificate(tmp_path_factory.mktemp("mirror-certs"), "www.acme.example")


def seed(cert: tuple[bytes, bytes]) -> list[dict[str, Any]]:
    return [
        service("web"),
        service("api", node_port=30081),
        service("other", node_port=30082),
        slice_of("web", ["10.1.0.1", "10.1.0.2"]),
        slice_of("api", ["10.1.0.3"]),
        slice_of("other", ["10.1.0.9"]),
        tls_secret("shop-tls", *cert),
        tls_secret("unreferenced", *cert),
        ingress(
            "shop",
            "www.acme.example",
            tls=[{"hosts": ["www.acme.example"], "secretName": "shop-tls"}],
        ),
        ingress("legacy", "old.acme.example", cls="nginx"),
        gateway_class("teapot-gw"),
        gateway_class("envoy", controller="gateway.envoyproxy.io/gatewayclass-controller"),
        gateway("gw", "teapot-gw"),
        gateway("eg", "envoy"),
        http_route("store", "gw", ["store.acme.example"]),
        http_route("elsewhere", "eg", ["x.acme.example"], service_name="other"),
    ]


async def mirrored(world: TenantWorld, resource: str, names: set[str]) -> dict[str, dict[str, Any]]:
    def check() -> list[dict[str, dict[str, Any]]] | None:
        found = world.mirrors(resource)
        return [found] if set(found) == names else None

    what = f"{resource} mirrored as {sorted(names)}"
    return (await wait_for_async(check, within=WITHIN, what=what))[0]


async def test_only_served_objects_and_what_they_reference_are_mirrored(
    tmp_path: Path, cert: tuple[bytes, bytes]
) -> None:
    async with tenant_world(tmp_path, *seed(cert)) as world:
        ingresses = await mirrored(world, "ingresses", {"c1.web.shop"})
        await mirrored(world, "gateways", {"c1.web.gw"})
        routes = await mirrored(world, "httproutes", {"c1.web.store"})
        secrets = await mirrored(world, "secrets", {"c1.web.shop-tls"})
        slices = await mirrored(
            world,
            "endpointslices",
            {
                "c1.web.web-abcde",
                "c1.web.web.nodeports.ipv4",
                "c1.web.api-abcde",
                "c1.web.api.nodeports.ipv4",
            },
        )
        shop = ingresses["c1.web.shop"]
        assert shop["spec"]["rules"][0]["host"] == "www.acme.example"
        assert shop["metadata"]["annotations"]["team"] == "shop"
        assert shop["metadata"]["labels"][LABEL_CLUSTER] == "c1"
        assert routes["c1.web.store"]["spec"]["parentRefs"] == [{"name": "gw"}]
        assert world.mirrors("gateways")["c1.web.gw"]["spec"]["gatewayClassName"] == "teapot"
        # Only the certificate and its key leave the tenant cluster.
        assert set(secrets["c1.web.shop-tls"]["data"]) == {"tls.crt", "tls.key"}
        assert base64.b64decode(secrets["c1.web.shop-tls"]["data"]["tls.crt"]) == cert[0]
        pods = slices["c1.web.web-abcde"]
        assert pods["metadata"]["labels"][MCS_SOURCE_CLUSTER] == "c1"
        assert pods["metadata"]["labels"][MCS_SERVICE_NAME] == "web"
        assert pods["metadata"]["labels"][LABEL_BACKENDS] == "PodIPs"
        assert [e["addresses"] for e in pods["endpoints"]] == [["10.1.0.1"], ["10.1.0.2"]]
        nodes = slices["c1.web.web.nodeports.ipv4"]
        assert nodes["metadata"]["labels"][LABEL_BACKENDS] == "NodePorts"
        assert nodes["ports"] == [{"name": "http", "protocol": "TCP", "port": 30080}]
        assert sorted(e["addresses"][0] for e in nodes["endpoints"]) == ["192.0.2.11", "192.0.2.12"]
        # The tenant's own GatewayClass of the Teapot controller is Accepted by the agent.
        accepted = await wait_for_async(
            lambda: (
                (world.tenant.get("gatewayclasses", "teapot-gw") or {})
                .get("status", {})
                .get("conditions")
            ),
            within=WITHIN,
            what="the GatewayClass accepted",
        )
        assert accepted[0]["type"] == "Accepted" and accepted[0]["status"] == "True"
        assert (
            not (world.tenant.get("gatewayclasses", "envoy") or {})
            .get("status", {})
            .get("conditions")
        )


async def test_changes_follow_and_what_is_no_longer_referenced_is_cleaned_up(
    tmp_path: Path, cert: tuple[bytes, bytes]
) -> None:
    async with tenant_world(tmp_path, *seed(cert)) as world:
        await mirrored(world, "httproutes", {"c1.web.store"})
        # An object of another source cluster in the same namespace is not this agent's.
        world.management.seed(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "c2.web.x", "namespace": NS, "labels": {LABEL_CLUSTER: "c2"}},
                "data": {},
            }
        )
        # An endpoint change reaches the mirror.
        world.tenant.put(slice_of("web", ["10.1.0.1", "10.1.0.7"]))

        def endpoint_moved() -> bool:
            got = world.mirrors("endpointslices").get("c1.web.web-abcde") or {}
            return [e["addresses"][0] for e in got.get("endpoints", [])] == ["10.1.0.1", "10.1.0.7"]

        await wait_for_async(endpoint_moved, within=WITHIN, what="the changed endpoint mirrored")
        # The Ingress goes: its mirror, its Secret and its Service's slices go with it.
        world.tenant.delete("ingresses", "shop", "web")
        await mirrored(world, "ingresses", set())
        await mirrored(world, "secrets", {"c2.web.x"})
        await mirrored(world, "endpointslices", {"c1.web.api-abcde", "c1.web.api.nodeports.ipv4"})
        # The route is detached from the Teapot Gateway: its mirror goes.
        route = copy.deepcopy(world.tenant.get("httproutes", "store", "web"))
        assert route is not None
        route["spec"]["parentRefs"] = [{"name": "eg"}]
        world.tenant.put(route)
        await mirrored(world, "httproutes", set())
        await mirrored(world, "endpointslices", set())


async def test_orphans_of_this_cluster_are_deleted_on_start(
    tmp_path: Path, cert: tuple[bytes, bytes]
) -> None:
    orphan = ingress("gone", "gone.acme.example")
    orphan["metadata"] = {"name": "c1.web.gone", "namespace": NS, "labels": {LABEL_CLUSTER: "c1"}}
    async with tenant_world(tmp_path, *seed(cert)) as world:
        world.management.seed(orphan)
        await mirrored(world, "ingresses", {"c1.web.shop"})


async def test_status_and_refusals_come_back_to_the_tenant(
    tmp_path: Path, cert: tuple[bytes, bytes]
) -> None:
    async with tenant_world(tmp_path, *seed(cert)) as world:
        await mirrored(world, "ingresses", {"c1.web.shop"})
        await mirrored(world, "httproutes", {"c1.web.store"})
        # The gateway's reconcile (played here by the management admin) writes status.
        await patch_status(
            world.admin,
            INGRESSES,
            "c1.web.shop",
            NS,
            {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}},
        )
        parent = {
            "parentRef": {"name": "gw"},
            "controllerName": GATEWAY_CONTROLLER,
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "lastTransitionTime": "2026-12-03T00:00:00Z"},
            ],
        }  # fmt: skip
        await patch_status(world.admin, HTTP_ROUTES, "c1.web.store", NS, {"parents": [parent]})

        def tenant_ingress_ip() -> list[Any] | None:
            obj = world.tenant.get("ingresses", "shop", "web") or {}
            return obj.get("status", {}).get("loadBalancer", {}).get("ingress") or None

        assert await wait_for_async(tenant_ingress_ip, within=WITHIN, what="the Ingress's IP") == [
            {"ip": "203.0.113.10"}
        ]
        parents = await wait_for_async(
            lambda: (
                (world.tenant.get("httproutes", "store", "web") or {})
                .get("status", {})
                .get("parents")
            ),
            within=WITHIN,
            what="the route's parent status",
        )
        assert parents[0]["controllerName"] == GATEWAY_CONTROLLER
        assert parents[0]["conditions"][0]["type"] == "Accepted"
        # A refusal written on the mirrored Ingress becomes an Event on the tenant's Ingress,
        # and the agent's later writes keep it.
        mirror = copy.deepcopy(world.management.get("ingresses", "c1.web.shop", NS))
        assert mirror is not None
        mirror["metadata"]["annotations"][ANNOTATION_REFUSED] = (
            "HostnameTaken: www.acme.example is taken"
        )
        world.management.put(mirror)
        events = await wait_for_async(
            lambda: [
                e for e in world.tenant.list("events", "web") if e.get("reason") == "HostnameTaken"
            ],
            within=WITHIN,
            what="the refusal as an Event",
        )
        assert events[0]["involvedObject"]["name"] == "shop"
        assert "is taken" in events[0]["message"]
        shop = copy.deepcopy(world.tenant.get("ingresses", "shop", "web"))
        assert shop is not None
        shop["metadata"]["annotations"]["team"] = "store"
        world.tenant.put(shop)

        def changed_and_kept() -> bool:
            m = world.management.get("ingresses", "c1.web.shop", NS) or {}
            annotations = m.get("metadata", {}).get("annotations", {})
            return annotations.get("team") == "store" and ANNOTATION_REFUSED in annotations

        await wait_for_async(
            changed_and_kept, within=WITHIN, what="the mirror updated, refusal kept"
        )


async def test_a_route_the_gateway_refused_gets_a_warning_event_with_the_rule(
    tmp_path: Path, cert: tuple[bytes, bytes]
) -> None:
    async with tenant_world(tmp_path, *seed(cert)) as world:
        await mirrored(world, "httproutes", {"c1.web.store"})
        why = "spec.hostnames[0]: store.bolt.example is outside the DNS domains of Tenant acme"
        parent = {
            "parentRef": {"name": "gw"},
            "controllerName": GATEWAY_CONTROLLER,
            "conditions": [
                {"type": "Accepted", "status": "False", "reason": "HostnameNotAllowed",
                 "message": f"HostnameNotAllowed: {why}",
                 "lastTransitionTime": "2026-12-03T00:00:00Z"},
            ],
        }  # fmt: skip
        # The gateway's reconcile (played here by the management admin) refuses the route.
        await patch_status(world.admin, HTTP_ROUTES, "c1.web.store", NS, {"parents": [parent]})
        events = await wait_for_async(
            lambda: [
                e
                for e in world.tenant.list("events", "web")
                if e.get("reason") == "HostnameNotAllowed"
            ],
            within=WITHIN,
            what="the refusal as an Event on the route",
        )
        assert [(e["type"], e["involvedObject"]["kind"], e["message"]) for e in events] == [
            ("Warning", "HTTPRoute", why)
        ]
        parents = (world.tenant.get("httproutes", "store", "web") or {})["status"]["parents"]
        assert parents[0]["conditions"][0]["status"] == "False"  # the condition, copied back
