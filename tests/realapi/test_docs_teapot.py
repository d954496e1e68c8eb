"""docs/teapot.md as a user runs it: the operator's and the tenant's marked commands, in
the order written, against a management and a tenant kube-apiserver of their own
(skipped when ../shared/kube is absent; CI has it). A command that fails fails the test,
named by its line in the document.

No Pod runs on these control planes, so the test stands in for what the clusters would do
between the steps, and for nothing else (each stand-in below says what it replaces):
kubelets (the manager and the agent run here as their Deployments describe them, each
with a token of its own ServiceAccount, its certificate or kubeconfig read back from the
Secret the docs created; a tenant node registers itself) and the cluster network (the API
server reaches the manager's webhook by URL instead of through its Service). The only
edits of the documented commands are in SUBSTITUTIONS.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
import yaml

from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import connect
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent
from teapot_lb.webhook import ReloadingCertificate, WebhookServer

from .docblocks import (
    DocBlock,
    arg,
    container_args,
    documented,
    fresh_planes,
    kubectl_json,
    mounted_secret,
    run_block,
    service_account_kubeconfig,
    webhook_by_url,
)
from .release import ROOT

DOC = ROOT / "docs" / "teapot.md"
# The edits of the documented commands, each where the docs tell the user to choose:
# the names the API server reaches the manager's webhook by (here: by URL, on this host).
SUBSTITUTIONS = {
    'WEBHOOK_NAMES="DNS:teapot-lb-manager-webhook.teapot-lb-system.svc"': (
        'WEBHOOK_NAMES="DNS:teapot-lb-manager-webhook.teapot-lb-system.svc,IP:127.0.0.1"'
    ),
}
# The tenant cluster's node, as its kubelet would register it: in acme's nodeNetworks
# (deploy/teapot/tenant-namespace.yaml).
TENANT_NODE = ("node-1", "192.0.2.11")
# What the docs' steps are, in order (a step dropped or moved is noticed here).
STEPS = ["management"] * 4 + ["tenant"] * 3


@pytest.fixture(scope="module")
def planes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ControlPlane]]:
    with fresh_planes(tmp_path_factory.mktemp("docs"), "management", "tenant") as planes:
        yield planes


class Kubelets:
    """What the clusters' kubelets (and network) would do between the documented steps."""

    def __init__(self, planes: dict[str, ControlPlane], workdir: Path, stack: AsyncExitStack):
        self.planes = planes
        self.workdir = workdir
        self.stack = stack

    async def after(self, block: DocBlock) -> None:
        management = self.planes["management"]
        if "deploy/teapot-lb.yaml" in block.code:
            # No controller Pod backs the one-cluster webhook here (install.md's own
            # steps and tests/realapi/test_install.py cover the controller).
            management.kubectl("delete", "validatingwebhookconfiguration", "teapot-lb")
        if "clientConfig/caBundle" in block.code:
            await self._start_manager(management)
        if "tenant-agent.yaml" in block.code:
            name, ip = TENANT_NODE
            tenant = self.planes["tenant"]
            tenant.kubectl(
                "apply",
                "-f",
                "-",
                input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
            )
            tenant.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
                           json.dumps({"status": {"addresses": [
                               {"type": "InternalIP", "address": ip}]}}))  # fmt: skip
        if "secret generic teapot-management" in block.code:
            await self._start_agent(self.planes["tenant"])

    async def _start_manager(self, plane: ControlPlane) -> None:
        args = container_args(plane, "teapot-lb-system", "teapot-lb-manager")
        files = mounted_secret(plane, "teapot-lb-system", "teapot-lb-manager-webhook", self.workdir)
        client = await self.stack.enter_async_context(
            await connect(
                service_account_kubeconfig(plane, "teapot-lb-system", "teapot-lb-manager")
            )
        )
        config = ManagerConfig(config_namespace=arg(args, "config-namespace") or "")
        manager = await self.stack.enter_async_context(running(KubeManager(client, config)))
        # Ready, and every watch current (a CRD established a moment ago answers 429
        # until its storage is initialized; the informer then lists again a second later).
        await wait_for_async(
            lambda: (not manager.readiness() and all(i.synced for i in manager.informers)) or None,
            within=30,
            what="the manager ready, its watches current",
        )
        webhook = WebhookServer(
            manager.objects,
            certificate=ReloadingCertificate(files["tls.crt"], files["tls.key"]),
            ready=manager.readiness,
        )
        port = await webhook.start("127.0.0.1", 0)
        self.stack.push_async_callback(webhook.stop)
        webhook_by_url(plane, "teapot-lb-manager", port)

    async def _start_agent(self, plane: ControlPlane) -> None:
        args = container_args(plane, "teapot-system", "teapot-tenant-agent")
        files = mounted_secret(plane, "teapot-system", "teapot-management", self.workdir)
        identity = service_account_kubeconfig(plane, "teapot-system", "teapot-tenant-agent")
        tenant = await self.stack.enter_async_context(await connect(identity))
        management = await self.stack.enter_async_context(await connect(files["kubeconfig"]))
        cluster = arg(args, "cluster-name")
        assert cluster == "web-1"
        config = AgentConfig(
            cluster=cluster,
            namespace=arg(args, "management-namespace") or management.namespace,
            load_balancer_class=arg(args, "load-balancer-class") or "",
        )
        agent = await self.stack.enter_async_context(
            running(TenantAgent(tenant, management, config))
        )
        await wait_for_async(
            lambda: not agent.readiness() or None, within=30, what="the agent ready"
        )


@asynccontextmanager
async def kubelets(planes: dict[str, ControlPlane], workdir: Path) -> AsyncIterator[Kubelets]:
    async with AsyncExitStack() as stack:
        yield Kubelets(planes, workdir, stack)


async def test_the_operators_and_the_tenants_steps_run_as_written(
    planes: dict[str, ControlPlane], tmp_path: Path
) -> None:
    blocks = documented(DOC, SUBSTITUTIONS)
    assert [b.target for b in blocks] == STEPS
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")  # "from a checkout of teapot-lb"
    async with kubelets(planes, tmp_path) as stand_in:
        for block in blocks:
            await run_block(DOC, block, planes[block.target], tmp_path, SUBSTITUTIONS)
            await stand_in.after(block)
    # What the docs promise at the end: the tenant's Service has its IP, from acme's
    # allocation, and the operator sees the request.
    service = kubectl_json(planes["tenant"], "-n", "default", "get", "service", "web")
    (entry,) = service["status"]["loadBalancer"]["ingress"]
    assert entry["ip"].startswith("198.51.100.")
    requests = yaml.safe_load(
        planes["management"].kubectl("-n", "tenant-acme", "get", "tlb", "-o", "yaml")
    )["items"]
    assert [r["metadata"]["name"] for r in requests] == ["web-1.default.web"]
