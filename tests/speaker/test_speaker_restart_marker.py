"""`teapot-lb speaker` knows a restart after an unclean stop from its state directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from fakeapi.wait import until
from teapot_lb.cli.run import RunConfig
from teapot_lb.cli.speaker import run_speaker
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.speaker.run_marker import RunMarker

from .builders import bgp_setup
from .test_kube_speaker import seed

RESTART_LOG = "the previous run did not stop gracefully"


async def run_once(fake_api: FakeApiServer, state: Path, *, crash: bool) -> list[str]:
    """Run the speaker until its marker exists, then stop it; the log events."""
    config = RunConfig(manifests=state, node="n2", state_dir=state, modes=())
    stop = asyncio.Event()
    marker = RunMarker(state).path
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(run_speaker(config, str(fake_api.kubeconfig_path), None, stop))
        await until(marker.exists, 10, "the marker")
        stop.set()
        await asyncio.wait_for(task, 10)
    assert not marker.exists(), "a graceful stop removes the marker"
    if crash:  # what a SIGKILL'd speaker leaves behind
        marker.write_text("4242\n")
    return [str(e.get("event")) for e in logs]


async def test_marker_found_at_start_means_restarting_and_a_clean_stop_clears_it(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    seed(fake_api, *bgp_setup())
    first = await run_once(fake_api, tmp_path, crash=True)
    assert not any(RESTART_LOG in e for e in first)
    second = await run_once(fake_api, tmp_path, crash=False)
    assert any(RESTART_LOG in e for e in second)
    third = await run_once(fake_api, tmp_path, crash=False)
    assert not any(RESTART_LOG in e for e in third)


def test_run_marker_begin_reports_a_leftover_marker(tmp_path: Path) -> None:
    marker = RunMarker(tmp_path / "state")
    assert marker.begin() is False  # also creates the directory
    assert marker.begin() is True  # never ended: the previous run crashed
    marker.end()
    assert marker.begin() is False
