from collections.abc import AsyncIterator

import pytest_asyncio

from fakeapi import fixtures as _fake_api_fixtures
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.lab.fakeapi import FakeApiServer

fake_api = _fake_api_fixtures.fake_api
# Newer versions of the fixture take their settings from a `fake_api_options` fixture.
if hasattr(_fake_api_fixtures, "fake_api_options"):
    fake_api_options = _fake_api_fixtures.fake_api_options

__all__ = ["fake_api", "kube"]


@pytest_asyncio.fixture
async def kube(fake_api: FakeApiServer) -> AsyncIterator[KubeClient]:
    """Our client, connected to the fake API server through its kubeconfig."""
    client = await connect(fake_api.kubeconfig_path, request_timeout_s=5.0)
    try:
        yield client
    finally:
        await client.close()
