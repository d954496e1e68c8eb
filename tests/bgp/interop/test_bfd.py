"""BGP with BFD (RFC 5882 §3.2) against BIRD and FRR: a dead path ends the session in BFD time.

Both sides run BFD at 100 ms x 3 on the session; the hold time is 9 s. Cutting our
node's cable at the switch must take both BGP sessions down well inside the hold time.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from .conftest import PairFactory
from .peers import BgpDaemon, Origination, wait_for
from .peers.bird import Bird
from .peers.frr import Frr

pytestmark = [pytest.mark.root, pytest.mark.daemon]

ROUTE = Origination("203.0.113.10/32")


def bfd_up(peer: BgpDaemon, our_addr: str) -> bool:
    if isinstance(peer, Bird):
        return " Up " in peer.ctl.command("show bfd sessions")
    assert isinstance(peer, Frr)
    out = subprocess.run(
        ["vtysh", "--vty_socket", str(peer.workdir), "-d", "bfdd", "-c", "show bfd peers json"],
        capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip
    peers = json.loads(out or "[]")
    return any(p.get("peer") == our_addr and p.get("status") == "up" for p in peers)


@pytest.mark.parametrize("daemon", ["bird", "frr"])
@pytest.mark.parametrize("transport", [4, 6], ids=["v4", "v6"])
def test_a_cut_path_ends_both_bgp_sessions_within_the_bfd_detection_time(
    bgp_pair: PairFactory, daemon: str, transport: int
) -> None:
    pair = bgp_pair(daemon, transport=transport, hold_time=9, bfd=True, our_originate=[ROUTE])
    peer = pair.peer
    peer.wait_routes(lambda r: ROUTE.prefix in r, what="our route")
    wait_for(lambda: bfd_up(peer, pair.our_addr), timeout=10, what=f"{daemon}'s BFD session Up",
             detail=peer.log_tail)  # fmt: skip
    cut = time.monotonic()
    pair.lab.cut("node")
    peer.wait_not_established(pair.our_addr, timeout=5)
    theirs = time.monotonic() - cut
    pair.ours.wait_not_established(pair.peer_addr, timeout=5)
    ours = time.monotonic() - cut
    print(f"{daemon} v{transport}: cable cut -> its BGP down in {theirs:.2f} s,"
          f" ours in {ours:.2f} s (hold time 9 s, BFD detection 0.3 s)")  # fmt: skip
    assert theirs < 3 and ours < 3
    # The router drops our next hop (FRR's RIB may take a moment after the session).
    peer.wait_routes(lambda r: ROUTE.prefix not in r, timeout=3, what="our route gone")
    assert any(
        pair.peer_addr in line and "BFD down" in line for line in pair.ours.log_text().splitlines()
    ), pair.ours.log_tail()
    pair.lab.cut("node", down=False)
    pair.wait_up(timeout=60)
    peer.wait_routes(lambda r: ROUTE.prefix in r, what="our route after the path is back")
