"""Configured KEEPALIVE and ConnectRetry intervals (RFC 4271 §8, §10)."""

from __future__ import annotations

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
