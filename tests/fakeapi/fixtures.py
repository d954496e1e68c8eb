"""The ``fake_api`` pytest fixture: a fake API server on the test's event loop.

Import it into a conftest (``from fakeapi.fixtures import fake_api, fake_api_options``).
The yielded :class:`~fakeapi.server.FakeApiServer` has ``.url``, ``.kubeconfig_path``,
``.faults``, ``.configuration()`` (a ``kubernetes_asyncio`` Configuration), and helpers
that read and write objects without HTTP (``seed``, ``get``, ``list``, ``put``,
``delete``, ``remove``).

To change the server's settings for a module or a test, override ``fake_api_options``::

    @pytest.fixture
    def fake_api_options() -> dict[str, object]:
        return {"history_size": 50_000, "bookmark_interval": 2.0}
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from teapot_lb.lab.fakeapi import FakeApiServer


@pytest.fixture
def fake_api_options() -> dict[str, Any]:
    """Keyword arguments for :class:`FakeApiServer` (override to change them)."""
    return {"history_size": 1000, "bookmark_interval": 0.5}


@pytest_asyncio.fixture
async def fake_api(
    tmp_path: Path, fake_api_options: dict[str, Any]
) -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer(**fake_api_options)
    await server.start()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    try:
        yield server
    finally:
        await server.stop()
