"""Real tier: the manager and an agent against a real kube-apiserver with real RBAC, as
deploy/teapot/ grants it (skipped when ../shared/kube is absent; CI has it).

The management side and the tenant cluster are one apiserver here (the tenant's Services
in their own namespace); each identity is a ServiceAccount token with exactly the rules
of deploy/teapot/management.yaml or tenant-namespace.yaml.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import connect
from teapot_lb.kube.errors import ApiStatusError
from teapot_lb.kube.resources import SERVICES, TENANT_LOAD_BALANCERS, TENANT_NODES, TENANTS
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.tenancy.kube_agent import AgentConfig, TenantAgent
from teapot_lb.tenancy.kube_manager import KubeManager, ManagerConfig
from teapot_lb.tenancy.nodes import desired_tenant_nodes

from .builders import TENANTS as FACTS
from .builders import pool_body, tenant_body, tlb_body
from .world import endpoints, service

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "teapot"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _rules(name: str, kind: str) -> list[dict[str, Any]]:
    (found,) = [d for d in _docs(name) if d["kind"] == kind]
    return list(found["rules"])


@dataclass(frozen=True)
class Real:
    plane: ControlPlane
    suffix: str
    config_ns: str
    app_ns: str
    manager: Path
    agents: dict[str, Path]

    def ns(self, tenant: str) -> str:
        return f"{FACTS[tenant]['namespace']}-{self.suffix}"

    def tenant(self, tenant: str) -> str:
        return f"{tenant}-{self.suffix}"


def _apply(plane: ControlPlane, *docs: dict[str, Any]) -> None:
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def _service_account(plane: ControlPlane, ns: str, name: str, role: dict[str, Any]) -> Path:
    _apply(
        plane,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}},
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": f"{role['kind']}Binding",
            "metadata": {"name": role["metadata"]["name"], **(
                {"namespace": ns} if role["kind"] == "Role" else {})},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"],
                        "name": role["metadata"]["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
    )  # fmt: skip
    token = plane.service_account_token(ns, name)
    return plane.token_kubeconfig(token, f"{name}-{ns}", namespace=ns)


@pytest.fixture(scope="module")
def real(kube_plane: ControlPlane) -> Iterator[Real]:
    plane = kube_plane
    suffix = uuid.uuid4().hex[:6]
    for crd in ("tenants", "tenantloadbalancers", "tenantnodes", "addresspools"):
        plane.kubectl("apply", "-f", str(ROOT / "deploy" / "crds" / f"lb.teapot.io_{crd}.yaml"))
        plane.kubectl("wait", "--for=condition=established", f"crd/{crd}.lb.teapot.io")
    config_ns, app_ns = f"teapot-{suffix}", f"apps-{suffix}"
    namespaces = [config_ns, app_ns, *(f"{FACTS[t]['namespace']}-{suffix}" for t in FACTS)]
    for ns in namespaces:
        plane.kubectl("create", "namespace", ns)
    pool_v4 = pool_body("shared-v4", ["198.51.100.0/26"])
    pool_v4["metadata"]["namespace"] = config_ns
    _apply(plane, pool_v4)
    for t in FACTS:
        body = tenant_body(
            t,
            namespace=f"{FACTS[t]['namespace']}-{suffix}",
            allocations=[{"addressPool": "shared-v4", "cidrs": [FACTS[t]["v4"]]}],
        )
        body["metadata"]["name"] = f"{t}-{suffix}"
        _apply(plane, body)  # fmt: skip
    manager = _service_account(plane, config_ns, "manager", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": f"teapot-manager-{suffix}"},
        "rules": _rules("management.yaml", "ClusterRole")})  # fmt: skip
    _apply(plane, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "teapot-manager", "namespace": config_ns},
        "rules": _rules("management.yaml", "Role")}, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "teapot-manager", "namespace": config_ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "teapot-manager"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "manager", "namespace": config_ns}]})  # fmt: skip
    agents = {
        t: _service_account(plane, f"{FACTS[t]['namespace']}-{suffix}", "teapot-tenant-agent", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "teapot-tenant-agent",
                         "namespace": f"{FACTS[t]['namespace']}-{suffix}"},
            "rules": _rules("tenant-namespace.yaml", "Role")})
        for t in FACTS
    }  # fmt: skip
    try:
        yield Real(plane, suffix, config_ns, app_ns, manager, agents)
    finally:
        for ns in namespaces:
            plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        for t in FACTS:
            plane.kubectl("delete", "tenant", f"{t}-{suffix}", check=False)


@pytest.mark.parametrize(
    "attempt",
    ["list-victim-requests", "create-in-victim-namespace", "read-victim-tenant",
     "raise-own-quota", "list-every-namespace", "register-nodes-in-victim-namespace"],
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
        }  # fmt: skip
        with pytest.raises(ApiStatusError) as refused:
            await calls[attempt]()
    assert refused.value.code == 403
    assert "system:serviceaccount:" in str(refused.value)


def _node(plane: ControlPlane, name: str, ip: str) -> None:
    _apply(plane, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    status = {"status": {"addresses": [{"type": "InternalIP", "address": ip}]}}
    plane.kubectl("patch", "node", name, "--subresource=status", "--type=merge",
                  "-p", json.dumps(status))  # fmt: skip


async def test_a_service_round_trips_its_status_through_the_real_apiserver(real: Real) -> None:
    plane = real.plane
    node_name = f"acme-{real.suffix}-n0"
    _node(plane, node_name, "192.0.2.11")
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
                _apply(plane, slice_)

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
    import base64

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
                ca = base64.b64encode(plane.pki.ca_cert.read_bytes()).decode()
                _apply(plane, {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": name},
                    "webhooks": [{
                        "name": "tenancy.lb.teapot.io", "admissionReviewVersions": ["v1"],
                        "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
                        "clientConfig": {"url": f"https://127.0.0.1:{port}/validate",
                                         "caBundle": ca},
                        # Only this test's namespace: the control plane is shared.
                        "namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": bolt_ns}},
                        "rules": [{"apiGroups": ["lb.teapot.io"], "apiVersions": ["v1alpha1"],
                                   "operations": ["CREATE", "UPDATE"],
                                   "resources": ["tenantloadbalancers"]}],
                    }],
                })  # fmt: skip
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
