"""Our BFD against FRR's ``bfdd`` (RFC 5881 single hop, RFC 5883 multihop; IPv4, IPv6)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary
from teapot_lb.lab.peers.lab import Lab
from teapot_lb.lab.wait import wait_for

from .conftest import FrrBfd, OurBfd

pytestmark = [pytest.mark.root, pytest.mark.daemon]

# FRR: tx 200 ms, rx 150 ms, mult 3. Ours: tx 100 ms, rx 250 ms, mult 4.
FRR = {"tx_ms": 200, "rx_ms": 150, "mult": 3}
OURS = {"tx_ms": 100, "rx_ms": 250, "mult": 4}


@pytest.fixture
def frr(lab: Lab, tmp_path: Path) -> Iterator[FrrBfd]:
    require_binary("/usr/lib/frr/zebra", "/usr/lib/frr/bfdd", "vtysh")
    daemon = FrrBfd(lab.hosts["peer"], tmp_path / "frr")
    yield daemon
    daemon.kill()


def start_pair(
    lab: Lab, frr: FrrBfd, ours: list[OurBfd], tmp_path: Path, version: int, multihop: bool
) -> tuple[str, str, OurBfd]:
    peer, node = lab.addr("peer", version), lab.addr("node", version)
    frr.configure([(node, peer)], multihop=multihop, **FRR)
    frr.start()
    spec = {"peer": peer, "local": node, "multihop": multihop, **OURS}
    driver = OurBfd(lab.hosts["node"], tmp_path / "ours", [spec])
    ours.append(driver)
    driver.wait_state(peer, "UP")
    wait_for(lambda: frr.peer(node)["status"] == "up", timeout=10, what="FRR's peer up",
             detail=frr.log_tail)  # fmt: skip
    return peer, node, driver


def settled(driver: OurBfd, peer: str) -> dict[str, Any]:
    return wait_for(lambda: (i := driver.info(peer)) and not i["polling"] and i, timeout=5,
                    what="our poll sequence to end")  # fmt: skip


CASES = [
    pytest.param(4, False, id="v4-single-hop"),
    pytest.param(6, False, id="v6-single-hop"),
    pytest.param(4, True, id="v4-multihop"),
    pytest.param(6, True, id="v6-multihop"),
]


@pytest.mark.parametrize(("version", "multihop"), CASES)
def test_session_comes_up_with_intervals_negotiated_per_rfc(
    lab: Lab, frr: FrrBfd, ours: list[OurBfd], tmp_path: Path, version: int, multihop: bool
) -> None:
    peer, node, driver = start_pair(lab, frr, ours, tmp_path, version, multihop)
    info = settled(driver, peer)
    assert info["transmit_interval_us"] == 150_000  # max(our tx 100, FRR's rx 150)
    assert info["detection_time_us"] == 3 * 250_000  # FRR's mult x max(our rx, FRR's tx)
    theirs = wait_for(lambda: (p := frr.peer(node)).get("remote-receive-interval") == 250 and p,
                      timeout=5, what="FRR to learn our intervals",
                      detail=lambda: str(frr.peer(node)))  # fmt: skip
    assert theirs["remote-transmit-interval"] == 100
    assert theirs["remote-detect-multiplier"] == 4


@pytest.mark.parametrize(("version", "multihop"), CASES)
def test_down_is_detected_on_both_sides(
    lab: Lab, frr: FrrBfd, ours: list[OurBfd], tmp_path: Path, version: int, multihop: bool
) -> None:
    peer, node, driver = start_pair(lab, frr, ours, tmp_path, version, multihop)
    driver.kill()
    killed = time.monotonic()
    wait_for(lambda: frr.peer(node)["status"] == "down", timeout=5, what="FRR's peer down",
             every=0.01, detail=lambda: str(frr.peer(node)))  # fmt: skip
    theirs = time.monotonic() - killed
    # ... and the other way round, with a fresh driver.
    again = OurBfd(lab.hosts["node"], tmp_path / "ours2",
                   [{"peer": peer, "local": node, "multihop": multihop, **OURS}])  # fmt: skip
    ours.append(again)
    again.wait_state(peer, "UP")
    killed = time.monotonic()
    frr.kill_bfdd()
    down = again.wait_state(peer, "DOWN", timeout=5)
    assert down["diagnostic"] == "CONTROL_DETECTION_TIME_EXPIRED"
    mine = down["at"] - killed
    print(f"v{version} multihop={multihop}: FRR saw us down in <= {theirs * 1000:.0f} ms "
          f"(budget 600), we saw FRR down in {mine * 1000:.0f} ms (budget 750)")  # fmt: skip
    assert mine < 0.75 + 0.25


def test_parameter_changes_on_either_side_do_not_flap(
    lab: Lab, frr: FrrBfd, ours: list[OurBfd], tmp_path: Path
) -> None:
    peer, node, driver = start_pair(lab, frr, ours, tmp_path, 4, False)
    settled(driver, peer)
    changes = len(driver.states(peer))
    driver.command("params", peer, tx_ms=400, rx_ms=350, mult=5)
    wait_for(lambda: frr.peer(node).get("remote-receive-interval") == 350, timeout=5,
             what="FRR to learn our new RX", detail=lambda: str(frr.peer(node)))  # fmt: skip
    frr.configure([(node, peer)], tx_ms=500, rx_ms=450, mult=3)
    wait_for(lambda: driver.info(peer)["transmit_interval_us"] == 450_000, timeout=5,
             what="us to send at FRR's new required RX")  # fmt: skip
    wait_for(lambda: driver.info(peer)["detection_time_us"] == 3 * 500_000, timeout=5,
             what="our detection time from FRR's new TX")  # fmt: skip
    assert len(driver.states(peer)) == changes, driver.states(peer)
    assert frr.peer(node)["status"] == "up"


def test_our_admin_down_takes_frr_down_and_admin_up_brings_it_back(
    lab: Lab, frr: FrrBfd, ours: list[OurBfd], tmp_path: Path
) -> None:
    peer, node, driver = start_pair(lab, frr, ours, tmp_path, 4, False)
    driver.command("admin_down", peer)
    driver.wait_state(peer, "ADMIN_DOWN")
    down = wait_for(lambda: (p := frr.peer(node))["status"] == "down" and p, timeout=5,
                    what="FRR's peer down", detail=lambda: str(frr.peer(node)))  # fmt: skip
    assert down["remote-diagnostic"] == "administratively down"
    driver.command("admin_up", peer)
    driver.wait_state(peer, "UP")
    wait_for(lambda: frr.peer(node)["status"] == "up", timeout=10, what="FRR's peer up again",
             detail=lambda: str(frr.peer(node)))  # fmt: skip
