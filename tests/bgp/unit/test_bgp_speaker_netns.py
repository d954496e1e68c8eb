"""Two of our speakers in two network namespaces: TCP MD5 on a real link (root only).

Each speaker runs its own event loop in a thread that entered its namespace (setns is
per thread), so the sockets it opens live in that namespace.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from ipaddress import IPv4Network
from typing import TypeVar

from teapot_lb.bgp.fsm import State
from teapot_lb.bgp.speaker import PeerConfig, Speaker
from teapot_lb.lab.netns import enter_netns
from teapot_lb.netlab import Topology

T = TypeVar("T")
V4 = IPv4Network("203.0.113.9/32")


def in_netns(pool: ThreadPoolExecutor, ns: str, main: Callable[[], Awaitable[T]]) -> Future[T]:
    def run() -> T:
        enter_netns(ns)
        return asyncio.run(main())  # type: ignore[arg-type]

    return pool.submit(run)


def pair(topology: Topology) -> tuple[str, str]:
    a = topology.add_host("a")
    b = topology.add_host("b")
    topology.link_pair(
        a, b, a_if="e0", b_if="e0", a_addrs=["192.0.2.1/24"], b_addrs=["192.0.2.2/24"]
    )
    return a.ns, b.ns


async def deadline_loop(cond: Callable[[], bool], within: float, stop: threading.Event) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while not cond() and not stop.is_set():
        if loop.time() > end:
            return False
        await asyncio.sleep(0.02)
    return cond()


def run_pair(topology: Topology, key_a: str, key_b: str) -> tuple[bool, int, int]:
    """(route arrived at b, a's connect attempts, bytes b received from a)."""
    ns_a, ns_b = pair(topology)
    stop = threading.Event()
    counters: dict[str, int] = {}

    async def speaker_a() -> None:
        s = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
        peer = s.add_peer(
            PeerConfig("192.0.2.2", 65002, password=key_a, connect_retry=0.3, connect_retry_max=0.3)
        )
        s.set_routes({V4: None})
        await s.start()
        await deadline_loop(
            lambda: peer.counters.connect_attempts >= 4 and not peer.established, 30, stop
        )
        counters["attempts"] = peer.counters.connect_attempts
        await deadline_loop(lambda: False, 30, stop)
        await s.shutdown()

    async def speaker_b() -> bool:
        s = Speaker(local_as=65002, router_id="192.0.2.2", listen_address="192.0.2.2")
        peer = s.add_peer(PeerConfig("192.0.2.1", 65001, passive=True, password=key_b))
        await s.start()
        if key_a == key_b:
            got = await deadline_loop(lambda: V4 in peer.rib_in.routes, 30, threading.Event())
        else:
            await deadline_loop(lambda: "attempts" in counters, 30, threading.Event())
            got = V4 in peer.rib_in.routes or peer.state == State.ESTABLISHED
        counters["bytes"] = peer.counters.bytes_received
        stop.set()
        await s.shutdown()
        return got

    with ThreadPoolExecutor(2) as pool:
        fb = in_netns(pool, ns_b, speaker_b)
        fa = in_netns(pool, ns_a, speaker_a)
        got = fb.result(timeout=90)
        fa.result(timeout=90)
    return got, counters.get("attempts", 0), counters["bytes"]


def test_matching_md5_keys_carry_routes_across_namespaces(topology: Topology) -> None:
    got, _, received = run_pair(topology, "same-key", "same-key")
    assert got and received > 0


def test_mismatched_md5_keys_never_reach_the_peer(topology: Topology) -> None:
    got, attempts, received = run_pair(topology, "key-one", "key-two")
    assert not got
    assert attempts >= 4  # a kept trying: b's kernel drops SYNs with a wrong MD5 signature
    assert received == 0
