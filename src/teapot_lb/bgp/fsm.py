"""The BGP-4 finite state machine (RFC 4271 §8), sans I/O.

A :class:`Session` is one peering attempt's state: events go in (``start``, ``stop``,
``connection_made``, ``connection_failed``, ``connection_lost``, ``data_received``,
``timer_expired``) and each returns a list of actions for the I/O layer to perform
(:class:`Send`, :class:`Connect`, :class:`CloseConnection`, and the timer orders
:class:`~teapot_lb.timers.ArmTimer` / :class:`~teapot_lb.timers.CancelTimer` of every
sans-I/O core) or to learn from (:class:`StateChanged`, :class:`RoutesLearned`,
...). No sockets, no clock.

Collision detection (§6.8) needs two connections to the same peer, so it lives one
level up: :class:`~.neighbor.Neighbor` runs one ``Session`` per connection, and when a
session reports :class:`OpenReceived` while another to the same peer is in OpenConfirm
(or OpenSent with the peer identifier known), it asks :func:`keep_locally_initiated` which
one survives and calls :meth:`Session.collision_lost` on the other.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import TypeAlias

from teapot_lb.timers import ArmTimer, CancelTimer

from .attributes import ReceivedPath
from .policy import Rejected
from .wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    KEEPALIVE_BYTES,
    AddPath,
    AddPathFamily,
    AddPathMode,
    As4Aggregator,
    As4Path,
    AsPath,
    Capability,
    CeaseSubcode,
    CodecError,
    Context,
    ErrorCode,
    Family,
    FsmSubcode,
    GracefulRestart,
    GracefulRestartFamily,
    Keepalive,
    LocalPref,
    MessageReader,
    MessageType,
    Multiprotocol,
    NextHop,
    Notification,
    Open,
    OpenSubcode,
    Prefix,
    Reach,
    RouteRefresh,
    RouteRefreshMessage,
    Unreach,
    UpdateRoutes,
    decode_message,
    decode_nlri,
    decode_update_routes,
    merge_as4_path,
)


class State(enum.Enum):
    IDLE = "Idle"
    CONNECT = "Connect"
    ACTIVE = "Active"
    OPEN_SENT = "OpenSent"
    OPEN_CONFIRM = "OpenConfirm"
    ESTABLISHED = "Established"


class Timer(enum.Enum):
    CONNECT_RETRY = "connect-retry"
    HOLD = "hold"
    KEEPALIVE = "keepalive"


# ---------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Send:
    data: bytes


@dataclass(frozen=True, slots=True)
class Connect:
    """Open a TCP connection to the peer."""


@dataclass(frozen=True, slots=True)
class CloseConnection:
    reason: str


@dataclass(frozen=True, slots=True)
class StateChanged:
    old: State
    new: State
    reason: str = ""


@dataclass(frozen=True, slots=True)
class OpenReceived:
    open: Open


@dataclass(frozen=True, slots=True)
class RoutesLearned:
    """Prefixes of one family received with one path, in NLRI encoding (objects on demand:
    :attr:`prefixes`, :attr:`routes`). ``add_path``: each encoding starts with its Path
    Identifier (RFC 7911)."""

    family: Family
    encodings: tuple[bytes, ...]
    path: ReceivedPath
    add_path: bool = False

    @property
    def prefixes(self) -> tuple[Prefix, ...]:
        return decode_nlri(self.encodings, self.family.afi, self.add_path)

    @property
    def routes(self) -> tuple[tuple[Prefix, ReceivedPath], ...]:
        return tuple((p, self.path) for p in self.prefixes)


@dataclass(frozen=True, slots=True)
class RoutesWithdrawn:
    """Prefixes of one family gone (withdrawn by the peer, or dropped by us: ``reason``)."""

    family: Family
    encodings: tuple[bytes, ...]
    reason: str = ""
    add_path: bool = False  # each encoding starts with its Path Identifier

    @property
    def prefixes(self) -> tuple[Prefix, ...]:
        return decode_nlri(self.encodings, self.family.afi, self.add_path)


@dataclass(frozen=True, slots=True)
class RoutesFiltered:
    """Prefixes the peer's import filter rejected (none of them is in the Adj-RIB-In)."""

    family: Family
    encodings: tuple[bytes, ...]
    rejected: Rejected
    add_path: bool = False  # each encoding starts with its Path Identifier

    @property
    def prefixes(self) -> tuple[Prefix, ...]:
        return decode_nlri(self.encodings, self.family.afi, self.add_path)


@dataclass(frozen=True, slots=True)
class EndOfRib:
    family: Family


@dataclass(frozen=True, slots=True)
class RouteRefreshRequested:
    family: Family


@dataclass(frozen=True, slots=True)
class UpdateProblems:
    """RFC 7606 handled errors in a received UPDATE (for logs and counters)."""

    problems: tuple[str, ...]
    treat_as_withdraw: bool


@dataclass(frozen=True, slots=True)
class NotificationSent:
    notification: Notification
    reason: str


@dataclass(frozen=True, slots=True)
class NotificationReceived:
    notification: Notification


@dataclass(frozen=True, slots=True)
class SessionDown:
    """An Established session ended. ``peer_restart_time`` is set when the peer can
    restart gracefully (RFC 4724 §4.2): keep its routes as stale for that long."""

    reason: str
    peer_restart_time: int | None = None
    stale_families: frozenset[Family] = frozenset()  # whose routes are kept as stale


Action: TypeAlias = (
    Send
    | Connect
    | CloseConnection
    | ArmTimer[Timer]
    | CancelTimer[Timer]
    | StateChanged
    | OpenReceived
    | RoutesLearned
    | RoutesWithdrawn
    | RoutesFiltered
    | EndOfRib
    | RouteRefreshRequested
    | UpdateProblems
    | NotificationSent
    | NotificationReceived
    | SessionDown
)

# ---------------------------------------------------------------------------- config

BOTH_FAMILIES = frozenset({IPV4_UNICAST, IPV6_UNICAST})
OPEN_HOLD_TIME = 240.0  # RFC 4271 §8.2.2: "a large value" while waiting for OPEN


@dataclass(frozen=True, slots=True)
class SessionConfig:
    local_as: int
    peer_as: int | None  # None accepts any ASN
    router_id: IPv4Address
    hold_time: int = 90
    # None: a third of the negotiated hold time. Never more than that (RFC 4271 §10):
    # a longer value is clamped (``Negotiated.keepalive_clamped`` says so).
    keepalive_time: float | None = None
    passive: bool = False
    families: frozenset[Family] = BOTH_FAMILIES
    # First retry delay; doubles up to connect_retry_max (equal values: a fixed interval).
    connect_retry: float = 5.0
    connect_retry_max: float = 120.0
    graceful_restart: bool = True
    restart_time: int = 120
    restarting: bool = False  # R bit: we restarted and the peer should keep our routes
    forwarding_preserved: bool = False  # F bit for every family
    enforce_first_as: bool = (
        True  # eBGP paths must start with the peer's AS (off for route servers)
    )
    add_path: AddPathMode = AddPathMode.OFF  # RFC 7911, for every family in ``families``

    def open_message(self) -> Open:
        caps: list[Capability] = [Multiprotocol(f) for f in sorted(self.families)]
        caps.append(RouteRefresh())
        if self.add_path:
            caps.append(
                AddPath(tuple(AddPathFamily(f, self.add_path) for f in sorted(self.families)))
            )
        if self.graceful_restart:
            caps.append(
                GracefulRestart(
                    self.restart_time,
                    restarting=self.restarting,
                    families=tuple(
                        GracefulRestartFamily(f, self.forwarding_preserved)
                        for f in sorted(self.families)
                    ),
                )
            )
        return Open.build(self.local_as, self.hold_time, self.router_id, tuple(caps))


@dataclass(frozen=True, slots=True)
class Negotiated:
    """What the OPEN exchange settled (RFC 4271 §4.2, RFC 5492)."""

    peer_open: Open
    peer_as: int
    hold_time: int
    keepalive_time: float  # 0 when the hold time is 0: no KEEPALIVEs
    four_octet_as: bool
    families: frozenset[Family]
    route_refresh: bool
    ibgp: bool
    peer_graceful_restart: GracefulRestart | None
    keepalive_clamped: bool = False  # the configured keepalive_time exceeded hold_time / 3
    # RFC 7911 §4: families whose NLRI we send / receive with Path Identifiers.
    add_path_send: frozenset[Family] = frozenset()
    add_path_receive: frozenset[Family] = frozenset()


def negotiate_add_path(
    ours: AddPathMode, peer: Open, families: frozenset[Family]
) -> tuple[frozenset[Family], frozenset[Family]]:
    """RFC 7911 §4: the families we send and receive several paths for. We send them
    where we said Send and the peer said Receive, and receive where the reverse holds."""
    send = frozenset(
        f for f in families if ours & AddPathMode.SEND and peer.add_path(f) & AddPathMode.RECEIVE
    )
    receive = frozenset(
        f for f in families if ours & AddPathMode.RECEIVE and peer.add_path(f) & AddPathMode.SEND
    )
    return send, receive


def keepalive_interval(configured: float | None, hold_time: int) -> tuple[float, bool]:
    """The KEEPALIVE interval for a negotiated ``hold_time`` and whether it was clamped.

    RFC 4271 §10: at most a third of the hold time; no KEEPALIVEs when the hold time is 0.
    """
    if not hold_time:
        return 0.0, False
    limit = hold_time / 3
    if configured is None or configured <= 0:
        return limit, False
    if configured > limit:
        return limit, True
    return configured, False


def keep_locally_initiated(local_id: IPv4Address, remote_id: IPv4Address) -> bool:
    """§6.8: the connection initiated by the speaker with the higher identifier survives."""
    return int(local_id) > int(remote_id)


# ---------------------------------------------------------------------------- session


@dataclass
class Session:
    """One BGP session's state machine (RFC 4271 §8)."""

    config: SessionConfig
    auto_restart: bool = True  # after an error, retry (with backoff) until stop()
    state: State = State.IDLE
    negotiated: Negotiated | None = None
    last_error: str | None = None
    received: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)
    _enabled: bool = False
    _retry: float = 0.0
    _reader: MessageReader = field(default_factory=MessageReader)
    _ctx: Context = field(default_factory=Context)

    @property
    def enabled(self) -> bool:
        """Started and not stopped: the session (re)connects on its own."""
        return self._enabled

    # -- events ------------------------------------------------------------------------------

    def start(self, *, passive: bool | None = None) -> list[Action]:
        """ManualStart (active) or ManualStart_with_PassiveTcpEstablishment.

        ``passive=True`` waits for the peer's connection this time only (a connection
        the manager already accepted); later retries follow the configuration.
        """
        if self.state != State.IDLE:
            return []
        self._enabled = True
        if not self._retry:
            self._retry = self.config.connect_retry
        if passive:
            return self._goto(State.ACTIVE, "start (accepting the peer's connection)")
        return self._begin("start")

    def stop(
        self, notification: Notification | None = None, reason: str = "stop", *, notify: bool = True
    ) -> list[Action]:
        """ManualStop: Cease (default Administrative Shutdown) when connected, then Idle.

        ``notify=False`` closes without a NOTIFICATION: a peer that negotiated graceful
        restart then keeps our routes while we restart (RFC 4724 §4.2).
        """
        self._enabled = False
        if not notify and self.state in (State.OPEN_SENT, State.OPEN_CONFIRM, State.ESTABLISHED):
            return self._down(reason, graceful=False, restart=False)
        if self.state in (State.OPEN_SENT, State.OPEN_CONFIRM, State.ESTABLISHED):
            note = notification or Notification.cease(CeaseSubcode.ADMINISTRATIVE_SHUTDOWN)
            return self._fail(note, reason, restart=False)
        actions: list[Action] = [CancelTimer(Timer.CONNECT_RETRY)]
        if self.state in (State.CONNECT, State.ACTIVE):
            actions.append(CloseConnection(reason))
        return actions + self._goto(State.IDLE, reason)

    def connection_made(self) -> list[Action]:
        """TCP connection up (ours confirmed or the peer's accepted)."""
        if self.state not in (State.CONNECT, State.ACTIVE):
            return [CloseConnection(f"connection not wanted in state {self.state.value}")]
        self._reader = MessageReader()
        self._ctx = Context()
        self.negotiated = None
        self.sent["open"] += 1
        return [
            CancelTimer(Timer.CONNECT_RETRY),
            Send(self.config.open_message().pack()),
            ArmTimer(Timer.HOLD, OPEN_HOLD_TIME),
            *self._goto(State.OPEN_SENT, "connection established"),
        ]

    def connection_failed(self, reason: str = "connection failed") -> list[Action]:
        """TcpConnectionFails before the connection was up."""
        if self.state not in (State.CONNECT, State.ACTIVE):
            return []
        self.last_error = reason
        actions: list[Action] = [ArmTimer(Timer.CONNECT_RETRY, self._next_retry())]
        return actions + self._goto(State.ACTIVE, reason)

    def connection_lost(self, reason: str = "connection closed by peer") -> list[Action]:
        if self.state in (State.IDLE, State.CONNECT, State.ACTIVE):
            return self.connection_failed(reason)
        self.last_error = reason
        return self._down(reason, graceful=True)

    def timer_expired(self, timer: Timer) -> list[Action]:
        st = self.state
        if timer == Timer.CONNECT_RETRY:
            if st == State.IDLE and self._enabled:
                return self._begin("connect retry timer expired")
            if st == State.CONNECT:
                return [
                    CloseConnection("connect attempt timed out"),
                    ArmTimer(Timer.CONNECT_RETRY, self._next_retry()),
                    Connect(),
                ]
            if st == State.ACTIVE and not self.config.passive:
                # The connect timeout of this attempt: the backoff advances on its failure
                # (connection_failed, or the timeout in Connect), once per attempt.
                return [
                    ArmTimer(Timer.CONNECT_RETRY, self._retry or self.config.connect_retry),
                    Connect(),
                    *self._goto(State.CONNECT, "connect retry timer expired"),
                ]
            return []
        if timer == Timer.HOLD and st in (State.OPEN_SENT, State.OPEN_CONFIRM, State.ESTABLISHED):
            return self._fail(Notification(ErrorCode.HOLD_TIMER_EXPIRED), "hold timer expired")
        if timer == Timer.KEEPALIVE and st in (State.OPEN_CONFIRM, State.ESTABLISHED):
            neg = self.negotiated
            if neg is None or not neg.hold_time:
                return []
            self.sent["keepalive"] += 1
            return [Send(KEEPALIVE_BYTES), ArmTimer(Timer.KEEPALIVE, neg.keepalive_time)]
        return []

    def data_received(self, data: bytes) -> list[Action]:
        if self.state not in (State.OPEN_SENT, State.OPEN_CONFIRM, State.ESTABLISHED):
            return []
        actions: list[Action] = []
        traffic = False
        self._reader.feed(data)
        try:
            for mtype, body in self._reader.frames():
                msg: object
                if mtype == MessageType.UPDATE:
                    msg = decode_update_routes(body, self._ctx)
                else:
                    msg = decode_message(mtype, body, self._ctx)
                traffic = True
                actions.extend(self._on_message(msg))
                if self._idle():
                    return actions
        except CodecError as err:
            self.received["malformed"] += 1
            return actions + self._fail(
                Notification.from_error(err), f"its message was malformed: {err}"
            )
        neg = self.negotiated
        if traffic and self.state == State.ESTABLISHED and neg is not None and neg.hold_time:
            actions.append(ArmTimer(Timer.HOLD, neg.hold_time))
        return actions

    def collision_lost(self) -> list[Action]:
        """§6.8: this connection loses the collision; close it with a Cease."""
        self._enabled = False
        note = Notification.cease(CeaseSubcode.CONNECTION_COLLISION_RESOLUTION)
        return self._fail(note, "connection collision resolution", restart=False)

    def notify(self, notification: Notification, reason: str) -> list[Action]:
        """Close the session with ``notification`` (e.g. Cease/max prefixes from a policy)."""
        return self._fail(notification, reason)

    # -- messages ----------------------------------------------------------------------------

    def _on_message(self, msg: object) -> list[Action]:
        st = self.state
        if isinstance(msg, Notification):
            self.received["notification"] += 1
            self.last_error = f"peer sent NOTIFICATION {msg.describe()}"
            return [NotificationReceived(msg), *self._down(self.last_error, graceful=False)]
        if isinstance(msg, Keepalive):
            self.received["keepalive"] += 1
            if st == State.OPEN_CONFIRM:
                self._retry = self.config.connect_retry
                return self._goto(State.ESTABLISHED, "KEEPALIVE received")
            if st == State.ESTABLISHED:
                return []
        elif isinstance(msg, Open):
            self.received["open"] += 1
            if st == State.OPEN_SENT:
                return self._on_open(msg)
        elif isinstance(msg, UpdateRoutes):
            self.received["update"] += 1
            if st == State.ESTABLISHED:
                return self._on_update(msg)
        elif isinstance(msg, RouteRefreshMessage):
            self.received["route-refresh"] += 1
            if st == State.ESTABLISHED:
                neg = self.negotiated
                if neg is not None and msg.family in neg.families and msg.subtype == 0:
                    return [RouteRefreshRequested(msg.family)]
                return []
        subcode = {
            State.OPEN_SENT: FsmSubcode.UNEXPECTED_MESSAGE_IN_OPENSENT,
            State.OPEN_CONFIRM: FsmSubcode.UNEXPECTED_MESSAGE_IN_OPENCONFIRM,
            State.ESTABLISHED: FsmSubcode.UNEXPECTED_MESSAGE_IN_ESTABLISHED,
        }.get(st, FsmSubcode.UNSPECIFIED)
        name = type(msg).__name__.upper()
        return self._fail(
            Notification(ErrorCode.FSM, subcode), f"unexpected {name} in state {st.value}"
        )

    def _on_open(self, msg: Open) -> list[Action]:
        cfg = self.config
        if cfg.peer_as is not None and msg.asn != cfg.peer_as:
            return self._fail(
                Notification(ErrorCode.OPEN_MESSAGE, OpenSubcode.BAD_PEER_AS),
                f"AS mismatch: expected {cfg.peer_as}, got {msg.asn}",
            )
        if msg.hold_time in (1, 2):
            return self._fail(
                Notification(ErrorCode.OPEN_MESSAGE, OpenSubcode.UNACCEPTABLE_HOLD_TIME),
                f"hold time {msg.hold_time} is not acceptable (0 or at least 3)",
            )
        ibgp = msg.asn == cfg.local_as
        if int(msg.bgp_id) == 0 or (ibgp and msg.bgp_id == cfg.router_id):
            return self._fail(
                Notification(ErrorCode.OPEN_MESSAGE, OpenSubcode.BAD_BGP_IDENTIFIER),
                f"bad BGP identifier {msg.bgp_id}",
            )
        hold = min(cfg.hold_time, msg.hold_time)
        keepalive, clamped = keepalive_interval(cfg.keepalive_time, hold)
        four = msg.four_octet_as
        families = cfg.families & msg.families
        add_send, add_receive = negotiate_add_path(cfg.add_path, msg, families)
        self.negotiated = Negotiated(
            peer_open=msg,
            peer_as=msg.asn,
            hold_time=hold,
            keepalive_time=keepalive,
            keepalive_clamped=clamped,
            four_octet_as=four,
            families=families,
            route_refresh=msg.route_refresh,
            ibgp=ibgp,
            peer_graceful_restart=msg.graceful_restart,
            add_path_send=add_send,
            add_path_receive=add_receive,
        )
        self._ctx = Context(four_octet_as=four, add_path=add_receive)
        self.sent["keepalive"] += 1
        actions: list[Action] = [OpenReceived(msg), Send(KEEPALIVE_BYTES)]
        if hold:
            actions += [ArmTimer(Timer.HOLD, hold), ArmTimer(Timer.KEEPALIVE, keepalive)]
        else:
            actions += [CancelTimer(Timer.HOLD), CancelTimer(Timer.KEEPALIVE)]
        return actions + self._goto(State.OPEN_CONFIRM, "OPEN received")

    def _on_update(self, msg: UpdateRoutes) -> list[Action]:
        neg = self.negotiated
        assert neg is not None
        eor = msg.end_of_rib()
        if eor is not None:
            return [EndOfRib(eor)]
        actions: list[Action] = []
        problems = list(msg.problems)
        taw = msg.treat_as_withdraw
        as_path = msg.get(AsPath)
        check_first = self.config.enforce_first_as and not neg.ibgp
        if not taw and check_first and as_path is not None and msg.reach:
            first = as_path.segments[0].asns[0] if as_path.segments else None
            if first != neg.peer_as and not (first == 23456 and not neg.four_octet_as):
                # RFC 4271 §6.3 check, handled as treat-as-withdraw (RFC 7606 §7.2).
                problems.append(f"AS_PATH starts with {first}, not the peer's AS {neg.peer_as}")
                taw = True
        if problems:
            actions.append(UpdateProblems(tuple(problems), taw))
        if taw:
            batches: tuple[Reach | Unreach, ...] = (*msg.unreach, *msg.reach)
            for batch in batches:
                if batch.encodings:
                    actions.append(
                        RoutesWithdrawn(
                            batch.family,
                            batch.encodings,
                            "treat-as-withdraw",
                            batch.family in neg.add_path_receive,
                        )
                    )
            return actions
        for gone in msg.unreach:
            if gone.encodings and gone.family in neg.families:
                add_path = gone.family in neg.add_path_receive
                actions.append(RoutesWithdrawn(gone.family, gone.encodings, add_path=add_path))
        if not msg.reach:
            return actions
        if not neg.four_octet_as and as_path is not None:
            as_path = merge_as4_path(as_path, msg.get(As4Path))
        kept = []
        for a in msg.attributes:
            t = type(a)
            if t in (As4Path, As4Aggregator, NextHop):
                continue
            if t is AsPath and as_path is not None:
                a = as_path
            elif t is LocalPref and not neg.ibgp:
                continue  # RFC 7606 §7.5: LOCAL_PREF from an external peer is discarded
            kept.append(a)
        attrs = tuple(kept)
        for reach in msg.reach:
            if reach.encodings and reach.family in neg.families:
                hop = reach.next_hops[0] if reach.next_hops else None
                path = ReceivedPath(hop, attrs)
                add_path = reach.family in neg.add_path_receive
                actions.append(RoutesLearned(reach.family, reach.encodings, path, add_path))
        return actions

    # -- transitions -------------------------------------------------------------------------

    def _begin(self, reason: str) -> list[Action]:
        if self.config.passive:
            return self._goto(State.ACTIVE, reason)
        # The connect retry timer doubles as the connect timeout; backoff grows on failures.
        return [
            ArmTimer(Timer.CONNECT_RETRY, self._retry or self.config.connect_retry),
            Connect(),
            *self._goto(State.CONNECT, reason),
        ]

    def _next_retry(self) -> float:
        current = self._retry or self.config.connect_retry
        self._retry = min(current * 2, self.config.connect_retry_max)
        return current

    def _fail(
        self,
        notification: Notification,
        reason: str,
        *,
        restart: bool = True,
    ) -> list[Action]:
        """Send a NOTIFICATION, close, go Idle (§6: every error ends the session)."""
        self.last_error = reason
        self.sent["notification"] += 1
        actions: list[Action] = [
            Send(notification.pack()),
            NotificationSent(notification, reason),
        ]
        # RFC 4724 §4.2: only a TCP loss (no NOTIFICATION) starts the peer's graceful
        # restart; the N bit of RFC 8538 is not advertised.
        return actions + self._down(reason, graceful=False, restart=restart)

    def _down(self, reason: str, *, graceful: bool, restart: bool = True) -> list[Action]:
        was = self.state
        neg = self.negotiated
        actions: list[Action] = [
            CloseConnection(reason),
            CancelTimer(Timer.HOLD),
            CancelTimer(Timer.KEEPALIVE),
        ]
        if was == State.ESTABLISHED:
            gr = neg.peer_graceful_restart if neg else None
            # RFC 4724 §4.2: only the families the peer listed in its capability are kept
            # (a helper-only peer lists none: its routes go now).
            kept = frozenset(f.family for f in gr.families) if gr is not None and graceful else None
            keep = gr.restart_time if gr is not None and kept else None
            actions.append(SessionDown(reason, keep, kept or frozenset()))
        actions += self._goto(State.IDLE, reason)
        if restart and self.auto_restart and self._enabled:
            if self.config.passive:
                actions += self._goto(State.ACTIVE, "waiting for the peer to connect")
            else:
                actions.append(ArmTimer(Timer.CONNECT_RETRY, self._next_retry()))
        else:
            actions.append(CancelTimer(Timer.CONNECT_RETRY))
        return actions

    def _idle(self) -> bool:
        return self.state == State.IDLE

    def _goto(self, new: State, reason: str) -> list[Action]:
        old = self.state
        if old == new:
            return []
        self.state = new
        return [StateChanged(old, new, reason)]
