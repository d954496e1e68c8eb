"""Real tier: the manager and an agent against a real kube-apiserver with real RBAC, as
deploy/teapot/ grants it (skipped when ../shared/kube is absent; CI has it).

The management side and the tenant cluster are one apiserver here (the tenant's Services
in their own namespace); each identity is a ServiceAccount token with exactly the rules
of deploy/teapot/management.yaml or tenant-namespace.yaml.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import connect
from teapot_lb.kube.errors import ApiStatusError
from teapot_lb.kube.resources import (
    EVENTS,
    SERVICES,
    TENANT_LOAD_BALANCERS,
    TENANT_NODES,
    TENANTS,
)
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import OPERATOR_EVENTS_NAMESPACE, KubeManager, ManagerConfig
from teapot_lb.tenancy.nodes import desired_tenant_nodes
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent

from .builders import tlb_body
from .real import Real, add_node, apply, management, webhook_configuration
from .world import endpoints, service


@pytest.fixture(scope="module")
def real(kube_plane: ControlPlane) -> Iterator[Real]:
    with management(kube_plane) as world:
        yield world


@pytest.mark.parametrize(
    "attempt",
    ["list-victim-requests", "create-in-victim-namespace", "read-victim-tenant",
     "raise-own-quota", "list-every-namespace", "register-nodes-in-victim-namespace",
     "list-victim-nodes", "list-victim-events", "read-operators-events-on-tenants"],
)  # fmt: skip
async def test_an_agents_credentials_reach_only_its_namespace(real: Real, attempt: str) -> None:
    acme_ns, bolt_ns = real.ns("acme"), real.ns("bolt")
    async with await connect(real.agents["bolt"], request_timeout_s=10.0) as bolt:
        await bolt.list(TENANT_LOAD_BALANCERS, namespace=bolt_ns)  # its own: allowed
        calls = {
            "list-victim-requests": lambda: bolt.list(TENANT_LOAD_BALANCERS, namespace=acme_ns),
            "create-in-victim-namespace": lambda: bolt.create(
                TENANT_LOAD_BALANCERS, tlb_body("acme", "steal", namespace=acme_ns)),
            "read-victim-tenant": lambda: bolt.get(TENANTS, real.tenant("acme")),
            "raise-own-quota": lambda: bolt.patch(
                TENANTS, real.tenant("bolt"), {"spec": {"quotas": {"addresses": 999}}}),
            "list-every-namespace": lambda: bolt.list(TENANT_LOAD_BALANCERS),
            "register-nodes-in-victim-namespace": lambda: bolt.create(
                TENANT_NODES, desired_tenant_nodes({}, "c9", acme_ns)),
            "list-victim-nodes": lambda: bolt.list(TENANT_NODES, namespace=acme_ns),
            # the manager's Events on acme's requests (its conditions' words), and the
            # operator's words on the Tenants (docs/teapot.md, "Who reads what")
            "list-victim-events": lambda: bolt.list(EVENTS, namespace=acme_ns),
            "read-operators-events-on-tenants": lambda: bolt.list(
                EVENTS, namespace=OPERATOR_EVENTS_NAMESPACE),
        }  # fmt: skip
        with pytest.raises(ApiStatusError) as refused:
            await calls[attempt]()
    assert refused.value.code == 403
    assert "system:serviceaccount:" in str(refused.value)


async def test_a_service_round_trips_its_status_through_the_real_apiserver(real: Real) -> None:
    plane = real.plane
    node_name = f"acme-{real.suffix}-n0"
    add_node(plane, node_name, "192.0.2.11")
    try:
        async with (
            await connect(real.manager, request_timeout_s=10.0) as manager_client,
            await connect(real.agents["acme"], request_timeout_s=10.0) as remote,
            await connect(plane.admin_kubeconfig, request_timeout_s=10.0) as tenant,
        ):
            manager = KubeManager(manager_client, ManagerConfig(config_namespace=real.config_ns))
            agent = TenantAgent(tenant, remote, AgentConfig("c1", real.ns("acme")))
            async with running(manager), running(agent):
                await tenant.create(SERVICES, service("web", namespace=real.app_ns))
                slice_ = endpoints("web", [node_name], namespace=real.app_ns)
                apply(plane, slice_)

                def ingress() -> list[str] | None:
                    svc = agent.services.get(f"{real.app_ns}/web") or {}
                    entries = svc.get("status", {}).get("loadBalancer", {}).get("ingress")
                    return [e["ip"] for e in entries] if entries else None

                ips = await wait_for_async(ingress, within=30, what="the Service's IP")
                assert ips == ["198.51.100.0"]
                request = await remote.get(
                    TENANT_LOAD_BALANCERS, f"c1.{real.app_ns}.web", real.ns("acme")
                )
                assert request["status"]["nextHops"] == ["192.0.2.11"]

                # The agent registered its nodes with its own credentials, and the manager
                # wrote its verdict with its own (the plane's other Nodes may be anywhere).
                def verdict() -> dict[str, Any] | None:
                    nodes = agent.published_nodes.remote.get(f"{real.ns('acme')}/c1") or {}
                    conditions = (nodes.get("status") or {}).get("conditions")
                    return nodes if conditions else None

                nodes = await wait_for_async(verdict, within=30, what="TenantNodes c1 vetted")
                published = {n["name"]: n["addresses"] for n in nodes["spec"]["nodes"]}
                assert published[node_name] == ["192.0.2.11"]
                await tenant.delete(SERVICES, "web", real.app_ns)
                await wait_for_async(
                    lambda: not [r for r in manager.requests if r.endswith(".web")] or None,
                    within=30,
                    what="the request deleted with the Service",
                )
    finally:
        plane.kubectl("delete", "node", node_name, check=False)


async def test_the_real_apiserver_calls_the_managers_webhook(real: Real) -> None:
    from teapot_lb.webhook import ReloadingCertificate, WebhookServer

    plane = real.plane
    cert, key = plane.pki.issue(f"teapot-manager-webhook-{real.suffix}", san="IP:127.0.0.1")
    bolt_ns = real.ns("bolt")
    async with await connect(real.manager, request_timeout_s=10.0) as manager_client:
        manager = KubeManager(manager_client, ManagerConfig(config_namespace=real.config_ns))
        webhook = WebhookServer(
            manager.objects, certificate=ReloadingCertificate(cert, key), ready=manager.readiness
        )
        port = await webhook.start("127.0.0.1", 0)
        name = f"teapot-manager-{real.suffix}"
        try:
            async with running(manager):
                await wait_for_async(
                    lambda: not manager.readiness() or None, within=30, what="manager synced"
                )
                apply(plane, webhook_configuration(name, port, plane, bolt_ns))
                steal = tlb_body("bolt", "steal", namespace=bolt_ns, requestedIPs=["198.51.100.1"])
                async with await connect(real.agents["bolt"], request_timeout_s=10.0) as bolt:

                    async def denied() -> str | None:
                        try:
                            await bolt.create(TENANT_LOAD_BALANCERS, steal)
                        except ApiStatusError as err:
                            return str(err) if "denied the request" in str(err) else None
                        await bolt.delete(TENANT_LOAD_BALANCERS, "steal", bolt_ns)
                        return None  # the configuration was not in effect yet

                    message = None
                    for _ in range(100):
                        message = await denied()
                        if message:
                            break
                        await asyncio.sleep(0.1)
                    assert message is not None
                    assert "spec.requestedIPs[0]: 198.51.100.1 is not allocated to Tenant" in (
                        message
                    )
                    assert "[AddressNotAllocated]" in message
                    fine = tlb_body("bolt", "fine", namespace=bolt_ns)
                    created = await bolt.create(TENANT_LOAD_BALANCERS, fine)
                    assert created["metadata"]["name"] == "fine"
        finally:
            plane.kubectl("delete", "validatingwebhookconfiguration", name, check=False)
            await webhook.stop()


async def test_an_agent_in_the_wrong_namespace_says_where_it_looked_and_what_sets_it(
    real: Real,
) -> None:
    """Issue 39, 3: an agent left in `default` (no --management-namespace, a context
    without a namespace) gets 403 on every management kind; each of its unready reasons
    names the resource, the namespace it tried and how to set it, TenantNodes and the
    gateway mirror's kinds too."""
    hint = "set it with --management-namespace or the namespace of the management kubeconfig"
    async with (
        await connect(real.agents["acme"], request_timeout_s=10.0) as remote,
        await connect(real.plane.admin_kubeconfig, request_timeout_s=10.0) as tenant,
    ):
        agent = TenantAgent(tenant, remote, AgentConfig("c1", "default", gateway=True))

        def about_management() -> list[str] | None:
            reasons = [r for r in agent.readiness() if "'default'" in r]
            named = " ".join(reasons)
            wanted = (("tenantloadbalancers", ".lb.teapot.io"), ("tenantnodes", ".lb.teapot.io"),
                      ("ingresses", ".networking.k8s.io"), ("events", ""))  # fmt: skip
            tried = [f"{kind}{group} in namespace default" for kind, group in wanted]
            return reasons if all(t in named for t in tried) else None

        async with running(agent):
            reasons = await wait_for_async(
                about_management, within=30, what="unready reasons for each management kind"
            )
    assert all(hint in r for r in reasons), reasons
