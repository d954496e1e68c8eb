"""After an outage the speaker plans only from a view where every kind is current: until
then the last consistent plan stays (nothing withdrawn, nothing new announced)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import pytest_asyncio

from fakeapi.wait import until
from teapot_lb.cluster import Kind, Store
from teapot_lb.kube.client import KubeClient
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.kube_source import KubeSource
from teapot_lb.speaker.node import NodeSpeaker

from .builders import FakeFactory, FakeSpeaker, bgp_setup, lb_service, node

WEB = "203.0.113.10/32"  # the backend hands the speaker prefixes as text
NEW = "203.0.113.11/32"
EXCLUDED = {"node.kubernetes.io/exclude-from-external-load-balancers": ""}


@dataclass
class Running:
    speaker: NodeSpeaker
    source: KubeSource
    factory: FakeFactory
    # Every set of prefixes ever handed to the BGP speaker for peer r1.
    announced: list[set[object]]

    @property
    def bgp(self) -> FakeSpeaker:
        s = self.factory.made[0]
        assert isinstance(s, FakeSpeaker)
        return s

    def now(self) -> set[object]:
        return self.announced[-1] if self.announced else set()


@pytest_asyncio.fixture
async def running(fake_api: FakeApiServer, kube: KubeClient) -> AsyncIterator[Running]:
    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lb-system"}})
    for doc in (*bgp_setup(), lb_service("web", "203.0.113.10")):
        fake_api.seed(doc)
    factory = FakeFactory()
    store = Store()
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    source = KubeSource(kube, store, speaker.notify, watch_timeout_s=5)
    tasks = [asyncio.create_task(source.run()), asyncio.create_task(speaker.run())]
    run = Running(speaker, source, factory, [])
    try:
        await until(lambda: factory.made, 10, "BGP speaker built")
        bgp = run.bgp
        original, changing = bgp.set_routes, bgp.change_routes

        def recording(routes: Mapping[object, object], peer: str | None) -> None:
            original(routes, peer)  # type: ignore[arg-type]
            if peer == "192.0.2.1":
                run.announced.append(set(bgp.routes[peer]))

        def recording_changes(
            routes: Mapping[object, object], withdrawn: object, *, peer: str
        ) -> None:
            changing(routes, withdrawn, peer=peer)  # type: ignore[arg-type]
            if peer == "192.0.2.1":
                run.announced.append(set(bgp.routes[peer]))

        bgp.set_routes = recording  # type: ignore[method-assign, assignment]
        bgp.change_routes = recording_changes  # type: ignore[method-assign, assignment]
        if "192.0.2.1" in bgp.routes:
            run.announced.append(set(bgp.routes["192.0.2.1"]))
        yield run
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t


async def test_a_half_recovered_view_neither_withdraws_nor_announces(
    running: Running, fake_api: FakeApiServer
) -> None:
    await until(lambda: WEB in running.now(), 10, "web announced")
    nodes = running.source.informers[Kind.NODE]
    # The Node informer loses the server (its requests fail) while the others keep
    # watching: its kind is not current, so the speaker's view is held.
    fake_api.faults.fail_for(60, code=503, path_contains="/nodes")
    fake_api.faults.drop_watches()
    await until(lambda: not running.source.consistent, 10, "view held")
    # Meanwhile: n1 is excluded, web deleted, a new Service created. The Service informer
    # sees the delete and the create; the Node informer cannot see the label.
    fake_api.put(node("n1", "192.0.2.11", **EXCLUDED))
    fake_api.delete("services", "web", "default")
    fake_api.seed(lb_service("new", "203.0.113.11"))
    services = running.source.staging
    await until(
        lambda: (
            services.get(Kind.SERVICE, "default/new") is not None
            and services.get(Kind.SERVICE, "default/web") is None
        ),
        10,
        "the Service informer saw the changes",
    )
    steps = running.speaker.stats.steps
    running.speaker.notify()  # anything else that makes the speaker plan (a BGP session)
    await until(lambda: running.speaker.stats.steps > steps, 10, "a step while held")
    assert running.now() == {WEB}, "the last consistent plan stays in force"
    assert not nodes.synced

    fake_api.faults.clear()
    await until(lambda: running.source.consistent, 10, "every kind current again")
    # From the consistent view: n1 is excluded, so nothing; `new` was never announced.
    await until(lambda: running.now() == set(), 10, "plan from the recovered view")
    assert all(NEW not in prefixes for prefixes in running.announced)


async def test_the_view_is_held_from_the_outage_until_every_kind_has_relisted(
    running: Running, fake_api: FakeApiServer
) -> None:
    await until(lambda: WEB in running.now(), 10, "web announced")
    fake_api.faults.fail_for(60, code=503)
    fake_api.faults.drop_watches()
    await until(lambda: not running.source.consistent, 10, "view held")
    fake_api.delete("services", "web", "default")
    fake_api.seed(lb_service("new", "203.0.113.11"))
    assert running.now() == {WEB}
    fake_api.faults.clear()
    await until(lambda: running.now() == {NEW}, 10, "converged after the outage")
    assert all(prefixes for prefixes in running.announced), "nothing withdrawn meanwhile"
    assert not running.source.readiness()
