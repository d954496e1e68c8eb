from collections.abc import AsyncIterator

import pytest_asyncio

from fakeapi.fixtures import fake_api, fake_api_options
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.lab.fakeapi import FakeApiServer

__all__ = ["fake_api", "fake_api_options", "kube"]


@pytest_asyncio.fixture
async def kube(fake_api: FakeApiServer) -> AsyncIterator[KubeClient]:
    """Our client, connected to the fake API server through its kubeconfig."""
    client = await connect(fake_api.kubeconfig_path, request_timeout_s=5.0)
    try:
        yield client
    finally:
        await client.close()
