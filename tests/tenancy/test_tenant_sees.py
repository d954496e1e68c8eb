"""What a tenant sees of an external provider's work (issue 38; issue 39's rule: every
outcome a tenant causes reaches the tenant's own object).

Over HTTP (the in-repo fake API servers): the manager drives the in-memory provider
(:mod:`.memlb`, whose operator's messages name its endpoint, the tenant's project and its
own ids), and each tenant's agent runs with credentials for its own management namespace.
The tenant's Service is told what happened in the words the provider wrote for the
tenant: a Warning while it cannot be built or is degraded, a Normal once it serves, once
per change (not per retry, resync or agent restart), and never the operator's detail nor
anything of another tenant.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from teapot_lb.kube.resources import EVENTS, SERVICES, TENANT_LOAD_BALANCERS, TENANT_NODES
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import ManagerConfig
from teapot_lb.model.service import ANNOTATION_IPS
from teapot_lb.model.tenancy import REASON_DEGRADED

from .builders import CONFIG_NS, TENANTS
from .memlb import ENDPOINT, UNREACHABLE, MemoryLB, project
from .world import WITHIN, TenantSide, World, service, teapot_world

MEMLB = {"providers": ["route", "memlb"], "defaultProvider": "memlb"}


@contextlib.asynccontextmanager
async def provider_world(
    tmp: Path, mem: MemoryLB, tenants: tuple[str, ...] = ("acme",)
) -> AsyncIterator[World]:
    """Tenants whose load balancers memlb builds, and their agents."""
    config = ManagerConfig(
        config_namespace=CONFIG_NS,
        providers={mem.name: mem},
        provider_retry_base_s=0.05,
        provider_resync_s=0.5,
    )
    specs = {name: MEMLB for name in tenants}
    async with teapot_world(tmp, tenants, config=config, **specs) as world:
        yield world


@contextlib.asynccontextmanager
async def acme_web(tmp: Path, mem: MemoryLB) -> AsyncIterator[tuple[World, TenantSide]]:
    """acme's Service web, its load balancer built by memlb."""
    async with provider_world(tmp, mem) as world:
        acme = world.tenants["acme"]
        await acme.client.create(SERVICES, service("web"))
        yield world, acme


def service_events(side: TenantSide, name: str, reason: str) -> list[dict[str, Any]]:
    """The Events on the tenant's Service `name` with `reason`."""
    return [
        e
        for e in side.events(reason)
        if (e.get("involvedObject") or {}).get("kind") == "Service"
        and e["involvedObject"].get("name") == name
    ]


def times_told(side: TenantSide, name: str, reason: str) -> int:
    """How often the Service was told `reason` (an Event told again is counted; a
    restarted agent's recorder starts another)."""
    return sum(int(e.get("count") or 0) for e in service_events(side, name, reason))


async def told(side: TenantSide, name: str, reason: str, times: int = 1) -> dict[str, Any]:
    """The latest Event with `reason` on Service `name`, once it was told `times` times
    (and not more)."""
    await wait_for_async(
        lambda: times_told(side, name, reason) >= times,
        within=WITHIN,
        what=f"Event {reason} told {times} times on {side.name}'s Service {name}; "
        f"now {service_events(side, name, reason)}",
    )
    assert times_told(side, name, reason) == times
    events = service_events(side, name, reason)
    return dict(max(events, key=lambda e: int(e["metadata"]["resourceVersion"])))


async def tenant_visible(side: TenantSide) -> str:
    """Everything the tenant reads of its load balancers: its cluster's Events and
    Services, and whatever the agent's own credentials read in its management namespace
    (a hostile tenant holds them): its requests whole, status and every condition
    included, its TenantNodes and the Events there (the manager's on its requests)."""
    events = [(e.get("reason"), e.get("message")) for e in side.api.list("events")]
    services = [s.get("status") for s in side.api.list("services")]
    management = [
        (await side.remote.list(kind, namespace=side.namespace)).items
        for kind in (TENANT_LOAD_BALANCERS, TENANT_NODES, EVENTS)
    ]
    return json.dumps([events, services, management])


async def test_a_provider_error_is_a_warning_on_the_service_in_the_tenants_words(
    tmp_path: Path,
) -> None:
    mem = MemoryLB(down=True)
    async with acme_web(tmp_path, mem) as (world, acme):
        warning = await told(acme, "web", "MemUnreachable")

        assert (warning["type"], warning["message"]) == ("Warning", UNREACHABLE)
        programmed = world.condition(acme.namespace, acme.request("web"), "Programmed") or {}
        assert programmed["message"] == UNREACHABLE  # the request is the tenant's to read
        # The operator's words are on the Tenant (kubectl describe tenant), naming the request.
        said = await world.operator_told("acme", "MemUnreachable")
        assert said.startswith(f"{acme.namespace}/{acme.request('web')}: ") and ENDPOINT in said
        seen = await tenant_visible(acme)
        assert ENDPOINT not in seen and project("acme") not in seen


async def test_a_provider_that_recovers_tells_the_service_it_serves(tmp_path: Path) -> None:
    mem = MemoryLB(down=True)
    async with acme_web(tmp_path, mem) as (world, acme):
        await told(acme, "web", "MemUnreachable")

        mem.down = False

        normal = await told(acme, "web", "Programmed")
        [ip] = await world.assigned(acme, "web")
        assert (normal["type"], normal["message"]) == ("Normal", f"the load balancer serves {ip}")
        assert times_told(acme, "web", "MemUnreachable") == 1


async def test_a_warning_is_not_told_again_on_retries_resyncs_or_a_change_of_the_service(
    tmp_path: Path,
) -> None:
    mem = MemoryLB(down=True)
    async with acme_web(tmp_path, mem) as (_, acme):
        await told(acme, "web", "MemUnreachable")
        retried = len(mem.ensured)

        svc = await acme.client.get(SERVICES, "web", "default")
        svc["metadata"]["labels"] = {"touched": "yes"}  # the agent reconciles it again
        await acme.client.replace(SERVICES, svc)
        await wait_for_async(
            lambda: len(mem.ensured) >= retried + 3, within=WITHIN, what="three more retries"
        )

        assert times_told(acme, "web", "MemUnreachable") == 1


async def test_an_agent_restart_does_not_tell_the_same_again_but_tells_what_changed_meanwhile(
    tmp_path: Path,
) -> None:
    """Served (Normal), then down (Warning): a restarted agent tells neither again; the
    provider recovering while no agent runs is told by the next one (Normal, again)."""
    mem = MemoryLB()
    async with acme_web(tmp_path, mem) as (world, acme):
        await told(acme, "web", "Programmed")
        mem.down = True
        await told(acme, "web", "MemUnreachable")

        await acme.restart_agent()
        # (the agent's memory of what it told the Service, filled from its Events)
        await wait_for_async(
            lambda: "default/web" in acme.agent._told_programmed,
            within=WITHIN,
            what="the restarted agent looked at Service web",
        )
        assert times_told(acme, "web", "MemUnreachable") == 1

        await acme.agents.aclose()  # no agent runs while the provider recovers
        mem.down = False
        await world.programmed(acme.namespace, acme.request("web"), "True")
        await acme.restart_agent()

        normal = await told(acme, "web", "Programmed", times=2)
        assert normal["type"] == "Normal"


async def test_a_degraded_load_balancer_is_a_warning_naming_the_tenants_failing_nodes(
    tmp_path: Path,
) -> None:
    mem = MemoryLB()
    async with acme_web(tmp_path, mem) as (world, acme):
        await told(acme, "web", "Programmed")
        [ip] = await world.assigned(acme, "web")

        mem.failing = frozenset({"acme-n1"})

        warning = await told(acme, "web", REASON_DEGRADED)
        assert warning["type"] == "Warning"
        assert warning["message"] == (
            f"the load balancer serves {ip}; 1 of 3 backends fail their health check: "
            "192.0.2.12:30080 (acme-n1)"
        )
        mem.failing = frozenset()
        normal = await told(acme, "web", "Programmed", times=2)  # served again
        assert normal["message"] == f"the load balancer serves {ip}"
        seen = await tenant_visible(acme)
        assert ENDPOINT not in seen and "lb-0" not in seen


async def test_a_tenant_is_told_nothing_of_another_tenant_even_asking_for_its_address(
    tmp_path: Path,
) -> None:
    """bolt's load balancer is degraded and acme's too; acme also asks for bolt's address.
    Whatever acme reads of its own load balancers names nothing of bolt's, and the other
    way round."""
    mem = MemoryLB(failing=frozenset({"acme-n1", "bolt-n0"}))
    async with provider_world(tmp_path, mem, ("acme", "bolt")) as world:
        acme, bolt = world.tenants["acme"], world.tenants["bolt"]
        await bolt.client.create(SERVICES, service("bolt-shop", namespace="default"))
        await told(bolt, "bolt-shop", REASON_DEGRADED)
        [bolt_ip] = await world.assigned(bolt, "bolt-shop")
        await acme.client.create(SERVICES, service("web"))
        await told(acme, "web", REASON_DEGRADED)
        await acme.client.create(SERVICES, service("grab", annotations={ANNOTATION_IPS: bolt_ip}))
        refused = await wait_for_async(
            lambda: (
                [
                    e
                    for e in acme.api.list("events")
                    if (e.get("involvedObject") or {}).get("name") == "grab"
                ]
                or None
            ),
            within=WITHIN,
            what="the refusal of acme's Service grab",
        )
        assert refused[0]["type"] == "Warning"

        for side, other in ((acme, bolt), (bolt, acme)):
            seen = await tenant_visible(side)
            facts = TENANTS[other.name]
            for theirs in (
                other.name,
                str(facts["namespace"]),
                *facts["node_ips"],
                *[f"{other.name}-n{i}" for i in range(len(facts["node_ips"]))],
                project(other.name),
            ):
                assert theirs not in seen, f"{side.name} reads {theirs} of {other.name}"
            assert ENDPOINT not in seen and project(side.name) not in seen
        assert "bolt-shop" not in await tenant_visible(acme)


async def test_an_address_the_ipam_cannot_give_is_a_warning_without_the_operators_pools(
    tmp_path: Path,
) -> None:
    """Route mode: a Service asking for the address another of the tenant's Services holds
    (no sharing key) is accepted but gets none; the Service is told why and what to do,
    not the AddressPool or the management keys the IPAM's own message names."""
    async with teapot_world(tmp_path, ("acme",)) as world:
        acme = world.tenants["acme"]
        await acme.client.create(SERVICES, service("first"))
        [ip] = await world.assigned(acme, "first")
        await acme.client.create(SERVICES, service("second", annotations={ANNOTATION_IPS: ip}))

        warning = await told(acme, "second", "IPInUse")

        assert warning["type"] == "Warning"
        assert warning["message"] == (
            "the load balancer got no address (IPInUse): the address it asks for is held by "
            "another load balancer of the tenant; give both the same "
            "lb.teapot.io/sharing-key to share it, or ask for another"
        )
        assert "shared-v4" in await world.operator_told("acme", "IPInUse")  # the operator's
        assert "shared-v4" not in await tenant_visible(acme)
