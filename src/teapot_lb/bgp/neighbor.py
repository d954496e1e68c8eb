"""Everything BGP does for one configured neighbor, sans I/O (as aioquic keeps QUIC in its
connection).

A :class:`Neighbor` runs one :class:`~.fsm.Session` per TCP connection to the neighbor (a
*link*), resolves collisions between two of them (RFC 4271 §6.8), treats a new connection
while Established as the peer's graceful restart (RFC 4724 §4.2), keeps the Adj-RIB-In
(import filter, stale routes and their timer) and the Adj-RIB-Out (export filter; the
export context is derived when the session comes up), coalesces route changes into one
flush, and counts.

Events in: :meth:`~Neighbor.start`, :meth:`~Neighbor.stop`, :meth:`~Neighbor.abort`,
:meth:`~Neighbor.connection_made` / :meth:`~Neighbor.connection_failed` (a :class:`Dial`
done), :meth:`~Neighbor.accepted` (the neighbor connected to us),
:meth:`~Neighbor.data_received`, :meth:`~Neighbor.connection_lost`,
:meth:`~Neighbor.timer_expired`, :meth:`~Neighbor.set_desired`,
:meth:`~Neighbor.withdraw_all`. Each returns a list of orders for the I/O layer:
:class:`Dial`, :class:`Adopt`, :class:`Refuse`, :class:`Transmit`, :class:`Close`,
:class:`Release`, the timer orders (:mod:`teapot_lb.timers`) and :class:`Report` (events
for the speaker's ``on_event``). No sockets, no clock: ``bgp.peer`` moves bytes and time.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

from teapot_lb import log
from teapot_lb.timers import ArmTimer, CancelTimer

from .config import PeerConfig
from .fsm import (
    Action,
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
from .neighbor_orders import (
    Adopt,
    Close,
    Dial,
    NeighborTimer,
    Order,
    Refuse,
    Release,
    Report,
    TimerName,
    Transmit,
)
from .rib import AdjRibIn, AdjRibOut, CompiledRoutes, ExportContext
from .wire import IPV4_UNICAST, IPV6_UNICAST, CeaseSubcode, Family, Notification, Update
from .wire.errors import ErrorCode
from .wire.family import Address

# Connect failures in a row before "bgp connect failed" (info) becomes a warning, and
# then every so many again.
CONNECT_FAILURES_WARNED = 5
# Our own orderly stops: the speaker shutting down, a BGPPeer removed or changed.
_OUR_SHUTDOWNS = frozenset(
    {CeaseSubcode.ADMINISTRATIVE_SHUTDOWN, CeaseSubcode.PEER_DECONFIGURED,
     CeaseSubcode.ADMINISTRATIVE_RESET, CeaseSubcode.OTHER_CONFIGURATION_CHANGE}
)  # fmt: skip


def _is_our_shutdown(note: Notification) -> bool:
    return note.code == ErrorCode.CEASE and note.subcode in _OUR_SHUTDOWNS


def _log() -> Any:
    # Looked up per use: a module-level logger would freeze the configuration at import.
    return log.get("teapot_lb.bgp.speaker")


@dataclass
class PeerCounters:
    """Monotonic counters for metrics (gauges are on :class:`~.peer.Peer`)."""

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


@dataclass(eq=False)
class Link:
    """One session and what the neighbor knows of its connection."""

    id: int
    session: Session
    outgoing: bool
    dialing: bool = False  # a Dial in flight
    local: Address | None = None  # our address on the connection


# ---------------------------------------------------------------------------- the neighbor


@dataclass(eq=False)
class Neighbor:
    """The protocol side of one configured neighbor. ``local_as`` / ``router_id``: the
    speaker's; ``restarting``: open the first session with the R and F bits (RFC 4724 §3)."""

    config: PeerConfig
    local_as: int
    router_id: IPv4Address
    restarting: bool = False
    counters: PeerCounters = field(default_factory=PeerCounters)
    export: ExportContext | None = None  # while Established
    rib_in: AdjRibIn = field(init=False)
    rib_out: AdjRibOut = field(init=False)
    main: Link = field(init=False)
    others: list[Link] = field(default_factory=list)  # a second connection (collision)

    def __post_init__(self) -> None:
        cfg = self.config
        self.address = str(ip_address(cfg.address))
        self.local_as = cfg.local_as or self.local_as
        self.rib_in = AdjRibIn(cfg.import_filter)
        self.rib_out = AdjRibOut(cfg.export_filter)
        self.session_config = SessionConfig(
            local_as=self.local_as,
            peer_as=cfg.peer_as,
            router_id=self.router_id,
            hold_time=cfg.hold_time,
            keepalive_time=cfg.keepalive_time,
            passive=cfg.passive,
            families=frozenset(Family(*f) for f in cfg.families),
            connect_retry=cfg.connect_retry,
            connect_retry_max=cfg.connect_retry_max,
            graceful_restart=cfg.graceful_restart,
            restart_time=cfg.restart_time,
            restarting=self.restarting,
            forwarding_preserved=self.restarting,
            enforce_first_as=cfg.enforce_first_as,
            add_path=cfg.add_path,
        )
        self.session_config.open_message().pack()  # refuse a bad config here, not later
        self._connect_failures = 0  # in a row: a persistent failure is logged as a warning
        self._ids = itertools.count(1)
        self.main = self._link(outgoing=True)
        self._out: list[Order] = []
        self._warned_next_hop: set[Family] = set()
        self._warned_keepalive = False
        self._flush_pending = False

    # -- what it is ---------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self.main.session.state

    @property
    def negotiated(self) -> Negotiated | None:
        return self.main.session.negotiated

    @property
    def links(self) -> list[Link]:
        return [self.main, *self.others]

    # -- events: administration ---------------------------------------------------------------

    def start(self) -> list[Order]:
        self._drive(self.main, self.main.session.start())
        return self._orders()

    def stop(self, notification: Notification | None, reason: str) -> list[Order]:
        """Close every connection (with ``notification``, default Cease/Administrative
        Shutdown) and stay down."""
        for link in self.links:
            self._drive(link, link.session.stop(notification, reason))
            self._out.append(Release(link.id))
        self.others.clear()
        self._out.append(CancelTimer(NeighborTimer.STALE))
        return self._orders()

    def abort(self) -> list[Order]:
        """Close without a NOTIFICATION (we restart; a graceful-restart peer keeps our routes)."""
        for link in self.links:
            self._drive(link, link.session.stop(None, "restarting", notify=False))
            self._out.append(Release(link.id))
        self.others.clear()
        return self._orders()

    def bfd_down(self, diagnostic: str) -> list[Order]:
        """The BFD session on this neighbor's path went Down: end the session now (RFC
        5882 §3.2) rather than after the hold time. A NOTIFICATION Cease/BFD Down (RFC 9384)
        goes first: if only BFD failed, the peer learns why at once and, as with any
        NOTIFICATION, keeps no graceful-restart state (RFC 4724 §4.2), so it drops our
        routes now; if the path is dead it is simply lost with the connection. The
        session then retries as after any error (ConnectRetry)."""
        reason = f"BFD down ({diagnostic})"
        note = Notification.cease(CeaseSubcode.BFD_DOWN)
        for link in self.links:
            if link.session.state in (State.OPEN_SENT, State.OPEN_CONFIRM, State.ESTABLISHED):
                self._drive(link, link.session.notify(note, reason))
        return self._orders()

    def set_desired(
        self, routes: CompiledRoutes, changed: Mapping[Family, Iterable[bytes]] | None = None
    ) -> list[Order]:
        """New desired routes; ``changed``: the prefixes that may differ (None: any)."""
        self.rib_out.set_desired(routes, changed)
        if self.state == State.ESTABLISHED and not self._flush_pending:
            # Coalesce: several changes before the timer fires cost one diff.
            self._flush_pending = True
            self._out.append(ArmTimer(NeighborTimer.FLUSH, 0.0))
        return self._orders()

    def flush_now(self) -> list[Order]:
        """Send the pending difference now rather than on the next loop turn (a caller
        that wants to time it, or to bound how stale the peer's view is)."""
        if self._flush_pending:
            self._out.append(CancelTimer(NeighborTimer.FLUSH))
            return self.timer_expired(NeighborTimer.FLUSH)
        return self._orders()

    def withdraw_all(self) -> list[Order]:
        if self.state == State.ESTABLISHED and self.export is not None:
            self._write(self.rib_out.withdraw_all(self.export))
        return self._orders()

    # -- events: connections ------------------------------------------------------------------

    def connection_made(self, link_id: int, local: Address | None) -> list[Order]:
        """Our connection for ``link_id`` is up; ``local``: our address on it."""
        link = self._find(link_id)
        self._connect_failures = 0
        if link is not None:
            link.dialing, link.outgoing, link.local = False, True, local
            self._drive(link, link.session.connection_made())
        return self._orders()

    def connection_failed(self, link_id: int, error: str, *, os_error: bool = True) -> list[Order]:
        """Our connection attempt failed: ``os_error`` from the network (retry quietly),
        else the attempt could not even be made (e.g. an MD5 key the kernel refuses)."""
        link = self._find(link_id)
        if link is None:
            return []
        link.dialing = False
        cfg = self.config
        if os_error:
            self._connect_failures += 1
            n = self._connect_failures
            # One failure is routine (the peer restarting); one that persists is not.
            if n >= CONNECT_FAILURES_WARNED and n % CONNECT_FAILURES_WARNED == 0:
                _log().warning(
                    "bgp connect keeps failing",
                    peer=cfg.address,
                    port=cfg.port,
                    error=error,
                    attempts=n,
                )
            else:
                _log().info("bgp connect failed", peer=cfg.address, port=cfg.port, error=error)
        else:
            _log().error("bgp cannot connect", peer=cfg.address, error=error)
        self._drive(link, link.session.connection_failed(f"connect: {error}"))
        return self._orders()

    def accepted(self, local: Address | None) -> list[Order]:
        """The neighbor connected to us: the orders say which link takes the connection
        (:class:`Adopt`) or that it is refused (:class:`Refuse`)."""
        main = self.main
        st = main.session.state
        neg = main.session.negotiated
        if st == State.ESTABLISHED and neg is not None and neg.peer_graceful_restart is not None:
            # RFC 4724 §4.2: a new connection from a peer that can restart gracefully means
            # it restarted; the old session is gone, its routes are kept as stale.
            _log().info(
                f"peer {self.address} reconnected while Established: treating it as the "
                "peer's graceful restart",
                peer=self.address,
            )
            self._drive(main, main.session.connection_lost("peer reconnected (restarted)"))
            st = main.session.state
        if st == State.IDLE and main.session.enabled:
            # Waiting to retry after an error: take the peer's connection instead.
            self._drive(main, main.session.timer_expired(Timer.CONNECT_RETRY))
            st = main.session.state
        if st in (State.CONNECT, State.ACTIVE):
            self._adopt(main, local)
        elif st in (State.OPEN_SENT, State.OPEN_CONFIRM) and not self.others:
            link = self._link(outgoing=False, auto_restart=False)
            self.others.append(link)
            self._drive(link, link.session.start(passive=True))
            self._adopt(link, local)
        else:
            reason = "established" if st == State.ESTABLISHED else st.value
            _log().info("bgp rejecting connection", peer=self.address, state=reason)
            self._out.append(Refuse(Notification.cease(CeaseSubcode.CONNECTION_REJECTED).pack()))
        return self._orders()

    def data_received(self, link_id: int, data: bytes) -> list[Order]:
        link = self._find(link_id)
        if link is None:
            return []
        self.counters.bytes_received += len(data)
        try:
            actions = link.session.data_received(data)
        except Exception as exc:  # a codec bug must not take the process down
            _log().exception("bgp internal error on received data", peer=self.address)
            note = Notification(6, CeaseSubcode.OUT_OF_RESOURCES)
            actions = link.session.notify(note, f"internal error: {exc!r}")
        self._drive(link, actions)
        return self._orders()

    def connection_lost(self, link_id: int, reason: str) -> list[Order]:
        link = self._find(link_id)
        if link is not None:
            self._drive(link, link.session.connection_lost(reason))
        return self._orders()

    def timer_expired(self, timer: TimerName) -> list[Order]:
        if timer is NeighborTimer.FLUSH:
            self._flush_pending = False
            try:
                self._flush()
            except Exception:
                _log().exception("bgp cannot send UPDATEs", peer=self.address)
        elif timer is NeighborTimer.STALE:
            self._forget(self.rib_in.sweep_stale(), "graceful restart time expired")
        elif isinstance(timer, tuple):
            link = self._find(timer[0])
            if link is not None:
                if timer[1] is Timer.CONNECT_RETRY and link.dialing:
                    self._log_unanswered_connect()
                self._drive(link, link.session.timer_expired(timer[1]))
        return self._orders()

    # -- the links ----------------------------------------------------------------------------

    def _link(self, *, outgoing: bool, auto_restart: bool = True) -> Link:
        session = Session(self.session_config, auto_restart=auto_restart)
        return Link(next(self._ids), session, outgoing)

    def _find(self, link_id: int) -> Link | None:
        for link in self.links:
            if link.id == link_id:
                return link
        return None

    def _adopt(self, link: Link, local: Address | None) -> None:
        link.dialing, link.outgoing, link.local = False, False, local
        self._out.append(Adopt(link.id))
        self._drive(link, link.session.connection_made())

    def _release(self, link: Link) -> None:
        self._out.append(Release(link.id))
        with contextlib.suppress(ValueError):
            self.others.remove(link)

    def _orders(self) -> list[Order]:
        out, self._out = self._out, []
        return out

    def _drive(self, link: Link, actions: Iterable[Action]) -> None:
        """Turn one session's actions into orders, and learn from its events."""
        for action in actions:
            if isinstance(action, Send):
                self.counters.bytes_sent += len(action.data)
                self._out.append(Transmit(link.id, action.data))
            elif isinstance(action, ArmTimer):
                self._out.append(ArmTimer((link.id, action.timer), action.seconds))
            elif isinstance(action, CancelTimer):
                self._out.append(CancelTimer((link.id, action.timer)))
            elif isinstance(action, Connect):
                self.counters.connect_attempts += 1
                link.dialing = True
                self._out.append(Dial(link.id))
            elif isinstance(action, CloseConnection):
                link.dialing = False
                self._out.append(Close(link.id, action.reason))
            else:
                try:
                    self._on_event(link, action)
                except Exception:  # one peer's trouble never escapes into the speaker
                    _log().exception(
                        "bgp action failed", peer=self.address, action=repr(action)[:200]
                    )

    def _hint_for(self, note: Notification) -> dict[str, str]:
        """What a NOTIFICATION from the peer most likely means, where we can tell."""
        if note.code == ErrorCode.HOLD_TIMER_EXPIRED and self.config.ttl(self.local_as) == 1:
            # Its hold timer expired: our KEEPALIVEs never reached it. An eBGP peer more
            # than one hop away that connects to us works one way only: our packets leave
            # with TTL 1 (RFC 4271 §5.1.3 single hop) and die at the first router.
            return {
                "hint": "our messages do not reach the peer: eBGP is sent with TTL 1 (single"
                " hop); if the peer is more than one hop away, set ebgpMultiHop on the"
                " BGPPeer (and check firewalls on the path)"
            }
        return {}

    def _log_unanswered_connect(self) -> None:
        """The previous connect got no answer before the ConnectRetry timer fired."""
        cfg = self.config
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

    # -- session events -----------------------------------------------------------------------

    def _on_event(self, link: Link, action: Action) -> None:
        if isinstance(action, StateChanged):
            self._on_state(link, action)
        elif isinstance(action, OpenReceived):
            self._check_collision(link, action)
        elif isinstance(action, NotificationSent):
            self.counters.notifications_sent += 1
            note = action.notification
            # Our own orderly stop (SIGTERM, a peer removed) is news, not trouble.
            say = _log().info if _is_our_shutdown(note) else _log().warning
            say(
                f"we sent NOTIFICATION {note.describe()} to peer {self.address}: {action.reason}",
                peer=self.address,
            )
        elif isinstance(action, NotificationReceived):
            self.counters.notifications_received += 1
            note = action.notification
            _log().warning(
                f"peer {self.address} sent us NOTIFICATION {note.describe()}",
                peer=self.address,
                **self._hint_for(note),
            )
        elif link is not self.main:
            return
        elif isinstance(action, RoutesLearned):
            self._on_learned(link, action)
            return
        elif isinstance(action, RoutesWithdrawn):
            self.counters.updates_received += 1
            self.counters.prefixes_withdrawn += len(action.encodings)
            self.rib_in.withdraw(action.family, action.encodings)
        elif isinstance(action, UpdateProblems):
            self.counters.update_errors += 1
            _log().warning(
                f"peer {self.address} sent an UPDATE we could not use in full"
                f" (RFC 7606 handling): {'; '.join(action.problems)}",
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
            self._out.append(Report(action))

    def _on_learned(self, link: Link, action: RoutesLearned) -> None:
        self.counters.updates_received += 1
        self.counters.prefixes_learned += len(action.encodings)
        judged = self.rib_in.learn(action.family, action.encodings, action.path)
        limit = self.config.max_prefixes
        if limit is not None and len(self.rib_in) > limit:
            note = Notification.cease(CeaseSubcode.MAXIMUM_PREFIXES_REACHED)
            self._drive(link, link.session.notify(note, f"more than {limit} prefixes received"))
        for why, encs in judged.rejected:
            self.counters.prefixes_rejected += len(encs)
            _log().debug(
                "bgp routes rejected by the import filter",
                peer=self.address,
                family=str(action.family),
                count=len(encs),
                reason=why.reason,
                filter=why.filter,
                rule=why.rule,
            )
            self._out.append(
                Report(RoutesFiltered(action.family, tuple(encs), why, action.add_path))
            )
        for path, encs in judged.accepted:
            if path is action.path and not judged.rejected:
                self._out.append(Report(action))  # as received: no copy of the encodings
            else:
                learned = RoutesLearned(action.family, tuple(encs), path, action.add_path)
                self._out.append(Report(learned))

    def _on_state(self, link: Link, change: StateChanged) -> None:
        if change.new == State.ESTABLISHED:
            if link is not self.main:
                # The other connection won: it becomes the session.
                old = self.main
                self.others.remove(link)
                self.main = link
                link.session.auto_restart = True
                if old.session.state != State.IDLE:
                    self._drive(old, old.session.collision_lost())
                self._out.append(Release(old.id))
            for other in list(self.others):
                self._drive(other, other.session.collision_lost())
                self._release(other)
            self._on_established()
        elif change.old == State.ESTABLISHED and link is self.main:
            self.export = None
            self.rib_out.reset()
        if link is not self.main and change.new == State.IDLE:
            self._release(link)
        if link is self.main:
            level = "info" if change.new in (State.ESTABLISHED, State.IDLE) else "debug"
            getattr(_log(), level)(
                f"peer {self.address} {change.old.value} → {change.new.value}",
                peer=self.address,
                reason=change.reason,
            )

    def _check_collision(self, link: Link, event: OpenReceived) -> None:
        """§6.8, checked when an OPEN arrives while another connection is in OpenConfirm."""
        for other in self.links:
            if other is link or other.session.state != State.OPEN_CONFIRM:
                continue
            keep_local = keep_locally_initiated(self.router_id, event.open.bgp_id)
            loser, winner = (link, other) if link.outgoing != keep_local else (other, link)
            _log().info(
                f"peer {self.address} connection collision: keeping the "
                f"{'locally' if keep_local else 'remotely'} initiated connection",
                peer=self.address,
            )
            self._drive(loser, loser.session.collision_lost())
            self._out.append(Release(loser.id))
            if loser is self.main:
                self.others.remove(winner)
                self.main = winner
                winner.session.auto_restart = True
            elif loser in self.others:
                self.others.remove(loser)
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
        if self.session_config.restarting:
            # The R and F bits describe this restart only (RFC 4724 §3): later sessions of
            # this peer (a flap an hour on) open without them.
            self.session_config = replace(
                self.session_config, restarting=False, forwarding_preserved=False
            )
            for link in self.links:
                link.session.config = self.session_config
        self.export = self._export_context(neg)
        changed = self.rib_in.add_path ^ neg.add_path_receive
        if changed:
            # Stale routes keyed with (or without) Path Identifiers cannot be matched by
            # the new session's announcements: they go now, under the old keying.
            for fam in sorted(changed):
                self._forget(self.rib_in.sweep_stale(fam), "ADD-PATH negotiated differently")
            self.rib_in.add_path = neg.add_path_receive
        # RFC 4724 §4.2: routes of families the restarted peer did not preserve go now.
        gr = neg.peer_graceful_restart
        if any(self.rib_in.stale_marks.values()):
            kept = {f.family for f in gr.families if f.forwarding_preserved} if gr else set()
            for fam in (IPV4_UNICAST, IPV6_UNICAST):
                if fam not in kept:
                    self._forget(self.rib_in.sweep_stale(fam), f"{fam} not preserved by the peer")
        self._flush(end_of_rib=True)

    def _export_context(self, neg: Negotiated) -> ExportContext:
        """What the Adj-RIB-Out needs of this session: next hops (configured, else our
        address on the connection: next-hop self) and the families to advertise."""
        local = self.main.local
        nh4 = self.config.next_hop_v4 or (local if isinstance(local, IPv4Address) else None)
        nh6 = self.config.next_hop_v6 or (local if isinstance(local, IPv6Address) else None)
        families = set(neg.families)
        for fam, nh in ((IPV4_UNICAST, nh4), (IPV6_UNICAST, nh6)):
            if fam in families and nh is None and not self.config.next_hop_unchanged:
                families.discard(fam)
                if fam not in self._warned_next_hop:
                    self._warned_next_hop.add(fam)
                    other = "IPv4" if fam == IPV4_UNICAST else "IPv6"
                    _log().warning(
                        f"peer {self.address}: {fam} negotiated but this node has no {other}"
                        f" address to give as next hop; not advertising {fam} (give the"
                        f" node an {other} InternalIP, or leave {fam} out of the BGPPeer's"
                        " families)",
                        peer=self.address,
                    )
        return ExportContext(
            local_as=self.local_as,
            peer_as=neg.peer_as,
            four_octet_as=neg.four_octet_as,
            next_hop_v4=nh4 if isinstance(nh4, IPv4Address) else None,
            next_hop_v6=(nh6,) if isinstance(nh6, IPv6Address) else (),
            families=frozenset(families),
            add_path=neg.add_path_send & families,
        )

    def _on_down(self, down: SessionDown) -> None:
        stale = down.peer_restart_time
        if stale and self.config.stale_limit is not None:
            stale = min(stale, self.config.stale_limit)
        if stale:
            for fam in (IPV4_UNICAST, IPV6_UNICAST):
                if fam not in down.stale_families:
                    self._forget(self.rib_in.clear(fam), f"session down ({fam} not restartable)")
            n = self.rib_in.mark_stale()
            _log().info(
                f"peer {self.address} down; keeping {n} routes as stale for "
                f"{stale}s (graceful restart)",
                peer=self.address,
            )
            self._out.append(ArmTimer(NeighborTimer.STALE, stale))
        else:
            self._forget(self.rib_in.clear(), "session down")

    def _forget(self, gone: dict[Family, list[bytes]], reason: str) -> None:
        """Routes removed from the Adj-RIB-In by us rather than by the peer's UPDATEs."""
        for family, encs in gone.items():
            if encs:
                _log().info(f"peer {self.address}: {len(encs)} {family} routes removed ({reason})")
                add_path = family in self.rib_in.add_path
                self._out.append(Report(RoutesWithdrawn(family, tuple(encs), reason, add_path)))

    def _flush(self, end_of_rib: bool = False) -> None:
        export = self.export
        if export is None:
            return
        msgs = self.rib_out.updates(export)
        if end_of_rib:
            msgs += [Update.end_of_rib_for(f).pack() for f in sorted(export.families)]
        self._write(msgs)

    def _write(self, msgs: list[bytes]) -> None:
        if not msgs:
            return
        data = b"".join(msgs)
        self._out.append(Transmit(self.main.id, data))
        self.counters.updates_sent += len(msgs)
        self.counters.bytes_sent += len(data)
