"""Shared fixtures: skips with reasons for root and daemons, namespace topologies."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from teapot_lb.netlab import Topology, netns_available


def require_root() -> None:
    """Skip the calling test when network namespaces cannot be created here."""
    reason = netns_available()
    if reason:
        pytest.skip(reason)


def require_binary(*names: str) -> None:
    """Skip the calling test when one of the daemons/tools is not installed."""
    for name in names:
        if shutil.which(name) is None and shutil.which(name, path="/usr/sbin:/usr/lib/frr") is None:
            pytest.skip(f"{name} is not installed (scripts/setup.sh installs it)")


@pytest.fixture
def topology(request: pytest.FixtureRequest) -> Iterator[Topology]:
    """A fresh namespace topology, always torn down (processes killed, namespaces deleted)."""
    require_root()
    label = request.node.name.replace("test_", "")[:6].replace("[", "").replace("-", "")
    topo = Topology(label or "t")
    try:
        yield topo
    finally:
        topo.close()
