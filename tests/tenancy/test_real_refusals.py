"""Real tier: what a tenant sees of a refusal (skipped when ../shared/kube is absent).

A tenant cluster (its own kube-apiserver) and the management cluster (the session's), the
manager with its webhooks registered as deploy/teapot/management.yaml and gateway.yaml
ship them (`failurePolicy: Fail`) or with none, the gateway's reconcile in the manager
(as `manager --gateway-address` runs it), and the tenant agent, the gateway mirror too,
with its ServiceAccount's RBAC. Whichever side refuses (the webhook when the agent writes
the request or the mirror, or the manager's or the gateway's own vetting), the tenant
reads the same rule and message in a Warning Event on its own Service, Ingress or
HTTPRoute (`kubectl describe`) within a second, the Tenant's REFUSED counts it, the
agent does not write the refused object again, and a change of the Tenant lets it ask
again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any

import pytest

from gateway.control.tenant_world import gateway, gateway_class, http_route, ingress
from needs import require_kube
from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.kube import resources
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.informer import Informer
from teapot_lb.kube.resources import EVENTS, HTTP_ROUTES, INGRESSES, SERVICES, Resource
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.model.ingress import GATEWAY_CONTROLLER
from teapot_lb.model.service import ANNOTATION_IPS, ANNOTATION_PROVIDER
from teapot_lb.model.tenancy import PROGRAMMED_FOR_TENANT
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent
from teapot_lb.webhook import ReloadingCertificate, WebhookServer

from .builders import TENANTS as FACTS
from .builders import tlb_body
from .memlb import ENDPOINT, UNREACHABLE, MemoryLB
from .real import (
    Real,
    add_node,
    apply,
    gateway_webhook_configuration,
    install_gateway_api,
    management,
    webhook_configuration,
)
from .world import service

PORT_QUOTA = 3
DOMAINS = ["acme.example"]  # acme's dnsDomains
MODES = ["Route", "Gateway"]  # acme's modes
GATEWAY_IP = "203.0.113.10"  # the shared gateway's (manager --gateway-address)
OUTSIDE_HOST = "www.elsewhere.example"  # in none of acme's dnsDomains
L7_KINDS: dict[str, Resource] = {"Ingress": INGRESSES, "HTTPRoute": HTTP_ROUTES}
INSIDE = ("n0", FACTS["acme"]["node_ips"][0])  # in acme's node networks
OUTSIDE = ("n1-outside", "192.0.2.200")  # in none of acme's


@pytest.fixture(scope="module")
def tenant_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """acme's tenant cluster: a kube-apiserver of its own, with one node in its networks."""
    require_kube()
    plane = ControlPlane(tmp_path_factory.mktemp("tenant-kube"), controller_manager=False)
    try:
        plane.start()
        install_gateway_api(plane)
        add_node(plane, *INSIDE)
        yield plane
    finally:
        plane.close()


@pytest.fixture(scope="module")
def real(kube_plane: ControlPlane) -> Iterator[Real]:
    quotas = {"addresses": 6, "loadBalancers": 5, "ports": PORT_QUOTA}
    with management(
        kube_plane, gateway=True, quotas=quotas, modes=MODES, dnsDomains=DOMAINS
    ) as world:
        yield world


@dataclass
class Scene:
    real: Real
    tenant_plane: ControlPlane
    tenant: KubeClient
    manager: KubeManager
    control: GatewayControl
    agent: TenantAgent
    events: Informer
    agents: AsyncExitStack  # the running agent's
    webhook_denials: list[str] = field(default_factory=list)

    async def restart_agent(self) -> None:
        """The agent stopped and a new one started (its memory gone, as after a crash)."""
        await self.agents.aclose()
        self.agent = TenantAgent(self.tenant, self.agent.management, self.agent.config)
        await self.agents.enter_async_context(running(self.agent))

    @property
    def acme(self) -> str:
        return self.real.tenant("acme")

    def patch_tenant(self, spec: dict[str, Any]) -> None:
        self.real.plane.kubectl("patch", "tenant", self.acme, "--type=merge",
                                "-p", json.dumps({"spec": spec}))  # fmt: skip

    def tenant_object(self, kind: str, name: str) -> dict[str, Any] | None:
        """The tenant's object as the agent's cache has it."""
        if kind == "Node":
            return self.agent.nodes.get(name)
        if kind == "Service":
            return self.agent.services.get(f"default/{name}")
        assert self.agent.l7 is not None
        return self.agent.l7.sources[L7_KINDS[kind]].get(f"default/{name}")

    def warning(self, kind: str, name: str) -> dict[str, Any] | None:
        """A Warning Event on the object as it is now (by its uid: a Node of an earlier
        test had the same name)."""
        current = self.tenant_object(kind, name) or {}
        uid = current.get("metadata", {}).get("uid")
        for event in self.events.list_objects():
            involved = event.get("involvedObject") or {}
            if (involved.get("kind"), involved.get("uid"), event.get("type")) == (
                kind, uid, "Warning"
            ):  # fmt: skip
                return event
        return None

    def refused_count(self) -> int | None:
        tenant = self.manager.tenants.get(self.acme)
        return tenant.status.refused if tenant is not None and tenant.status else None


async def _until_denied(plane: ControlPlane, namespace: str) -> None:
    """Until the apiserver calls the newly registered webhooks (dry runs they deny)."""
    request = tlb_body("acme", "probe", namespace=namespace, requestedIPs=["198.51.100.17"])
    mirror = ingress("probe", OUTSIDE_HOST)
    mirror["metadata"]["namespace"] = namespace

    async def denied(probe: dict[str, Any]) -> bool:
        try:
            await asyncio.to_thread(
                plane.kubectl, "create", "--dry-run=server", "-f", "-", input=json.dumps(probe)
            )
        except RuntimeError as err:
            return "denied the request" in str(err)
        return False

    for probe in (request, mirror):
        for _ in range(300):  # 30 s
            if await denied(probe):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the apiserver never called the webhook for {probe['kind']}")


@asynccontextmanager
async def scene(
    real: Real, tenant_plane: ControlPlane, *, webhook: bool, providers: tuple[MemoryLB, ...] = ()
) -> AsyncIterator[Scene]:
    plane, acme_ns = real.plane, real.ns("acme")
    async with (
        await connect(real.manager, request_timeout_s=10.0) as manager_client,
        await connect(real.agents["acme"], request_timeout_s=10.0) as remote,
        await connect(tenant_plane.admin_kubeconfig, request_timeout_s=10.0) as tenant,
    ):
        config = ManagerConfig(
            config_namespace=real.config_ns,
            tenant_status_delay_s=0.1,
            providers={p.name: p for p in providers},
            provider_retry_base_s=0.05,
        )
        manager = KubeManager(manager_client, config)
        # The gateway's reconcile as `manager --gateway-address` runs it beside the manager.
        control = GatewayControl(
            manager_client,
            [ip_address(GATEWAY_IP)],
            config_namespace=real.config_ns,
            on_translation=manager.gateway_translated,
        )
        agent = TenantAgent(tenant, remote, AgentConfig("c1", acme_ns, gateway=True))
        events = Informer(tenant, EVENTS)
        agents = AsyncExitStack()
        world = Scene(real, tenant_plane, tenant, manager, control, agent, events, agents)
        server = None
        name = f"teapot-manager-refusals-{real.suffix}"
        try:
            async with running(manager), running(control), running(events), agents:
                await agents.enter_async_context(running(agent))

                def unready() -> list[str]:
                    return [
                        *manager.readiness(), *control.readiness(), *world.agent.readiness()
                    ]  # fmt: skip

                try:
                    await wait_for_async(
                        lambda: not unready() or None,
                        within=30,
                        what="the manager, the gateway's reconcile and the agent synced",
                    )
                except AssertionError as err:
                    raise AssertionError(f"{err}: {unready()}") from None
                if webhook:
                    cert, key = plane.pki.issue(name, san="IP:127.0.0.1")
                    server = WebhookServer(
                        manager.objects,
                        certificate=ReloadingCertificate(cert, key),
                        observe=lambda kind, allowed: (
                            None if allowed else world.webhook_denials.append(kind)
                        ),
                        l7=control.admission,
                    )
                    port = await server.start("127.0.0.1", 0)
                    apply(plane, webhook_configuration(name, port, plane, acme_ns))
                    apply(plane, gateway_webhook_configuration(f"{name}-gw", port, plane, acme_ns))
                    await _until_denied(plane, acme_ns)
                    world.webhook_denials.clear()
                yield world
        finally:
            plane.kubectl("delete", "validatingwebhookconfiguration", name, check=False)
            plane.kubectl("delete", "validatingwebhookconfiguration", f"{name}-gw", check=False)
            if server is not None:
                await server.stop()


async def _cleanly_deleted(world: Scene, name: str) -> None:
    """Delete the Service with the agent running: its request and refusals go with it."""
    await world.tenant.delete(SERVICES, name, "default")
    await wait_for_async(
        lambda: (
            (
                not world.agent.services.get(f"default/{name}")
                and not world.agent.remote.list_keys()
                and not world.agent.denials.list_objects()
            )
            or None
        ),
        within=10,
        what="the Service, its request and its refusals gone",
    )


def _ports(count: int) -> list[dict[str, Any]]:
    return [
        {"name": f"p{i}", "protocol": "TCP", "port": 8000 + i, "nodePort": 30100 + i}
        for i in range(count)
    ]


@dataclass(frozen=True)
class Case:
    service: dict[str, Any]
    reason: str
    message: Callable[[Scene], str]
    tenant_spec: dict[str, Any] | None = None  # acme's Tenant during the case
    node: tuple[str, str] | None = None  # a node the case adds to the tenant cluster
    by_webhook: bool = True  # False: a provider's refusal, the manager's (not the webhook's)


CASES = {
    "another tenant's IP": Case(
        {"annotations": {ANNOTATION_IPS: "198.51.100.17"}},
        "AddressNotAllocated",
        lambda w: f"spec.requestedIPs[0]: 198.51.100.17 is not allocated to Tenant {w.acme}",
    ),
    "too many ports": Case(
        {"ports": _ports(PORT_QUOTA + 1)},
        "QuotaExceeded",
        lambda w: (
            f"spec.ports: quota of {PORT_QUOTA} ports of Tenant {w.acme} reached "
            f"(0 held, this request needs {PORT_QUOTA + 1})"
        ),
    ),
    "a forbidden mode": Case(
        {},
        "ModeNotAllowed",
        lambda w: f"spec.mode: Tenant {w.acme} may not use mode Route (allowed: Gateway)",
        tenant_spec={"modes": ["Gateway"]},
    ),
    "source ranges through the shared gateway": Case(
        {
            "annotations": {ANNOTATION_PROVIDER: "proxy"},
            "loadBalancerSourceRanges": ["203.0.113.0/24"],
        },
        "ProviderRefused",
        lambda w: (
            "provider proxy: spec.loadBalancerSourceRanges: the shared gateway does not filter "
            "clients by source address, and the tenant's kube-proxy cannot behind it; remove "
            "loadBalancerSourceRanges or use provider route (the address reaches the nodes "
            "unchanged and kube-proxy filters)"
        ),
        by_webhook=False,
    ),
    "a backend outside its networks": Case(
        {},
        "BackendNotAllowed",
        lambda w: (
            f"spec.backends[1].addresses[0]: node {OUTSIDE[0]} address {OUTSIDE[1]} is "
            f"outside the node networks of Tenant {w.acme} ({', '.join(FACTS['acme']['nodes'])})"
        ),
        node=OUTSIDE,
    ),
}


@pytest.mark.parametrize("webhook", [True, False], ids=["webhook on", "webhook off"])
@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_tenant_reads_a_refusal_on_its_own_service_within_a_second(
    real: Real, tenant_plane: ControlPlane, case: str, webhook: bool
) -> None:
    spec = CASES[case]
    name = f"web-{len(case)}-{int(webhook)}"
    async with scene(real, tenant_plane, webhook=webhook) as world:
        try:
            if spec.tenant_spec:
                world.patch_tenant(spec.tenant_spec)
                await wait_for_async(
                    lambda: (
                        world.manager.tenants[world.acme].spec.modes[0].value == "Gateway" or None
                    ),
                    within=10,
                    what="the manager read the Tenant",
                )
            if spec.node:
                add_node(tenant_plane, *spec.node)
                await wait_for_async(
                    lambda: (
                        (
                            world.agent.store.view().nodes.get(spec.node[0])
                            and world.agent.store.view().nodes[spec.node[0]].addresses()
                        )
                        or None
                    ),
                    within=10,
                    what="the agent saw the node",
                )
            await world.tenant.create(SERVICES, service(name, **spec.service))
            event = await wait_for_async(
                lambda: world.warning("Service", name), within=1.0, what="a Warning on the Service"
            )
            assert (event["reason"], event["message"]) == (spec.reason, spec.message(world))
            if spec.node:
                on_node = await wait_for_async(
                    lambda: world.warning("Node", OUTSIDE[0]), within=1.0, what="one on the Node"
                )
                assert (on_node["reason"], on_node["message"]) == (spec.reason, spec.message(world))
            await wait_for_async(
                lambda: world.refused_count() == 1 or None, within=5, what="REFUSED 1"
            )
            if webhook and spec.by_webhook:
                # Refused by the webhook once; the agent does not write it again
                # (it retried at 0.2, 0.4, 0.8 s... before).
                assert world.webhook_denials == ["TenantLoadBalancer"]
                await asyncio.sleep(1.5)
                assert world.webhook_denials == ["TenantLoadBalancer"]
            service_events = [
                e for e in world.events.list_objects() if e["involvedObject"]["name"] == name
            ]
            assert [e["count"] for e in service_events] == [1]
        finally:
            if spec.node:
                tenant_plane.kubectl("delete", "node", spec.node[0], check=False)
            if spec.tenant_spec:
                world.patch_tenant({"modes": MODES})  # as management() made it
            await _cleanly_deleted(world, name)


async def _over_the_port_quota(world: Scene, name: str) -> None:
    """A Service with one port more than acme's quota, and its Warning read."""
    await world.tenant.create(SERVICES, service(name, ports=_ports(PORT_QUOTA + 1)))
    await wait_for_async(
        lambda: world.warning("Service", name), within=1.0, what="a Warning on the Service"
    )


@pytest.mark.parametrize("webhook", [True, False], ids=["webhook on", "webhook off"])
async def test_a_refused_service_is_served_once_the_tenant_allows_it(
    real: Real, tenant_plane: ControlPlane, webhook: bool
) -> None:
    name = f"grow-{int(webhook)}"
    async with scene(real, tenant_plane, webhook=webhook) as world:
        try:
            await _over_the_port_quota(world, name)
            world.patch_tenant({"quotas": {"ports": PORT_QUOTA + 1}})

            def ingress() -> list[str] | None:
                svc = world.agent.services.get(f"default/{name}") or {}
                entries = svc.get("status", {}).get("loadBalancer", {}).get("ingress")
                return [e["ip"] for e in entries] if entries else None

            assert await wait_for_async(ingress, within=5, what="the Service's IP") == [
                "198.51.100.0"
            ]
            await wait_for_async(
                lambda: world.refused_count() == 0 or None, within=5, what="REFUSED 0"
            )
        finally:
            world.patch_tenant({"quotas": {"ports": PORT_QUOTA}})
            await _cleanly_deleted(world, name)


async def test_a_node_the_webhook_refuses_leaves_the_service_served_and_says_why(
    real: Real, tenant_plane: ControlPlane
) -> None:
    name = "keeps"
    async with scene(real, tenant_plane, webhook=True) as world:
        try:
            await world.tenant.create(SERVICES, service(name))

            def ingress() -> list[str] | None:
                svc = world.agent.services.get(f"default/{name}") or {}
                entries = svc.get("status", {}).get("loadBalancer", {}).get("ingress")
                return [e["ip"] for e in entries] if entries else None

            ips = await wait_for_async(ingress, within=5, what="the Service's IP")
            add_node(tenant_plane, *OUTSIDE)  # the update of its request is denied
            event = await wait_for_async(
                lambda: world.warning("Service", name), within=5, what="a Warning on the Service"
            )
            assert event["reason"] == "BackendNotAllowed"
            await wait_for_async(
                lambda: world.warning("Node", OUTSIDE[0]), within=1.0, what="one on the Node"
            )
            assert ingress() == ips  # still served, by its last accepted backends
            request = world.agent.remote.list_objects()[0]
            assert [b["node"] for b in request["spec"]["backends"]] == [INSIDE[0]]
            await wait_for_async(
                lambda: world.refused_count() == 1 or None, within=5, what="REFUSED 1"
            )
        finally:
            tenant_plane.kubectl("delete", "node", OUTSIDE[0], check=False)
            await _cleanly_deleted(world, name)


def _in_default(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["namespace"] = "default"
    return body


def _served(world: Scene, kind: str, name: str) -> bool | None:
    """The tenant's Ingress has the gateway's address, or its HTTPRoute is Accepted by
    our controller (as the gateway wrote it on the mirror, copied back by the agent)."""
    status = (world.tenant_object(kind, name) or {}).get("status") or {}
    if kind == "Ingress":
        return status.get("loadBalancer", {}).get("ingress") == [{"ip": GATEWAY_IP}] or None
    parents = [p for p in status.get("parents") or [] if p["controllerName"] == GATEWAY_CONTROLLER]
    return any(
        c["type"] == "Accepted" and c["status"] == "True"
        for p in parents
        for c in p.get("conditions", [])
    ) or None  # fmt: skip


@pytest.mark.parametrize("webhook", [True, False], ids=["webhook on", "webhook off"])
@pytest.mark.parametrize("kind", sorted(L7_KINDS))
async def test_a_hostname_outside_the_tenants_domains_is_read_on_its_own_object_within_a_second(
    real: Real, tenant_plane: ControlPlane, kind: str, webhook: bool
) -> None:
    """Issue 39: the refusal on the tenant's own Ingress or HTTPRoute (`kubectl describe`)
    within a second whichever side decided it (the webhook denying the mirror, or the
    gateway's vetting at reconcile); counted in the Tenant's REFUSED; a denied mirror not
    written again until something changes; the Tenant's dnsDomains widened, it is served."""
    name = f"elsewhere-{kind.lower()}-{int(webhook)}"
    resource = L7_KINDS[kind]
    field_name = "spec.rules[0].host" if kind == "Ingress" else "spec.hostnames[0]"
    async with scene(real, tenant_plane, webhook=webhook) as world:
        try:
            if kind == "HTTPRoute":
                cls = f"teapot-{name}"
                await world.tenant.create(resources.GATEWAY_CLASSES, gateway_class(cls))
                await world.tenant.create(resources.GATEWAYS, _in_default(gateway(name, cls)))
                body = http_route(name, name, [OUTSIDE_HOST], service_name="web")
            else:
                body = ingress(name, OUTSIDE_HOST)
            await world.tenant.create(resource, _in_default(body))
            event = await wait_for_async(
                lambda: world.warning(kind, name), within=1.0, what=f"a Warning on the {kind}"
            )
            assert event["reason"] == "HostnameNotAllowed", event
            assert event["message"].startswith(f"{field_name}: {OUTSIDE_HOST}"), event
            described = await asyncio.to_thread(
                tenant_plane.kubectl, "describe", kind.lower(), name, "-n", "default"
            )
            assert "HostnameNotAllowed" in described, described
            await wait_for_async(
                lambda: world.refused_count() == 1 or None, within=5, what="REFUSED 1"
            )
            if webhook:
                # Denied once; not written again while neither it nor the Tenant changes
                # (other objects of the tenant change meanwhile: a Service).
                assert world.webhook_denials == [kind], world.webhook_denials
                await world.tenant.create(SERVICES, service(f"{name}-svc"))
                await asyncio.sleep(1.5)
                assert world.webhook_denials == [kind], world.webhook_denials
            world.patch_tenant({"dnsDomains": [*DOMAINS, "elsewhere.example"]})
            await wait_for_async(
                lambda: _served(world, kind, name), within=5, what=f"the {kind} served"
            )
            await wait_for_async(
                lambda: world.refused_count() == 0 or None, within=5, what="REFUSED 0"
            )
        finally:
            world.patch_tenant({"dnsDomains": DOMAINS})
            await world.tenant.delete(resource, name, "default")
            if kind == "HTTPRoute":
                await world.tenant.delete(resources.GATEWAYS, name, "default")
                await world.tenant.delete(resources.GATEWAY_CLASSES, f"teapot-{name}")
            if webhook:
                await _cleanly_deleted(world, f"{name}-svc")


@pytest.mark.parametrize("webhook", [True, False], ids=["webhook on", "webhook off"])
async def test_a_restarted_agent_does_not_say_a_refusal_again(
    real: Real, tenant_plane: ControlPlane, webhook: bool
) -> None:
    """Once per change, not per retry, and not per restart of the agent: the new agent
    finds its refusal already on the Service (the Event keeps count 1)."""
    name = f"again-{int(webhook)}"
    async with scene(real, tenant_plane, webhook=webhook) as world:
        try:
            await _over_the_port_quota(world, name)
            await world.restart_agent()
            # The new agent has asked again (the webhook: once more) and is done with it.
            asked = 2 if webhook else 0
            await wait_for_async(
                lambda: (
                    not world.agent.readiness()
                    and len(world.webhook_denials) == asked
                    and world.agent.loop.queue.pending == 0
                ) or None,
                within=10,
                what="the restarted agent done with the Service",
            )  # fmt: skip
            said = [
                (e["reason"], e["count"])
                for e in world.events.list_objects()
                if e["involvedObject"]["name"] == name
            ]
            assert said == [("QuotaExceeded", 1)], said
        finally:
            await _cleanly_deleted(world, name)


async def test_a_providers_error_and_recovery_are_read_on_the_service_in_the_tenants_words(
    real: Real, tenant_plane: ControlPlane
) -> None:
    """An external provider (the in-memory one) that cannot reach its API, then can: the
    tenant's Service reads a Warning in the tenant's words, then a Normal `Programmed`,
    each once; the real CRD keeps the condition ProgrammedForTenant; the provider's endpoint is in
    no Event of the tenant cluster."""
    mem = MemoryLB(down=True)
    name = "built"
    async with scene(real, tenant_plane, webhook=False, providers=(mem,)) as world:
        try:
            world.patch_tenant({"providers": ["route", "proxy", mem.name],
                                "defaultProvider": mem.name})  # fmt: skip
            await wait_for_async(
                lambda: world.manager.tenants[world.acme].spec.default_provider == mem.name or None,
                within=10,
                what="the manager read the Tenant",
            )
            await world.tenant.create(SERVICES, service(name))
            warning = await wait_for_async(
                lambda: world.warning("Service", name), within=5.0, what="a Warning"
            )
            assert (warning["reason"], warning["message"]) == ("MemUnreachable", UNREACHABLE)
            request = world.agent.remote.list_objects()[0]
            [told] = [c for c in request["status"]["conditions"]
                      if c["type"] == PROGRAMMED_FOR_TENANT]  # fmt: skip
            assert (told["status"], told["message"]) == ("False", UNREACHABLE)

            mem.down = False

            def said() -> list[tuple[str, str, int]]:
                return [
                    (e["type"], e["reason"], e["count"])
                    for e in world.events.list_objects()
                    if e["involvedObject"]["name"] == name
                ]

            await wait_for_async(
                lambda: ("Normal", "Programmed", 1) in said() or None,
                within=5.0,
                what=f"a Normal Programmed on the Service; now {said()}",
            )
            assert sorted(said()) == [("Normal", "Programmed", 1), ("Warning", "MemUnreachable", 1)]
            assert ENDPOINT not in json.dumps(world.events.list_objects())
        finally:
            world.patch_tenant({"providers": None, "defaultProvider": None})
            await _cleanly_deleted(world, name)
