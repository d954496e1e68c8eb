"""The L2 backend's bookkeeping with fake responders and a fake clock (no AF_PACKET)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from ipaddress import IPv4Address, ip_address, ip_network
from typing import Any

import pytest_asyncio

from teapot_lb.announce.fleet import ElectionOrders
from teapot_lb.l2.announcer import Claim
from teapot_lb.l2.claims import ClaimTiming
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.membership.core import Member, MemberState, Timing
from teapot_lb.speaker.interfaces import InterfaceInfo
from teapot_lb.speaker.l2_backend import L2Backend

ETH0 = InterfaceInfo("eth0", 2, b"\x02\x00\x00\x00\x00\x01", None, (ip_network("192.0.2.0/24"),))
OTHER_MAC = b"\x02\x00\x00\x00\x00\x99"
IP = "192.0.2.200"


class FakeResponder:
    def __init__(self, info: InterfaceInfo, *, on_claim: Callable[[Any, Claim], None]) -> None:
        self.info = info
        self.on_claim = on_claim
        self.owned: set[Any] = set()
        self.watched: Any = frozenset()
        self.log: list[tuple[str, str]] = []
        self.counters = type("C", (), {})()

    def start(self) -> None:
        pass

    def close(self) -> None:
        self.log.append(("close", ""))

    def watch(self, ips: Any) -> None:
        self.watched = ips

    def acquire(self, ip: Any) -> None:
        self.owned.add(ip)
        self.log.append(("acquire", str(ip)))

    def release(self, ip: Any) -> None:
        self.owned.discard(ip)
        self.log.append(("release", str(ip)))

    def defend(self, ip: Any, *, until: float, every: float) -> None:
        self.log.append(("defend", str(ip)))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def interfaces() -> dict[str, InterfaceInfo]:
    return {"eth0": ETH0}


@pytest_asyncio.fixture
async def backend() -> AsyncIterator[tuple[L2Backend, Clock, list[int]]]:
    clock = Clock()
    changes: list[int] = []
    b = L2Backend(
        "n1",
        on_change=lambda: changes.append(1),
        timing=Timing(interval=0.01, dead_after=3),
        port=0,  # ephemeral; no peers: nothing is sent
        list_interfaces=interfaces,
        responder=FakeResponder,
        clock=clock,
    )
    b.set_peers([])
    yield b, clock, changes
    b.shutdown()


def eth0(b: L2Backend) -> FakeResponder:
    r = b.responders["eth0"]
    assert isinstance(r, FakeResponder)
    return r


async def test_nothing_is_claimed_before_one_detection_interval(backend: Any) -> None:
    b, clock, _ = backend
    await b.apply({IP: ()})
    assert b.owned == {} and "eth0" not in b.responders
    clock.now += 0.031
    await b.apply({IP: ()})
    assert b.owned == {ip_address(IP): ("eth0",)}
    assert eth0(b).log == [("acquire", IP)]


async def test_only_the_difference_is_acquired_and_released(backend: Any) -> None:
    b, clock, _ = backend
    clock.now += 1
    await b.apply({IP: (), "192.0.2.201": ()})
    await b.apply({IP: (), "192.0.2.201": ()})
    await b.apply({"192.0.2.201": (), "192.0.2.202": ()})
    assert eth0(b).log == [
        ("acquire", IP),
        ("acquire", "192.0.2.201"),
        ("release", IP),
        ("acquire", "192.0.2.202"),
    ]


async def test_an_ip_in_no_interface_subnet_is_an_error(backend: Any) -> None:
    b, clock, _ = backend
    clock.now += 1
    await b.apply({"203.0.113.5": (), IP: ("eth9",)})
    assert b.errors == {
        "203.0.113.5": "no interface's subnet contains the IP",
        IP: "interface(s) eth9 not on this node",
    }
    assert b.owned == {}


def _claim(b: L2Backend, mac: bytes) -> None:
    r = eth0(b)
    r.on_claim(r, Claim(IPv4Address(IP), mac))


async def test_a_better_ranked_claimant_makes_us_yield_and_stay_silent(backend: Any) -> None:
    b, clock, changes = backend
    b.arbiter.timing = ClaimTiming(hold=0.2)
    clock.now += 1
    better = "n2"
    orders = {IP: (better, "n1")}  # the claimant ranks first among the allowed nodes
    await b.apply({IP: ()}, orders)
    b.membership.members.clear()
    b.membership.members[better] = Member(better, 1, 1, clock.now, (OTHER_MAC,), MemberState.DEAD)
    _claim(b, OTHER_MAC)
    assert ("release", IP) in eth0(b).log and changes
    await b.apply({IP: ()}, orders)  # the plan still says us (the claimant looks dead)
    assert b.owned == {}
    assert "yielded" in b.errors[IP]
    # The winner stays silent: when the hold runs out the backend asks for a new plan,
    # and the IP is ours again.
    replans = len(changes)
    silent = ip_address(IP)
    await wait_for_async(lambda: not b.arbiter.silenced(silent), within=5.0, what="silence over")
    assert len(changes) > replans
    await b.apply({IP: ()}, orders)
    assert b.owned == {ip_address(IP): ("eth0",)}


async def test_a_worse_ranked_claimant_is_defended_against(backend: Any) -> None:
    b, clock, _ = backend
    clock.now += 1
    b.membership.members["n2"] = Member("n2", 1, 1, clock.now, (OTHER_MAC,), MemberState.DEAD)
    await b.apply({IP: ()}, {IP: ("n1", "n2")})
    _claim(b, OTHER_MAC)
    assert eth0(b).log[-1] == ("defend", IP)
    assert b.owned == {ip_address(IP): ("eth0",)}


async def test_a_node_no_longer_allowed_to_own_the_ip_never_wins(backend: Any) -> None:
    """Config race: in our view n2 may not own the IP (not in the order), so its claim is
    ranked after every allowed node and we defend, whatever the hash order says."""
    b, clock, _ = backend
    clock.now += 1
    b.membership.members["n2"] = Member("n2", 1, 1, clock.now, (OTHER_MAC,), MemberState.ALIVE)
    await b.apply({IP: ()}, {IP: ("n1",)})
    _claim(b, OTHER_MAC)
    assert eth0(b).log[-1] == ("defend", IP)


async def test_shutdown_releases_everything(backend: Any) -> None:
    b, clock, _ = backend
    clock.now += 1
    await b.apply({IP: ()})
    r = eth0(b)
    b.shutdown()
    assert ("release", IP) in r.log and ("close", "") in r.log
    assert b.owned == {}


async def test_the_ips_watched_follow_the_cluster_s_l2_ips(backend: Any) -> None:
    """Claims are reported for the IPs the interface answers for and for every other L2 IP
    of the cluster (split brain), read from the latest orders at each claim (never a copy
    made per step): a new answer's IPs replace the old ones."""
    b, clock, _ = backend
    clock.now += 1
    await b.apply({IP: ()}, ElectionOrders({IP: ["n1"], "192.0.2.77": ["n2"]}))
    watched = eth0(b).watched
    assert ip_address(IP) in watched and ip_address("192.0.2.77") in watched
    assert ip_address("192.0.2.78") not in watched  # no L2 IP of the cluster
    await b.apply({IP: ()}, ElectionOrders({IP: ["n1"], "192.0.2.78": ["n3"]}))
    assert ip_address("192.0.2.78") in watched and ip_address("192.0.2.77") not in watched
    await b.apply({}, ElectionOrders({IP: ["n2"], "192.0.2.78": ["n3"]}))
    assert ip_address(IP) in watched  # released: still heard (the winner, or its absence)
    await b.apply({}, {})
    assert ip_address(IP) not in watched and ip_address("192.0.2.78") not in watched
