"""BGP with BFD (RFC 5882 §3.2) against BIRD: a dead path ends the session in BFD time.

Both sides run BFD at 100 ms x 3 on the session; the hold time is 9 s. Cutting our
node's cable at the switch must take both BGP sessions down well inside the hold time.
"""

from __future__ import annotations

import time

import pytest

from .conftest import PairFactory
from .peers import Origination, wait_for
from .peers.bird import Bird

pytestmark = [pytest.mark.root, pytest.mark.daemon]

ROUTE = Origination("203.0.113.10/32")


@pytest.mark.parametrize("transport", [4, 6], ids=["v4", "v6"])
def test_a_cut_path_ends_both_bgp_sessions_within_the_bfd_detection_time(
    bgp_pair: PairFactory, transport: int
) -> None:
    pair = bgp_pair("bird", transport=transport, hold_time=9, bfd=True, our_originate=[ROUTE])
    bird = pair.peer
    assert isinstance(bird, Bird)
    bird.wait_routes(lambda r: ROUTE.prefix in r, what="our route")
    wait_for(lambda: " Up " in bird.ctl.command("show bfd sessions"), timeout=10,
             what="BIRD's BFD session Up")  # fmt: skip
    cut = time.monotonic()
    pair.lab.cut("node")
    bird.wait_not_established(pair.our_addr, timeout=5)
    theirs = time.monotonic() - cut
    pair.ours.wait_not_established(pair.peer_addr, timeout=5)
    ours = time.monotonic() - cut
    print(f"v{transport}: cable cut -> BIRD's BGP down in {theirs:.2f} s, ours in {ours:.2f} s"
          " (hold time 9 s, BFD detection 0.3 s)")  # fmt: skip
    assert theirs < 3 and ours < 3
    assert ROUTE.prefix not in bird.routes()  # the router dropped our next hop
    assert any(
        pair.peer_addr in line and "BFD down" in line for line in pair.ours.log_text().splitlines()
    ), pair.ours.log_tail()
    pair.lab.cut("node", down=False)
    pair.wait_up(timeout=60)
    bird.wait_routes(lambda r: ROUTE.prefix in r, what="our route after the path is back")
