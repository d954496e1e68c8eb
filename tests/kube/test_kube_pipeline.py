"""The adapter's pieces together, as a controller uses them: informers -> ReconcileLoop ->
reconcile(key) reading the cache -> status write; under server errors and watch loss."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import NotFound
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.reconciler import ReconcileLoop, Result
from teapot_lb.kube.resources import ENDPOINT_SLICES, SERVICES, KubeObject, split_key
from teapot_lb.kube.status import update_status
from teapot_lb.kube.workqueue import WorkQueue
from teapot_lb.lab.fakeapi import FakeApiServer


def quick_informer(kube: KubeClient, resource: Any = SERVICES) -> Informer:
    return Informer(kube, resource, backoff=Backoff(0.05, 0.5))


@contextlib.asynccontextmanager
async def running(loop: ReconcileLoop) -> AsyncIterator[ReconcileLoop]:
    task = asyncio.create_task(loop.run())
    try:
        yield loop
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class Labeller:
    """A toy level-triggered controller: status.loadBalancer.ingress = an IP per Service."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.services = quick_informer(kube)
        self.loop = ReconcileLoop(
            "labeller",
            self.reconcile,
            workers=3,
            queue=WorkQueue(base_delay_s=0.05, max_delay_s=0.5),
        )
        self.loop.watch(self.services)
        self.assigned: dict[str, str] = {}

    async def reconcile(self, key: str) -> Result | None:
        obj = self.services.get(key)
        if obj is None:
            self.assigned.pop(key, None)  # deleted: release
            return None
        ip = self.assigned.setdefault(key, f"192.0.2.{len(self.assigned) + 1}")
        ns, name = split_key(key)

        def desired(current: dict[str, Any]) -> dict[str, Any]:
            return {"loadBalancer": {"ingress": [{"ip": ip}]}}

        with contextlib.suppress(NotFound):
            await update_status(self.kube, SERVICES, name, ns, desired)
        return None


def has_ip(fake_api: FakeApiServer, name: str) -> bool:
    obj = fake_api.get("services", name, "default")
    return bool(obj and (obj.get("status") or {}).get("loadBalancer", {}).get("ingress"))


async def test_every_service_gets_status_despite_500s_and_lost_watches(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    ctl = Labeller(kube)
    async with running(ctl.loop):
        await asyncio.wait_for(ctl.services.wait_synced(), 10)
        fake_api.faults.fail_for(1.0, method="PUT")
        for i in range(20):
            await kube.create(SERVICES, {"metadata": {"name": f"s{i}", "namespace": "default"}})
        fake_api.faults.drop_watches(abrupt=True)
        await until(
            lambda: all(has_ip(fake_api, f"s{i}") for i in range(20)),
            within=20,
            what="all services have an IP",
        )
        # Deletions missed during a compacted gap still release.
        fake_api.faults.fail_for(0.5, method="GET", path_contains="/services")
        fake_api.faults.drop_watches()
        for i in range(10):
            fake_api.delete("services", f"s{i}", "default")
        fake_api.faults.compact()
        await until(lambda: len(ctl.assigned) == 10, within=20, what="deleted keys released")
        assert sorted(ctl.assigned) == sorted(f"default/s{i}" for i in range(10, 20))


async def test_reconcile_starts_only_after_caches_synced(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    for i in range(5):
        fake_api.seed({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}"}})
    services = quick_informer(kube)
    seen_sizes: list[int] = []

    async def reconcile(key: str) -> None:
        seen_sizes.append(len(services))

    loop = ReconcileLoop("sync", reconcile)
    loop.watch(services)
    async with running(loop):
        await until(lambda: len(seen_sizes) == 5, what="all keys reconciled")
    assert set(seen_sizes) == {5}


async def test_failed_reconcile_is_retried_with_backoff_then_forgotten(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    fake_api.seed({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    attempts: list[str] = []
    results: list[tuple[str, BaseException | None]] = []

    async def reconcile(key: str) -> None:
        attempts.append(key)
        if len(attempts) < 3:
            raise RuntimeError("transient")

    loop = ReconcileLoop(
        "retry",
        reconcile,
        queue=WorkQueue(base_delay_s=0.01),
        on_result=lambda key, _s, err: results.append((key, err)),
    )
    loop.watch(quick_informer(kube))
    async with running(loop):
        await until(lambda: len(results) == 3, what="three attempts")
        assert [err is None for _, err in results] == [False, False, True]
        assert loop.queue.num_requeues("default/s") == 0


async def test_requeue_after_reconciles_again(fake_api: FakeApiServer, kube: KubeClient) -> None:
    fake_api.seed({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    attempts: list[str] = []

    async def reconcile(key: str) -> Result:
        attempts.append(key)
        return Result(requeue_after=0.05)

    loop = ReconcileLoop("requeue", reconcile)
    loop.watch(quick_informer(kube))
    async with running(loop):
        await until(lambda: len(attempts) >= 3, what="periodic reconcile")


async def test_key_mapper_routes_dependent_objects_to_their_owner(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    fake_api.seed({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}})
    reconciled: list[str] = []

    async def reconcile(key: str) -> None:
        reconciled.append(key)

    def slice_to_service(_type: EventType, _key: str, obj: KubeObject) -> list[str]:
        svc = obj["metadata"].get("labels", {}).get("kubernetes.io/service-name")
        return [f"{obj['metadata']['namespace']}/{svc}"] if svc else []

    loop = ReconcileLoop("map", reconcile)
    loop.watch(quick_informer(kube))
    loop.watch(quick_informer(kube, ENDPOINT_SLICES), slice_to_service)
    async with running(loop):
        await until(lambda: reconciled == ["default/web"], what="initial reconcile")
        await kube.create(
            ENDPOINT_SLICES,
            {
                "metadata": {
                    "name": "web-x1",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "web"},
                },
                "addressType": "IPv4",
                "endpoints": [],
            },
        )
        await until(lambda: reconciled == ["default/web", "default/web"], what="slice -> web")
