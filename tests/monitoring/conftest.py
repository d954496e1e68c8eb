"""The fake API server, for the controller's metrics at their source."""

from __future__ import annotations

from fakeapi.fixtures import fake_api, fake_api_options

__all__ = ["fake_api", "fake_api_options"]
