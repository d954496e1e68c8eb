"""Our BFD against BIRD 2's ``protocol bfd`` (RFC 5881 single hop, IPv4 and IPv6)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from teapot_lb.lab.peers.lab import Lab
from teapot_lb.lab.wait import wait_for

from .conftest import BirdBfd, OurBfd, bird_bfd_block

pytestmark = [pytest.mark.root, pytest.mark.daemon]

# BIRD: tx 200 ms, rx 150 ms, mult 3. Ours: tx 100 ms, rx 250 ms, mult 4.
BIRD = {"tx_ms": 200, "rx_ms": 150, "mult": 3}
OURS = {"tx_ms": 100, "rx_ms": 250, "mult": 4}


def start_pair(
    lab: Lab, bird: BirdBfd, ours: list[OurBfd], tmp_path: Path, version: int,
    multihop: bool = False,
) -> tuple[str, str, OurBfd]:  # fmt: skip
    peer, node = lab.addr("peer", version), lab.addr("node", version)
    bird.configure(bird_bfd_block([(node, peer)], multihop=multihop, **BIRD), lab.v4["peer"])
    bird.start()
    spec = {"peer": peer, "local": node, "multihop": multihop, **OURS}
    driver = OurBfd(lab.hosts["node"], tmp_path / "ours", [spec])
    ours.append(driver)
    driver.wait_state(peer, "UP")
    wait_for(lambda: bird.session(node)["state"] == "Up", timeout=10, what="BIRD's session Up",
             detail=bird.log_tail)  # fmt: skip
    return peer, node, driver


@pytest.mark.parametrize(("version", "multihop"), [(4, False), (6, False), (4, True), (6, True)])
def test_session_comes_up_with_intervals_negotiated_per_rfc(
    lab: Lab, bird: BirdBfd, ours: list[OurBfd], tmp_path: Path, version: int, multihop: bool
) -> None:
    peer, node, driver = start_pair(lab, bird, ours, tmp_path, version, multihop)
    # §6.8.2: each side sends at max(its desired TX, the other's required RX).
    info = wait_for(lambda: (i := driver.info(peer)) and not i["polling"] and i, timeout=5,
                    what="our poll sequence to end")  # fmt: skip
    assert info["transmit_interval_us"] == 150_000  # max(our 100, BIRD's rx 150)
    # §6.8.4: BIRD's mult x max(our required RX, BIRD's desired TX).
    assert info["detection_time_us"] == 3 * 250_000
    theirs = wait_for(lambda: (s := bird.session(node))["interval"] == "0.250" and s,
                      timeout=5, what="BIRD's interval to settle",
                      detail=lambda: str(bird.session(node)))  # fmt: skip
    assert theirs["interval"] == "0.250"  # max(BIRD's tx 200, our rx 250)
    assert theirs["timeout"] == "0.600"  # our mult 4 x max(BIRD's rx 150, our tx 100)


@pytest.mark.parametrize("version", [4, 6])
def test_bird_stopping_is_detected_within_the_detection_time(
    lab: Lab, bird: BirdBfd, ours: list[OurBfd], tmp_path: Path, version: int
) -> None:
    peer, _, driver = start_pair(lab, bird, ours, tmp_path, version)
    killed = time.monotonic()
    bird.kill()
    down = driver.wait_state(peer, "DOWN", timeout=5)
    assert down["diagnostic"] == "CONTROL_DETECTION_TIME_EXPIRED"
    took = down["at"] - killed
    print(f"IPv{version}: BIRD killed -> our BFD Down in {took * 1000:.0f} ms (budget 750 ms)")
    assert took < 0.75 + 0.25


@pytest.mark.parametrize("version", [4, 6])
def test_we_stopping_is_detected_by_bird(
    lab: Lab, bird: BirdBfd, ours: list[OurBfd], tmp_path: Path, version: int
) -> None:
    _, node, driver = start_pair(lab, bird, ours, tmp_path, version)
    driver.kill()
    killed = time.monotonic()
    wait_for(lambda: bird.session(node)["state"] == "Down", timeout=5, what="BIRD's session Down",
             every=0.01, detail=bird.log_tail)  # fmt: skip
    print(f"IPv{version}: our BFD killed -> BIRD Down within {time.monotonic() - killed:.3f} s")


def test_parameter_changes_on_either_side_do_not_flap(
    lab: Lab, bird: BirdBfd, ours: list[OurBfd], tmp_path: Path
) -> None:
    peer, node, driver = start_pair(lab, bird, ours, tmp_path, 4)
    ups = len(driver.states(peer))
    driver.command("params", peer, tx_ms=400, rx_ms=350, mult=5)
    wait_for(lambda: bird.session(node)["interval"] == "0.350", timeout=5,
             what="BIRD to send at our new required RX",
             detail=lambda: str(bird.session(node)))  # fmt: skip
    wait_for(lambda: bird.session(node)["timeout"] == "2.000", timeout=5,
             what="BIRD's detection time from our new TX and mult",
             detail=lambda: str(bird.session(node)))  # fmt: skip
    bird.configure(bird_bfd_block([(node, peer)], tx_ms=500, rx_ms=450, mult=3), lab.v4["peer"])
    wait_for(lambda: driver.info(peer)["transmit_interval_us"] == 450_000, timeout=5,
             what="us to send at BIRD's new required RX")  # fmt: skip
    wait_for(lambda: driver.info(peer)["detection_time_us"] == 3 * 500_000, timeout=5,
             what="our detection time from BIRD's new TX")  # fmt: skip
    assert len(driver.states(peer)) == ups, driver.states(peer)  # no flap on our side
    assert bird.session(node)["state"] == "Up"


def test_a_passive_session_sends_nothing_until_the_role_changes(
    lab: Lab, bird: BirdBfd, ours: list[OurBfd], tmp_path: Path
) -> None:
    """BIRD passive too: nobody may speak first (RFC 5880 §6.1), so BIRD never hears us
    while we are passive; made active (a BFDProfile's passiveMode turned off), we send and
    the session comes Up without being re-created."""
    peer, node = lab.addr("peer", 4), lab.addr("node", 4)
    block = bird_bfd_block([(node, peer)], **BIRD).replace("multiplier", "passive on; multiplier")
    bird.configure(block, lab.v4["peer"])
    bird.start()
    driver = OurBfd(lab.hosts["node"], tmp_path / "ours",
                    [{"peer": peer, "local": node, "passive": True, **OURS}])  # fmt: skip
    ours.append(driver)
    wait_for(lambda: bird.session(node)["state"] == "Down", timeout=10,
             what="BIRD's (passive) session to exist", detail=bird.log_tail)  # fmt: skip
    assert not driver.info(peer)["sending"]
    # An active session sends its first packet at once, and BIRD would go Init: give it
    # far more than that (our slow rate is one packet a second) and see silence.
    time.sleep(1.5)
    assert bird.session(node)["state"] == "Down" and driver.state(peer) == "DOWN"
    driver.command("params", peer, passive=False, **OURS)
    driver.wait_state(peer, "UP")
    wait_for(lambda: bird.session(node)["state"] == "Up", timeout=10, what="BIRD's session Up")
    assert driver.info(peer)["sending"]
