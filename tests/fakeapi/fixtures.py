"""The ``fake_api`` pytest fixture: a fake API server on the test's event loop.

Import it into a conftest (``from fakeapi.fixtures import fake_api``). The yielded
:class:`~fakeapi.server.FakeApiServer` has ``.url``, ``.kubeconfig_path``, ``.faults``,
``.configuration()`` (a ``kubernetes_asyncio`` Configuration), and helpers that read and
write objects without HTTP (``seed``, ``get``, ``list``, ``put``, ``delete``, ``remove``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from .server import FakeApiServer


@pytest_asyncio.fixture
async def fake_api(tmp_path: Path) -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer(history_size=1000, bookmark_interval=0.5)
    await server.start()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    try:
        yield server
    finally:
        await server.stop()
