"""Isolation: tenant bolt tries, over HTTP, to get tenant acme's address, route, nodes or
quota — through the management API with its own credentials, through its own requests,
and through its cluster's Services. Each attempt is refused with its reason, and nothing
of acme's changes (its request, its Service's IP, its Tenant)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from teapot_lb.kube.errors import ApiStatusError
from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    EVENTS,
    SERVICES,
    TENANT_LOAD_BALANCERS,
    TENANTS,
)
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.tenancy.vet import Usage

from .builders import CONFIG_NS, pool_body, tenant_body, tlb_body
from .world import WITHIN, World, endpoints, node, service, teapot_world

ACME_NS, BOLT_NS = "tenant-acme", "tenant-bolt"
ACME_IP = "198.51.100.0"  # what acme's Service "web" gets (the first of its allocation)
BOLT_QUOTAS = {"addresses": 2, "loadBalancers": 3, "ports": 4}


@dataclass(frozen=True)
class Victim:
    request: str
    resource_version: str
    addresses: list[str]
    ingress: list[str]
    tenant_spec: dict[str, Any]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    tmp = tmp_path_factory.mktemp("isolation")
    async with teapot_world(tmp, bolt={"quotas": BOLT_QUOTAS}) as w:
        acme = w.tenants["acme"]
        acme.api.seed(endpoints("web", ["acme-n0"]))
        await acme.client.create(SERVICES, service("web", annotations={
            "lb.teapot.io/sharing-key": "acme-key"}))  # fmt: skip
        assert await w.assigned(acme, "web") == [ACME_IP]
        yield w


def victim(world: World) -> Victim:
    acme = world.tenants["acme"]
    name = acme.request("web")
    obj = world.tlb(ACME_NS, name)
    assert obj is not None
    tenant = world.management.get("tenants", "acme")
    assert tenant is not None
    return Victim(
        name,
        obj["metadata"]["resourceVersion"],
        obj["status"]["addresses"],
        acme.ingress("web"),
        tenant["spec"],
    )


# ----------------------------------------------------------------- the attempts


Attempt = Callable[[World], Awaitable[object]]


@dataclass(frozen=True)
class Case:
    """An attempt and the refusal expected: an HTTP status (the API's authorization), a
    reason on bolt's request's Accepted condition, or an Event on bolt's Service."""

    id: str
    attempt: Attempt | None = None
    status: int | None = None
    reason: str | None = None
    event: str | None = None
    setup: tuple[dict[str, Any], ...] = field(default=())
    request: dict[str, Any] | None = None


def acme_tlb(world: World) -> dict[str, Any]:
    obj = world.tlb(ACME_NS, world.tenants["acme"].request("web"))
    assert obj is not None
    return copy.deepcopy(obj)


def bolt(world: World) -> Any:
    return world.tenants["bolt"].remote


async def _watch_first(world: World) -> None:
    events = bolt(world).watch(TENANT_LOAD_BALANCERS, resource_version="0", namespace=ACME_NS)
    async for _ in events:
        return


RBAC: list[Case] = [
    Case("create-request-in-victim-namespace", lambda w: bolt(w).create(
        TENANT_LOAD_BALANCERS, tlb_body("acme", "mine")), 403),
    Case("list-victim-requests", lambda w: bolt(w).list(
        TENANT_LOAD_BALANCERS, namespace=ACME_NS), 403),
    Case("get-victim-request", lambda w: bolt(w).get(
        TENANT_LOAD_BALANCERS, w.tenants["acme"].request("web"), ACME_NS), 403),
    Case("replace-victim-request", lambda w: bolt(w).replace(
        TENANT_LOAD_BALANCERS, acme_tlb(w)), 403),
    Case("patch-victim-backends-to-own-nodes", lambda w: bolt(w).patch(
        TENANT_LOAD_BALANCERS, w.tenants["acme"].request("web"),
        {"spec": {"backends": [{"node": "x", "addresses": ["192.0.2.71"], "ready": True}]}},
        namespace=ACME_NS), 403),
    Case("patch-victim-status-to-release-its-ip", lambda w: bolt(w).patch(
        TENANT_LOAD_BALANCERS, w.tenants["acme"].request("web"), {"status": {"addresses": []}},
        namespace=ACME_NS, status=True), 403),
    Case("delete-victim-request", lambda w: bolt(w).delete(
        TENANT_LOAD_BALANCERS, w.tenants["acme"].request("web"), ACME_NS), 403),
    Case("list-requests-of-every-tenant", lambda w: bolt(w).list(TENANT_LOAD_BALANCERS), 403),
    Case("watch-victim-requests", _watch_first, 403),
    Case("read-victim-tenant", lambda w: bolt(w).get(TENANTS, "acme"), 403),
    Case("raise-own-quota", lambda w: bolt(w).patch(
        TENANTS, "bolt", {"spec": {"quotas": {"addresses": 1000}}}), 403),
    Case("create-tenant-claiming-victim-namespace", lambda w: bolt(w).create(
        TENANTS, tenant_body("bolt", namespace=ACME_NS) | {"metadata": {"name": "bolt2"}}), 403),
    Case("delete-victim-tenant", lambda w: bolt(w).delete(TENANTS, "acme"), 403),
    Case("read-address-pools", lambda w: bolt(w).list(ADDRESS_POOLS, namespace=CONFIG_NS), 403),
    Case("create-address-pool", lambda w: bolt(w).create(
        ADDRESS_POOLS, pool_body("mine", ["198.51.100.0/28"])), 403),
    Case("read-victim-events", lambda w: bolt(w).list(EVENTS, namespace=ACME_NS), 403),
    Case("forge-event-on-victim", lambda w: bolt(w).create(EVENTS, {
        "metadata": {"name": "x", "namespace": ACME_NS}, "reason": "Fake", "message": "x",
        "involvedObject": {"kind": "TenantLoadBalancer", "name": "x"}}), 403),
]  # fmt: skip


def own(name: str, **spec: Any) -> dict[str, Any]:
    return tlb_body("bolt", name, **spec)


def two_backends(second: str) -> list[dict[str, Any]]:
    return [
        {"node": "bolt-n0", "addresses": ["192.0.2.71"], "ready": True},
        {"node": "bolt-n1", "addresses": [second], "ready": True},
    ]


REQUESTS: list[Case] = [
    Case("request-victim-held-ip", request=own("a", requestedIPs=[ACME_IP]),
         reason="AddressNotAllocated"),
    Case("request-victim-free-ip", request=own("a", requestedIPs=["198.51.100.5"]),
         reason="AddressNotAllocated"),
    Case("request-victim-ipv6", request=own(
        "a", ipFamilies=["IPv6"], requestedIPs=["2001:db8:100::1"]), reason="AddressNotAllocated"),
    Case("request-ip-outside-every-pool", request=own("a", requestedIPs=["203.0.113.5"]),
         reason="AddressNotAllocated"),
    Case("share-victim-ip-with-its-sharing-key", request=own(
        "a", requestedIPs=[ACME_IP], sharingKey="acme-key"), reason="AddressNotAllocated"),
    Case("backend-at-victim-node", request=own("a", backends=[
        {"node": "n", "addresses": ["192.0.2.11"], "ready": True}]), reason="BackendNotAllowed"),
    Case("backend-at-victim-node-ipv6", request=own("a", backends=[
        {"node": "n", "addresses": ["2001:db8:a::11"], "ready": True}]),
         reason="BackendNotAllowed"),
    Case("backend-at-operator-machine", request=own("a", backends=[
        {"node": "n", "addresses": ["203.0.113.1"], "ready": True}]), reason="BackendNotAllowed"),
    Case("backend-at-a-load-balancer-ip", request=own("a", backends=[
        {"node": "n", "addresses": [ACME_IP], "ready": True}]), reason="BackendNotAllowed"),
    Case("victim-node-hidden-behind-an-own-node", request=own(
        "a", backends=two_backends("192.0.2.12")), reason="BackendNotAllowed"),
    Case("victim-address-as-second-address-of-own-node", request=own("a", backends=[
        {"node": "bolt-n0", "addresses": ["192.0.2.71", "192.0.2.13"], "ready": True}]),
         reason="BackendNotAllowed"),
    Case("mode-not-allowed", request=own("a", mode="Gateway"), reason="ModeNotAllowed"),
    Case("over-address-quota", request=own("c"), reason="QuotaExceeded",
         setup=(own("a"), own("b", ports=[{"port": 81}]))),
    Case("dual-stack-over-address-quota", request=own(
        "b", ipFamilyPolicy="RequireDualStack", ipFamilies=["IPv4", "IPv6"],
        ports=[{"port": 81}]), reason="QuotaExceeded", setup=(own("a"),)),
    Case("over-load-balancer-quota", request=own(
        "d", sharingKey="k", ports=[{"port": 84}]), reason="QuotaExceeded",
         setup=tuple(own(n, sharingKey="k", ports=[{"port": p}])
                     for n, p in (("a", 81), ("b", 82), ("c", 83)))),
    Case("over-port-quota", request=own(
        "a", ports=[{"port": p} for p in range(81, 86)]), reason="QuotaExceeded"),
]  # fmt: skip


def bolt_service(**spec: Any) -> Attempt:
    async def create(w: World) -> None:
        await w.tenants["bolt"].client.create(SERVICES, service("attack", **spec))

    return create


async def _node_in_victim_network(w: World) -> None:
    side = w.tenants["bolt"]
    side.api.seed(node("bolt-sneaky", "192.0.2.14"))
    await side.client.create(SERVICES, service("attack"))


SERVICE_CASES: list[Case] = [
    Case("service-load-balancer-ip-of-victim", bolt_service(loadBalancerIP=ACME_IP),
         event="AddressNotAllocated"),
    Case("service-annotated-with-victim-ipv6", bolt_service(
        ipFamilies=["IPv6"], annotations={"lb.teapot.io/ips": "2001:db8:100::2"}),
         event="AddressNotAllocated"),
    Case("service-sharing-victim-key-and-ip", bolt_service(loadBalancerIP=ACME_IP, annotations={
        "lb.teapot.io/sharing-key": "acme-key"}), event="AddressNotAllocated"),
    Case("cluster-node-inside-victim-node-network", _node_in_victim_network,
         event="BackendNotAllowed"),
]  # fmt: skip

CASES = RBAC + REQUESTS + SERVICE_CASES


def test_the_suite_has_at_least_30_distinct_attempts() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 30


async def _clean_bolt(world: World) -> None:
    side = world.tenants["bolt"]
    for svc in side.api.list("services", "default"):
        if svc["metadata"]["name"] != "kubernetes":
            side.api.remove("services", svc["metadata"]["name"], "default")
    side.api.remove("nodes", "bolt-sneaky")
    for obj in world.management.list("tenantloadbalancers", BOLT_NS):
        world.management.remove("tenantloadbalancers", obj["metadata"]["name"], BOLT_NS)
    await wait_for_async(
        lambda: (
            world.manager.book.usage("bolt") == Usage()
            and not world.management.list("tenantloadbalancers", BOLT_NS)
        ),
        within=WITHIN,
        what="bolt's requests gone",
    )


async def _create_own(world: World, body: dict[str, Any]) -> str:
    created = await bolt(world).create(TENANT_LOAD_BALANCERS, body)
    return str(created["metadata"]["name"])


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_an_attempt_on_another_tenant_is_refused_with_its_reason(
    world: World, case: Case
) -> None:
    before = victim(world)
    try:
        for body in case.setup:
            name = await _create_own(world, body)
            accepted = await world.accepted(BOLT_NS, name)
            assert accepted["status"] == "True", accepted  # the setup itself is legitimate
        if case.request is not None:
            name = await _create_own(world, case.request)
            accepted = await world.accepted(BOLT_NS, name)
            assert (accepted["status"], accepted["reason"]) == ("False", case.reason), accepted
            assert world.tlb(BOLT_NS, name)["status"]["addresses"] == []  # type: ignore[index]
        elif case.status is not None:
            assert case.attempt is not None
            with pytest.raises(ApiStatusError) as refused:
                await case.attempt(world)
            assert refused.value.code == case.status
        else:
            assert case.attempt is not None
            await case.attempt(world)
            side = world.tenants["bolt"]
            events = await wait_for_async(
                lambda: side.events(str(case.event)), within=WITHIN, what=f"{case.event} Event"
            )
            assert events[0]["involvedObject"]["name"] == "attack"
            assert side.ingress("attack") == []
        assert victim(world) == before
        assert world.tenants["acme"].ingress("web") == [ACME_IP]
    finally:
        await _clean_bolt(world)
