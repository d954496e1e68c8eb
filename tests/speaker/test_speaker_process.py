"""The `speaker` command's run loop against the fake API server, and its metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import generate_latest

from fakeapi.wait import until
from teapot_lb.bgp import State
from teapot_lb.cli.run import RunConfig
from teapot_lb.cli.speaker import run_speaker
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.speaker.report import annotation_key

from .builders import FakeFactory, bgp_setup, lb_service, store_of
from .test_kube_speaker import seed


async def test_speaker_command_reports_from_the_api_and_stops_on_request(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    seed(fake_api, *bgp_setup(), lb_service("web", "203.0.113.10"))
    stop = asyncio.Event()
    config = RunConfig(manifests=tmp_path, node="n2", state_dir=tmp_path, modes=())
    task = asyncio.create_task(run_speaker(config, str(fake_api.kubeconfig_path), None, stop))

    def annotated() -> bool:
        svc = fake_api.get("services", "web", "default") or {}
        annotations = svc.get("metadata", {}).get("annotations") or {}
        return annotations.get(annotation_key("n2")) == "bgp 203.0.113.10 to r1,r2"

    await until(annotated, 10, "the n2 annotation")
    stop.set()
    speaker = await asyncio.wait_for(task, 10)
    assert speaker.stats.step_errors == 0
    assert not annotated(), "a stopped speaker must remove its annotation"


async def test_metrics_show_sessions_prefixes_and_plans() -> None:
    factory = FakeFactory()
    store = store_of(
        *bgp_setup(), lb_service("web", "203.0.113.10"), lb_service("api", "203.0.113.11")
    )
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    await speaker.step()
    for peer in factory.made[0].peers.values():
        peer.state = State.ESTABLISHED if peer.config.address == "192.0.2.1" else State.ACTIVE
        peer.established = peer.state is State.ESTABLISHED
        peer.prefixes_sent = 2 if peer.established else 0
    text = generate_latest(speaker_registry(speaker)).decode()
    assert 'teapot_lb_speaker_bgp_session_up{peer="r1"} 1.0' in text
    assert 'teapot_lb_speaker_bgp_session_up{peer="r2"} 0.0' in text
    assert 'teapot_lb_speaker_bgp_session_state{peer="r2",state="Active"} 1.0' in text
    assert 'teapot_lb_speaker_bgp_prefixes_advertised{peer="r1"} 2.0' in text
    assert 'teapot_lb_speaker_bgp_prefixes_desired{peer="r2"} 2.0' in text
    assert 'teapot_lb_speaker_announced_ips{mode="bgp"} 2.0' in text
    assert "teapot_lb_speaker_plans_total 1.0" in text
