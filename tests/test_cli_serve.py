"""The serve frame of the long-running commands (teapot_lb.cli.serve): monitoring and
webhook served when given an address, the work run until cancelled, then everything
stopped in order; and the shared option checks."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import click
import pytest
from prometheus_client import CollectorRegistry

from teapot_lb.cli.serve import Served, lease_config, serve_component, webhook_certificate
from teapot_lb.httpserve import MonitoringServer
from teapot_lb.lab.wait import wait_for_async


class Recorder:
    """Stands for a component's pieces: records what was stopped and closed, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.running = asyncio.Event()

    async def run(self) -> None:
        self.running.set()
        await asyncio.Event().wait()  # until cancelled

    async def stop(self) -> None:
        self.events.append("stop")

    async def close(self) -> None:
        self.events.append("close")
        raise OSError("already gone")  # ignored: the process is going


class RecordingMonitor(MonitoringServer):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__(CollectorRegistry())
        self.recorder = recorder

    async def stop(self) -> None:
        self.recorder.events.append("monitoring")
        await super().stop()


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as resp:
        status: int = resp.status
    return status


async def test_a_component_serves_its_probes_runs_until_cancelled_then_stops_in_order() -> None:
    rec = Recorder()
    monitor = RecordingMonitor(rec)

    async def setup() -> Served:
        client: Any = rec  # a KubeClient's close() is all the frame uses
        return Served(run=rec.run, monitoring=monitor, stop=[rec.stop], clients=[client])

    task = asyncio.create_task(serve_component("test", setup, metrics_addr="127.0.0.1:0"))
    await wait_for_async(lambda: rec.running.is_set() or None, within=10, what="the work runs")
    assert monitor.port
    status = await asyncio.to_thread(get, f"http://127.0.0.1:{monitor.port}/healthz")
    assert status == 200
    task.cancel()
    await task  # the frame ends quietly on cancellation
    assert rec.events == ["stop", "monitoring", "close"]


async def test_without_an_address_nothing_listens_and_no_webhook_is_made() -> None:
    rec = Recorder()
    made: list[str] = []

    def webhook() -> Any:
        made.append("webhook")
        raise AssertionError("no webhook without an address")

    async def setup() -> Served:
        return Served(run=rec.run, monitoring=RecordingMonitor(rec), webhook=webhook)

    task = asyncio.create_task(serve_component("test", setup, metrics_addr="", webhook_addr=""))
    await wait_for_async(lambda: rec.running.is_set() or None, within=10, what="the work runs")
    task.cancel()
    await task
    assert made == [] and rec.events == ["monitoring"]


def test_the_webhook_certificate_and_key_go_together(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    assert webhook_certificate(cert, key) == (cert, key)
    assert webhook_certificate(None, None) is None
    with pytest.raises(click.UsageError, match="go together"):
        webhook_certificate(cert, None)


def test_the_lease_namespace_falls_back_to_the_pod_then_the_config_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setenv("POD_NAME", "pod-1")
    lease = lease_config(True, None, "teapot-lb-system", "teapot-lb-x")
    assert lease is not None
    assert (lease.namespace, lease.name, lease.identity) == (
        "teapot-lb-system", "teapot-lb-x", "pod-1",
    )  # fmt: skip
    monkeypatch.setenv("POD_NAMESPACE", "lb")
    assert (lease_config(True, None, "teapot-lb-system", "x") or lease).namespace == "lb"
    assert lease_config(False, None, "teapot-lb-system", "x") is None
    monkeypatch.delenv("POD_NAMESPACE")
    with pytest.raises(click.UsageError, match="--lease-namespace"):
        lease_config(True, None, "", "x")
