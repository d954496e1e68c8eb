"""The webhook over HTTPS: answers reviews, reloads its certificate when the files change."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path
from typing import Any

import aiohttp

from model.builders import objects, pool
from teapot_lb.webhook import ReloadingCertificate, WebhookServer

from .certs import make_certificate
from .test_review import admission


async def peer_certificate(port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        assert der is not None
        return bytes(der)
    finally:
        writer.close()


async def post(port: int, cafile: Path, body: Any) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(cafile))
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"https://127.0.0.1:{port}/validate", json=body, ssl=context) as resp,
    ):
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()


async def test_the_webhook_denies_an_overlapping_pool_over_tls(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    existing = objects(pool("blue", "192.0.2.0/28"))
    server = WebhookServer(lambda: existing, certificate=ReloadingCertificate(cert, key))
    port = await server.start("127.0.0.1", 0)
    try:
        status, answer = await post(port, cert, admission(pool("green", "192.0.2.8/29")))
        assert status == 200 and answer["response"]["allowed"] is False
        assert "overlaps AddressPool 'blue'" in answer["response"]["status"]["message"]
        status, _ = await post(port, cert, {"kind": "nonsense"})
        assert status == 400
    finally:
        await server.stop()


async def test_the_webhook_is_unavailable_until_its_cache_is_ready(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    server = WebhookServer(
        list, certificate=ReloadingCertificate(cert, key), ready=lambda: ["cache not synced"]
    )
    port = await server.start("127.0.0.1", 0)
    try:
        status, text = await post(port, cert, admission(pool("blue", "192.0.2.0/28")))
        assert status == 503 and "cache not synced" in text
    finally:
        await server.stop()


async def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    first = make_certificate(tmp_path / "first")
    second = make_certificate(tmp_path / "second")
    cert, key = live / "tls.crt", live / "tls.key"
    shutil.copy(first[0], cert)
    shutil.copy(first[1], key)
    server = WebhookServer(
        list, certificate=ReloadingCertificate(cert, key), reload_interval_s=0.05
    )
    port = await server.start("127.0.0.1", 0)
    try:
        original = await peer_certificate(port)
        assert original == ssl.PEM_cert_to_DER_cert(first[0].read_text())
        shutil.copy(second[1], key)
        shutil.copy(second[0], cert)
        renewed = ssl.PEM_cert_to_DER_cert(second[0].read_text())
        deadline = asyncio.get_running_loop().time() + 10
        while await peer_certificate(port) != renewed:  # poll new connections, with a deadline
            assert asyncio.get_running_loop().time() < deadline, "certificate not reloaded"
            await asyncio.sleep(0.05)
        assert server.certificate is not None and server.certificate.loads >= 2
    finally:
        await server.stop()
