"""`teapot-lb controller` as a process: assigns IPs, serves probes, metrics and the webhook,
releases its lease on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import ssl
import sys
from pathlib import Path

import aiohttp

from fakeapi.wait import until
from model.builders import NS, pool, service
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.resources import ADDRESS_POOLS, SERVICES
from teapot_lb.lab.fakeapi import FakeApiServer
from webhook.certs import make_certificate
from webhook.test_review import admission

from .test_kube_controller import ips_of, seed_config_namespace

COMMAND = "from teapot_lb.cli.controller import controller; controller()"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def test_the_controller_command_serves_assigns_and_exits_cleanly(
    fake_api: FakeApiServer, kube: KubeClient, tmp_path: Path
) -> None:
    seed_config_namespace(fake_api)
    await kube.create(ADDRESS_POOLS, pool("blue", "192.0.2.0/28"))
    cert, key = make_certificate(tmp_path)
    metrics_port, webhook_port = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        COMMAND,
        "--kubeconfig",
        str(fake_api.kubeconfig_path),
        "--config-namespace",
        NS,
        "--lease-namespace",
        "kube-system",
        "--identity",
        "cmd",
        "--metrics-addr",
        f"127.0.0.1:{metrics_port}",
        "--webhook-addr",
        f"127.0.0.1:{webhook_port}",
        "--webhook-cert",
        str(cert),
        "--webhook-key",
        str(key),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        metrics_url = f"http://127.0.0.1:{metrics_port}"

        async def ready() -> bool:
            try:
                return (await fetch(f"{metrics_url}/readyz"))[0] == 200
            except aiohttp.ClientError:
                return False

        deadline = asyncio.get_running_loop().time() + 30
        while not await ready():
            assert process.returncode is None, "controller exited"
            assert asyncio.get_running_loop().time() < deadline, "never ready"
            await asyncio.sleep(0.1)

        await kube.create(SERVICES, service("web"))
        await until(lambda: ips_of(fake_api, "web") == ["192.0.2.0"], 20, "IP assigned")

        status, text = await fetch(f"{metrics_url}/metrics")
        assert status == 200
        assert "teapot_lb_controller_leader 1.0" in text
        assert "teapot_lb_controller_assignments_total 1.0" in text
        assert (await fetch(f"{metrics_url}/healthz"))[0] == 200

        context = ssl.create_default_context(cafile=str(cert))
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"https://127.0.0.1:{webhook_port}/validate",
                json=admission(pool("green", "192.0.2.8/29")),
                ssl=context,
            ) as resp,
        ):
            answer = await resp.json()
        assert answer["response"]["allowed"] is False
        assert "overlaps AddressPool 'blue'" in answer["response"]["status"]["message"]

        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 15) == 0
        lease = fake_api.get("leases", "teapot-lb-controller", "kube-system")
        assert lease is not None and lease["spec"]["holderIdentity"] == ""
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
