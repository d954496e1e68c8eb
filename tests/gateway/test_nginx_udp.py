"""UDP through nginx's stream module: rendered, checked, reloaded on change, restarted
when killed, with a UDP echo backend in a namespace."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from teapot_lb.gateway import nginx
from teapot_lb.gateway.config import BackendRef, GatewayConfig, Protocol, StreamRoute
from teapot_lb.gateway.nginx import Nginx
from teapot_lb.lab.gateway_lab import GATEWAY, GatewayLab, gateway_lab
from teapot_lb.lab.wait import wait_for_async

from .builders import backend, listener

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]


def _config(*endpoints: tuple[str, int]) -> GatewayConfig:
    return GatewayConfig(
        listeners=(listener("dns", 5353, Protocol.UDP),),
        backends=(backend("udpecho", *endpoints),),
        udp_routes=(StreamRoute(listeners=("dns",), backends=(BackendRef(backend="udpecho"),)),),
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("nginx")
    if not Path(nginx.STREAM_MODULE).exists():
        pytest.skip("nginx's stream module is not installed (scripts/setup.sh installs it)")
    with gateway_lab(tmp_path_factory.mktemp("udp"), "udp") as lab:
        lab.start_backends("udp:one:198.51.100.2:5300", "udp:two:198.51.100.3:5300")
        yield lab


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def driver(lab: GatewayLab) -> AsyncIterator[Nginx]:
    n = Nginx(lab.work / "nginx", wrap=lab.gateway.exec_argv([]))
    yield n
    await n.stop()


async def _answers(lab: GatewayLab, name: str) -> None:
    await wait_for_async(
        lambda: lab.tcp_exchange(GATEWAY, 5353, "ping", udp=True) == f"{name} ping",
        within=10,
        what=f"a UDP answer from {name}",
    )


async def test_a_udp_datagram_reaches_the_echo_backend_and_its_answer_comes_back(
    lab: GatewayLab, driver: Nginx
) -> None:
    assert await driver.apply(_config(("198.51.100.2", 5300))) is None
    await _answers(lab, "one")


async def test_an_endpoint_change_reloads_nginx_and_moves_the_traffic(
    lab: GatewayLab, driver: Nginx
) -> None:
    assert await driver.apply(_config(("198.51.100.2", 5300))) is None
    pid, reloads = driver.daemon.pid, driver.reloads
    assert await driver.apply(_config(("198.51.100.3", 5300))) is None
    await _answers(lab, "two")
    assert (driver.daemon.pid, driver.reloads) == (pid, reloads + 1)


async def test_a_config_nginx_refuses_keeps_the_last_one(lab: GatewayLab, driver: Nginx) -> None:
    assert await driver.apply(_config(("198.51.100.2", 5300))) is None
    bad = _config(("198.51.100.2", 5300))
    bad = bad.model_copy(
        update={"listeners": (listener("dns", 5353, Protocol.UDP, address="192.0.2.99"),)}
    )
    error = await driver.apply(bad)
    assert error is not None and "nginx refused the configuration" in error
    await _answers(lab, "one")


async def test_nginx_killed_is_restarted(lab: GatewayLab, driver: Nginx) -> None:
    assert await driver.apply(_config(("198.51.100.2", 5300))) is None
    pid = driver.daemon.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await wait_for_async(
        lambda: driver.daemon.pid not in (None, pid), within=10, what="nginx restarted"
    )
    await _answers(lab, "one")
