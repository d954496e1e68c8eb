"""The BFD session machine (RFC 5880 §6.8), told as two sessions talking."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.bfd.session import (
    SLOW_TX,
    BfdTimer,
    Discarded,
    DiscardReason,
    Order,
    Parameters,
    Session,
    StateChanged,
    Transmit,
    jittered,
)
from teapot_lb.bfd.wire import ControlPacket, Diagnostic, State
from teapot_lb.timers import ArmTimer, CancelTimer

FAST = Parameters(desired_min_tx=100_000, required_min_rx=100_000, detect_mult=3)


def a_session(discriminator: int = 1, parameters: Parameters = FAST, **kw: object) -> Session:
    return Session(discriminator, parameters, random=lambda: 1.0, **kw)  # type: ignore[arg-type]


def sent(orders: list[Order]) -> list[ControlPacket]:
    return [o.packet for o in orders if isinstance(o, Transmit)]


def changes(orders: list[Order]) -> list[tuple[State, Diagnostic]]:
    return [(o.new, o.diagnostic) for o in orders if isinstance(o, StateChanged)]


def armed(orders: list[Order], timer: BfdTimer) -> float | None:
    found = [o.seconds for o in orders if isinstance(o, ArmTimer) and o.timer is timer]
    return found[-1] if found else None


def deliver(orders: list[Order], to: Session) -> list[Order]:
    """Hand every packet in ``orders`` to ``to`` (single hop: TTL 255)."""
    out: list[Order] = []
    for packet in sent(orders):
        out += to.packet_received(packet, 255)
    return out


def exchange(a: Session, b: Session, rounds: int = 4) -> None:
    """Both send periodically, and every reply flows back, until it settles."""
    for _ in range(rounds):
        deliver(deliver(b.timer_expired(BfdTimer.TRANSMIT), a), b)
        deliver(deliver(a.timer_expired(BfdTimer.TRANSMIT), b), a)


def up_pair(
    a_params: Parameters = FAST, b_params: Parameters = FAST, *, single_hop: bool = True
) -> tuple[Session, Session]:
    a, b = a_session(1, a_params, single_hop=single_hop), a_session(2, b_params)
    deliver(deliver(a.start(), b), a)
    deliver(b.start(), a)
    exchange(a, b)
    assert a.state is b.state is State.UP
    return a, b


def test_three_way_handshake_down_init_up() -> None:
    a, b = a_session(1), a_session(2)
    first = a.start()
    assert sent(first)[0].state is State.DOWN and sent(first)[0].your_discriminator == 0
    b_orders = deliver(first, b)
    assert changes(b_orders) == [(State.INIT, Diagnostic.NONE)]
    b_says = sent(b.start())
    assert b_says[0].state is State.INIT and b_says[0].your_discriminator == 1
    a_orders = a.packet_received(b_says[0], 255)
    assert changes(a_orders) == [(State.UP, Diagnostic.NONE)]
    assert changes(deliver(a_orders, b)) == [(State.UP, Diagnostic.NONE)]


def test_packets_go_at_one_second_until_up() -> None:
    a = a_session()
    packet = sent(a.start())[0]
    assert packet.desired_min_tx == SLOW_TX  # §6.8.3
    assert a.transmit_interval == SLOW_TX


def test_negotiated_tx_is_the_max_of_our_desired_tx_and_their_required_rx() -> None:
    a, b = up_pair(
        Parameters(desired_min_tx=50_000, required_min_rx=300_000, detect_mult=3),
        Parameters(desired_min_tx=200_000, required_min_rx=120_000, detect_mult=5),
    )
    assert a.transmit_interval == 120_000
    assert b.transmit_interval == 300_000
    # §6.8.4: their multiplier times max(our required RX, their desired TX).
    assert a.detection_time == 5 * 300_000
    assert b.detection_time == 3 * 120_000


def test_detection_timeout_takes_the_session_down_with_diag_1() -> None:
    a, _ = up_pair()
    orders = a.timer_expired(BfdTimer.DETECT)
    assert changes(orders) == [(State.DOWN, Diagnostic.CONTROL_DETECTION_TIME_EXPIRED)]
    assert a.remote_discriminator == 0
    assert sent(a.timer_expired(BfdTimer.TRANSMIT))[0].desired_min_tx == SLOW_TX


def test_every_packet_rearms_the_detection_timer() -> None:
    a, b = up_pair()
    orders = deliver(b.timer_expired(BfdTimer.TRANSMIT), a)
    assert armed(orders, BfdTimer.DETECT) == pytest.approx(3 * 0.1)


def test_admin_down_tells_the_peer_which_goes_down_with_diag_3() -> None:
    a, b = up_pair()
    orders = a.admin_down()
    assert changes(orders) == [(State.ADMIN_DOWN, Diagnostic.ADMINISTRATIVELY_DOWN)]
    assert CancelTimer(BfdTimer.DETECT) in orders
    assert changes(deliver(orders, b)) == [(State.DOWN, Diagnostic.NEIGHBOR_SIGNALED_SESSION_DOWN)]
    # While AdminDown, received packets change nothing.
    assert changes(deliver(b.timer_expired(BfdTimer.TRANSMIT), a)) == []


def test_admin_up_runs_the_handshake_again() -> None:
    a, b = up_pair()
    deliver(a.admin_down(), b)
    assert changes(a.admin_up()) == [(State.DOWN, Diagnostic.ADMINISTRATIVELY_DOWN)]
    exchange(a, b)
    assert a.state is b.state is State.UP


def test_peer_going_down_takes_us_down_with_diag_3() -> None:
    a, b = up_pair()
    b.timer_expired(BfdTimer.DETECT)
    orders = deliver(b.timer_expired(BfdTimer.TRANSMIT), a)
    assert changes(orders) == [(State.DOWN, Diagnostic.NEIGHBOR_SIGNALED_SESSION_DOWN)]


def test_going_up_polls_to_leave_the_slow_pace() -> None:
    a, b = a_session(1), a_session(2)
    deliver(deliver(a.start(), b), a)
    orders = deliver(b.start(), a)  # b's Init: a goes Up
    poll = sent(orders)
    assert poll and poll[0].poll and poll[0].desired_min_tx == 100_000
    final = deliver(orders, b)
    assert any(p.final for p in sent(final))
    deliver(final, a)
    assert not a.polling


def test_a_parameter_change_polls_without_a_flap() -> None:
    a, b = up_pair()
    slower = Parameters(desired_min_tx=400_000, required_min_rx=400_000, detect_mult=3)
    orders = a.change_parameters(slower)
    assert sent(orders)[0].poll and sent(orders)[0].desired_min_tx == 400_000
    # §6.8.3: an increased TX is not used before the Final.
    assert a.transmit_interval == 100_000
    answer = deliver(orders, b)
    (final,) = sent(answer)
    assert final.final and not final.poll
    assert changes(deliver(answer, a) + answer) == []
    assert not a.polling and a.transmit_interval == 400_000
    assert b.transmit_interval == 400_000  # b honours our new required RX
    assert b.detection_time == 3 * 400_000
    assert a.state is b.state is State.UP


def test_a_lowered_rx_counts_in_detection_only_after_the_final() -> None:
    a, b = up_pair(Parameters(desired_min_tx=100_000, required_min_rx=500_000, detect_mult=3), FAST)
    orders = a.change_parameters(
        Parameters(desired_min_tx=100_000, required_min_rx=100_000, detect_mult=3)
    )
    assert a.detection_time == 3 * 500_000
    deliver(deliver(orders, b), a)
    assert a.detection_time == 3 * 100_000


def test_a_poll_is_answered_at_once_with_final_only() -> None:
    a, _ = up_pair()
    poll = ControlPacket(State.UP, 2, 1, 100_000, 100_000, 3, poll=True)
    (answer,) = sent(a.packet_received(poll, 255))
    assert answer.final and not answer.poll


def test_single_hop_packets_without_ttl_255_are_discarded() -> None:
    a = a_session()
    packet = ControlPacket(State.DOWN, 2, 0, SLOW_TX, SLOW_TX, 3)
    assert a.packet_received(packet, 254) == [Discarded(DiscardReason.TTL, packet)]
    assert a.state is State.DOWN


def test_multihop_accepts_any_ttl_above_the_configured_minimum() -> None:
    a = a_session(parameters=dataclasses.replace(FAST, min_ttl=250), single_hop=False)
    packet = ControlPacket(State.DOWN, 2, 0, SLOW_TX, SLOW_TX, 3)
    assert changes(a.packet_received(packet, 252)) == [(State.INIT, Diagnostic.NONE)]
    dropped = a.packet_received(packet, 249)
    assert dropped == [Discarded(DiscardReason.TTL_BELOW_MINIMUM, packet)]


def test_a_new_minimum_ttl_applies_to_the_next_packet_without_a_flap() -> None:
    a, b = up_pair(dataclasses.replace(FAST, min_ttl=250), single_hop=False)
    a.change_parameters(dataclasses.replace(FAST, min_ttl=253))
    packet = sent(b.timer_expired(BfdTimer.TRANSMIT))[0]
    assert a.packet_received(packet, 252) == [Discarded(DiscardReason.TTL_BELOW_MINIMUM, packet)]
    assert not changes(a.packet_received(packet, 253)) and a.state is State.UP


def test_a_single_hop_session_ignores_a_minimum_ttl_and_wants_255() -> None:
    a = a_session(parameters=dataclasses.replace(FAST, min_ttl=2))
    assert a.min_ttl is None
    packet = ControlPacket(State.DOWN, 2, 0, SLOW_TX, SLOW_TX, 3)
    assert a.packet_received(packet, 254) == [Discarded(DiscardReason.TTL, packet)]


PASSIVE = dataclasses.replace(FAST, passive=True)


def test_a_passive_session_sends_nothing_until_the_remote_has_sent() -> None:
    a, b = a_session(1, PASSIVE), a_session(2)
    assert sent(a.start()) == [] and not a.sending
    assert sent(a.timer_expired(BfdTimer.TRANSMIT)) == []
    answer = a.packet_received(sent(b.start())[0], 255)
    assert [p.your_discriminator for p in sent(answer)] == [2] and a.sending
    deliver(answer, b)
    exchange(a, b)
    assert a.state is b.state is State.UP


def test_a_passive_session_falls_silent_when_the_remote_is_lost() -> None:
    a, b = up_pair(PASSIVE)
    changed = a.timer_expired(BfdTimer.DETECT)
    assert changes(changed) == [(State.DOWN, Diagnostic.CONTROL_DETECTION_TIME_EXPIRED)]
    assert sent(a.timer_expired(BfdTimer.TRANSMIT)) == [] and not a.sending  # §6.8.7
    assert sent(a.packet_received(sent(b.timer_expired(BfdTimer.TRANSMIT))[0], 255))


def test_turning_passive_off_starts_sending() -> None:
    a = a_session(1, PASSIVE)
    a.start()
    assert sent(a.change_parameters(FAST)) and a.sending


def test_a_packet_for_another_discriminator_is_discarded() -> None:
    a = a_session()
    packet = ControlPacket(State.INIT, 2, 99, SLOW_TX, SLOW_TX, 3)
    assert a.packet_received(packet, 255) == [Discarded(DiscardReason.WRONG_DISCRIMINATOR, packet)]


def test_authenticated_packets_are_discarded_as_we_use_none() -> None:
    a = a_session()
    packet = ControlPacket(State.DOWN, 2, 0, SLOW_TX, SLOW_TX, 3, auth=b"\x01\x03\x00")
    assert a.packet_received(packet, 255)[0] == Discarded(DiscardReason.AUTHENTICATION, packet)


def test_no_periodic_packets_when_the_remote_requires_rx_zero() -> None:
    a, _ = up_pair()
    quiet = ControlPacket(State.UP, 2, 1, 100_000, 0, 3)
    a.packet_received(quiet, 255)
    orders = a.timer_expired(BfdTimer.TRANSMIT)
    assert sent(orders) == [] and armed(orders, BfdTimer.TRANSMIT) is not None


@pytest.mark.parametrize(("mult", "low", "high"), [(3, 0.75, 1.0), (1, 0.75, 0.90)])
def test_jitter_of_section_6_8_7(mult: int, low: float, high: float) -> None:
    assert jittered(1000, mult, lambda: 0.0) == pytest.approx(1000 * low)
    assert jittered(1000, mult, lambda: 1.0) == pytest.approx(1000 * high)


def test_transmit_timer_is_jittered_by_the_given_random_source() -> None:
    a = Session(1, FAST, random=lambda: 0.0)
    assert armed(a.start(), BfdTimer.TRANSMIT) == pytest.approx(0.75)


def test_parameters_refuse_zero_detect_mult() -> None:
    with pytest.raises(ValueError, match="detect_mult"):
        dataclasses.replace(FAST, detect_mult=0)


def test_a_detected_failure_is_one_clients_act_on() -> None:
    a, _ = up_pair()
    (change,) = [o for o in a.timer_expired(BfdTimer.DETECT) if isinstance(o, StateChanged)]
    assert change.failed


def test_the_peers_admin_down_is_not_a_failure_for_clients() -> None:
    """RFC 5882 §3.2: a client does not tear down when the peer signalled AdminDown."""
    a, b = up_pair()
    (change,) = [o for o in deliver(b.admin_down(), a) if isinstance(o, StateChanged)]
    assert change.diagnostic is Diagnostic.NEIGHBOR_SIGNALED_SESSION_DOWN
    assert change.peer_admin_down and not change.failed


def test_stop_cancels_both_timers_and_sends_nothing_more() -> None:
    a, _ = up_pair()
    assert a.stop() == [CancelTimer(BfdTimer.TRANSMIT), CancelTimer(BfdTimer.DETECT)]
    assert a.timer_expired(BfdTimer.TRANSMIT) == []


EVENTS = st.lists(
    st.sampled_from(["a_tx", "b_tx", "a_detect", "b_detect", "a_admin_down", "a_admin_up",
                     "a_slower", "a_faster"]),
    max_size=60,
)  # fmt: skip


@given(EVENTS)
def test_any_sequence_of_events_keeps_the_rules(events: list[str]) -> None:
    """Whatever happens: no exception, never P and F together, Up only after a packet from
    a peer in Init or Up, and the transmit interval is the §6.8.2 maximum once settled."""
    a, b = a_session(1), a_session(2)
    deliver(b.start(), a)
    a.start()  # lost: packets are lost whenever an event is not followed by its delivery
    for event in events:
        actor = a if event.startswith("a_") else b
        other = b if actor is a else a
        if event.endswith("_tx"):
            orders = actor.timer_expired(BfdTimer.TRANSMIT)
        elif event.endswith("_detect"):
            orders = actor.timer_expired(BfdTimer.DETECT)
        elif event == "a_admin_down":
            orders = a.admin_down()
        elif event == "a_admin_up":
            orders = a.admin_up()
        else:
            tx = 400_000 if event == "a_slower" else 50_000
            orders = a.change_parameters(Parameters(tx, tx, 3))
        for packet in sent(orders):
            assert not (packet.poll and packet.final)
        before = other.state
        answer = deliver(orders, other)
        for change in answer:
            if isinstance(change, StateChanged) and change.new is State.UP:
                assert before in (State.DOWN, State.INIT) and actor.state in (State.INIT, State.UP)
        deliver(answer, actor)
    for s in (a, b):
        if not s.polling:
            assert s.transmit_interval == max(
                s.parameters.desired_min_tx if s.state is State.UP else max(
                    s.parameters.desired_min_tx, SLOW_TX), s.remote_min_rx)  # fmt: skip
