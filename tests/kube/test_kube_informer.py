"""The informer keeps an exact cache through watch drops, 410s and server errors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.resources import ADDRESS_POOLS, SERVICES, KubeObject
from teapot_lb.lab.fakeapi import FakeApiServer


def service(name: str, labels: dict[str, str] | None = None) -> KubeObject:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[EventType, str]] = []

    def __call__(self, type_: EventType, key: str, obj: KubeObject) -> None:
        self.events.append((type_, key))

    def saw(self, type_: EventType, key: str) -> Callable[[], bool]:
        return lambda: (type_, key) in self.events


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 10)
        yield informer
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def make(kube: KubeClient, **kwargs: Any) -> tuple[Informer, Recorder]:
    informer = Informer(kube, SERVICES, backoff=Backoff(0.05, 0.5), **kwargs)
    recorder = Recorder()
    informer.add_handler(recorder)
    return informer, recorder


async def test_informer_lists_then_sees_create_update_delete(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service("old"))
    informer, rec = make(kube)
    async with running(informer) as inf:
        assert inf.has_synced and inf.get("default/old") is not None
        assert (EventType.ADDED, "default/old") in rec.events

        await kube.create(SERVICES, service("a"))
        await until(rec.saw(EventType.ADDED, "default/a"), what="ADDED a")
        await kube.patch(SERVICES, "a", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
        await until(rec.saw(EventType.MODIFIED, "default/a"), what="MODIFIED a")
        cached = inf.get("default/a")
        assert cached is not None and cached["metadata"]["labels"] == {"x": "1"}
        assert cached["kind"] == "Service"
        await kube.delete(SERVICES, "a", "default")
        await until(rec.saw(EventType.DELETED, "default/a"), what="DELETED a")
        assert inf.get("default/a") is None
        assert inf.lists == 1


async def test_informer_resumes_after_watch_drop_without_relisting(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    informer, rec = make(kube)
    async with running(informer) as inf:
        for abrupt in (False, True):
            await until(lambda: fake_api.open_watches == 1, what="watch open")
            fake_api.faults.drop_watches(abrupt=abrupt)
            name = f"after-drop-{abrupt}".lower()
            await kube.create(SERVICES, service(name))
            await until(rec.saw(EventType.ADDED, f"default/{name}"), what=name)
        assert inf.lists == 1
        assert inf.watches >= 3


async def test_deletes_missed_while_history_compacted_arrive_from_relist(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    for name in ("keep", "gone1", "gone2"):
        await kube.create(SERVICES, service(name))
    informer, rec = make(kube)
    async with running(informer) as inf:
        await until(lambda: fake_api.open_watches == 1, what="watch open")
        # The watch dies; while it is down the objects are deleted and the history is
        # compacted, so resuming from the last version gets 410 Gone.
        fake_api.faults.fail_for(0.5, method="GET", path_contains="/services")
        fake_api.faults.drop_watches()
        fake_api.delete("services", "gone1", "default")
        fake_api.delete("services", "gone2", "default")
        fake_api.faults.compact()
        await until(rec.saw(EventType.DELETED, "default/gone2"), what="DELETED gone2")
        assert rec.saw(EventType.DELETED, "default/gone1")()
        assert sorted(inf.list_keys()) == ["default/keep"]
        assert inf.lists >= 2


async def test_relist_reports_objects_changed_in_the_gap_as_modified(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service("a"))
    informer, rec = make(kube)
    async with running(informer) as inf:
        await until(lambda: fake_api.open_watches == 1, what="watch open")
        fake_api.faults.fail_for(0.5, method="GET", path_contains="/services")
        fake_api.faults.drop_watches()
        obj = fake_api.get("services", "a", "default")
        assert obj is not None
        fake_api.put({**obj, "metadata": {**obj["metadata"], "labels": {"changed": "yes"}}})
        fake_api.faults.compact()
        await until(rec.saw(EventType.MODIFIED, "default/a"), what="MODIFIED a")
        cached = inf.get("default/a")
        assert cached is not None and cached["metadata"]["labels"] == {"changed": "yes"}


async def test_informer_recovers_after_server_errors(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    informer, rec = make(kube)
    async with running(informer) as inf:
        await until(lambda: fake_api.open_watches == 1, what="watch open")
        fake_api.faults.fail_for(1.5, method="GET")
        fake_api.faults.drop_watches()
        fake_api.seed(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "during"}, "spec": {}}
        )
        await until(rec.saw(EventType.ADDED, "default/during"), within=15, what="ADDED during")
        assert inf.errors >= 1


async def test_informer_with_label_selector_sees_only_matching_objects(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    await kube.create(SERVICES, service("web", {"app": "web"}))
    await kube.create(SERVICES, service("db", {"app": "db"}))
    informer, rec = make(kube, label_selector="app=web")
    async with running(informer) as inf:
        assert inf.list_keys() == ["default/web"]
        await kube.patch(
            SERVICES, "db", {"metadata": {"labels": {"app": "web"}}}, namespace="default"
        )
        await until(rec.saw(EventType.ADDED, "default/db"), what="db now matches")
        await kube.patch(
            SERVICES, "web", {"metadata": {"labels": {"app": "x"}}}, namespace="default"
        )
        await until(rec.saw(EventType.DELETED, "default/web"), what="web no longer matches")
        assert inf.list_keys() == ["default/db"]


async def test_bookmarks_advance_the_resource_version(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    informer, _ = make(kube)
    async with running(informer) as inf:
        start = int(inf.resource_version)
        # Changes to another kind move the global resourceVersion; only bookmarks can
        # tell the Service informer about it.
        fake_api.seed(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {}}
        )
        await until(lambda: int(inf.resource_version) > start, what="bookmark received")


async def test_informer_for_custom_resources(fake_api: FakeApiServer, kube: KubeClient) -> None:
    informer = Informer(kube, ADDRESS_POOLS, namespace="default", backoff=Backoff(0.05, 0.5))
    async with running(informer) as inf:
        await kube.create(
            ADDRESS_POOLS,
            {"metadata": {"name": "p", "namespace": "default"}, "spec": {"addresses": []}},
        )
        await until(lambda: inf.get("default/p") is not None, what="pool cached")


async def test_cache_drops_managed_fields(fake_api: FakeApiServer, kube: KubeClient) -> None:
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    fake_api.seed(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "listed", "managedFields": managed},
            "spec": {},
        }
    )
    informer, rec = make(kube)
    async with running(informer) as inf:
        fake_api.seed(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "watched", "managedFields": managed},
                "spec": {},
            }
        )
        await until(rec.saw(EventType.ADDED, "default/watched"), what="ADDED watched")
        for key in ("default/listed", "default/watched"):
            cached = inf.get(key)
            assert cached is not None and "managedFields" not in cached["metadata"]


async def test_a_failing_handler_is_logged_and_the_others_still_see_the_event(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    informer = Informer(kube, SERVICES, backoff=Backoff(0.05, 0.5))

    def broken(type_: EventType, key: str, obj: KubeObject) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(broken)
    rec = Recorder()
    informer.add_handler(rec)
    async with running(informer):
        await kube.create(SERVICES, service("a"))
        await until(rec.saw(EventType.ADDED, "default/a"), what="ADDED a despite the bug")


PAGED = [f"s{i}" for i in range(8)]  # three pages of three at most


def seed_services(fake_api: FakeApiServer, *names: str) -> None:
    for name in names:
        fake_api.seed({"apiVersion": "v1", "kind": "Service", **service(name)})


async def test_a_list_in_pages_gives_the_cache_and_events_of_one_whole_list(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_services(fake_api, *PAGED)
    paged, paged_events = make(kube, page_size=3)
    whole, whole_events = make(kube, page_size=0)
    async with running(paged), running(whole):
        assert paged_events.events == whole_events.events
        assert paged_events.events == [(EventType.ADDED, f"default/{n}") for n in PAGED]
        # A re-list after a gap (410): objects deleted, changed and added meanwhile.
        await until(lambda: fake_api.open_watches == 2, what="both watches open")
        fake_api.faults.fail_for(0.5, method="GET", path_contains="/services")
        fake_api.faults.drop_watches()
        fake_api.remove("services", "s1", "default")
        fake_api.remove("services", "s6", "default")
        changed = fake_api.get("services", "s4", "default")
        assert changed is not None
        fake_api.put({**changed, "metadata": {**changed["metadata"], "labels": {"x": "1"}}})
        seed_services(fake_api, "s9")
        fake_api.faults.compact()
        await until(lambda: paged.synced and whole.synced and paged.lists == whole.lists == 2)
        assert paged_events.events == whole_events.events
        assert paged_events.events[len(PAGED) :] == [
            (EventType.MODIFIED, "default/s4"),
            (EventType.ADDED, "default/s9"),
            (EventType.DELETED, "default/s1"),
            (EventType.DELETED, "default/s6"),
        ]
        assert paged.list_objects() == whole.list_objects()
        assert paged.resource_version == whole.resource_version
    # Both lists came in pages of three: each page after the first asked with its token.
    paged_lists = [r for r in fake_api.requests if "limit=3" in r.query]
    assert sum("continue=" in r.query for r in paged_lists) >= 4


async def test_an_expired_continue_token_mid_list_is_recovered(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_services(fake_api, *PAGED)
    fake_api.faults.expire_continue_next()
    informer, rec = make(kube, page_size=3)
    async with running(informer) as inf:
        assert inf.synced and inf.lists == 1 and inf.errors == 0
        assert sorted(inf.list_keys()) == [f"default/{n}" for n in PAGED]
        # The first page's objects came again after the 410, unchanged: no second event.
        assert rec.events == [(EventType.ADDED, f"default/{n}") for n in PAGED]
    assert any("continue=" in r.query and r.status == 410 for r in fake_api.requests)
