"""The adapter's pieces together, as a controller uses them: informer -> work queue ->
reconcile(key) reading the cache -> status write; under server errors and watch loss."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fakeapi import FakeApiServer
from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import KubeError, NotFound
from teapot_lb.kube.informer import Informer
from teapot_lb.kube.resources import SERVICES, split_key
from teapot_lb.kube.status import update_status
from teapot_lb.kube.workqueue import QueueShutDown, WorkQueue


class Labeller:
    """A toy level-triggered controller: status.loadBalancer.ingress = a fake IP per name."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.informer = Informer(kube, SERVICES, backoff=Backoff(0.05, 0.5))
        self.queue = WorkQueue(base_delay_s=0.05, max_delay_s=0.5)
        self.informer.add_handler(lambda _type, key, _obj: self.queue.add(key))
        self.assigned: dict[str, str] = {}

    async def reconcile(self, key: str) -> None:
        obj = self.informer.get(key)
        if obj is None:
            self.assigned.pop(key, None)  # deleted: release
            return
        ip = self.assigned.setdefault(key, f"192.0.2.{len(self.assigned) + 1}")
        ns, name = split_key(key)

        def desired(current: dict[str, Any]) -> dict[str, Any]:
            return {"loadBalancer": {"ingress": [{"ip": ip}]}}

        with contextlib.suppress(NotFound):
            await update_status(self.kube, SERVICES, name, ns, desired)

    async def worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            try:
                await self.reconcile(key)
                self.queue.forget(key)
            except KubeError:
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Labeller]:
        tasks = [asyncio.create_task(self.informer.run())]
        tasks += [asyncio.create_task(self.worker()) for _ in range(2)]
        try:
            await asyncio.wait_for(self.informer.wait_synced(), 10)
            yield self
        finally:
            self.queue.shut_down()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def has_ip(fake_api: FakeApiServer, name: str) -> bool:
    obj = fake_api.get("services", name, "default")
    return bool(obj and (obj.get("status") or {}).get("loadBalancer", {}).get("ingress"))


async def test_every_service_gets_status_despite_500s_and_lost_watches(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    async with Labeller(kube).running() as ctl:
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
