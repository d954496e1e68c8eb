"""The metrics the alert rules read, at their source (speaker, controller, webhook)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from controller.test_kube_controller import (
    DEADLINE,
    assigned,
    controller,
    ips_of,
    seed_config_namespace,
)
from fakeapi.wait import until
from model.builders import pool, service
from speaker.builders import FakeFactory, bgp_setup, lb_service, store_of
from teapot_lb.bgp import State
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.model.common import IPAddress
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.speaker.vip_backend import VIPBackend
from teapot_lb.vrrp.notify import VrrpState
from teapot_lb.vrrp.supervisor import InstanceStatus, SupervisorCounters
from teapot_lb.webhook import ReloadingCertificate, WebhookServer
from webhook.certs import make_certificate
from webhook.test_review import admission
from webhook.test_server import post


def established(factory: FakeFactory) -> None:
    for peer in factory.made[0].peers.values():
        peer.state, peer.established = State.ESTABLISHED, True


async def test_the_speaker_reports_per_service_ip_whether_it_announces_it() -> None:
    store = store_of(
        *bgp_setup(),
        lb_service("web", "203.0.113.10"),
        lb_service("local", "203.0.113.11", externalTrafficPolicy="Local"),
    )
    factory = FakeFactory()
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    await speaker.step()
    established(factory)
    text = generate_latest(speaker_registry(speaker)).decode()
    announced = 'teapot_lb_speaker_service_ip_announced{ip="203.0.113.10",service="default/web"}'
    assert f"{announced} 1.0" in text
    # Local traffic policy and no endpoints on n1: not announced here.
    silent = 'teapot_lb_speaker_service_ip_announced{ip="203.0.113.11",service="default/local"}'
    assert f"{silent} 0.0" in text


async def test_the_speaker_counts_session_establishments_and_rejected_prefixes() -> None:
    factory = FakeFactory()
    speaker = NodeSpeaker(
        "n1", store_of(*bgp_setup(), lb_service("web", "203.0.113.10")), bgp=BGPBackend(factory)
    )
    await speaker.step()
    established(factory)
    r1 = factory.made[0].peers["192.0.2.1"]
    r1.counters.established = 3
    r1.counters.prefixes_rejected = 2
    r1.counters.notifications_received = 1
    text = generate_latest(speaker_registry(speaker)).decode()
    assert 'teapot_lb_speaker_bgp_sessions_established_total{peer="r1"} 3.0' in text
    assert 'teapot_lb_speaker_bgp_prefixes_rejected_total{peer="r1"} 2.0' in text
    assert 'teapot_lb_speaker_bgp_notifications_received_total{peer="r1"} 1.0' in text
    assert 'teapot_lb_speaker_bgp_sessions_established_total{peer="r2"} 0.0' in text


async def test_the_controller_counts_the_services_it_refused_an_ip(
    fake_api: FakeApiServer,
) -> None:
    seed_config_namespace(fake_api)
    for doc in (pool("one", "192.0.2.7/32"), service("first"), service("second")):
        fake_api.seed(doc)
    async with controller(fake_api) as running:
        without_ip = running.metrics.services_without_ip
        await until(lambda: without_ip._value.get() == 1, DEADLINE, "one Service without IP")
        names = ("first", "second")
        await until(lambda: any(ips_of(fake_api, n) for n in names), DEADLINE, "one IP written")
        holder, other = names if ips_of(fake_api, "first") else names[::-1]
        fake_api.delete("services", holder, "default")
        await assigned(fake_api, other)  # the freed address goes to the refused one
        await until(lambda: without_ip._value.get() == 0, DEADLINE, "no Service without IP")
    text = generate_latest(running.metrics.registry).decode()
    assert "teapot_lb_controller_services_without_ip 0.0" in text


async def test_the_webhook_reports_reviews_it_could_not_answer(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    failures: list[str] = []
    waiting = ["cache not synced"]
    server = WebhookServer(
        list,
        certificate=ReloadingCertificate(cert, key),
        ready=lambda: waiting,
        fail=failures.append,
    )
    port = await server.start("127.0.0.1", 0)
    try:
        status, _ = await post(port, cert, admission(pool("blue", "192.0.2.0/28")))
        assert status == 503
        waiting.clear()
        status, _ = await post(port, cert, {"kind": "nonsense"})
        assert status == 400
        status, _ = await post(port, cert, admission(pool("blue", "192.0.2.0/28")))
        assert status == 200
    finally:
        await server.stop()
    assert failures == ["not_ready", "bad_review"]


def test_the_vrrp_state_names_the_instance_in_a_label_prometheus_keeps(tmp_path: Path) -> None:
    """`instance` is Prometheus's target label: the VRRP instance's name goes in
    `vrrp_instance` so a scrape does not shadow it."""
    vip = VIPBackend("n1", tmp_path)
    vip.supervisor = _OneInstance()  # type: ignore[assignment]
    speaker = NodeSpeaker("n1", store_of(), vip=vip)
    text = generate_latest(speaker_registry(speaker)).decode()
    assert 'teapot_lb_speaker_vrrp_state{state="MASTER",vrrp_instance="vi_web"} 1.0' in text
    assert "instance=" not in text.replace("vrrp_instance=", "")


class _OneInstance:
    """What the speaker's metrics read of a keepalived supervisor: one MASTER instance."""

    counters = SupervisorCounters()
    states = {"vi_web": InstanceStatus("vi_web", VrrpState.MASTER, 100, (), 0.0)}

    def masters(self) -> dict[str, tuple[IPAddress, ...]]:
        return {}
