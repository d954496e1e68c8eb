"""Configured KEEPALIVE and ConnectRetry intervals (RFC 4271 §8, §10)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from ipaddress import IPv4Address

from teapot_lb.bgp.fsm import (
    Action,
    ArmTimer,
    Connect,
    Send,
    Session,
    SessionConfig,
    State,
    Timer,
    keepalive_interval,
)
from teapot_lb.bgp.speaker import PeerConfig, Speaker
from teapot_lb.bgp.wire import IPV4_UNICAST, Keepalive, Multiprotocol, Open

PEER_ID = IPv4Address("192.0.2.1")


def session(**kw: object) -> Session:
    base: dict[str, object] = {
        "local_as": 65001,
        "peer_as": 65000,
        "router_id": IPv4Address("192.0.2.10"),
    }
    base.update(kw)
    return Session(SessionConfig(**base))  # type: ignore[arg-type]


def open_from_peer(hold: int) -> bytes:
    return Open.build(65000, hold, PEER_ID, (Multiprotocol(IPV4_UNICAST),)).pack()


def armed(actions: list[Action], timer: Timer) -> list[float]:
    return [a.seconds for a in actions if isinstance(a, ArmTimer) and a.timer == timer]


def to_open_confirm(s: Session, peer_hold: int) -> list[Action]:
    s.start()
    s.connection_made()
    actions = s.data_received(open_from_peer(peer_hold))
    assert s.state == State.OPEN_CONFIRM
    return actions


def test_configured_keepalive_time_arms_the_keepalive_timer() -> None:
    s = session(hold_time=90, keepalive_time=10.0)
    actions = to_open_confirm(s, peer_hold=90)
    assert armed(actions, Timer.KEEPALIVE) == [10.0]
    assert s.negotiated is not None and not s.negotiated.keepalive_clamped
    s.data_received(Keepalive().pack())
    assert s.state == State.ESTABLISHED
    again = s.timer_expired(Timer.KEEPALIVE)
    assert any(isinstance(a, Send) for a in again)
    assert armed(again, Timer.KEEPALIVE) == [10.0]


def test_keepalive_time_longer_than_a_third_of_the_negotiated_hold_is_clamped() -> None:
    # We propose 90 s, the peer 30 s: negotiated 30 s, so 20 s is too long; 10 s it is.
    s = session(hold_time=90, keepalive_time=20.0)
    actions = to_open_confirm(s, peer_hold=30)
    assert armed(actions, Timer.HOLD) == [30]
    assert armed(actions, Timer.KEEPALIVE) == [10.0]
    assert s.negotiated is not None
    assert s.negotiated.keepalive_time == 10.0 and s.negotiated.keepalive_clamped


def test_unset_keepalive_time_is_a_third_of_the_negotiated_hold() -> None:
    s = session(hold_time=90)
    actions = to_open_confirm(s, peer_hold=60)
    assert armed(actions, Timer.KEEPALIVE) == [20.0]
    assert s.negotiated is not None and not s.negotiated.keepalive_clamped


def test_zero_hold_time_sends_no_keepalives_whatever_is_configured() -> None:
    s = session(hold_time=90, keepalive_time=5.0)
    actions = to_open_confirm(s, peer_hold=0)
    assert armed(actions, Timer.KEEPALIVE) == []
    assert keepalive_interval(5.0, 0) == (0.0, False)


def retry_intervals(s: Session, attempts: int) -> list[float]:
    """The ConnectRetry intervals of `attempts` consecutive failed connection attempts."""
    out: list[float] = []
    actions = s.start()
    assert any(isinstance(a, Connect) for a in actions)
    for _ in range(attempts):
        out.extend(armed(s.connection_failed("refused"), Timer.CONNECT_RETRY))
        actions = s.timer_expired(Timer.CONNECT_RETRY)
        assert any(isinstance(a, Connect) for a in actions)
    return out


def test_equal_connect_retry_and_max_give_a_fixed_interval() -> None:
    s = session(connect_retry=7.0, connect_retry_max=7.0)
    assert retry_intervals(s, 5) == [7.0] * 5


def test_connect_retry_backs_off_up_to_its_maximum() -> None:
    s = session(connect_retry=2.0, connect_retry_max=60.0)
    assert retry_intervals(s, 7) == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


# --- through the asyncio speaker, two of ours over loopback -------------------------------


async def until(cond: Callable[[], object], what: str, within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def pair(
    a_config: Callable[[int], PeerConfig], *, restarting: bool = False
) -> AsyncIterator[tuple[Speaker, Speaker]]:
    """Speaker b (AS 65002, passive, hold 9 s) and a (AS 65001, active, `a_config(port)`)."""
    b = Speaker(local_as=65002, router_id="192.0.2.2", listen_address="127.0.0.1", listen_port=0)
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None, restarting=restarting)
    try:
        await b.start()
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, hold_time=9))
        await a.start()
        a.add_peer(a_config(b.listen_port or 0))
        yield a, b
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_speaker_clamps_a_too_long_keepalive_and_logs_it_once(
    no_internal_errors: list[dict[str, object]],
) -> None:
    def config(port: int) -> PeerConfig:
        return PeerConfig(
            "127.0.0.1", 65002, port=port, hold_time=90, keepalive_time=20.0, connect_retry=0.2
        )

    async with pair(config) as (a, b):
        peer = a.peer("127.0.0.1")
        await peer.wait_established(15)
        neg = peer.negotiated
        assert neg is not None and neg.hold_time == 9 and neg.keepalive_time == 3.0
        # A second session (b drops and re-adds the peer) is clamped again, not logged again.
        await b.remove_peer("127.0.0.1")
        await until(lambda: not peer.established, "a to see the session end")
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, hold_time=9))
        await until(lambda: peer.counters.established == 2, "the second session")
        assert peer.negotiated is not None and peer.negotiated.keepalive_time == 3.0
        warnings = [e for e in no_internal_errors if "keepalive time" in str(e.get("event"))]
        assert len(warnings) == 1 and "every 3s" in str(warnings[0]["event"])


async def test_r_bit_is_set_on_the_first_session_after_a_restart_only() -> None:
    def config(port: int) -> PeerConfig:
        return PeerConfig("127.0.0.1", 65002, port=port, connect_retry=0.2, connect_retry_max=0.2)

    async with pair(config, restarting=True) as (_a, b):
        first = b.peer("127.0.0.1")
        await first.wait_established(15)
        assert first.negotiated is not None
        gr = first.negotiated.peer_graceful_restart
        assert gr is not None and gr.restarting
        # The session flaps (b drops and re-adds the peer): the next OPEN is a plain one.
        await b.remove_peer("127.0.0.1")
        again = b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, hold_time=9))
        await again.wait_established(15)
        assert again.negotiated is not None
        gr = again.negotiated.peer_graceful_restart
        assert gr is not None and not gr.restarting
