"""The Teapot flow over HTTP: tenant Service -> agent -> management API -> manager ->
management API -> agent -> Service status; deletion, refusals, orphans."""

from __future__ import annotations

from pathlib import Path

from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.resources import SERVICES
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.tenancy.request import RELAY_COMPONENT, node_event_ref

from .builders import TENANTS, tlb_body
from .world import WITHIN, endpoints, service, teapot_world


async def test_a_tenant_service_gets_an_ip_of_its_tenant_and_next_hops_of_its_nodes(
    tmp_path: Path,
) -> None:
    async with teapot_world(tmp_path, ("acme",)) as world:
        acme = world.tenants["acme"]
        acme.api.seed(endpoints("web", ["acme-n0", "acme-n2"]))
        await acme.client.create(SERVICES, service("web", externalTrafficPolicy="Local"))
        ips = await world.assigned(acme, "web")
        assert ips == ["198.51.100.0"]
        tlb = world.tlb(acme.namespace, acme.request("web"))
        assert tlb is not None
        assert tlb["status"]["nextHops"] == ["192.0.2.11", "192.0.2.13"]
        assert [r.prefix for r in world.manager.routes()] == ["198.51.100.0/32"]
        svc = acme.api.get("services", "web", "default")
        assert svc is not None and "lb.teapot.io/tenant-agent" in svc["metadata"]["finalizers"]
        await wait_for_async(
            lambda: (
                (world.management.get("tenants", "acme") or {})
                .get("status", {})
                .get("usage", {})
                .get("addresses")
                == 1
            ),
            within=WITHIN,
            what="Tenant acme's usage",
        )


async def test_deleting_the_service_deletes_the_request_and_withdraws_the_route(
    tmp_path: Path,
) -> None:
    async with teapot_world(tmp_path, ("acme",)) as world:
        acme = world.tenants["acme"]
        acme.api.seed(endpoints("web", ["acme-n0"]))
        await acme.client.create(SERVICES, service("web"))
        await world.assigned(acme, "web")
        await acme.client.delete(SERVICES, "web", "default")
        await wait_for_async(
            lambda: (
                acme.api.get("services", "web", "default") is None
                and world.tlb(acme.namespace, acme.request("web")) is None
            ),
            within=WITHIN,
            what="the Service and its request gone",
        )
        await wait_for_async(
            lambda: world.manager.routes() == [], within=WITHIN, what="the route withdrawn"
        )


async def test_a_refusal_reaches_the_service_as_an_event(tmp_path: Path) -> None:
    async with teapot_world(tmp_path, ("acme",), acme={"quotas": {"loadBalancers": 1}}) as world:
        acme = world.tenants["acme"]
        await acme.client.create(SERVICES, service("one"))
        await world.assigned(acme, "one")
        await acme.client.create(SERVICES, service("two"))
        await wait_for_async(
            lambda: acme.events("QuotaExceeded"), within=WITHIN, what="a QuotaExceeded Event"
        )
        event = acme.events("QuotaExceeded")[0]
        assert event["involvedObject"]["name"] == "two"
        assert "quota of 1 load balancers of Tenant acme reached" in event["message"]
        assert acme.ingress("two") == []


async def test_on_start_the_agent_deletes_orphans_of_its_cluster_only(tmp_path: Path) -> None:
    async with teapot_world(tmp_path, ("acme",)) as world:
        acme = world.tenants["acme"]
        orphan = {
            "apiVersion": "lb.teapot.io/v1alpha1",
            "kind": "TenantLoadBalancer",
            "metadata": {
                "name": acme.request("gone"),
                "namespace": acme.namespace,
                "labels": {
                    "lb.teapot.io/cluster": "c1",
                    "lb.teapot.io/service-namespace": "default",
                    "lb.teapot.io/service-name": "gone",
                },
            },
            "spec": {"source": {"cluster": "c1", "namespace": "default", "name": "gone"}},
        }
        other = {
            **orphan,
            "metadata": {
                **orphan["metadata"],  # type: ignore[dict-item]
                "name": "c2.default.gone",
                "labels": {"lb.teapot.io/cluster": "c2"},
            },
        }
        world.management.seed(orphan)
        world.management.seed(other)
        await wait_for_async(
            lambda: world.tlb(acme.namespace, acme.request("gone")) is None,
            within=WITHIN,
            what="the orphan deleted",
        )
        assert world.tlb(acme.namespace, "c2.default.gone") is not None


async def test_a_request_written_while_the_webhook_was_down_is_refused_at_reconcile(
    tmp_path: Path,
) -> None:
    async with teapot_world(tmp_path, ("acme", "bolt")) as world:
        # Written straight into storage, as if no webhook had been there.
        world.management.seed(tlb_body("bolt", "sneak", requestedIPs=["198.51.100.3"]))
        accepted = await world.accepted("tenant-bolt", "sneak")
        assert (accepted["status"], accepted["reason"]) == ("False", "AddressNotAllocated")


async def test_a_relay_event_about_a_nodes_session_reaches_that_node(tmp_path: Path) -> None:
    async with teapot_world(tmp_path, ("acme",)) as world:
        acme = world.tenants["acme"]
        recorder = EventRecorder(world.admin, RELAY_COMPONENT)
        address = TENANTS["acme"]["node_ips"][1]
        why = f"session {address} torn down: more than 100 routes received"
        # The relay, on a max-prefix trip of acme's node-1 (relay/kube.py TenantEvents).
        assert await recorder.record(
            node_event_ref(acme.namespace, address), "Warning", "MaxPrefixReached", why
        )
        told = await wait_for_async(
            lambda: acme.events("MaxPrefixReached"), within=WITHIN, what="an Event on the Node"
        )
        assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in told] == [
            ("Node", "acme-n1")
        ]
        assert (told[0]["type"], told[0]["message"]) == ("Warning", why)
