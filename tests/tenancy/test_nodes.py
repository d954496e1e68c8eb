"""Registered tenant nodes over HTTP: the tenant agent publishes its cluster's Nodes as a
TenantNodes in the tenant's management namespace (with its own limited credentials) and
follows Node changes; the manager vets every address against the Tenant's nodeNetworks
and writes the refused ones in the status, counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teapot_lb.kube.resources import NODES, TENANT_NODES
from teapot_lb.lab.wait import wait_for_async

from .world import WITHIN, World, node, teapot_world


def published(world: World, namespace: str) -> dict[str, list[str]] | None:
    obj = world.management.get("tenantnodes", "c1", namespace)
    if obj is None:
        return None
    return {n["name"]: n["addresses"] for n in obj["spec"]["nodes"]}


def accepted(world: World, namespace: str) -> dict[str, Any] | None:
    obj = world.management.get("tenantnodes", "c1", namespace) or {}
    status = obj.get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Accepted"), None)


async def test_the_agent_publishes_its_clusters_nodes_and_follows_them(tmp_path: Path) -> None:
    async with teapot_world(tmp_path, ("acme",)) as world:
        acme = world.tenants["acme"]
        want = {"acme-n0": ["192.0.2.11"], "acme-n1": ["192.0.2.12"], "acme-n2": ["192.0.2.13"]}
        await wait_for_async(lambda: published(world, acme.namespace) == want, within=WITHIN,
                             what="acme's nodes published")  # fmt: skip
        obj = world.management.get("tenantnodes", "c1", acme.namespace)
        assert obj is not None and obj["spec"]["cluster"] == "c1"
        condition = await wait_for_async(lambda: accepted(world, acme.namespace), within=WITHIN,
                                         what="the manager's verdict")  # fmt: skip
        assert (condition["status"], condition["reason"]) == ("True", "Accepted")
        # A node joins, another leaves: the published list follows.
        acme.api.seed(node("acme-n3", "192.0.2.14"))
        await acme.client.delete(NODES, "acme-n0")
        want = {"acme-n1": ["192.0.2.12"], "acme-n2": ["192.0.2.13"], "acme-n3": ["192.0.2.14"]}
        await wait_for_async(lambda: published(world, acme.namespace) == want, within=WITHIN,
                             what="acme's nodes after the change")  # fmt: skip
        # Deleted by someone: published again.
        await world.admin.delete(TENANT_NODES, "c1", acme.namespace)
        await wait_for_async(lambda: published(world, acme.namespace) == want, within=WITHIN,
                             what="acme's nodes published again")  # fmt: skip


async def test_the_manager_refuses_an_address_outside_the_node_networks_with_its_reason(
    tmp_path: Path,
) -> None:
    async with teapot_world(tmp_path, ("acme",)) as world:
        acme = world.tenants["acme"]
        acme.api.seed(node("acme-far", "203.0.113.50"))
        condition = await wait_for_async(
            lambda: (c := accepted(world, acme.namespace)) and c["status"] == "False" and c,
            within=WITHIN, what="the outside address refused",
        )  # fmt: skip
        assert condition["reason"] == "AddressOutsideNodeNetworks"
        assert condition["message"] == (
            "203.0.113.50 of node acme-far is outside the nodeNetworks of Tenant acme"
            " (192.0.2.0/26, 2001:db8:a::/64): the relay takes no session and no next hop from it"
        )
        obj = world.management.get("tenantnodes", "c1", acme.namespace)
        assert obj is not None and obj["status"]["refused"] == 1
        gauge = world.manager.metrics.node_addresses_refused.labels("acme", acme.namespace, "c1")
        assert gauge._value.get() == 1
        # The node goes: nothing refused any more.
        await acme.client.delete(NODES, "acme-far")
        await wait_for_async(
            lambda: (c := accepted(world, acme.namespace)) and c["status"] == "True",
            within=WITHIN, what="every address registered again",
        )  # fmt: skip


async def test_a_tenant_nodes_published_before_the_manager_leads_gets_its_verdict(
    tmp_path: Path,
) -> None:
    """Level-triggered: a TenantNodes already there when the manager starts (its agent
    published it earlier, or the manager restarted) is vetted when the manager leads, not
    only when it next changes."""
    from teapot_lb.controller.kube_runner import running
    from teapot_lb.kube.client import connect
    from teapot_lb.lab.fakeapi import FakeApiServer
    from teapot_lb.manager.kube import KubeManager, ManagerConfig

    from .builders import API, CONFIG_NS, TENANTS, tenant_body

    namespace = TENANTS["acme"]["namespace"]
    management = FakeApiServer(seed_namespaces=("default", CONFIG_NS, namespace))
    await management.start()
    try:
        management.add_token("fake-token")
        management.write_kubeconfig(tmp_path / "management")
        management.seed(tenant_body("acme"))
        management.seed({
            "apiVersion": API, "kind": "TenantNodes",
            "metadata": {"name": "c1", "namespace": namespace},
            "spec": {"cluster": "c1", "nodes": [
                {"name": "acme-n0", "addresses": ["192.0.2.11"]},
                {"name": "acme-far", "addresses": ["203.0.113.50"]},
            ]},
        })  # fmt: skip
        assert management.kubeconfig_path is not None
        async with await connect(management.kubeconfig_path, request_timeout_s=5.0) as admin:
            manager = KubeManager(admin, ManagerConfig(config_namespace=CONFIG_NS))
            async with running(manager):

                def verdict() -> dict[str, Any] | None:
                    obj = management.get("tenantnodes", "c1", namespace) or {}
                    status: dict[str, Any] | None = obj.get("status")
                    return status

                status = await wait_for_async(verdict, within=WITHIN, what="the verdict")
        assert status["refused"] == 1
        accepted = [c for c in status["conditions"] if c["type"] == "Accepted"]
        assert [c["reason"] for c in accepted] == ["AddressOutsideNodeNetworks"]
    finally:
        await management.stop()
