"""The manager drives an external provider (over HTTP, the in-repo fake API server).

The provider here is a small in-memory one that keeps the contract of
`teapot_lb.providers.base` (:mod:`.memlb`): this tests the manager's side of the
contract, not a provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.informer import EventType as InformerEvent
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import OPERATOR_EVENTS_NAMESPACE, KubeManager, ManagerConfig
from teapot_lb.model.event import Event, EventType
from teapot_lb.model.tenancy import REASON_DEGRADED
from teapot_lb.providers.base import Member, owner_tag

from .builders import CONFIG_NS, TENANTS, pool_body, tenant_body, tlb_body
from .memlb import ENDPOINT, UNREACHABLE, Built, MemoryLB

WITHIN = 15.0
NAMESPACE = str(TENANTS["acme"]["namespace"])


@dataclass
class Management:
    api: FakeApiServer
    admin: KubeClient

    def condition(self, name: str, kind: str) -> tuple[str, str, str] | None:
        obj = self.api.get("tenantloadbalancers", name, NAMESPACE) or {}
        for c in obj.get("status", {}).get("conditions") or []:
            if c["type"] == kind:
                return c["status"], c["reason"], c["message"]
        return None

    def addresses(self, name: str) -> list[str]:
        obj = self.api.get("tenantloadbalancers", name, NAMESPACE) or {}
        return list(obj.get("status", {}).get("addresses") or [])

    def transition(self, name: str, kind: str) -> str | None:
        obj = self.api.get("tenantloadbalancers", name, NAMESPACE) or {}
        found = [c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind]
        return found[0]["lastTransitionTime"] if found else None

    async def until(
        self, name: str, kind: str, status: str, reason: str, within: float = WITHIN
    ) -> str:
        """Wait for the condition; its message."""
        found = await wait_for_async(
            lambda: (c := self.condition(name, kind)) and c[:2] == (status, reason) and c,
            within=within,
            what=f"{kind}={status} ({reason}) on {name}; now {self.condition(name, kind)}",
        )
        return found[2]

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.list("events", NAMESPACE) if e.get("reason") == reason]

    def operator_events(self) -> list[tuple[str, int]]:
        """(reason, count) of every Event on a Tenant."""
        return [
            (e["reason"], e["count"])
            for e in self.api.list("events", OPERATOR_EVENTS_NAMESPACE)
            if (e.get("involvedObject") or {}).get("kind") == "Tenant"
        ]

    async def operator_told(self, reason: str) -> str:
        """The operator's words with `reason`: an Event on Tenant acme (in `default`, where
        Events about a cluster-scoped object are), once there is one."""

        def found() -> list[str] | None:
            said = [
                str(e["message"])
                for e in self.api.list("events", OPERATOR_EVENTS_NAMESPACE)
                if e.get("reason") == reason
                and (e.get("involvedObject") or {}).get("kind") == "Tenant"
                and e["involvedObject"].get("name") == "acme"
            ]
            return said or None

        return (await wait_for_async(found, within=WITHIN, what=f"{reason} on Tenant acme"))[-1]


@contextlib.asynccontextmanager
async def management(tmp: Path, **acme: Any) -> AsyncIterator[Management]:
    api = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NAMESPACE))
    await api.start()
    try:
        api.add_token("fake-token")
        api.write_kubeconfig(tmp / "management")
        api.seed(pool_body("shared-v4", ["198.51.100.0/26"]))
        api.seed(tenant_body("acme", **({"providers": ["route", "memlb"]} | acme)))
        assert api.kubeconfig_path is not None
        async with await connect(api.kubeconfig_path, request_timeout_s=5.0) as admin:
            yield Management(api, admin)
    finally:
        await api.stop()


def manager(world: Management, provider: MemoryLB) -> KubeManager:
    config = ManagerConfig(
        config_namespace=CONFIG_NS,
        providers={provider.name: provider},
        provider_retry_base_s=0.05,
        provider_resync_s=0.5,
    )
    return KubeManager(world.admin, config, watch_timeout_s=30)


async def request(world: Management, name: str, **spec: Any) -> str:
    created = await world.admin.create(
        TENANT_LOAD_BALANCERS, tlb_body("acme", name, **({"provider": "memlb"} | spec))
    )
    return str(created["metadata"]["uid"])


async def test_a_request_is_built_by_its_provider_and_programmed_once_active(
    tmp_path: Path,
) -> None:
    mem = MemoryLB()
    async with management(tmp_path) as world, running(manager(world, mem)):
        uid = await request(
            world,
            "web",
            externalTrafficPolicy="Local",
            healthCheckNodePort=32000,
            backends=[
                {"node": "n0", "addresses": ["192.0.2.11"], "ready": True},
                {"node": "n1", "addresses": ["192.0.2.12"], "ready": False},
            ],
        )
        message = await world.until("web", "Programmed", "True", "Active")
        assert message == "the load balancer serves 198.51.100.0"  # the tenant's words
        said = await world.operator_told("Programmed")
        assert said == f"{NAMESPACE}/web: memlb lb-0 serves 198.51.100.0"  # the operator's
        spec = mem.ensured[-1]
        assert (spec.key, spec.uid, spec.tenant) == (f"{NAMESPACE}/web", uid, "acme")
        assert [str(ip) for ip in spec.addresses] == ["198.51.100.0"]
        (listener,) = spec.listeners
        assert listener.members == (Member("n0", ip_address("192.0.2.11"), 30080),)
        assert listener.health_check_port == 32000
        assert mem.creates == 1 and list(mem.objects) == ["lb-0"]
        obj = world.api.get("tenantloadbalancers", "web", NAMESPACE) or {}
        assert obj["status"]["nextHops"] == []  # not announced by the speakers as well
        await wait_for_async(
            lambda: world.events("Programmed"), within=WITHIN, what="a Programmed Event"
        )


async def test_a_degraded_load_balancer_stays_programmed_and_says_so_in_a_warning_event(
    tmp_path: Path,
) -> None:
    """A member out of service (its health monitor's probes fail) leaves the address
    served by the others: Programmed stays True, with reason Degraded naming the member,
    and the tenant gets a Warning Event (not the Normal one of a load balancer built)."""
    mem = MemoryLB()
    async with management(tmp_path) as world, running(manager(world, mem)):
        await request(world, "web")
        await world.until("web", "Programmed", "True", "Active")
        mem.failing = frozenset({"n1"})

        message = await world.until("web", "Programmed", "True", REASON_DEGRADED)

        assert message.endswith("1 of 3 backends fail their health check: 192.0.2.12:30080 (n1)")
        [event] = await wait_for_async(
            lambda: world.events(REASON_DEGRADED), within=WITHIN, what="a Degraded Event"
        )
        assert event["type"] == "Warning" and event["message"] == message
        said = await world.operator_told(REASON_DEGRADED)
        assert said.endswith("out of service: n1 (192.0.2.12 port 30080) ERROR")


async def test_a_provider_error_says_why_is_retried_and_clears_once_it_answers(
    tmp_path: Path,
) -> None:
    mem = MemoryLB(down=True)
    async with management(tmp_path) as world, running(manager(world, mem)) as m:
        await request(world, "web")
        message = await world.until("web", "Programmed", "False", "MemUnreachable")
        assert message == UNREACHABLE
        said = await world.operator_told("MemUnreachable")
        assert said == (
            f"{NAMESPACE}/web: memlb API at {ENDPOINT} (project project-of-acme): "
            "connection refused"
        )
        await wait_for_async(lambda: len(mem.ensured) >= 3, within=WITHIN, what="retries")
        await wait_for_async(
            lambda: world.events("MemUnreachable"), within=WITHIN, what="a Warning Event"
        )
        errors = m.metrics.provider_errors.labels("memlb", "ensure")._value.get()
        assert errors >= 3
        mem.down = False
        await world.until("web", "Programmed", "True", "Active")
        assert mem.creates == 1


async def test_a_deleted_request_is_deleted_from_the_provider_until_nothing_is_left(
    tmp_path: Path,
) -> None:
    mem = MemoryLB()
    async with management(tmp_path) as world, running(manager(world, mem)):
        uid = await request(world, "web")
        await world.until("web", "Programmed", "True", "Active")
        await world.admin.delete(TENANT_LOAD_BALANCERS, "web", NAMESPACE)
        await wait_for_async(lambda: not mem.objects, within=WITHIN, what="the object deleted")
        assert mem.deletes == [uid, uid]  # in progress, then gone: asked until None


async def test_a_request_moved_to_another_provider_is_deleted_from_the_first(
    tmp_path: Path,
) -> None:
    mem = MemoryLB()
    async with management(tmp_path) as world, running(manager(world, mem)) as m:
        await request(world, "web")
        await world.until("web", "Programmed", "True", "Active")
        obj = await world.admin.get(TENANT_LOAD_BALANCERS, "web", NAMESPACE)
        obj["spec"]["provider"] = "route"
        await world.admin.replace(TENANT_LOAD_BALANCERS, obj)
        await world.until("web", "Programmed", "True", "Programmed")
        await wait_for_async(lambda: not mem.objects, within=WITHIN, what="memlb's object gone")
        assert [r.prefix for r in m.routes()] == ["198.51.100.0/32"]


async def test_a_restarted_manager_creates_nothing_twice_and_sweeps_only_what_it_owns(
    tmp_path: Path,
) -> None:
    mem = MemoryLB()
    mem.objects["orphan"] = Built(owner_tag("uid-of-a-request-deleted-meanwhile"))
    mem.objects["foreign"] = Built(None)  # someone else's: no tag of ours
    async with management(tmp_path) as world:
        async with running(manager(world, mem)):
            await request(world, "web")
            await world.until("web", "Programmed", "True", "Active")
        since = world.transition("web", "Programmed")
        ensured = len(mem.ensured)
        before = world.operator_events()
        assert ("Programmed", 1) in before
        mem.objects["orphan-2"] = Built(owner_tag("uid-deleted-while-no-manager-ran"))
        async with running(manager(world, mem)) as second:
            await wait_for_async(
                lambda: len(mem.ensured) > ensured and "orphan-2" not in mem.objects,
                within=WITHIN,
                what="the request ensured again and the orphan swept",
            )
            calls = second.metrics.provider_calls.labels("memlb", "ensure", "Active")
            assert calls._value.get() >= 1
            await world.until("web", "Programmed", "True", "Active")
        assert mem.creates == 1
        assert sorted(mem.objects) == ["foreign", "lb-0"]
        programmed = ("True", "Active", "the load balancer serves 198.51.100.0")
        assert world.condition("web", "Programmed") == programmed
        # The restart kept the built request's condition while the provider had not
        # answered yet: it never went back to Pending (the same transition time).
        assert world.transition("web", "Programmed") == since
        # What the operator was told, the restarted manager did not tell again.
        assert world.operator_events() == before


async def test_what_a_provider_cannot_build_is_refused_before_an_address_and_counted(
    tmp_path: Path,
) -> None:
    mem = MemoryLB()
    async with management(tmp_path) as world, running(manager(world, mem)):
        await request(world, "dns", ports=[{"protocol": "UDP", "port": 53, "nodePort": 30053}])
        message = await world.until("dns", "Accepted", "False", "ProviderRefused")
        assert message == "provider memlb: spec.ports[0].protocol: UDP is not supported by memlb"
        await request(world, "other", provider="octavia")
        message = await world.until("other", "Accepted", "False", "ProviderNotAllowed")
        allowed = "(allowed: route, memlb)"
        assert message == f"spec.provider: Tenant acme may not use provider octavia {allowed}"
        await wait_for_async(
            lambda: (world.api.get("tenants", "acme") or {}).get("status", {}).get("refused") == 2,
            within=WITHIN,
            what="REFUSED 2 on Tenant acme",
        )
        await wait_for_async(
            lambda: world.events("ProviderRefused") and world.events("ProviderNotAllowed"),
            within=WITHIN,
            what="an Event per refusal",
        )
        obj = world.api.get("tenantloadbalancers", "dns", NAMESPACE) or {}
        assert obj["status"]["addresses"] == [] and mem.ensured == []


async def test_a_provider_the_tenant_lists_but_this_manager_does_not_run_is_unavailable(
    tmp_path: Path,
) -> None:
    mem = MemoryLB()
    async with (
        management(tmp_path, providers=["memlb", "octavia"]) as world,
        running(manager(world, mem)),
    ):
        await request(world, "web", provider="octavia")
        message = await world.until("web", "Accepted", "False", "ProviderUnavailable")
        assert message.startswith(
            "spec.provider: provider octavia does not run in this manager (running: memlb, proxy,"
        )


async def test_a_request_waiting_for_an_address_gets_the_one_another_request_frees(
    tmp_path: Path,
) -> None:
    """The tenant's allocation holds one address: the second request is told
    NoFreeAddress, and gets the address once the first request is deleted, with nothing
    else changing (as MetalLB retries its pending Services when an IP is freed)."""
    one = [{"addressPool": "shared-v4", "cidrs": ["198.51.100.7/32"]}]
    async with (
        management(tmp_path, allocations=one) as world,
        running(manager(world, MemoryLB())),
    ):
        await request(world, "first", provider="route")
        await wait_for_async(
            lambda: world.addresses("first") == ["198.51.100.7"],
            within=WITHIN,
            what="the first request holding the tenant's one address",
        )
        await request(world, "second", provider="route")
        await world.until("second", "Programmed", "False", "NoFreeAddress")
        await world.admin.delete(TENANT_LOAD_BALANCERS, "first", NAMESPACE)
        await wait_for_async(
            lambda: world.addresses("second") == ["198.51.100.7"],
            within=WITHIN,
            what=f"the freed address given to the second; now {world.addresses('second')}",
        )


async def test_no_operator_detail_is_recorded_where_a_tenants_agent_reads(tmp_path: Path) -> None:
    """Events on Tenants are in namespace `default`: a Tenant given that namespace would
    have its agent read every Tenant's operator detail, so while one is, none is recorded
    (the manager logs it instead)."""
    said = Event(EventType.WARNING, "MemUnreachable", f"{NAMESPACE}/web: {ENDPOINT} refused")
    async with management(tmp_path) as world:
        m = manager(world, MemoryLB())
        m._on_tenant(InformerEvent.ADDED, "acme", tenant_body("acme"))
        m._tell_operator("acme", said)
        assert m._events.get_nowait()[2] == said  # (the Tenant's own: namespace tenant-acme)

        bolt = tenant_body("bolt", namespace=OPERATOR_EVENTS_NAMESPACE)
        m._on_tenant(InformerEvent.ADDED, "bolt", bolt)
        m._tell_operator("acme", said)

        assert m._events.empty()
