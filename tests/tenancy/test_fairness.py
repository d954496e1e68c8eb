"""Fairness between tenants in the manager (issue 37, goal 2): its work queue takes one
tenant's key at a time in turn (kube.workqueue's groups, by the tenant's namespace), so
a tenant rewriting its requests as fast as the API takes them does not hold up another
tenant's new request."""

from __future__ import annotations

import asyncio
from pathlib import Path

from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import (
    TENANTS_KEY,
    DenialsKey,
    KubeManager,
    NodesKey,
    RequestKey,
    TenantStatusKey,
)

from .builders import TENANTS, tenant, tlb_body
from .world import WITHIN, teapot_world

ACME, BOLT = TENANTS["acme"]["namespace"], TENANTS["bolt"]["namespace"]


def test_a_key_is_grouped_by_the_namespace_of_the_tenant_it_is_about() -> None:
    manager = KubeManager.__new__(KubeManager)  # only the tenants it knows are read
    manager.tenants = {"bolt": tenant("bolt")}
    assert manager._namespace_of(RequestKey(f"{ACME}/web")) == ACME
    assert manager._namespace_of(NodesKey(f"{BOLT}/c1")) == BOLT
    assert manager._namespace_of(DenialsKey(BOLT)) == BOLT
    assert manager._namespace_of(TenantStatusKey("bolt")) == BOLT
    assert manager._namespace_of(TENANTS_KEY) == ""


async def test_a_tenants_new_request_is_served_while_another_rewrites_its_own(
    tmp_path: Path,
) -> None:
    async with teapot_world(tmp_path, ("acme", "bolt")) as world:
        for i in range(4):
            await world.admin.create(TENANT_LOAD_BALANCERS, tlb_body("bolt", f"b{i}"))
        for i in range(4):
            await world.accepted(BOLT, f"b{i}")
        stop = asyncio.Event()
        writes = 0

        async def rewrite(i: int) -> None:
            nonlocal writes
            k = 0
            while not stop.is_set():
                ready = k % 2 == 0
                backends = tlb_body("bolt", f"b{i}", ready=ready)["spec"]["backends"]
                await world.admin.patch(
                    TENANT_LOAD_BALANCERS, f"b{i}", {"spec": {"backends": backends}},
                    namespace=BOLT,
                )  # fmt: skip
                writes += 1
                k += 1

        flooding = asyncio.gather(*(rewrite(i) for i in range(4)))
        try:
            await wait_for_async(lambda: writes >= 40 or None, within=WITHIN, what="bolt's flood")
            for i in range(3):
                await world.admin.create(TENANT_LOAD_BALANCERS, tlb_body("acme", f"a{i}"))
                await wait_for_async(
                    lambda i=i: (world.tlb(ACME, f"a{i}") or {}).get("status", {}).get("addresses")
                    or None,
                    within=WITHIN, what=f"acme's a{i} addressed during bolt's flood",
                )  # fmt: skip
                assert not flooding.done()
        finally:
            stop.set()
            await flooding
