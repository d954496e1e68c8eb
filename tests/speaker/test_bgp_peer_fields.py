"""BGPPeer timers and families as the node's BGP speaker runs them."""

from __future__ import annotations

from typing import Any

from model.builders import parse
from teapot_lb.bfd.session import Parameters as BfdParameters
from teapot_lb.bgp import PeerConfig
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST
from teapot_lb.speaker.bgp_backend import peer_setup, peer_setups

from .builders import node, ours, store_of


def config_of(**spec: Any) -> PeerConfig:
    peer = parse(
        ours("BGPPeer", "r", {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1", **spec})
    )
    setup = peer_setup(peer, {})
    assert setup.error is None and setup.config is not None
    return setup.config


def test_keepalive_time_is_passed_to_the_session() -> None:
    assert config_of(holdTime="90s", keepaliveTime="10s").keepalive_time == 10.0


def test_unset_keepalive_time_leaves_it_to_the_negotiated_hold_time() -> None:
    assert config_of(holdTime="90s").keepalive_time is None


def test_connect_time_is_a_fixed_retry_interval() -> None:
    c = config_of(connectTime="30s")
    assert (c.connect_retry, c.connect_retry_max) == (30.0, 30.0)
    short = config_of(connectTime="1s")
    assert (short.connect_retry, short.connect_retry_max) == (1.0, 1.0)


def test_unset_connect_time_backs_off_from_two_to_sixty_seconds() -> None:
    c = config_of()
    assert (c.connect_retry, c.connect_retry_max) == (2.0, 60.0)


def test_empty_families_offer_both_ipv4_and_ipv6_unicast() -> None:
    assert config_of().families == frozenset({IPV4_UNICAST, IPV6_UNICAST})
    assert config_of(families=["ipv6-unicast"]).families == frozenset({IPV6_UNICAST})


def peer_with_bfd(profile: str) -> dict[str, Any]:
    spec = {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1", "bfdProfile": profile}
    return ours("BGPPeer", "r", spec)


def test_a_bfd_profile_becomes_the_sessions_bfd_parameters() -> None:
    fast = ours("BFDProfile", "fast", {"transmitInterval": 100, "receiveInterval": 150})
    view = store_of(node("n1", "192.0.2.11"), fast, peer_with_bfd("fast")).view()
    setup = peer_setups(view, "n1")["r"]
    assert setup.config is not None and setup.warning is None
    assert setup.config.bfd == BfdParameters(
        desired_min_tx=100_000, required_min_rx=150_000, detect_mult=3
    )


def test_a_peer_without_a_profile_runs_no_bfd() -> None:
    assert config_of().bfd is None


def test_a_deleted_bfd_profile_keeps_the_session_without_bfd_and_says_so() -> None:
    view = store_of(node("n1", "192.0.2.11"), peer_with_bfd("gone")).view()
    setup = peer_setups(view, "n1")["r"]
    assert setup.error is None and setup.config is not None and setup.config.bfd is None
    assert setup.warning is not None
    assert "running without BFD" in setup.warning and "gone" in setup.warning
