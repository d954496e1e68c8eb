"""Real tier (issue 38): a Gateway-mode request's address announced through the real
kube-apiserver, with the manager's identity and exactly the rules deploy/teapot/ grants it
(management.yaml, gateway.yaml's `teapot-lb-gateway-control` and, in the configuration
namespace, `teapot-lb-gateway-addresses`): as `manager --gateway-address IP
--gateway-service NS/teapot-lb-gateway` runs, the request is Programmed once its copy of
the gateway's Service exists, the Tenant counts its address once, and the copy is deleted
with the request. Skipped when ../shared/kube is absent (CI has it)."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import ip_address
from typing import Any

import pytest

from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.control.l7services import ANNOTATION_ADDRESS_FOR, LABEL_ADDRESS_OF
from teapot_lb.kube.client import connect
from teapot_lb.kube.informer import Informer
from teapot_lb.kube.resources import SERVICES, TENANT_LOAD_BALANCERS, TENANTS
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.model.tenancy import PROGRAMMED

from .builders import gateway_service_body, tlb_body
from .real import Real, apply, management

GATEWAY_IP = "203.0.113.10"  # the shared gateway's (manager --gateway-address)
WITHIN = 30.0


@pytest.fixture(scope="module")
def real(kube_plane: ControlPlane) -> Iterator[Real]:
    with management(kube_plane, gateway=True, modes=["Gateway"], providers=["proxy"]) as world:
        yield world


def programmed(requests: Informer, key: str) -> tuple[str, str] | None:
    """The request's Programmed (status, message) when True."""
    obj = requests.get(key) or {}
    for c in obj.get("status", {}).get("conditions") or []:
        if c["type"] == PROGRAMMED and c["status"] == "True":
            return c["status"], c["message"]
    return None


async def test_a_proxy_requests_address_is_announced_counted_once_and_let_go(real: Real) -> None:
    template = gateway_service_body(GATEWAY_IP)
    template["metadata"]["namespace"] = real.config_ns
    apply(real.plane, template)
    acme_ns, copy_name = real.ns("acme"), "teapot-lb-gateway-198-51-100-0"
    async with (
        await connect(real.manager, request_timeout_s=10.0) as client,
        await connect(real.plane.admin_kubeconfig, request_timeout_s=10.0) as admin,
    ):
        config = ManagerConfig(
            config_namespace=real.config_ns, gateway_services=True, tenant_status_delay_s=0.1
        )
        manager = KubeManager(client, config)
        control = GatewayControl(
            client, [ip_address(GATEWAY_IP)], config_namespace=real.config_ns,
            on_translation=manager.gateway_translated,
            address_service=f"{real.config_ns}/teapot-lb-gateway",
        )  # fmt: skip
        # What the test reads, with the admin's eyes.
        requests = Informer(admin, TENANT_LOAD_BALANCERS, namespace=acme_ns)
        services = Informer(admin, SERVICES, namespace=real.config_ns)
        tenants = Informer(admin, TENANTS)
        async with (
            running(manager), running(control),
            running(requests), running(services), running(tenants),
        ):  # fmt: skip
            await admin.create(
                TENANT_LOAD_BALANCERS, tlb_body("acme", "web", namespace=acme_ns, mode="Gateway")
            )
            key = f"{acme_ns}/web"
            _, message = await wait_for_async(
                lambda: programmed(requests, key), within=WITHIN, what="web Programmed"
            )
            assert message == "198.51.100.0:80/TCP served by the shared gateway"
            copy_ = await wait_for_async(
                lambda: services.get(f"{real.config_ns}/{copy_name}"), within=WITHIN,
                what="the copy (Programmed waited for the manager to see it)",
            )  # fmt: skip
            meta = copy_["metadata"]
            assert meta["annotations"][ANNOTATION_ADDRESS_FOR] == key
            assert meta["annotations"]["lb.teapot.io/ips"] == "198.51.100.0"
            assert meta["labels"][LABEL_ADDRESS_OF] == real.tenant("acme")
            assert copy_["spec"]["type"] == "LoadBalancer"

            def usage() -> Any:
                tenant = tenants.get(real.tenant("acme")) or {}
                return (tenant.get("status") or {}).get("usage")

            counted = await wait_for_async(usage, within=WITHIN, what="acme's usage")
            assert counted["addresses"] == 1
            assert manager.view().gateway_addresses == {}  # the copy is no second claim

            await admin.delete(TENANT_LOAD_BALANCERS, "web", acme_ns)
            await wait_for_async(
                lambda: services.get(f"{real.config_ns}/{copy_name}") is None or None,
                within=WITHIN, what="the copy deleted with the request",
            )  # fmt: skip
