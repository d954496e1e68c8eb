"""A speaker the API server refuses (RBAC) is not ready, and says what was refused."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from pathlib import Path

import aiohttp

from teapot_lb.cli.run import RunConfig
from teapot_lb.cli.speaker import run_speaker
from teapot_lb.lab.fakeapi import FakeApiServer

from .builders import bgp_setup
from .test_kube_speaker import seed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_a_refused_list_makes_readyz_503_naming_verb_resource_and_namespace(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    seed(fake_api, *bgp_setup())
    fake_api.faults.fail_for(60, code=403, method="GET", path_contains="/bgppeers")
    port = free_port()
    config = RunConfig(
        manifests=tmp_path,
        node="n1",
        state_dir=tmp_path,
        modes=(),
        metrics_address=f"127.0.0.1:{port}",
    )
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_speaker(config, str(fake_api.kubeconfig_path), "lb-system", stop)
    )

    async def readyz() -> tuple[int, str]:
        url = f"http://127.0.0.1:{port}/readyz"
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return resp.status, await resp.text()

    async def readyz_until(check: Callable[[int, str], bool], what: str) -> tuple[int, str]:
        deadline = asyncio.get_running_loop().time() + 10
        last = (0, "")
        while asyncio.get_running_loop().time() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                last = await readyz()
                if check(*last):
                    return last
            await asyncio.sleep(0.05)
        raise AssertionError(f"/readyz never {what}; last {last}")

    try:
        status, body = await readyz_until(lambda _, text: "forbidden" in text, "refused")
        assert status == 503
        assert "forbidden: list bgppeers.lb.teapot.io in namespace lb-system" in body
        fake_api.faults.clear()
        assert await readyz_until(lambda code, _: code == 200, "ready") == (200, "ok\n")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
