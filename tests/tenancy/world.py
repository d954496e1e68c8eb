"""A Teapot world over HTTP: one management fake API server, one tenant cluster (fake API
server) per tenant, the manager, and each tenant's agent with credentials for its own
management namespace only (the fake server's token -> namespace authorization)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import OPERATOR_EVENTS_NAMESPACE, KubeManager, ManagerConfig
from teapot_lb.tenancy.request import TEAPOT_CLOUD_CLASS, request_name
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent

from .builders import CONFIG_NS, TENANTS, pool_body, tenant_body

WITHIN = 15.0


def node(name: str, ip: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
    }


def service(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": TEAPOT_CLOUD_CLASS,
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080}],
            "selector": {"app": name},
            **spec,
        },
    }


def endpoints(service_name: str, nodes: list[str], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-x",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [f"10.0.0.{i + 1}"], "nodeName": n, "conditions": {"ready": True}}
            for i, n in enumerate(nodes)
        ],
    }


@dataclass
class TenantSide:
    name: str
    api: FakeApiServer
    client: KubeClient  # admin of the tenant cluster (the test's hands)
    remote: KubeClient  # the agent's management credentials (its namespace only)
    agent: TenantAgent
    agents: contextlib.AsyncExitStack  # the running agent's
    cluster: str = "c1"

    async def restart_agent(self) -> None:
        """The agent stopped and a new one started (its memory gone, as after a crash)."""
        await self.agents.aclose()
        self.agent = TenantAgent(self.client, self.remote, self.agent.config, watch_timeout_s=30)
        await self.agents.enter_async_context(running(self.agent))

    @property
    def namespace(self) -> str:
        return str(TENANTS[self.name]["namespace"])

    def request(self, service_name: str, namespace: str = "default") -> str:
        return request_name(self.cluster, namespace, service_name)

    def ingress(self, service_name: str, namespace: str = "default") -> list[str]:
        svc = self.api.get("services", service_name, namespace) or {}
        entries = svc.get("status", {}).get("loadBalancer", {}).get("ingress") or []
        return [str(e["ip"]) for e in entries]

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.list("events") if e.get("reason") == reason]


@dataclass
class World:
    management: FakeApiServer
    admin: KubeClient
    manager: KubeManager
    tmp: Path
    tenants: dict[str, TenantSide] = field(default_factory=dict)

    def tlb(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.management.get("tenantloadbalancers", name, namespace)

    def condition(self, namespace: str, name: str, kind: str) -> dict[str, Any] | None:
        obj = self.tlb(namespace, name) or {}
        for c in obj.get("status", {}).get("conditions") or []:
            if c["type"] == kind:
                return dict(c)
        return None

    def operator_events(self, tenant: str) -> list[dict[str, Any]]:
        """The manager's Events on Tenant `tenant` (the operator's words about its
        requests), in namespace `default`, where no agent reads."""
        return [
            e
            for e in self.management.list("events", OPERATOR_EVENTS_NAMESPACE)
            if (e.get("involvedObject") or {}).get("kind") == "Tenant"
            and e["involvedObject"].get("name") == tenant
        ]

    async def operator_told(self, tenant: str, reason: str) -> str:
        """The latest message with `reason` on Tenant `tenant`, once there is one."""
        said = await wait_for_async(
            lambda: (
                [e["message"] for e in self.operator_events(tenant) if e["reason"] == reason]
                or None
            ),
            within=WITHIN,
            what=f"{reason} on Tenant {tenant}; now {self.operator_events(tenant)}",
        )
        return str(said[-1])

    async def accepted(self, namespace: str, name: str) -> dict[str, Any]:
        """The request's Accepted condition, once the manager has written it."""
        return await wait_for_async(
            lambda: self.condition(namespace, name, "Accepted"),
            within=WITHIN,
            what=f"Accepted on {namespace}/{name}",
        )

    async def programmed(self, namespace: str, name: str, status: str) -> dict[str, Any]:
        """The request's Programmed condition, once its status is `status`."""
        return await wait_for_async(
            lambda: (
                (c := self.condition(namespace, name, "Programmed")) and c["status"] == status and c
            ),
            within=WITHIN,
            what=f"Programmed={status} on {namespace}/{name}",
        )

    async def assigned(self, side: TenantSide, service_name: str) -> list[str]:
        return await wait_for_async(
            lambda: side.ingress(service_name) or None,
            within=WITHIN,
            what=f"an IP in the status of {side.name}'s Service {service_name}",
        )


@contextlib.asynccontextmanager
async def teapot_world(
    tmp: Path,
    tenants: tuple[str, ...] = ("acme", "bolt"),
    *,
    config: ManagerConfig | None = None,
    **tenant_specs: dict[str, Any],
) -> AsyncIterator[World]:
    """The management side with Tenants `tenants` (spec overrides by tenant name), and for
    each a tenant cluster with its nodes and a running agent; the manager runs with
    `config` (default: only the configuration namespace set)."""
    async with contextlib.AsyncExitStack() as stack:
        management = FakeApiServer(
            bookmark_interval=0.5,
            seed_namespaces=("default", CONFIG_NS, *(TENANTS[t]["namespace"] for t in TENANTS)),
        )
        await management.start()
        stack.push_async_callback(management.stop)
        management.add_token("fake-token")
        management.write_kubeconfig(tmp / "management")
        for name, addresses in (
            ("shared-v4", ["198.51.100.0/26"]),
            ("shared-v6", ["2001:db8:100::/120"]),
        ):
            management.seed(pool_body(name, addresses))
        for t in tenants:
            management.seed(tenant_body(t, **tenant_specs.get(t, {})))
        admin = await connect(management.kubeconfig_path, request_timeout_s=5.0)
        stack.push_async_callback(admin.close)
        config = config or ManagerConfig(config_namespace=CONFIG_NS)
        manager = KubeManager(admin, config, watch_timeout_s=30)
        await stack.enter_async_context(running(manager))
        world = World(management, admin, manager, tmp)
        for t in tenants:
            world.tenants[t] = await stack.enter_async_context(_tenant_side(world, t))
        yield world


@contextlib.asynccontextmanager
async def _tenant_side(world: World, name: str) -> AsyncIterator[TenantSide]:
    facts = TENANTS[name]
    token = f"{name}-agent"
    world.management.add_token(token, [facts["namespace"]])
    remote_config = world.management.write_kubeconfig(
        world.tmp / f"{name}-remote", namespace=facts["namespace"], token=token
    )
    api = FakeApiServer(bookmark_interval=0.5)
    await api.start()
    try:
        api.write_kubeconfig(world.tmp / f"{name}-tenant")
        for i, ip in enumerate(facts["node_ips"]):
            api.seed(node(f"{name}-n{i}", ip))
        assert api.kubeconfig_path is not None
        async with (
            await connect(api.kubeconfig_path, request_timeout_s=5.0) as client,
            await connect(remote_config, request_timeout_s=5.0) as remote,
        ):
            agent = TenantAgent(
                client,
                remote,
                AgentConfig(cluster="c1", namespace=facts["namespace"]),
                watch_timeout_s=30,
            )
            async with contextlib.AsyncExitStack() as agents:
                await agents.enter_async_context(running(agent))
                yield TenantSide(name, api, client, remote, agent, agents)
    finally:
        await api.stop()
