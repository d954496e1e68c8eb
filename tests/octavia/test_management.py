"""The driver's management side against the fake API server (real HTTP, the real
client): the project's Tenant, writing a request twice, the manager's answer or a clear
timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.octavia import TENANT_NS, tenant
from teapot_lb.octavia.management import LoopThread, Management, ManagementError
from teapot_lb.octavia.mapping import desired_request

from .builders import PROJECT, tree


def seeded(api: FakeApiServer, *tenants: dict[str, object]) -> None:
    api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TENANT_NS}})
    for body in tenants:
        api.seed(body)


async def test_the_project_s_tenant_is_the_one_labelled_with_it(fake_api: FakeApiServer) -> None:
    seeded(fake_api, tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29"))
    async with await connect(fake_api.kubeconfig_path) as client:
        management = Management(client)
        assert (await management.tenant_of_project(PROJECT)).name == "acme"
        with pytest.raises(ManagementError, match="belongs to no Tenant"):
            await management.tenant_of_project("f" * 32)


async def test_a_project_claimed_by_two_tenants_is_refused(fake_api: FakeApiServer) -> None:
    seeded(
        fake_api,
        tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29"),
        tenant("acme2", "tenant-acme2", PROJECT, "203.0.113.8/29"),
    )
    async with await connect(fake_api.kubeconfig_path) as client:
        with pytest.raises(ManagementError, match="claimed by Tenants acme, acme2"):
            await Management(client).tenant_of_project(PROJECT)


async def test_writing_twice_replaces_the_spec_and_bumps_the_generation(
    fake_api: FakeApiServer,
) -> None:
    seeded(fake_api)
    async with await connect(fake_api.kubeconfig_path) as client:
        management = Management(client)
        first = await management.write(desired_request(tree(), TENANT_NS))
        lb = tree().model_copy(update={"admin_state_up": False})
        second = await management.write(desired_request(lb, TENANT_NS))
        assert (second.metadata.generation or 0) > (first.metadata.generation or 0)
        stored = await management.request(TENANT_NS, lb.id)
        assert stored is not None and not any(b.ready for b in stored.spec.backends)
        assert await management.delete(TENANT_NS, lb.id)
        assert not await management.delete(TENANT_NS, lb.id)


async def test_without_a_manager_the_wait_ends_with_a_clear_error(
    fake_api: FakeApiServer,
) -> None:
    seeded(fake_api)
    async with await connect(fake_api.kubeconfig_path) as client:
        management = Management(client, answer_within_s=0.3)
        written = await management.write(desired_request(tree(), TENANT_NS))
        with pytest.raises(ManagementError, match=r"did not answer .* within 0.3 s"):
            await management.answer(written)


async def test_the_answer_is_the_status_that_observed_the_written_generation(
    fake_api: FakeApiServer,
) -> None:
    seeded(fake_api)
    async with await connect(fake_api.kubeconfig_path) as client:
        management = Management(client, answer_within_s=5)
        written = await management.write(desired_request(tree(), TENANT_NS))
        generation = written.metadata.generation

        async def manager() -> None:
            await asyncio.sleep(0.05)
            conditions = [
                {"type": kind, "status": "True", "reason": kind, "message": "ok",
                 "lastTransitionTime": "2026-12-03T00:00:00Z", "observedGeneration": generation}
                for kind in ("Accepted", "Programmed")
            ]  # fmt: skip
            status = {"addresses": ["198.51.100.1"], "nextHops": ["192.0.2.10"],
                      "conditions": conditions}  # fmt: skip
            await client.patch(TENANT_LOAD_BALANCERS, written.name, {"status": status},
                               namespace=TENANT_NS, status=True)  # fmt: skip

        answer, _ = await asyncio.gather(management.answer(written), manager())
        assert answer.accepted and answer.programmed
        assert answer.addresses == ("198.51.100.1",)


def test_jobs_with_one_key_run_one_after_the_other() -> None:
    loop = LoopThread()
    order: list[str] = []

    def job(name: str, pause: float) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            order.append(f"{name} start")
            await asyncio.sleep(pause)
            order.append(f"{name} end")

        return run

    try:
        first = loop.submit("lb", job("a", 0.05))
        second = loop.submit("lb", job("b", 0))
        first.result(timeout=5)
        second.result(timeout=5)
    finally:
        loop.close()
    assert order == ["a start", "a end", "b start", "b end"]
