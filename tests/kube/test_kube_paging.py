"""Lists in pages: the client follows continue tokens, the informer handles page by page."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from fakeapi import FakeApiServer
from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.client import KubeClient, ObjectList
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.resources import SERVICES, KubeObject, key_of

NAMES = [f"s{i}" for i in range(8)]  # three pages of three at most


def seed(fake_api: FakeApiServer, *names: str) -> None:
    for name in names:
        fake_api.seed(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"port": 80}]},
            }
        )


async def pages_of(kube: KubeClient, limit: int) -> list[ObjectList]:
    return [page async for page in kube.list_pages(SERVICES, limit=limit)]


def keys(pages: list[ObjectList]) -> list[list[str]]:
    return [[key_of(obj) for obj in page.items] for page in pages]


async def test_list_pages_follows_the_continue_tokens(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    pages = await pages_of(kube, 3)
    assert keys(pages) == [
        ["default/s0", "default/s1", "default/s2"],
        ["default/s3", "default/s4", "default/s5"],
        ["default/s6", "default/s7"],
    ]
    assert [page.first for page in pages] == [True, False, False]
    assert len({page.resource_version for page in pages}) == 1
    assert fake_api.count_requests("GET", "/services") == 3
    assert all(obj["kind"] == "Service" for page in pages for obj in page.items)


async def test_list_collects_every_page(fake_api: FakeApiServer, kube: KubeClient) -> None:
    seed(fake_api, *NAMES)
    listed = await kube.list(SERVICES, limit=3)
    assert [key_of(obj) for obj in listed.items] == [f"default/{n}" for n in NAMES]
    assert listed.resource_version == (await kube.list(SERVICES, limit=0)).resource_version


async def test_an_expired_continue_token_starts_the_list_over(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    fake_api.faults.expire_continue_next()
    pages = await pages_of(kube, 3)
    # The first page, the 410, then the list again from its start, paged.
    assert [page.first for page in pages] == [True, True, False, False]
    assert keys(pages)[1:] == keys(await pages_of(kube, 3))
    listed = await kube.list(SERVICES, limit=3)
    assert len(listed.items) == len(NAMES)


async def test_a_second_expiry_reads_the_list_whole(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    fake_api.faults.expire_continue_next(2)
    pages = await pages_of(kube, 3)
    assert [page.first for page in pages] == [True, True, True]
    assert [len(page.items) for page in pages] == [3, 3, len(NAMES)]
    assert "limit" not in fake_api.requests[-1].query


# ------------------------------------------------------------------ the informer


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[EventType, str, str]] = []

    def __call__(self, type_: EventType, key: str, obj: KubeObject) -> None:
        self.events.append((type_, key, obj["metadata"].get("resourceVersion", "")))


@contextlib.asynccontextmanager
async def running(*informers: Informer) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        for informer in informers:
            await asyncio.wait_for(informer.wait_synced(), 10)
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with pytest.raises(asyncio.CancelledError):
                await task


def informer(kube: KubeClient, page_size: int) -> tuple[Informer, Recorder]:
    made = Informer(kube, SERVICES, backoff=Backoff(0.05, 0.5), page_size=page_size)
    recorder = Recorder()
    made.add_handler(recorder)
    return made, recorder


async def test_a_list_in_pages_gives_the_cache_and_events_of_one_whole_list(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    paged, paged_events = informer(kube, 3)
    whole, whole_events = informer(kube, 0)
    async with running(paged, whole):
        assert paged_events.events == whole_events.events
        assert [t for t, _, _ in paged_events.events] == [EventType.ADDED] * len(NAMES)
        # A re-list after a gap (410): objects deleted, changed and added meanwhile.
        await until(lambda: fake_api.open_watches == 2, what="both watches open")
        fake_api.faults.fail_for(0.5, method="GET", path_contains="/services")
        fake_api.faults.drop_watches()
        fake_api.remove("services", "s1", "default")
        fake_api.remove("services", "s6", "default")
        changed = fake_api.get("services", "s4", "default")
        assert changed is not None
        fake_api.put({**changed, "metadata": {**changed["metadata"], "labels": {"x": "1"}}})
        seed(fake_api, "s9")
        fake_api.faults.compact()
        await until(lambda: paged.lists == 2 and whole.lists == 2, what="both re-listed")
        await until(lambda: paged.synced and whole.synced, what="both current again")
        relisted = paged_events.events[len(NAMES) :]
        assert relisted == whole_events.events[len(NAMES) :]
        assert [(t, k) for t, k, _ in relisted] == [
            (EventType.MODIFIED, "default/s4"),
            (EventType.ADDED, "default/s9"),
            (EventType.DELETED, "default/s1"),
            (EventType.DELETED, "default/s6"),
        ]
        assert paged.list_objects() == whole.list_objects()
        assert paged.resource_version == whole.resource_version
    # Every list after the first page asked with its token, at most three at a time.
    paged_lists = [r for r in fake_api.requests if "limit=3" in r.query and "watch" not in r.query]
    assert sum("continue=" in r.query for r in paged_lists) >= 4


async def test_an_expired_continue_token_mid_list_is_recovered(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    fake_api.faults.expire_continue_next()
    paged, recorder = informer(kube, 3)
    async with running(paged):
        assert paged.synced and paged.lists == 1 and paged.errors == 0
        assert sorted(paged.list_keys()) == [f"default/{n}" for n in NAMES]
        # Objects of the page before the 410 came once: listed again unchanged, no event.
        assert [(t, k) for t, k, _ in recorder.events] == [
            (EventType.ADDED, f"default/{n}") for n in NAMES
        ]
