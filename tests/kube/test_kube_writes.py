"""Status writes and Events against the fake API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import Conflict, NotFound
from teapot_lb.kube.events import EventKind, EventRecorder
from teapot_lb.kube.resources import ADDRESS_POOLS, EVENTS, NODES, SERVICES, KubeObject
from teapot_lb.kube.status import patch_status, update_status
from teapot_lb.lab.fakeapi import FakeApiServer


def service(name: str = "web") -> KubeObject:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }


def with_ingress(ip: str) -> Any:
    def desired(obj: KubeObject) -> dict[str, Any]:
        status = obj.get("status") or {}
        ingress = list(status.get("loadBalancer", {}).get("ingress") or [])
        if {"ip": ip} not in ingress:
            ingress.append({"ip": ip})
        return {**status, "loadBalancer": {"ingress": ingress}}

    return desired


async def test_update_status_writes_through_the_status_subresource(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service())
    written = await update_status(kube, SERVICES, "web", "default", with_ingress("192.0.2.1"))
    assert written["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.1"}]
    assert fake_api.count_requests("PUT", "/services/web/status") == 1


async def test_update_status_skips_the_write_when_nothing_changes(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service())
    await update_status(kube, SERVICES, "web", "default", with_ingress("192.0.2.1"))
    await update_status(kube, SERVICES, "web", "default", with_ingress("192.0.2.1"))
    await update_status(kube, SERVICES, "web", "default", lambda obj: None)
    assert fake_api.count_requests("PUT", "/status") == 1


async def test_update_status_retries_after_conflicts(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service())
    fake_api.faults.conflict_next(3, method="PUT", path_contains="/status")
    written = await update_status(kube, SERVICES, "web", "default", with_ingress("192.0.2.1"))
    assert written["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.1"}]
    assert fake_api.count_requests("PUT", "/status") == 4


async def test_update_status_gives_up_after_the_attempt_budget(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service())
    fake_api.faults.conflict_next(10, method="PUT", path_contains="/status")
    with pytest.raises(Conflict):
        await update_status(kube, SERVICES, "web", "default", with_ingress("192.0.2.1"), attempts=3)


async def test_concurrent_status_writers_both_land_through_real_conflicts(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service())
    await asyncio.gather(
        update_status(kube, SERVICES, "web", "default", with_ingress("192.0.2.1")),
        update_status(kube, SERVICES, "web", "default", with_ingress("2001:db8::1")),
    )
    obj = fake_api.get("services", "web", "default")
    assert obj is not None
    ips = sorted(i["ip"] for i in obj["status"]["loadBalancer"]["ingress"])
    assert ips == ["192.0.2.1", "2001:db8::1"]


async def test_update_status_of_missing_object_is_not_found(kube: KubeClient) -> None:
    with pytest.raises(NotFound):
        await update_status(kube, SERVICES, "nope", "default", with_ingress("192.0.2.1"))


async def test_patch_status_of_custom_resource(fake_api: FakeApiServer, kube: KubeClient) -> None:
    await kube.create(
        ADDRESS_POOLS, {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}
    )
    await patch_status(kube, ADDRESS_POOLS, "p", "default", {"assigned": {"ipv4": 3}})
    pool = fake_api.get("addresspools", "p", "default")
    assert pool is not None and pool["status"] == {"assigned": {"ipv4": 3}}


async def test_patch_status_to_a_whole_status_removes_the_fields_it_no_longer_has(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(
        ADDRESS_POOLS, {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}
    )
    was = {"assigned": {"ipv4": 3}, "pool": "shared"}
    await patch_status(kube, ADDRESS_POOLS, "p", "default", was)
    await patch_status(kube, ADDRESS_POOLS, "p", "default", {"assigned": {"ipv4": 0}}, was=was)
    pool = fake_api.get("addresspools", "p", "default")
    assert pool is not None and pool["status"] == {"assigned": {"ipv4": 0}}


async def test_repeated_event_is_aggregated_into_one_with_a_count(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    svc = await kube.create(SERVICES, service())
    recorder = EventRecorder(kube, "teapot-lb-controller")
    for _ in range(3):
        assert await recorder.record(svc, EventKind.WARNING, "AllocationFailed", "pool empty")
    assert await recorder.record(svc, EventKind.NORMAL, "IPAllocated", "192.0.2.1")
    events = fake_api.list("events", "default")
    by_reason = {e["reason"]: e for e in events}
    assert len(events) == 2
    failed = by_reason["AllocationFailed"]
    assert failed["count"] == 3 and failed["type"] == "Warning"
    assert failed["involvedObject"]["kind"] == "Service"
    assert failed["involvedObject"]["uid"] == svc["metadata"]["uid"]
    assert failed["source"]["component"] == "teapot-lb-controller"
    assert by_reason["IPAllocated"]["count"] == 1


async def test_event_for_a_listed_builtin_object_names_its_kind(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service())
    listed = await kube.list(SERVICES, namespace="default")
    recorder = EventRecorder(kube, "c")
    await recorder.record(listed.items[0], EventKind.NORMAL, "IPAllocated", "ok")
    (event,) = fake_api.list("events", "default")
    assert event["involvedObject"]["kind"] == "Service"
    assert event["involvedObject"]["apiVersion"] == "v1"


async def test_event_about_cluster_scoped_object_goes_to_default_namespace(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    node = fake_api.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    node = await kube.get(NODES, "n1")
    assert await EventRecorder(kube, "speaker").record(node, "Normal", "Announcing", "x")
    (event,) = fake_api.list("events", "default")
    assert event["involvedObject"]["name"] == "n1"


async def test_event_recording_failure_is_reported_not_raised(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    svc = await kube.create(SERVICES, service())
    fake_api.faults.fail_next(1, method="POST", path_contains="/events")
    assert not await EventRecorder(kube, "c").record(svc, EventKind.NORMAL, "IPAllocated", "x")


async def test_event_expired_on_the_server_is_created_again(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    svc = await kube.create(SERVICES, service())
    recorder = EventRecorder(kube, "c")
    await recorder.record(svc, EventKind.NORMAL, "IPAllocated", "x")
    (event,) = fake_api.list("events", "default")
    await kube.delete(EVENTS, event["metadata"]["name"], "default")
    assert await recorder.record(svc, EventKind.NORMAL, "IPAllocated", "x")
    (again,) = fake_api.list("events", "default")
    assert again["count"] == 1
