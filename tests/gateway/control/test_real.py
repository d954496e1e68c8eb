"""Real tier: the upstream Gateway API CRDs (standard channel v1.6.1, ../shared/gateway-api)
installed into a real kube-apiserver as an operator would; the tenant agent mirrors with
the RBAC of deploy/teapot/gateway.yaml, the gateway's reconcile writes status back, and
the webhook, called by the real apiserver, refuses another tenant's hostname theft.
Skipped with a reason when ../shared/kube is absent (the `kube_plane` fixture).

The tenant cluster and the management cluster are one apiserver here: the tenant's objects
in their own namespace, the mirrors in the tenant's management namespace.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.control.l7mirror import ANNOTATION_REFUSED
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import ApiStatusError
from teapot_lb.kube.resources import (
    EVENTS,
    GATEWAY_CLASSES,
    GATEWAYS,
    HTTP_ROUTES,
    INGRESSES,
    SERVICES,
)
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.model.ingress import GATEWAY_CONTROLLER
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent
from teapot_lb.webhook import ReloadingCertificate, WebhookServer
from tenancy.builders import tenant_body

from .builders import DOMAINS
from .tenant_world import gateway, gateway_class, http_route, ingress, service, slice_of

ROOT = Path(__file__).resolve().parents[3]
GATEWAY_API = ROOT.parent / "shared" / "gateway-api"
DEPLOY = ROOT / "deploy" / "teapot"
CRDS = ("gatewayclasses", "gateways", "httproutes", "tlsroutes", "tcproutes", "udproutes",
        "referencegrants")  # fmt: skip
GATEWAY_IP = "203.0.113.10"
WITHIN = 30.0


def _apply(plane: ControlPlane, *docs: dict[str, Any]) -> None:
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def _role(name: str, kind: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    (found,) = [d for d in docs if d["kind"] == kind]
    return list(found["rules"])


@dataclass(frozen=True)
class Real:
    plane: ControlPlane
    suffix: str
    apps: str  # the tenant's own namespace (its cluster)
    agents: dict[str, Path]  # tenant -> kubeconfig of its agent's ServiceAccount

    def ns(self, tenant: str) -> str:
        return f"tenant-{tenant}-{self.suffix}"


@pytest.fixture(scope="module")
def real(kube_plane: ControlPlane) -> Iterator[Real]:
    plane = kube_plane
    if not GATEWAY_API.is_dir():
        pytest.skip(f"the Gateway API CRDs are not in {GATEWAY_API}")
    for crd in CRDS:
        plane.kubectl("apply", "--server-side", "-f",
                      str(GATEWAY_API / f"gateway.networking.k8s.io_{crd}.yaml"))  # fmt: skip
    # (the gateway also reads AddressPools and TenantLoadBalancers: dedicated addresses)
    ours = ("tenants", "addresspools", "tenantloadbalancers")
    for kind in ours:
        plane.kubectl("apply", "-f", str(ROOT / "deploy" / "crds" / f"lb.teapot.io_{kind}.yaml"))
    for crd in [f"{c}.gateway.networking.k8s.io" for c in CRDS] + [
        f"{k}.lb.teapot.io" for k in ours
    ]:
        plane.kubectl("wait", "--for=condition=established", f"crd/{crd}")
    suffix = uuid.uuid4().hex[:6]
    real = Real(plane, suffix, f"web-{suffix}", {})
    namespaces = [real.apps, real.ns("acme"), real.ns("bolt")]
    for ns in namespaces:
        plane.kubectl("create", "namespace", ns)
    for name in ("acme", "bolt"):
        domains = [*DOMAINS[name], "apps.example"]
        body = tenant_body(name, namespace=real.ns(name), dnsDomains=domains,
                           modes=["Route", "Gateway"])  # fmt: skip
        body["metadata"]["name"] = f"{name}-{suffix}"
        _apply(plane, body)
        ns = real.ns(name)
        rules = _role("tenant-namespace.yaml", "Role") + _role("gateway.yaml", "Role")
        _apply(plane,
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": "teapot-tenant-agent", "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "teapot-tenant-agent", "namespace": ns}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "teapot-tenant-agent", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": "teapot-tenant-agent"},
             "subjects": [{"kind": "ServiceAccount", "name": "teapot-tenant-agent",
                           "namespace": ns}]},
        )  # fmt: skip
        token = plane.service_account_token(ns, "teapot-tenant-agent")
        real.agents[name] = plane.token_kubeconfig(token, f"agent-{ns}", namespace=ns)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"acme-{suffix}-n0"}}
    _apply(plane, node)
    status = {"status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.11"}]}}
    plane.kubectl("patch", "node", node["metadata"]["name"], "--subresource=status",
                  "--type=merge", "-p", json.dumps(status))  # fmt: skip
    try:
        yield real
    finally:
        for ns in namespaces:
            plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        for name in ("acme", "bolt"):
            plane.kubectl("delete", "tenant", f"{name}-{suffix}", check=False)
        plane.kubectl("delete", "node", node["metadata"]["name"], check=False)
        plane.kubectl("delete", "gatewayclass", f"teapot-{suffix}", check=False)


@pytest_asyncio.fixture
async def admin(real: Real) -> AsyncIterator[KubeClient]:
    async with await connect(real.plane.admin_kubeconfig, request_timeout_s=10.0) as client:
        yield client


async def _webhook(real: Real, control: GatewayControl) -> tuple[WebhookServer, str]:
    plane = real.plane
    cert, key = plane.pki.issue(f"teapot-gateway-webhook-{real.suffix}", san="IP:127.0.0.1")
    webhook = WebhookServer(
        lambda: [], certificate=ReloadingCertificate(cert, key), ready=control.readiness,
        l7=control.admission,
    )  # fmt: skip
    port = await webhook.start("127.0.0.1", 0)
    (hook,) = [d for d in yaml.safe_load_all((DEPLOY / "gateway.yaml").read_text())
               if d and d["kind"] == "ValidatingWebhookConfiguration"]  # fmt: skip
    name = f"teapot-gateway-{real.suffix}"
    hook["metadata"]["name"] = name
    ca = base64.b64encode(plane.pki.ca_cert.read_bytes()).decode()
    for h in hook["webhooks"]:
        h["clientConfig"] = {"url": f"https://127.0.0.1:{port}/validate", "caBundle": ca}
        # Only this test's tenant namespaces: the control plane is shared.
        h["namespaceSelector"] = {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In",
            "values": [real.ns("acme"), real.ns("bolt")]}]}  # fmt: skip
    _apply(plane, hook)
    return webhook, name


async def test_the_agent_mirrors_and_the_real_apiserver_calls_the_gateways_webhook(
    real: Real, admin: KubeClient
) -> None:
    plane, apps, suffix = real.plane, real.apps, real.suffix
    # Written while no webhook is there: refused at reconcile, the reason noted on it
    # through the webhook registered below (which admits the gateway's own note).
    # Its hostname is no tenant's: this one API server is both the management cluster and
    # acme's tenant cluster, so acme's agent (which reads every namespace of its "tenant
    # cluster") may mirror bolt's Ingress into acme's namespace too; neither may serve it.
    early = ingress("early", "www.elsewhere.example")
    early["metadata"]["namespace"] = real.ns("bolt")
    await admin.create(INGRESSES, early)
    control = GatewayControl(admin, [ip_address(GATEWAY_IP)], watch_timeout_s=60)
    webhook, hook_name = await _webhook(real, control)
    try:
        async with (
            await connect(real.agents["acme"], request_timeout_s=10.0) as acme_remote,
            running(control),
        ):
            await wait_for_async(lambda: not control.readiness() or None, within=WITHIN,
                                 what="the gateway's caches synced")  # fmt: skip
            config = AgentConfig("c1", real.ns("acme"), gateway=True)
            agent = TenantAgent(admin, acme_remote, config, watch_timeout_s=60)
            async with running(agent):
                await admin.create(SERVICES, service("web", ns=apps))
                _apply(plane, slice_of("web", ["10.1.0.1"], ns=apps))
                shop = ingress("shop", "www.apps.example")
                shop["metadata"]["namespace"] = apps
                await admin.create(INGRESSES, shop)
                await admin.create(GATEWAY_CLASSES, gateway_class(f"teapot-{suffix}"))
                gw = gateway("gw", f"teapot-{suffix}")
                gw["metadata"]["namespace"] = apps
                await admin.create(GATEWAYS, gw)
                route = http_route("store", "gw", ["store.acme.example"], service_name="web")
                route["metadata"]["namespace"] = apps
                await admin.create(HTTP_ROUTES, route)

                def tenant_ip() -> list[Any] | None:
                    obj = agent.l7.sources[INGRESSES].get(f"{apps}/shop") if agent.l7 else None
                    return ((obj or {}).get("status") or {}).get("loadBalancer", {}).get("ingress")

                what = "the gateway's IP in the tenant's Ingress"
                ips = await wait_for_async(tenant_ip, within=WITHIN, what=what)
                assert ips == [{"ip": GATEWAY_IP}]

                def route_parents() -> list[Any] | None:
                    obj = agent.l7.sources[HTTP_ROUTES].get(f"{apps}/store") if agent.l7 else None
                    parents = ((obj or {}).get("status") or {}).get("parents") or []
                    return [p for p in parents if p["controllerName"] == GATEWAY_CONTROLLER] or None

                (parent,) = await wait_for_async(route_parents, within=WITHIN,
                                                 what="the route's parent status")  # fmt: skip
                assert {c["type"]: c["status"] for c in parent["conditions"]} == {
                    "Accepted": "True", "ResolvedRefs": "True"}  # fmt: skip
                assert control.config is not None
                assert {h for r in control.config.http_routes for h in r.hostnames} == {
                    "www.apps.example", "store.acme.example"}  # fmt: skip

                # Bolt, with its own agent's credentials, tries acme's hostname.
                theft = ingress("steal", "www.apps.example")
                theft["metadata"]["namespace"] = real.ns("bolt")
                async with await connect(real.agents["bolt"], request_timeout_s=10.0) as bolt:

                    async def denied() -> str | None:
                        try:
                            await bolt.create(INGRESSES, theft)
                        except ApiStatusError as err:
                            return str(err) if "denied the request" in str(err) else None
                        await bolt.delete(INGRESSES, "steal", real.ns("bolt"))
                        return None  # the webhook configuration was not in effect yet

                    message = None
                    for _ in range(100):
                        message = await denied()
                        if message:
                            break
                        await asyncio.sleep(0.1)
                    assert message is not None
                    assert "spec.rules[0].host" in message and "[HostnameTaken]" in message

                    def noted() -> str | None:
                        got = control.objects[INGRESSES].get(f"{real.ns('bolt')}/early") or {}
                        notes = got.get("metadata", {}).get("annotations") or {}
                        return notes.get(ANNOTATION_REFUSED)

                    note = await wait_for_async(noted, within=WITHIN, what="the refusal noted")
                    assert note.startswith("HostnameNotAllowed: spec.rules[0].host")
                    events = await admin.list(EVENTS, namespace=real.ns("bolt"))
                    assert any(e.get("reason") == "HostnameNotAllowed" for e in events.items)
                    # The API server defaulted fields of the mirrors (Gateway API CRDs do)
                    # and the gateway wrote their status many times: the agent never
                    # rewrote a mirror whose content had not changed.
                    agent_user = f"system:serviceaccount:{real.ns('acme')}:teapot-tenant-agent"
                    writes = [
                        e for e in plane.audit_events(agent_user)
                        if (e.get("objectRef") or {}).get("resource")
                        in ("ingresses", "gateways", "httproutes")
                    ]  # fmt: skip
                    assert {e["verb"] for e in writes} >= {"create", "list", "watch"}
                    rewrites = [e for e in writes if e["verb"] in ("update", "patch")]
                    assert rewrites == [], [e["requestURI"] for e in rewrites]
                    # Acme's own Ingress with a snippet: its mirror is denied by the
                    # webhook, and the agent tells acme with an Event on its Ingress.
                    snippet = ingress("snippet", "snip.acme.example")
                    snippet["metadata"]["namespace"] = apps
                    snippet["metadata"]["annotations"] = {
                        "nginx.ingress.kubernetes.io/server-snippet": "return 200;"
                    }
                    await admin.create(INGRESSES, snippet)

                    async def told() -> list[dict[str, Any]] | None:
                        listed = await admin.list(EVENTS, namespace=apps)
                        return [
                            e for e in listed.items
                            if e.get("reason") == "SnippetNotAllowed"
                            and e["involvedObject"]["name"] == "snippet"
                        ] or None  # fmt: skip

                    event = None
                    for _ in range(300):
                        event = await told()
                        if event:
                            break
                        await asyncio.sleep(0.1)
                    assert event is not None, "no Warning Event on the tenant's Ingress"
                    # The rule as the reason, the vetting's own `field: message` text.
                    assert event[0]["message"].startswith("metadata.annotations")
                    assert "denied the request" not in event[0]["message"]
                    fine = ingress("site", "www.bolt.example")
                    fine["metadata"]["namespace"] = real.ns("bolt")
                    created = await bolt.create(INGRESSES, fine)
                    assert created["metadata"]["name"] == "site"
    finally:
        plane.kubectl("delete", "validatingwebhookconfiguration", hook_name, check=False)
        await webhook.stop()
