"""The controller does not act on a half-recovered cache: after an outage, a Service is
reconciled only once every kind has been listed again."""

from __future__ import annotations

from fakeapi.wait import until
from model.builders import pool, service
from teapot_lb.cluster import Kind
from teapot_lb.controller.keys import ServiceKey
from teapot_lb.kube.client import KubeClient
from teapot_lb.lab.fakeapi import FakeApiServer

from .test_kube_controller import DEADLINE, assigned, controller, create, ips_of
from .test_kube_controller import seed_config_namespace as seed_namespace


async def test_a_service_created_while_a_kind_relists_waits_for_a_consistent_view(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/28"))
    async with controller(fake_api) as runner:
        await create(kube, service("before"))
        await assigned(fake_api, "before")
        # The AddressPool informer cannot reach the server: its kind is not current, so
        # nothing is reconciled.
        fake_api.faults.fail_for(60, code=503, method="GET", path_contains="/addresspools")
        fake_api.faults.drop_watches()
        await until(lambda: not runner.cache.synced, DEADLINE, "cache not current")
        await create(kube, service("during"))
        await until(
            lambda: ServiceKey("default/during") in runner._parked, DEADLINE, "reconcile parked"
        )
        assert ips_of(fake_api, "during") == []
        assert runner.store.get(Kind.SERVICE, "default/during") is not None
        fake_api.faults.clear()
        await assigned(fake_api, "during")
        assert ips_of(fake_api, "before") == ["192.0.2.0"]
