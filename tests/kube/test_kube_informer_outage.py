"""The informer through API-server outages: back within seconds, nothing lost, and
`synced` false for exactly as long as the cache may be stale."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff, Retry
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.resources import SERVICES, KubeObject
from teapot_lb.lab.fakeapi import FakeApiServer

# After the server answers again the informer must be current within this (generous for
# a loaded machine; the retry cap is 1 s).
RECOVERY_S = 5.0


def service(name: str) -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[EventType, str]] = []
        self.sync: list[bool] = []

    def __call__(self, type_: EventType, key: str, obj: KubeObject) -> None:
        self.events.append((type_, key))

    def saw(self, type_: EventType, key: str) -> bool:
        return (type_, key) in self.events


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Recorder]:
    rec = Recorder()
    informer.add_handler(rec)
    informer.add_sync_handler(rec.sync.append)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 10)
        yield rec
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def outage(fake_api: FakeApiServer, informer: Informer) -> int:
    """Stop the server and wait until the informer has failed a few times; returns the
    port to restart on."""
    port = urlsplit(fake_api.url).port
    assert port is not None
    await fake_api.stop()
    await until(lambda: informer.errors >= 4, within=10, what="retries during the outage")
    return port


async def test_a_restarted_server_with_a_compacted_history_is_relisted_within_seconds(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    for name in ("keep", "deleted-during-outage"):
        fake_api.seed(service(name))
    informer = Informer(kube, SERVICES)  # the production retry delays
    async with running(informer) as rec:
        assert rec.sync == [True]
        await until(lambda: fake_api.open_watches == 1, what="watch open")
        port = await outage(fake_api, informer)
        assert not informer.synced and rec.sync == [True, False]
        # What happened while we were away, and the history is gone (410 for old versions).
        fake_api.delete("services", "deleted-during-outage", "default")
        fake_api.seed(service("created-during-outage"))
        fake_api.faults.compact()
        lists = informer.lists
        await fake_api.start("127.0.0.1", port)
        await until(lambda: informer.synced, within=RECOVERY_S, what="synced after restart")
        assert informer.lists == lists + 1
        assert rec.saw(EventType.DELETED, "default/deleted-during-outage")
        assert rec.saw(EventType.ADDED, "default/created-during-outage")
        assert sorted(informer.list_keys()) == ["default/created-during-outage", "default/keep"]
        assert rec.sync == [True, False, True]


async def test_a_410_relists_without_waiting_out_earlier_failures(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    # Any backoff sleep here would be 30 s: the deadline below only holds if a 410 does
    # not wait.
    slow = Retry(Backoff(30.0, 30.0), refused=Backoff(30.0, 30.0))
    informer = Informer(kube, SERVICES, retry=slow)
    async with running(informer) as rec:
        await until(lambda: fake_api.open_watches == 1, what="watch open")
        fake_api.seed(service("a"))
        await until(lambda: rec.saw(EventType.ADDED, "default/a"), what="ADDED a")
        # The watch ends; its resumption is held while `a` is deleted and the history
        # compacted, so it resumes from a version the server no longer has: 410.
        fake_api.faults.delay(1.0, count=1, method="GET", path_contains="/services")
        fake_api.faults.drop_watches()
        fake_api.delete("services", "a", "default")
        fake_api.faults.compact()
        await until(
            lambda: rec.saw(EventType.DELETED, "default/a"), within=RECOVERY_S, what="relisted"
        )
        assert informer.lists == 2 and informer.synced


async def test_a_cut_stream_resumes_without_a_relist_and_stays_synced(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    informer = Informer(kube, SERVICES)
    async with running(informer) as rec:
        await until(lambda: fake_api.open_watches == 1, what="watch open")
        fake_api.faults.drop_watches(abrupt=True)
        fake_api.seed(service("after-cut"))
        await until(lambda: rec.saw(EventType.ADDED, "default/after-cut"), what="resumed")
        assert informer.lists == 1 and rec.sync == [True]


async def test_a_refused_list_says_which_verb_resource_and_namespace(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    fake_api.faults.fail_for(60, code=403, method="GET", path_contains="/services")
    informer = Informer(kube, SERVICES, namespace="teapot-lb-system")
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: informer.forbidden is not None, what="refusal recorded")
        refusal = informer.forbidden or ""
        assert "list" in refusal and "services" in refusal
        assert "namespace teapot-lb-system" in refusal
        assert not informer.synced
        fake_api.faults.clear()
        await until(lambda: informer.synced, within=10, what="synced once allowed")
        assert informer.forbidden is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_not_ready_says_what_was_tried_where_how_it_failed_and_what_to_set(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    hint = "set --namespace"
    fake_api.faults.fail_for(60, code=500, method="GET", path_contains="/services")
    informer = Informer(kube, SERVICES, namespace="tenant-acme")
    assert unready([informer], hint) == [
        "services in namespace tenant-acme not synced yet (set --namespace)"
    ]
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: informer.last_error is not None, what="a failure recorded")
        (reason,) = unready([informer], hint)
        assert reason.startswith("services in namespace tenant-acme not synced: list failed: 500")
        assert reason.endswith("(set --namespace)")
        fake_api.faults.clear()
        fake_api.faults.fail_for(60, code=403, method="GET", path_contains="/services")
        await until(lambda: informer.forbidden is not None, what="the refusal recorded")
        (reason,) = unready([informer], hint)
        assert reason.startswith("forbidden: list services in namespace tenant-acme: ")
        fake_api.faults.clear()
        await until(lambda: informer.synced, within=10, what="synced once allowed")
        assert unready([informer], hint) == []
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
