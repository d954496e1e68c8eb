"""The fake API server for the cluster half of `teapot-lb status`."""

from __future__ import annotations

from fakeapi.fixtures import fake_api, fake_api_options

__all__ = ["fake_api", "fake_api_options"]
