"""One tenant (acme) over HTTP: the management fake API server (the agent's token sees
only tenant-acme there) and the tenant cluster's, with the real tenant agent running as
the Teapot ingress controller (`gateway=True`)."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.model.ingress import GATEWAY_CONTROLLER
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent
from tenancy.builders import CONFIG_NS, TENANTS
from tenancy.world import node

NS = "tenant-acme"
GW = "gateway.networking.k8s.io/v1"


def service(name: str, ns: str = "web", node_port: int = 30080) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "type": "NodePort",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": node_port}],
        },
    }


def slice_of(service_name: str, addresses: list[str], ns: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-abcde",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [a], "nodeName": "acme-n0", "conditions": {"ready": True}}
            for a in addresses
        ],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def tls_secret(name: str, cert: bytes, key: bytes, ns: str = "web") -> dict[str, Any]:
    enc = {k: base64.b64encode(v).decode() for k, v in (("tls.crt", cert), ("tls.key", key))}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "type": "kubernetes.io/tls",
        "data": {**enc, "ca.crt": enc["tls.crt"]},
    }


def ingress(name: str, host: str, cls: str = "teapot", **spec: Any) -> dict[str, Any]:
    path = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "web", "annotations": {"team": "shop"}},
        "spec": {
            "ingressClassName": cls,
            "rules": [{"host": host, "http": {"paths": [path]}}],
            **spec,
        },
    }


def gateway_class(name: str, controller: str = GATEWAY_CONTROLLER) -> dict[str, Any]:
    return {
        "apiVersion": GW,
        "kind": "GatewayClass",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }


def gateway(name: str, cls: str) -> dict[str, Any]:
    return {
        "apiVersion": GW,
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "web"},
        "spec": {
            "gatewayClassName": cls,
            "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
        },
    }


def http_route(
    name: str, parent: str, hostnames: list[str], service_name: str = "api"
) -> dict[str, Any]:
    return {
        "apiVersion": GW,
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "web"},
        "spec": {
            "parentRefs": [{"name": parent}],
            "hostnames": hostnames,
            "rules": [{"backendRefs": [{"name": service_name, "port": 80}]}],
        },
    }


@dataclass
class TenantWorld:
    management: FakeApiServer
    tenant: FakeApiServer
    client: KubeClient  # admin of the tenant cluster (the test's hands)
    admin: KubeClient  # admin of the management cluster (stands in for the gateway)
    agent: TenantAgent

    def mirrors(self, resource: str) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in self.management.list(resource, NS)}


@contextlib.asynccontextmanager
async def tenant_world(tmp: Path, *seed: dict[str, Any]) -> AsyncIterator[TenantWorld]:
    management = FakeApiServer(
        bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NS, "tenant-bolt")
    )
    await management.start()
    tenant = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", "web"))
    await tenant.start()
    try:
        management.add_token("admin-token")
        management.add_token("acme-agent", [NS])
        admin_config = management.write_kubeconfig(tmp / "admin", token="admin-token")
        remote_config = management.write_kubeconfig(
            tmp / "remote", namespace=NS, token="acme-agent"
        )
        tenant.write_kubeconfig(tmp / "tenant")
        assert tenant.kubeconfig_path is not None
        for i, ip in enumerate(TENANTS["acme"]["node_ips"][:2]):
            tenant.seed(node(f"acme-n{i}", ip))
        for obj in seed:
            tenant.seed(obj)
        async with (
            await connect(tenant.kubeconfig_path, request_timeout_s=5.0) as client,
            await connect(remote_config, request_timeout_s=5.0) as remote,
            await connect(admin_config, request_timeout_s=5.0) as admin,
        ):
            agent = TenantAgent(
                client,
                remote,
                AgentConfig(cluster="c1", namespace=NS, gateway=True),
                watch_timeout_s=30,
            )
            async with running(agent):
                yield TenantWorld(management, tenant, client, admin, agent)
    finally:
        await tenant.stop()
        await management.stop()
