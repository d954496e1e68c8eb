"""What a router does with our routes when only the `teapot-lb run` process dies.

SIGKILL leaves the node and its link up: the kernel closes the dead process's TCP
connection (FIN), so BIRD ends the session at once. Without graceful restart it drops
our routes right away, long before the 90 s hold time; with graceful restart it keeps
them as stale until we come back (or its restart timer runs out).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.peers import Bird, Neighbor
from teapot_lb.netlab import Topology

from .restart_lab import LB_IP, NODE_ASN, NODE_IP, ROUTER_ASN, ROUTER_IP, NodeLab

PREFIX = f"{LB_IP}/32"
HOLD = 90


@pytest.fixture(params=[False, True], ids=["no-graceful-restart", "graceful-restart"])
def lab(request: pytest.FixtureRequest, topology: Topology, tmp_path: Path) -> Iterator[
    tuple[NodeLab, Bird]
]:  # fmt: skip
    require_root()
    require_binary("bird", "birdc")
    gr = bool(request.param)
    node_lab = NodeLab(topology, tmp_path, graceful_restart=gr)
    bird = Bird(
        node_lab.router,
        tmp_path / "bird",
        asn=ROUTER_ASN,
        router_id=ROUTER_IP,
        neighbors=[Neighbor(NODE_IP, NODE_ASN, hold_time=HOLD, passive=True, graceful_restart=gr)],
    )
    bird.start()
    try:
        yield node_lab, bird
    finally:
        bird.stop()


def test_sigkill_ends_the_session_at_once_and_only_graceful_restart_keeps_routes(
    lab: tuple[NodeLab, Bird],
) -> None:
    node_lab, bird = lab
    gr = bird.neighbors[0].graceful_restart
    node_lab.start()
    bird.wait_established(NODE_IP)
    bird.wait_routes(lambda rib: PREFIX in rib, what=f"{PREFIX} learned")

    killed = time.monotonic()
    node_lab.stop(signal.SIGKILL)
    bird.wait_not_established(NODE_IP, timeout=HOLD / 3)
    down_s = time.monotonic() - killed
    if gr:
        # Stale but kept: still in BIRD's table after the session went down.
        assert PREFIX in bird.routes(), "graceful restart must keep the route"
        print(f"\nSIGKILL → session down after {down_s:.2f}s; route kept (graceful restart)")
    else:
        bird.wait_routes(lambda rib: PREFIX not in rib, timeout=HOLD / 3, what="route dropped")
        gone_s = time.monotonic() - killed
        print(f"\nSIGKILL → session down after {down_s:.2f}s, route gone after {gone_s:.2f}s")
    # Either way: far sooner than the 90 s hold time (a third of it is a generous bound).
    assert down_s < HOLD / 3
