"""A BFDProfile edited, named or dropped reaches the running BFD session; BGP is not reset.

The BGP backend sees a BGPPeer whose settings differ only in BFD and hands the new
parameters to the speaker (:meth:`teapot_lb.bgp.Speaker.set_bfd`), which changes them
through a poll sequence (interop with BIRD: tests/bgp/interop/test_bfd.py).
"""

from __future__ import annotations

from typing import Any

from speaker.builders import FakeFactory, bgp_setup, lb_service, ours, put, store_of
from teapot_lb.bfd.session import Parameters
from teapot_lb.cluster import Kind
from teapot_lb.model.bfd import BFDProfile
from teapot_lb.speaker.bgp_backend import BGPBackend, bfd_session
from teapot_lb.speaker.node import NodeSpeaker

ROUTER = "192.0.2.1"


def profile(name: str = "fast", **spec: Any) -> dict[str, Any]:
    return ours("BFDProfile", name, {"transmitInterval": 100, "receiveInterval": 100, **spec})


async def running(*docs: dict[str, Any], **peer: Any) -> tuple[Any, BGPBackend, Any]:
    factory = FakeFactory()
    store = store_of(*bgp_setup(**peer), *docs, lb_service("web", "203.0.113.10"))
    backend = BGPBackend(factory)
    speaker = NodeSpeaker("n1", store, bgp=backend)
    await speaker.step()
    bgp = factory.made[0]
    bgp.calls.clear()
    return store, backend, (speaker, bgp)


async def test_editing_the_profile_changes_bfd_without_resetting_the_session() -> None:
    store, backend, (speaker, bgp) = await running(profile(), bfdProfile="fast")
    assert bgp.peers[ROUTER].config.bfd == Parameters(100_000, 100_000, 3)
    put(store, profile(transmitInterval=300, detectMultiplier=5))
    await speaker.step()
    assert bgp.calls == [("bfd", ROUTER)]
    assert bgp.bfd[ROUTER] == Parameters(300_000, 100_000, 5)
    assert backend.session_resets == 0 and backend.bfd_changes == 1
    await speaker.step()  # level-triggered: nothing more to do
    assert bgp.calls == [("bfd", ROUTER)]


async def test_naming_and_dropping_a_profile_starts_and_stops_bfd_only() -> None:
    store, backend, (speaker, bgp) = await running(profile())
    assert bgp.peers[ROUTER].config.bfd is None
    peer = {"myASN": 64512, "peerASN": 64500, "peerAddress": ROUTER}
    put(store, ours("BGPPeer", "r1", {**peer, "bfdProfile": "fast"}))
    await speaker.step()
    assert bgp.calls == [("bfd", ROUTER)] and bgp.bfd[ROUTER] == Parameters(100_000, 100_000, 3)
    put(store, ours("BGPPeer", "r1", peer))
    await speaker.step()
    assert bgp.calls[-1] == ("bfd", ROUTER) and bgp.bfd[ROUTER] is None
    assert backend.session_resets == 0


async def test_a_profile_deleted_under_its_peer_stops_bfd_but_keeps_the_session() -> None:
    store, backend, (speaker, bgp) = await running(profile(), bfdProfile="fast")
    store.delete(Kind.BFD_PROFILE, "lb-system/fast")
    await speaker.step()
    assert bgp.calls == [("bfd", ROUTER)] and bgp.bfd[ROUTER] is None
    assert backend.session_resets == 0


def test_passive_mode_and_minimum_ttl_reach_the_session() -> None:
    spec = {"passiveMode": True, "minimumTtl": 250}
    prof = BFDProfile.model_validate(profile(**spec))
    multihop = bfd_session(prof.parameters(multihop=True))
    assert multihop.passive and multihop.min_ttl == 250
    single = bfd_session(prof.parameters(multihop=False))
    assert single.passive and single.min_ttl is None  # a single hop always wants 255
