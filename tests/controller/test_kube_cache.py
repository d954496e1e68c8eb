"""The controller's cache holds one representation of each object: its typed model.

No raw JSON is kept (not by the cache, not by its informers); what a write needs of the
object is read from the model, and a write that lands on someone else's change is still
reconciled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from fakeapi.wait import until
from model.builders import service
from teapot_lb.cluster import Kind
from teapot_lb.controller.kube_cache import ControllerCache
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.resources import SERVICES
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.model import Service

KEY = "default/web"


@contextlib.asynccontextmanager
async def cache_of(kube: KubeClient, changes: list[str]) -> AsyncIterator[ControllerCache]:
    cache = ControllerCache(
        kube, ControllerMetrics(), on_change=lambda kind, key: changes.append(key)
    )
    task = asyncio.create_task(cache.run())
    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        yield cache
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_cache_keeps_the_model_and_writes_read_their_identity_from_it(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    created = await kube.create(SERVICES, service("web"))
    async with cache_of(kube, []) as cache:
        await until(lambda: cache.store.get(Kind.SERVICE, KEY) is not None, 10, "the Service")
        assert isinstance(cache.store.get(Kind.SERVICE, KEY), Service)
        with pytest.raises(TypeError):
            cache.informers[Kind.SERVICE].get(KEY)  # the informer keeps versions only
        meta = created["metadata"]
        assert cache.reference(Kind.SERVICE, KEY) == {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
            },
        }
        assert cache.version(Kind.SERVICE, KEY) == meta["resourceVersion"]
        assert cache.reference(Kind.SERVICE, "default/absent") is None


async def test_our_own_write_is_cached_and_someone_elses_change_under_it_is_reconciled(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service("web"))
    changes: list[str] = []
    async with cache_of(kube, changes) as cache:
        await until(lambda: cache.version(Kind.SERVICE, KEY) is not None, 10, "the Service")
        based_on = cache.reference(Kind.SERVICE, KEY)
        assert based_on is not None
        status = {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}
        ours = await kube.patch(
            SERVICES, "web", {"status": status}, namespace="default", status=True
        )
        changes.clear()
        cache.write_through(Kind.SERVICE, KEY, based_on, ours)
        svc = cache.store.get(Kind.SERVICE, KEY)
        assert isinstance(svc, Service) and [str(ip) for ip in svc.ingress_ips()] == ["192.0.2.7"]
        assert changes == []  # only our own status: nothing to reconcile

        based_on = cache.reference(Kind.SERVICE, KEY)
        assert based_on is not None
        labels = {"metadata": {"labels": {"team": "blue"}}}
        theirs = await kube.patch(SERVICES, "web", labels, namespace="default")
        cache.write_through(Kind.SERVICE, KEY, based_on, theirs)
        assert changes == [KEY]
