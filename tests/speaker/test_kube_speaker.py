"""The speaker against the fake API server: informers feed the plan; reports go back."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio

from fakeapi.wait import until
from teapot_lb.cluster import Store
from teapot_lb.kube.client import KubeClient
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.kube_reporter import KubeReporter
from teapot_lb.speaker.kube_source import KubeSource, read_cluster
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.speaker.report import annotation_key

from .builders import FakeFactory, FakeSpeaker, bgp_setup, lb_service

KEY = annotation_key("n1")
P10 = "203.0.113.10/32"  # the backend hands the speaker prefixes as text


@dataclass
class Running:
    speaker: NodeSpeaker
    source: KubeSource
    factory: FakeFactory

    @property
    def bgp(self) -> FakeSpeaker:
        s = self.factory.made[0]
        assert isinstance(s, FakeSpeaker)
        return s


def seed(fake_api: FakeApiServer, *docs: dict[str, Any]) -> None:
    for ns in ("default", "lb-system"):
        if fake_api.get("namespaces", ns) is None:
            fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for d in docs:
        fake_api.seed(d)


@pytest_asyncio.fixture
async def running(fake_api: FakeApiServer, kube: KubeClient) -> AsyncIterator[Running]:
    seed(
        fake_api,
        *bgp_setup(["64512:9"], passwordSecret={"name": "bgp"}),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "bgp", "namespace": "lb-system"},
            "data": {"password": base64.b64encode(b"s3cret").decode()},
        },
        lb_service("web", "203.0.113.10"),
    )
    factory = FakeFactory()
    store = Store()
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    source = KubeSource(kube, store, speaker.notify, watch_timeout_s=5)
    reporter = KubeReporter(kube, "n1")
    speaker.reporter = reporter
    tasks = [asyncio.create_task(source.run()), asyncio.create_task(speaker.run())]
    try:
        yield Running(speaker, source, factory)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await reporter.close()


def annotation(fake_api: FakeApiServer, name: str) -> str | None:
    obj = fake_api.get("services", name, "default") or {}
    value = (obj.get("metadata", {}).get("annotations") or {}).get(KEY)
    return str(value) if value is not None else None


def events(fake_api: FakeApiServer, name: str, reason: str) -> list[str]:
    return [
        str(e["message"])
        for e in fake_api.list("events")
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


async def test_informers_feed_the_plan_and_routes_reach_every_peer(running: Running) -> None:
    await until(lambda: running.factory.made and len(running.bgp.routes) == 2, 10, "routes")
    assert set(running.bgp.routes) == {"192.0.2.1", "192.0.2.2"}
    attrs = running.bgp.routes["192.0.2.1"][P10]
    assert attrs is not None and attrs.communities == (64512 << 16 | 9,)


async def test_the_bgp_password_is_read_from_the_secret(running: Running) -> None:
    await until(lambda: running.factory.made and "192.0.2.1" in running.bgp.peers, 10, "peer")
    assert running.bgp.peers["192.0.2.1"].config.password == "s3cret"


async def test_announcement_status_is_an_annotation_per_node_and_an_event(
    running: Running, fake_api: FakeApiServer
) -> None:
    await until(lambda: annotation(fake_api, "web") is not None, 10, "annotation")
    assert annotation(fake_api, "web") == "bgp 203.0.113.10 to r1,r2"
    await until(lambda: events(fake_api, "web", "NodeAnnouncing"), 10, "event")
    assert events(fake_api, "web", "NodeAnnouncing") == [
        "node n1 announces bgp 203.0.113.10 to r1,r2"
    ]


async def test_a_service_losing_its_ip_is_withdrawn_and_its_annotation_removed(
    running: Running, fake_api: FakeApiServer
) -> None:
    await until(lambda: annotation(fake_api, "web") is not None, 10, "annotation")
    svc = copy.deepcopy(fake_api.get("services", "web", "default"))
    assert svc is not None
    svc["status"] = {"loadBalancer": {}}
    fake_api.put(svc)
    await until(lambda: running.bgp.routes.get("192.0.2.1") == {}, 10, "withdrawn")
    await until(lambda: annotation(fake_api, "web") is None, 10, "annotation removed")
    await until(
        lambda: (
            "node n1 stopped announcing bgp 203.0.113.10 to r1,r2"
            in events(fake_api, "web", "NodeAnnouncing")
        ),
        10,
        "stop event",
    )


async def test_explain_reads_the_whole_cluster(fake_api: FakeApiServer) -> None:
    seed(fake_api, *bgp_setup(), lb_service("web", "203.0.113.10"))
    view = await read_cluster(str(fake_api.kubeconfig_path))
    assert set(view.nodes) == {"n1", "n2"}
    assert view.services["default/web"].ingress_ips()
    assert set(view.bgp_peers) == {"lb-system/r1", "lb-system/r2"}


async def test_explain_reads_the_management_kinds_only_when_asked(
    fake_api: FakeApiServer,
) -> None:
    seed(fake_api, *bgp_setup(), lb_service("web", "203.0.113.10"))
    fake_api.seed(
        {
            "apiVersion": "lb.teapot.io/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": "acme"},
            "spec": {"namespace": "tenant-acme", "nodeNetworks": ["192.0.2.0/28"]},
        }
    )
    plain = await read_cluster(str(fake_api.kubeconfig_path))
    assert plain.tenants == {}
    with_tenancy = await read_cluster(str(fake_api.kubeconfig_path), tenancy=True)
    assert set(with_tenancy.tenants) == {"acme"}
    assert with_tenancy.services.keys() == plain.services.keys()


async def test_explain_now_reads_the_speakers_annotations(
    running: Running, fake_api: FakeApiServer
) -> None:
    from teapot_lb.announce.plan import explain
    from teapot_lb.cli.explain import now_of, observed_in_cluster

    await until(lambda: annotation(fake_api, "web") is not None, 10, "annotation")
    view = await read_cluster(str(fake_api.kubeconfig_path))
    observed = observed_in_cluster(view, "default/web")
    now = {d.node: now_of(d, observed) for d in explain(view, "default/web")}
    assert now == {"n1": "yes", "n2": "no"}  # only n1 runs a speaker here
