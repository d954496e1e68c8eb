"""The asyncio BGP speaker: the only part of :mod:`teapot_lb.bgp` that does I/O.

It moves bytes and time for the sans-I/O :class:`~.fsm.Session` and keeps one
Adj-RIB-Out and Adj-RIB-In per peer. One peer's errors never reach another: every
callback from the network is contained to that peer's connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

from teapot_lb import log

from .attributes import ReceivedPath, RouteAttributes
from .fsm import (
    BOTH_FAMILIES,
    Action,
    ArmTimer,
    CancelTimer,
    CloseConnection,
    Connect,
    EndOfRib,
    Negotiated,
    NotificationReceived,
    NotificationSent,
    OpenReceived,
    RouteRefreshRequested,
    RoutesFiltered,
    RoutesLearned,
    RoutesWithdrawn,
    Send,
    Session,
    SessionConfig,
    SessionDown,
    State,
    StateChanged,
    Timer,
    UpdateProblems,
    keep_locally_initiated,
)
from .policy import ACCEPT_ALL, Filter
from .rib import AdjRibIn, AdjRibOut, CompiledRoutes, ExportContext, compile_routes
from .transport import TCP_MD5SIG, md5sig_struct, set_md5, set_ttl
from .wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    CeaseSubcode,
    Family,
    Notification,
    Prefix,
    Update,
)


def _log() -> Any:
    # Looked up per use: a module-level logger would freeze the configuration at import.
    return log.get(__name__)


EventCallback = Callable[["Peer", Action], None]


@dataclass(frozen=True, slots=True)
class PeerConfig:
    """One neighbor. ``peer_as=None`` accepts any ASN."""

    address: str
    peer_as: int | None
    port: int = 179
    local_address: str | None = None
    local_as: int | None = None  # default: the speaker's
    passive: bool = False
    hold_time: int = 90
    # KEEPALIVE interval; None: a third of the negotiated hold time (also the upper bound).
    keepalive_time: float | None = None
    password: str | None = None  # TCP MD5 (RFC 2385)
    ebgp_multihop: int | None = None  # TTL; eBGP without it uses TTL 1 (single hop)
    families: frozenset[Family] = BOTH_FAMILIES
    graceful_restart: bool = True
    restart_time: int = 120
    next_hop_v4: IPv4Address | None = None  # default: the session's local address
    next_hop_v6: IPv6Address | None = None
    connect_retry: float = 2.0  # first ConnectRetry interval; doubles up to connect_retry_max
    connect_retry_max: float = 60.0  # equal to connect_retry: a fixed interval
    max_prefixes: int | None = None  # Cease/Maximum Number of Prefixes Reached beyond it
    enforce_first_as: bool = True  # treat-as-withdraw eBGP paths not starting with peer_as
    import_filter: Filter = ACCEPT_ALL  # what of the peer's routes enters its Adj-RIB-In
    export_filter: Filter = ACCEPT_ALL  # what of the desired routes the peer gets

    def __post_init__(self) -> None:
        ip_address(self.address)  # ValueError names the bad address
        if self.hold_time in (1, 2) or not 0 <= self.hold_time <= 0xFFFF:
            raise ValueError(f"peer {self.address}: hold time must be 0 or 3..65535 seconds")
        if self.peer_as is not None and not 1 <= self.peer_as <= 0xFFFFFFFF:
            raise ValueError(f"peer {self.address}: peer_as {self.peer_as} is not a valid ASN")
        if self.keepalive_time is not None and not 0 <= self.keepalive_time <= 0xFFFF:
            raise ValueError(f"peer {self.address}: keepalive time must be 0..65535 seconds")
        if not 0 < self.connect_retry <= self.connect_retry_max:
            raise ValueError(
                f"peer {self.address}: connect retry must be > 0 and <= connect_retry_max"
            )
        if self.password is not None and len(self.password.encode()) > 80:
            raise ValueError(f"peer {self.address}: TCP MD5 password longer than 80 bytes")

    description: str = ""


@dataclass
class PeerCounters:
    """Monotonic counters for metrics (gauges are on :class:`Peer`)."""

    connect_attempts: int = 0
    established: int = 0
    updates_sent: int = 0
    updates_received: int = 0
    notifications_sent: int = 0
    notifications_received: int = 0
    prefixes_learned: int = 0
    prefixes_withdrawn: int = 0
    prefixes_rejected: int = 0  # by the import filter (by reason: rib_in.rejections)
    update_errors: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0


class _Protocol(asyncio.Protocol):
    def __init__(self, link: _Link | None, on_accept: Callable[[_Protocol], None] | None = None):
        self.link = link
        self.on_accept = on_accept
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.on_accept is not None:
            self.on_accept(self)
        elif self.link is not None:
            self.link.made(self)

    def data_received(self, data: bytes) -> None:
        if self.link is not None:
            self.link.data_received(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if self.link is not None:
            self.link.lost(self, exc)


class _Link:
    """One Session and the connection and timers it drives."""

    def __init__(self, peer: Peer, session: Session, outgoing: bool) -> None:
        self.peer = peer
        self.session = session
        self.outgoing = outgoing
        self.proto: _Protocol | None = None
        self.timers: dict[Timer, asyncio.TimerHandle] = {}
        self.connect_task: asyncio.Task[None] | None = None

    # -- driving the session ------------------------------------------------------------------

    def run(self, actions: Iterable[Action]) -> None:
        for action in actions:
            try:
                self._do(action)
            except Exception:  # never let one peer's trouble escape into the loop
                _log().exception(
                    "bgp action failed", peer=self.peer.address, action=repr(action)[:200]
                )

    def _do(self, action: Action) -> None:
        if isinstance(action, Send):
            if self.proto is not None and self.proto.transport is not None:
                self.proto.transport.write(action.data)
                self.peer.counters.bytes_sent += len(action.data)
        elif isinstance(action, ArmTimer):
            old = self.timers.pop(action.timer, None)
            if old is not None:
                old.cancel()
            loop = asyncio.get_running_loop()
            self.timers[action.timer] = loop.call_later(action.seconds, self._fire, action.timer)
        elif isinstance(action, CancelTimer):
            old = self.timers.pop(action.timer, None)
            if old is not None:
                old.cancel()
        elif isinstance(action, Connect):
            self._cancel_connect()
            self.peer.counters.connect_attempts += 1
            self.connect_task = asyncio.get_running_loop().create_task(self._connect())
        elif isinstance(action, CloseConnection):
            self._cancel_connect()
            proto, self.proto = self.proto, None
            if proto is not None and proto.transport is not None:
                proto.link = None
                proto.transport.close()  # flushes what was written (a NOTIFICATION) first
                closing = self.peer.speaker._closing
                closing.add(proto)
                proto.closed.add_done_callback(lambda _: closing.discard(proto))
        else:
            self.peer._on_event(self, action)

    def _log_unanswered_connect(self) -> None:
        """The previous connect got no answer before the ConnectRetry timer fired."""
        cfg = self.peer.config
        if cfg.password:
            # RFC 2385 §2.0: segments with a wrong or missing MD5 signature are dropped
            # silently by the receiving kernel, so a key mismatch looks like a dead peer.
            _log().warning(
                "bgp connect unanswered; TCP MD5 is configured: check that the md5 password "
                f"matches on {cfg.address} (a mismatch makes the peer drop our SYNs silently)",
                peer=cfg.address,
                port=cfg.port,
            )
        else:
            _log().info("bgp connect unanswered", peer=cfg.address, port=cfg.port)

    def _fire(self, timer: Timer) -> None:
        self.timers.pop(timer, None)
        if timer is Timer.CONNECT_RETRY and self.connect_task and not self.connect_task.done():
            self._log_unanswered_connect()
        self.run(self.session.timer_expired(timer))

    def cancel_all(self) -> None:
        for handle in self.timers.values():
            handle.cancel()
        self.timers.clear()
        self._cancel_connect()

    def _cancel_connect(self) -> None:
        if self.connect_task is not None and not self.connect_task.done():
            self.connect_task.cancel()
        self.connect_task = None

    # -- network -----------------------------------------------------------------------------

    async def _connect(self) -> None:
        cfg = self.peer.config
        family = socket.AF_INET6 if ip_address(cfg.address).version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            self.peer._prepare_socket(sock)
            if cfg.local_address:
                sock.bind((cfg.local_address, 0))
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, (cfg.address, cfg.port))
            await loop.create_connection(lambda: self._attach_protocol(), sock=sock)
        except asyncio.CancelledError:
            sock.close()
            raise
        except Exception as exc:
            sock.close()
            self.connect_task = None
            if isinstance(exc, OSError):
                reason = f"connect: {exc.strerror or exc}"
                _log().info("bgp connect failed", peer=cfg.address, port=cfg.port, error=str(exc))
            else:  # e.g. an MD5 key the kernel refuses: a configuration error, keep retrying
                reason = f"connect: {exc}"
                _log().error("bgp cannot connect", peer=cfg.address, error=str(exc))
            self.run(self.session.connection_failed(reason))

    def _attach_protocol(self) -> _Protocol:
        proto = _Protocol(self)
        self.proto = proto
        self.outgoing = True
        self.connect_task = None
        return proto

    def made(self, proto: _Protocol) -> None:
        """Our outgoing connection is up."""
        if self.proto is proto:
            self.run(self.session.connection_made())

    def adopt(self, proto: _Protocol) -> None:
        """Take over an accepted connection."""
        self._cancel_connect()
        self.proto = proto
        self.outgoing = False
        proto.link = self
        self.run(self.session.connection_made())

    def data_received(self, proto: _Protocol, data: bytes) -> None:
        if proto is not self.proto:
            return
        self.peer.counters.bytes_received += len(data)
        try:
            actions = self.session.data_received(data)
        except Exception as exc:  # a codec bug must not take the process down
            _log().exception("bgp internal error on received data", peer=self.peer.address)
            note = Notification(6, CeaseSubcode.OUT_OF_RESOURCES)
            actions = self.session.notify(note, f"internal error: {exc!r}")
        self.run(actions)

    def lost(self, proto: _Protocol, exc: Exception | None) -> None:
        if proto is not self.proto:
            return
        self.proto = None
        reason = f"connection lost: {exc}" if exc else "connection closed by peer"
        self.run(self.session.connection_lost(reason))


class Peer:
    """A configured neighbor: its session(s), RIBs, counters."""

    def __init__(self, speaker: Speaker, config: PeerConfig) -> None:
        self.speaker = speaker
        self.config = config
        self.address = str(ip_address(config.address))
        self.counters = PeerCounters()
        self.rib_out = AdjRibOut(config.export_filter)
        self.rib_in = AdjRibIn(config.import_filter)
        self.local_as = config.local_as or speaker.local_as
        self._session_config = SessionConfig(
            local_as=self.local_as,
            peer_as=config.peer_as,
            router_id=speaker.router_id,
            hold_time=config.hold_time,
            keepalive_time=config.keepalive_time,
            passive=config.passive,
            families=frozenset(Family(*f) for f in config.families),
            connect_retry=config.connect_retry,
            connect_retry_max=config.connect_retry_max,
            graceful_restart=config.graceful_restart,
            restart_time=config.restart_time,
            restarting=speaker.restarting_for(config.restart_time),
            forwarding_preserved=speaker.restarting_for(config.restart_time),
            enforce_first_as=config.enforce_first_as,
        )
        self._session_config.open_message().pack()  # refuse a bad config here, not later
        self.main = _Link(self, Session(self._session_config), outgoing=True)
        self._others: list[_Link] = []
        self._established = asyncio.Event()
        self._stale_timer: asyncio.TimerHandle | None = None
        self._export: ExportContext | None = None
        self._warned_next_hop: set[Family] = set()
        self._warned_keepalive = False
        self._flush_pending = False

    def __repr__(self) -> str:
        return f"Peer({self.address}, AS{self.config.peer_as}, {self.state.value})"

    # -- public ------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self.main.session.state

    @property
    def established(self) -> bool:
        return self.state == State.ESTABLISHED

    @property
    def negotiated(self) -> Negotiated | None:
        """What the OPEN exchange settled (hold time, families, 4-octet ASN, ...)."""
        return self.main.session.negotiated

    @property
    def last_error(self) -> str | None:
        return self.main.session.last_error

    @property
    def prefixes_sent(self) -> int:
        return self.rib_out.sent_count()

    @property
    def prefixes_received(self) -> int:
        return len(self.rib_in)

    def routes_in(self) -> dict[Prefix, ReceivedPath]:
        return self.rib_in.routes

    async def wait_established(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        await asyncio.wait_for(self._established.wait(), timeout)

    # -- speaker-facing ---------------------------------------------------------------------

    def start(self) -> None:
        self.main.run(self.main.session.start())

    def set_desired(self, routes: CompiledRoutes) -> None:
        self.rib_out.set_desired(routes)
        if self.established and not self._flush_pending:
            # Coalesce: several set_routes in one loop iteration cost one diff.
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._deferred_flush)

    def _deferred_flush(self) -> None:
        self._flush_pending = False
        try:
            self._flush()
        except Exception:
            _log().exception("bgp cannot send UPDATEs", peer=self.address)

    def accept(self, proto: _Protocol) -> None:
        """An incoming connection from this peer's address."""
        st = self.main.session.state
        neg = self.main.session.negotiated
        if st == State.ESTABLISHED and neg is not None and neg.peer_graceful_restart is not None:
            # RFC 4724 §4.2: a new connection from a peer that can restart gracefully means
            # it restarted; the old session is gone, its routes are kept as stale.
            _log().info(
                f"peer {self.address} reconnected while Established: treating it as the "
                "peer's graceful restart",
                peer=self.address,
            )
            self.main.run(self.main.session.connection_lost("peer reconnected (restarted)"))
            st = self.main.session.state
        if st == State.IDLE and self.main.session.enabled:
            # Waiting to retry after an error: take the peer's connection instead.
            self.main.run(self.main.session.timer_expired(Timer.CONNECT_RETRY))
            st = self.main.session.state
        if st in (State.CONNECT, State.ACTIVE):
            self.main.adopt(proto)
        elif st in (State.OPEN_SENT, State.OPEN_CONFIRM) and not self._others:
            link = _Link(self, Session(self._session_config, auto_restart=False), outgoing=False)
            self._others.append(link)
            link.run(link.session.start(passive=True))
            link.adopt(proto)
        else:
            reason = "established" if st == State.ESTABLISHED else st.value
            _log().info("bgp rejecting connection", peer=self.address, state=reason)
            assert proto.transport is not None
            proto.transport.write(Notification.cease(CeaseSubcode.CONNECTION_REJECTED).pack())
            proto.transport.close()

    def stop(self, notification: Notification | None, reason: str) -> None:
        for link in [self.main, *self._others]:
            link.run(link.session.stop(notification, reason))
            link.cancel_all()
        self._others.clear()
        if self._stale_timer is not None:
            self._stale_timer.cancel()

    def abort(self) -> None:
        """Close without a NOTIFICATION (we restart; a graceful-restart peer keeps our routes)."""
        for link in [self.main, *self._others]:
            link.run(link.session.stop(None, "restarting", notify=False))
            link.cancel_all()
        self._others.clear()

    def withdraw_all(self) -> None:
        if self.established and self._export is not None:
            self._write(self.rib_out.withdraw_all(self._export))

    def _prepare_socket(self, sock: socket.socket) -> None:
        cfg = self.config
        if cfg.password:
            set_md5(sock, cfg.address, cfg.password)
        ebgp = cfg.peer_as is None or cfg.peer_as != self.local_as
        ttl = cfg.ebgp_multihop or (1 if ebgp else None)
        if ttl:
            set_ttl(sock, ttl)

    # -- session events ----------------------------------------------------------------------

    def _on_event(self, link: _Link, action: Action) -> None:
        if isinstance(action, StateChanged):
            self._on_state(link, action)
        elif isinstance(action, OpenReceived):
            self._check_collision(link, action)
        elif isinstance(action, NotificationSent):
            self.counters.notifications_sent += 1
            _log().warning(
                f"peer {self.address} {action.reason} → NOTIFICATION "
                f"{action.notification.describe()}",
                peer=self.address,
            )
        elif isinstance(action, NotificationReceived):
            self.counters.notifications_received += 1
            _log().warning(
                f"peer {self.address} sent NOTIFICATION {action.notification.describe()}",
                peer=self.address,
            )
        elif link is not self.main:
            return
        elif isinstance(action, RoutesLearned):
            self.counters.updates_received += 1
            self.counters.prefixes_learned += len(action.encodings)
            judged = self.rib_in.learn(action.family, action.encodings, action.path)
            limit = self.config.max_prefixes
            if limit is not None and len(self.rib_in) > limit:
                note = Notification.cease(CeaseSubcode.MAXIMUM_PREFIXES_REACHED)
                link.run(link.session.notify(note, f"more than {limit} prefixes received"))
            if judged.rejected:
                for why, encs in judged.rejected:
                    self.counters.prefixes_rejected += len(encs)
                    self.speaker._emit(self, RoutesFiltered(action.family, tuple(encs), why))
                for path, encs in judged.accepted:
                    self.speaker._emit(self, RoutesLearned(action.family, tuple(encs), path))
                return
            if judged.accepted and judged.accepted[0][0] is not action.path:
                path, encs = judged.accepted[0]  # the filter changed the path
                action = RoutesLearned(action.family, tuple(encs), path)
        elif isinstance(action, RoutesWithdrawn):
            self.counters.updates_received += 1
            self.counters.prefixes_withdrawn += len(action.encodings)
            self.rib_in.withdraw(action.family, action.encodings)
        elif isinstance(action, UpdateProblems):
            self.counters.update_errors += 1
            _log().warning(
                f"peer {self.address} sent a malformed UPDATE: {'; '.join(action.problems)}",
                peer=self.address,
                treat_as_withdraw=action.treat_as_withdraw,
            )
        elif isinstance(action, EndOfRib):
            self._forget(self.rib_in.sweep_stale(action.family), "stale after End-of-RIB")
        elif isinstance(action, SessionDown):
            self._on_down(action)
        elif isinstance(action, RouteRefreshRequested):
            self.rib_out.reset()
            self._flush(end_of_rib=True)
        if link is self.main:
            self.speaker._emit(self, action)

    def _on_state(self, link: _Link, change: StateChanged) -> None:
        if change.new == State.ESTABLISHED:
            if link is not self.main:
                # The other connection won: it becomes the session.
                old = self.main
                self._others.remove(link)
                self.main = link
                link.session.auto_restart = True
                if old.session.state != State.IDLE:
                    old.run(old.session.collision_lost())
                old.cancel_all()
            for other in self._others:
                other.run(other.session.collision_lost())
                other.cancel_all()
            self._others.clear()
            self._on_established()
        elif change.old == State.ESTABLISHED and link is self.main:
            self._established.clear()
            self._export = None
            self.rib_out.reset()
        if link is not self.main and change.new == State.IDLE:
            link.cancel_all()
            with contextlib.suppress(ValueError):
                self._others.remove(link)
        if link is self.main:
            level = "info" if change.new in (State.ESTABLISHED, State.IDLE) else "debug"
            getattr(_log(), level)(
                f"peer {self.address} {change.old.value} → {change.new.value}",
                peer=self.address,
                reason=change.reason,
            )

    def _check_collision(self, link: _Link, event: OpenReceived) -> None:
        """§6.8, checked when an OPEN arrives while another connection is in OpenConfirm."""
        others = [x for x in (self.main, *self._others) if x is not link]
        for other in others:
            if other.session.state != State.OPEN_CONFIRM:
                continue
            keep_local = keep_locally_initiated(self.speaker.router_id, event.open.bgp_id)
            loser, winner = (link, other) if link.outgoing != keep_local else (other, link)
            _log().info(
                f"peer {self.address} connection collision: keeping the "
                f"{'locally' if keep_local else 'remotely'} initiated connection",
                peer=self.address,
            )
            loser.run(loser.session.collision_lost())
            loser.cancel_all()
            if loser is self.main:
                self._others.remove(winner)
                self.main = winner
                winner.session.auto_restart = True
            elif loser in self._others:
                self._others.remove(loser)
            return

    def _on_established(self) -> None:
        self.counters.established += 1
        neg = self.main.session.negotiated
        assert neg is not None
        if neg.keepalive_clamped and not self._warned_keepalive:
            self._warned_keepalive = True
            _log().warning(
                f"peer {self.address}: keepalive time {self.config.keepalive_time}s is more "
                f"than a third of the negotiated hold time {neg.hold_time}s; sending "
                f"KEEPALIVEs every {neg.keepalive_time:g}s (RFC 4271 §10)",
                peer=self.address,
            )
        if self._session_config.restarting:
            # The R and F bits describe this restart only (RFC 4724 §3): later sessions of
            # this peer (a flap an hour on) open without them.
            self._session_config = replace(
                self._session_config, restarting=False, forwarding_preserved=False
            )
            for link in (self.main, *self._others):
                link.session.config = self._session_config
        sockname: Any = None
        proto = self.main.proto
        if proto is not None and proto.transport is not None:
            sockname = proto.transport.get_extra_info("sockname")
        local = ip_address(sockname[0].split("%")[0]) if sockname else None
        nh4 = self.config.next_hop_v4 or (local if isinstance(local, IPv4Address) else None)
        nh6 = self.config.next_hop_v6 or (local if isinstance(local, IPv6Address) else None)
        families = set(neg.families)
        for fam, nh in ((IPV4_UNICAST, nh4), (IPV6_UNICAST, nh6)):
            if fam in families and nh is None:
                families.discard(fam)
                if fam not in self._warned_next_hop:
                    self._warned_next_hop.add(fam)
                    _log().warning(
                        f"peer {self.address}: no {fam} next hop (set next_hop_v"
                        f"{4 if fam == IPV4_UNICAST else 6}); not advertising {fam}",
                        peer=self.address,
                    )
        self._export = ExportContext(
            local_as=self.local_as,
            peer_as=neg.peer_as,
            four_octet_as=neg.four_octet_as,
            next_hop_v4=nh4 if isinstance(nh4, IPv4Address) else None,
            next_hop_v6=(nh6,) if isinstance(nh6, IPv6Address) else (),
            families=frozenset(families),
        )
        # RFC 4724 §4.2: routes of families the restarted peer did not preserve go now.
        gr = neg.peer_graceful_restart
        if any(self.rib_in.stale_marks.values()):
            kept = {f.family for f in gr.families if f.forwarding_preserved} if gr else set()
            for fam in (IPV4_UNICAST, IPV6_UNICAST):
                if fam not in kept:
                    self._forget(self.rib_in.sweep_stale(fam), f"{fam} not preserved by the peer")
        self._flush(end_of_rib=True)
        self._established.set()

    def _on_down(self, down: SessionDown) -> None:
        if down.peer_restart_time:
            n = self.rib_in.mark_stale()
            _log().info(
                f"peer {self.address} down; keeping {n} routes as stale for "
                f"{down.peer_restart_time}s (graceful restart)",
                peer=self.address,
            )
            if self._stale_timer is not None:
                self._stale_timer.cancel()
            self._stale_timer = asyncio.get_running_loop().call_later(
                down.peer_restart_time, self._stale_expired
            )
        else:
            self._forget(self.rib_in.clear(), "session down")

    def _stale_expired(self) -> None:
        self._stale_timer = None
        self._forget(self.rib_in.sweep_stale(), "graceful restart time expired")

    def _forget(self, gone: dict[Family, list[bytes]], reason: str) -> None:
        """Routes removed from the Adj-RIB-In by us rather than by the peer's UPDATEs."""
        for family, encs in gone.items():
            if encs:
                _log().info(f"peer {self.address}: {len(encs)} {family} routes removed ({reason})")
                self.speaker._emit(self, RoutesWithdrawn(family, tuple(encs), reason))

    def _flush(self, end_of_rib: bool = False) -> None:
        export = self._export
        if export is None:
            return
        msgs = self.rib_out.updates(export)
        if end_of_rib:
            msgs += [Update.end_of_rib_for(f).pack() for f in sorted(export.families)]
        self._write(msgs)

    def _write(self, msgs: list[bytes]) -> None:
        proto = self.main.proto
        if not msgs or proto is None or proto.transport is None:
            return
        data = b"".join(msgs)
        proto.transport.write(data)
        self.counters.updates_sent += len(msgs)
        self.counters.bytes_sent += len(data)


@dataclass
class _Listener:
    servers: list[asyncio.Server] = field(default_factory=list)


class Speaker:
    """A BGP speaker with any number of peers."""

    def __init__(
        self,
        *,
        local_as: int,
        router_id: str | IPv4Address,
        listen_address: str | None = None,
        listen_port: int | None = 179,
        restarting: bool = False,
        on_event: EventCallback | None = None,
    ) -> None:
        self.local_as = local_as
        self.router_id = IPv4Address(router_id)
        self.listen_address = listen_address
        self._listen_port = listen_port
        # Set the R (and F) bit: we came back from a restart (RFC 4724 §3). Applies to
        # the first session of each peer started within its restart time of start().
        self.restarting = restarting
        self._started_at: float | None = None
        self.on_event = on_event
        self.peers: dict[str, Peer] = {}
        self._listener = _Listener()
        self._routes: CompiledRoutes | None = None
        self._per_peer_routes: dict[str, CompiledRoutes] = {}
        self._closing: set[_Protocol] = set()
        self._running = False

    @property
    def listen_port(self) -> int | None:
        """The bound port (useful with ``listen_port=0``)."""
        for server in self._listener.servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self._listen_port

    def restarting_for(self, restart_time: float) -> bool:
        """Whether a peer with ``restart_time`` that starts now opens with the R bit."""
        if not self.restarting:
            return False
        started = self._started_at
        return started is None or time.monotonic() - started < restart_time

    async def start(self) -> None:
        self._running = True
        if self._started_at is None:
            self._started_at = time.monotonic()
        if self._listen_port is not None:
            loop = asyncio.get_running_loop()
            hosts: list[str] = [self.listen_address] if self.listen_address else ["0.0.0.0", "::"]
            port = self._listen_port
            for host in hosts:
                server = await loop.create_server(
                    lambda: _Protocol(None, self._accept), host=host, port=port, reuse_address=True
                )
                if port == 0:  # bind the other family to the same ephemeral port
                    port = int(server.sockets[0].getsockname()[1])
                self._listener.servers.append(server)
            for peer in self.peers.values():
                self._listen_md5(peer)
            _log().info("bgp listening", address=self.listen_address or "*", port=self.listen_port)
        for peer in self.peers.values():
            peer.start()

    def add_peer(self, config: PeerConfig) -> Peer:
        peer = Peer(self, config)
        if peer.address in self.peers:
            raise ValueError(f"peer {peer.address} is already configured")
        self.peers[peer.address] = peer
        routes = self._per_peer_routes.get(peer.address, self._routes)
        if routes is not None:
            peer.rib_out.set_desired(routes)
        if self._running:
            self._listen_md5(peer)
            peer.start()
        return peer

    async def remove_peer(self, address: str, communication: str = "") -> None:
        peer = self.peers.pop(str(ip_address(address)))
        peer.stop(Notification.cease(CeaseSubcode.PEER_DECONFIGURED, communication), "peer removed")
        await self._drain()

    def peer(self, address: str) -> Peer:
        return self.peers[str(ip_address(address))]

    def set_routes(
        self, routes: Mapping[Prefix, RouteAttributes | None], peer: str | None = None
    ) -> None:
        """Desired routes for every peer (or one); only the difference is sent."""
        started = time.perf_counter()
        compiled = compile_routes(routes)
        if peer is None:
            self._routes = compiled
            self._per_peer_routes.clear()
            targets = list(self.peers.values())
        else:
            self._per_peer_routes[str(ip_address(peer))] = compiled
            targets = [self.peer(peer)]
        for p in targets:
            p.set_desired(compiled)
        _log().debug(
            "bgp routes set",
            count=len(compiled),
            peers=len(targets),
            seconds=round(time.perf_counter() - started, 4),
        )

    def routes_in(self, peer: str) -> dict[Prefix, ReceivedPath]:
        return self.peer(peer).routes_in()

    async def shutdown(
        self, communication: str = "", *, withdraw: bool = False, graceful_restart: bool = False
    ) -> None:
        """Stop every peer and the listener.

        Default: Cease/Administrative Shutdown with ``communication`` (RFC 9003), which
        makes routers drop our routes at once. ``withdraw`` first withdraws everything
        explicitly. ``graceful_restart`` closes without a NOTIFICATION so peers that
        negotiated graceful restart keep our routes until we come back.
        """
        self._running = False
        for server in self._listener.servers:
            server.close()
        for peer in self.peers.values():
            if graceful_restart:
                peer.abort()
                continue
            if withdraw:
                peer.withdraw_all()
            note = Notification.cease(CeaseSubcode.ADMINISTRATIVE_SHUTDOWN, communication)
            peer.stop(note, "shutdown")
        await self._drain()
        for server in self._listener.servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        self._listener.servers.clear()

    async def _drain(self, grace: float = 5.0) -> None:
        """Wait for closing connections to flush their last bytes, then abort stragglers."""
        pending = [p for p in self._closing if not p.closed.done()]
        if pending:
            await asyncio.wait([p.closed for p in pending], timeout=grace)
        for p in pending:
            if not p.closed.done() and p.transport is not None:
                p.transport.abort()
        self._closing = {p for p in self._closing if not p.closed.done()}

    # -- internals ---------------------------------------------------------------------------

    def _listen_md5(self, peer: Peer) -> None:
        if not peer.config.password:
            return
        family = socket.AF_INET6 if ip_address(peer.address).version == 6 else socket.AF_INET
        for server in self._listener.servers:
            for tsock in server.sockets:
                if tsock.family == family:
                    tsock.setsockopt(
                        socket.IPPROTO_TCP,
                        TCP_MD5SIG,
                        md5sig_struct(peer.address, peer.config.password),
                    )

    def _accept(self, proto: _Protocol) -> None:
        transport = proto.transport
        assert transport is not None
        peername = transport.get_extra_info("peername")
        try:
            addr = ip_address(peername[0].split("%")[0])
            if isinstance(addr, IPv6Address) and addr.ipv4_mapped is not None:
                addr = addr.ipv4_mapped
            peer = self.peers.get(str(addr))
            if peer is None or not self._running:
                _log().info("bgp connection from an unknown address closed", remote=str(addr))
                transport.close()
                return
            sock = transport.get_extra_info("socket")
            ebgp = peer.config.peer_as != peer.local_as
            ttl = peer.config.ebgp_multihop or (1 if ebgp else None)
            if ttl and sock is not None:
                set_ttl(sock, ttl)
            peer.accept(proto)
        except Exception:
            _log().exception("bgp error accepting a connection", remote=str(peername))
            transport.abort()

    def _emit(self, peer: Peer, action: Action) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(peer, action)
        except Exception:
            _log().exception("bgp event callback failed", peer=peer.address)
