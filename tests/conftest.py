"""Shared fixtures: skips with reasons for root and daemons, namespace topologies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from needs import require_binary, require_root
from teapot_lb.netlab import Topology

__all__ = ["require_binary", "require_root", "topology"]


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
