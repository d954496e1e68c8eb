"""The RFC 4271 §8 state machine: bytes and timer events in, actions out."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.bgp.fsm import (
    ArmTimer,
    CloseConnection,
    Connect,
    EndOfRib,
    NotificationReceived,
    NotificationSent,
    OpenReceived,
    RouteRefreshRequested,
    RoutesLearned,
    RoutesWithdrawn,
    Send,
    Session,
    SessionConfig,
    SessionDown,
    State,
    Timer,
    UpdateProblems,
    keep_locally_initiated,
)
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    AsPath,
    Capability,
    CeaseSubcode,
    Communities,
    ErrorCode,
    FsmSubcode,
    GracefulRestart,
    GracefulRestartFamily,
    Keepalive,
    LocalPref,
    MpReachNlri,
    Multiprotocol,
    NextHop,
    Notification,
    Open,
    OpenSubcode,
    Origin,
    RouteRefreshMessage,
    Update,
    UpdateSubcode,
    decode_stream,
    pack_attribute,
)

LOCAL_ID = IPv4Address("192.0.2.10")
PEER_ID = IPv4Address("192.0.2.1")
NH = IPv4Address("192.0.2.1")
PREFIX = IPv4Network("198.51.100.0/24")


def config(**kw: object) -> SessionConfig:
    base: dict[str, object] = {"local_as": 65001, "peer_as": 65000, "router_id": LOCAL_ID}
    base.update(kw)
    return SessionConfig(**base)  # type: ignore[arg-type]


def peer_open(
    asn: int = 65000, hold: int = 90, bgp_id: IPv4Address = PEER_ID, gr: bool = False
) -> bytes:
    caps: list[Capability] = [Multiprotocol(IPV4_UNICAST), Multiprotocol(IPV6_UNICAST)]
    if gr:
        families = (GracefulRestartFamily(IPV4_UNICAST), GracefulRestartFamily(IPV6_UNICAST))
        caps.append(GracefulRestart(120, families=families))
    return Open.build(asn, hold, bgp_id, tuple(caps)).pack()


def withdrawn(actions: list[object]) -> list[tuple[tuple[object, ...], str]]:
    return [(a.prefixes, a.reason) for a in actions if isinstance(a, RoutesWithdrawn)]


def sent_notifications(actions: list[object]) -> list[Notification]:
    return [a.notification for a in actions if isinstance(a, NotificationSent)]


def sent_messages(actions: list[object]) -> list[object]:
    return [m for a in actions if isinstance(a, Send) for m in decode_stream(a.data)]


def established(**kw: object) -> Session:
    gr = bool(kw.pop("peer_gr", False))
    s = Session(config(**kw))
    s.start()
    s.connection_made()
    s.data_received(peer_open(gr=gr) + Keepalive().pack())
    assert s.state == State.ESTABLISHED
    return s


def route_update(*attrs: object, nlri: tuple[IPv4Network, ...] = (PREFIX,)) -> bytes:
    base = (Origin(0), AsPath.sequence(65000), NextHop(NH))
    return Update(attributes=(*base, *attrs), nlri=nlri).pack()  # type: ignore[arg-type]


def test_active_start_connects_and_arms_connect_retry() -> None:
    actions = Session(config(connect_retry=5)).start()
    assert Connect() in actions and ArmTimer(Timer.CONNECT_RETRY, 5) in actions


def test_passive_start_waits_in_active_without_connecting() -> None:
    s = Session(config(passive=True))
    actions = s.start()
    assert s.state == State.ACTIVE and Connect() not in actions


def test_connection_sends_open_with_our_capabilities() -> None:
    s = Session(config())
    s.start()
    (msg,) = sent_messages(s.connection_made())
    assert isinstance(msg, Open) and msg.asn == 65001 and msg.bgp_id == LOCAL_ID
    assert msg.families == {(1, 1), (2, 1)} and msg.graceful_restart is not None
    assert s.state == State.OPEN_SENT


def test_open_then_keepalive_reaches_established_with_negotiated_hold() -> None:
    s = Session(config(hold_time=90))
    s.start()
    s.connection_made()
    actions = s.data_received(peer_open(hold=30))
    assert any(isinstance(a, OpenReceived) for a in actions)
    assert ArmTimer(Timer.HOLD, 30) in actions and ArmTimer(Timer.KEEPALIVE, 10) in actions
    assert isinstance(sent_messages(actions)[0], Keepalive)
    s.data_received(Keepalive().pack())
    assert s.state == State.ESTABLISHED and s.negotiated and s.negotiated.hold_time == 30


def test_hold_time_zero_disables_keepalives() -> None:
    s = Session(config(hold_time=0))
    s.start()
    s.connection_made()
    actions = s.data_received(peer_open(hold=90))
    assert not any(isinstance(a, ArmTimer) and a.timer == Timer.KEEPALIVE for a in actions)


def test_wrong_peer_as_is_open_error_bad_peer_as() -> None:
    s = Session(config())
    s.start()
    s.connection_made()
    actions = s.data_received(peer_open(asn=65002))
    assert sent_notifications(actions) == [
        Notification(ErrorCode.OPEN_MESSAGE, OpenSubcode.BAD_PEER_AS)
    ]
    assert any(isinstance(a, CloseConnection) for a in actions)
    assert s.state == State.IDLE and s.last_error == "AS mismatch: expected 65000, got 65002"


def test_hold_time_of_two_seconds_is_unacceptable() -> None:
    s = Session(config())
    s.start()
    s.connection_made()
    (note,) = sent_notifications(s.data_received(peer_open(hold=2)))
    assert (note.code, note.subcode) == (2, OpenSubcode.UNACCEPTABLE_HOLD_TIME)


def test_ibgp_peer_with_our_identifier_is_bad_bgp_identifier() -> None:
    s = Session(config(peer_as=65001))
    s.start()
    s.connection_made()
    (note,) = sent_notifications(s.data_received(peer_open(asn=65001, bgp_id=LOCAL_ID)))
    assert (note.code, note.subcode) == (2, OpenSubcode.BAD_BGP_IDENTIFIER)


def test_hold_timer_expiry_sends_hold_timer_expired() -> None:
    s = established()
    actions = s.timer_expired(Timer.HOLD)
    assert sent_notifications(actions) == [Notification(ErrorCode.HOLD_TIMER_EXPIRED)]
    assert s.state == State.IDLE and any(isinstance(a, SessionDown) for a in actions)


def test_keepalive_timer_sends_keepalive_and_rearms() -> None:
    s = established()
    actions = s.timer_expired(Timer.KEEPALIVE)
    assert isinstance(sent_messages(actions)[0], Keepalive)
    assert ArmTimer(Timer.KEEPALIVE, 30) in actions


def test_received_keepalive_restarts_the_hold_timer() -> None:
    s = established()
    assert ArmTimer(Timer.HOLD, 90) in s.data_received(Keepalive().pack())


def test_update_in_open_confirm_is_an_fsm_error() -> None:
    s = Session(config())
    s.start()
    s.connection_made()
    s.data_received(peer_open())
    (note,) = sent_notifications(s.data_received(route_update()))
    assert (note.code, note.subcode) == (
        ErrorCode.FSM,
        FsmSubcode.UNEXPECTED_MESSAGE_IN_OPENCONFIRM,
    )


def test_update_with_routes_is_learned_with_attributes() -> None:
    s = established()
    actions = s.data_received(route_update(Communities((7,))))
    (learned,) = [a for a in actions if isinstance(a, RoutesLearned)]
    ((prefix, path),) = learned.routes
    assert prefix == PREFIX and path.next_hop == NH and path.communities == (7,)


def test_ipv6_routes_are_learned_from_mp_reach() -> None:
    s = established()
    mp = MpReachNlri(IPV6_UNICAST, (IPv6Address("2001:db8::1"),), (IPv6Network("2001:db8:7::/48"),))
    actions = s.data_received(Update(attributes=(Origin(0), AsPath.sequence(65000), mp)).pack())
    (learned,) = [a for a in actions if isinstance(a, RoutesLearned)]
    assert learned.routes[0][0] == IPv6Network("2001:db8:7::/48")
    assert learned.routes[0][1].next_hop == IPv6Address("2001:db8::1")


def test_malformed_attribute_is_treat_as_withdraw_not_a_reset() -> None:
    s = established()
    bad = Update().pack()[:19]  # header placeholder, rebuilt below
    attrs = (
        Origin(0).pack()
        + AsPath.sequence(65000).pack()
        + NextHop(NH).pack()
        + pack_attribute(0xC0, 8, b"abc")  # COMMUNITIES of length 3
    )
    body = b"\x00\x00" + len(attrs).to_bytes(2, "big") + attrs + b"\x18\xc6\x33\x64"
    raw = bad[:16] + (19 + len(body)).to_bytes(2, "big") + b"\x02" + body
    actions = s.data_received(raw)
    assert withdrawn(actions) == [((PREFIX,), "treat-as-withdraw")]
    assert any(isinstance(a, UpdateProblems) and a.treat_as_withdraw for a in actions)
    assert s.state == State.ESTABLISHED


def test_ebgp_path_not_starting_with_peer_as_is_treat_as_withdraw() -> None:
    s = established()
    u = Update(attributes=(Origin(0), AsPath.sequence(64999), NextHop(NH)), nlri=(PREFIX,))
    assert withdrawn(s.data_received(u.pack())) == [((PREFIX,), "treat-as-withdraw")]


def test_route_server_paths_are_accepted_when_first_as_is_not_enforced() -> None:
    s = established(enforce_first_as=False)
    u = Update(attributes=(Origin(0), AsPath.sequence(64999), NextHop(NH)), nlri=(PREFIX,))
    assert any(isinstance(a, RoutesLearned) for a in s.data_received(u.pack()))


def test_local_pref_from_ebgp_peer_is_discarded() -> None:
    s = established()
    actions = s.data_received(route_update(LocalPref(500)))
    (learned,) = [a for a in actions if isinstance(a, RoutesLearned)]
    assert learned.routes[0][1].local_pref is None


def test_malformed_update_resets_with_the_rfc_code() -> None:
    s = established()
    raw = b"\xff" * 16 + b"\x00\x17\x02" + b"\x00\x09\x00\x00"  # withdrawn length overruns
    (note,) = sent_notifications(s.data_received(raw))
    assert (note.code, note.subcode) == (3, UpdateSubcode.MALFORMED_ATTRIBUTE_LIST)
    assert s.state == State.IDLE


def test_garbage_is_connection_not_synchronized() -> None:
    s = established()
    (note,) = sent_notifications(s.data_received(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 10))
    assert (note.code, note.subcode) == (1, 1)


def test_end_of_rib_is_reported_per_family() -> None:
    s = established()
    actions = s.data_received(Update.end_of_rib_for(IPV6_UNICAST).pack() + Update().pack())
    assert [a for a in actions if isinstance(a, EndOfRib)] == [
        EndOfRib(IPV6_UNICAST),
        EndOfRib((1, 1)),
    ]  # type: ignore[arg-type]


def test_route_refresh_request_is_reported() -> None:
    s = established()
    actions = s.data_received(RouteRefreshMessage(IPV6_UNICAST).pack())
    assert RouteRefreshRequested(IPV6_UNICAST) in actions


def test_peer_notification_ends_session_without_graceful_restart() -> None:
    s = established(peer_gr=True)
    actions = s.data_received(
        Notification.cease(CeaseSubcode.ADMINISTRATIVE_SHUTDOWN, "bye").pack()
    )
    assert any(isinstance(a, NotificationReceived) for a in actions)
    (down,) = [a for a in actions if isinstance(a, SessionDown)]
    assert down.peer_restart_time is None
    assert s.last_error == 'peer sent NOTIFICATION Cease/Administrative Shutdown "bye"'


def test_hold_timer_expiry_ends_graceful_restart_too() -> None:
    s = established(peer_gr=True)
    (down,) = [a for a in s.timer_expired(Timer.HOLD) if isinstance(a, SessionDown)]
    assert down.peer_restart_time is None


def test_connection_loss_with_graceful_restart_peer_keeps_routes() -> None:
    s = established(peer_gr=True)
    (down,) = [a for a in s.connection_lost() if isinstance(a, SessionDown)]
    assert down.peer_restart_time == 120


def test_after_an_error_the_session_retries_with_backoff() -> None:
    s = established(connect_retry=1)
    first = s.timer_expired(Timer.HOLD)
    assert ArmTimer(Timer.CONNECT_RETRY, 1) in first
    assert Connect() in s.timer_expired(Timer.CONNECT_RETRY)
    assert ArmTimer(Timer.CONNECT_RETRY, 2) in s.connection_failed()


def test_stop_sends_cease_administrative_shutdown_and_stays_idle() -> None:
    s = established()
    note = Notification.cease(CeaseSubcode.ADMINISTRATIVE_SHUTDOWN, "maintenance")
    assert sent_notifications(s.stop(note)) == [note]
    assert s.state == State.IDLE
    assert s.timer_expired(Timer.CONNECT_RETRY) == []


def test_collision_keeps_the_connection_of_the_higher_identifier() -> None:
    assert keep_locally_initiated(IPv4Address("192.0.2.10"), IPv4Address("192.0.2.1"))
    assert not keep_locally_initiated(IPv4Address("192.0.2.1"), IPv4Address("192.0.2.10"))


def test_collision_loser_closes_with_cease_collision_resolution() -> None:
    s = Session(config())
    s.start()
    s.connection_made()
    s.data_received(peer_open())
    (note,) = sent_notifications(s.collision_lost())
    assert (note.code, note.subcode) == (6, CeaseSubcode.CONNECTION_COLLISION_RESOLUTION)
    assert s.state == State.IDLE


def test_message_split_across_reads_is_reassembled() -> None:
    s = established()
    raw = route_update()
    assert s.data_received(raw[:7]) == []
    assert any(isinstance(a, RoutesLearned) for a in s.data_received(raw[7:]))


EVENTS = st.lists(
    st.one_of(
        st.just(("start",)),
        st.just(("stop",)),
        st.just(("made",)),
        st.just(("failed",)),
        st.just(("lost",)),
        st.tuples(st.just("timer"), st.sampled_from(list(Timer))),
        st.tuples(
            st.just("data"),
            st.sampled_from(
                [
                    peer_open(),
                    peer_open(asn=65009),
                    Keepalive().pack(),
                    route_update(),
                    Update().pack(),
                    Notification(6, 2).pack(),
                    RouteRefreshMessage(IPV6_UNICAST).pack(),
                    b"\xff" * 16,
                    b"junk",
                ]
            ),
        ),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(EVENTS)
def test_any_event_sequence_keeps_the_session_consistent(events: list[tuple[object, ...]]) -> None:
    s = Session(config())
    for ev in events:
        kind = ev[0]
        if kind == "start":
            actions = s.start()
        elif kind == "stop":
            actions = s.stop()
        elif kind == "made":
            actions = s.connection_made()
        elif kind == "failed":
            actions = s.connection_failed()
        elif kind == "lost":
            actions = s.connection_lost()
        elif kind == "timer":
            actions = s.timer_expired(ev[1])  # type: ignore[arg-type]
        else:
            actions = s.data_received(ev[1])  # type: ignore[arg-type]
        for a in actions:
            if isinstance(a, Send):
                assert decode_stream(a.data)  # only whole, valid messages are sent
        if s.state == State.ESTABLISHED:
            assert s.negotiated is not None
        if any(isinstance(a, NotificationSent) for a in actions):
            assert any(isinstance(a, CloseConnection) for a in actions)
