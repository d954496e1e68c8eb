"""The shared /metrics, /healthz, /readyz server."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from teapot_lb.httpserve import MonitoringServer, parse_address


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as resp,
    ):
        return resp.status, await resp.text()


async def test_probes_report_failing_checks_one_per_line_and_metrics_are_served() -> None:
    registry = CollectorRegistry()
    Counter("things", "Things done.", registry=registry).inc(3)
    waiting = ["services not synced", "pools not synced"]
    server = MonitoringServer(registry, liveness=[list], readiness=[lambda: waiting])
    port = await server.start("127.0.0.1", 0)
    try:
        assert await get(port, "/healthz") == (200, "ok\n")
        assert await get(port, "/readyz") == (503, "services not synced\npools not synced\n")
        waiting.clear()
        assert await get(port, "/readyz") == (200, "ok\n")
        status, text = await get(port, "/metrics")
        assert status == 200 and "things_total 3.0" in text
    finally:
        await server.stop()


def test_addresses_are_parsed_with_defaults_and_errors() -> None:
    assert parse_address(":7472") == ("0.0.0.0", 7472)
    assert parse_address("127.0.0.1:80") == ("127.0.0.1", 80)
    assert parse_address("[::1]:9443") == ("::1", 9443)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("7472")
