"""The asyncio side of one neighbor: moves bytes and time for its :class:`~.neighbor.Neighbor`.

:class:`Peer` owns the sockets (one per link), the connection attempts and the timers the
neighbor orders, and feeds back what happens to them. Every decision (which connection
survives, what to send, when a route goes stale) is the neighbor's. One peer's errors never
reach another: every callback from the network is contained to that peer.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable, Iterable, Mapping
from ipaddress import ip_address
from typing import TYPE_CHECKING, Any

from teapot_lb import log
from teapot_lb.timers import ArmTimer, CancelTimer, LoopTimers

from .attributes import ReceivedPath
from .config import PeerConfig
from .fsm import Negotiated, State, StateChanged
from .neighbor import Neighbor, PeerCounters
from .neighbor_orders import (
    Adopt,
    Close,
    Dial,
    Order,
    Refuse,
    Release,
    Report,
    TimerName,
    Transmit,
)
from .rib import AdjRibIn, AdjRibOut, CompiledRoutes
from .transport import set_md5, set_min_ttl, set_ttl
from .wire import Notification, Prefix
from .wire.family import Address, Family

# A read is handed to the session in slices of this many bytes (the session reassembles
# messages across them): one read can hold 256 KiB, some 10,000 routes that take the
# relay 100 ms to judge in one go, while a slice is judged in a few tens of ms and the
# speaker's inbox serves the other peers between slices. 64 KiB rather than 16: on a quiet
# machine a quiet tenant's route behind 100k junk routes stayed within 1.7x of its p99
# alone (bench/fairness.py), and the relay's CPU for 200,000 paths was 2.25 s against
# 2.1 - 3.1 s with 16 KiB slices (bench/relay.py; docs/performance.md).
DELIVERY_SLICE = 64 * 1024

if TYPE_CHECKING:
    from .speaker import Speaker


def _log() -> Any:
    return log.get("teapot_lb.bgp.speaker")


class Connection(asyncio.Protocol):
    """One TCP connection: says when it is up (``on_made``), hands its bytes and its end to
    the peer it is bound to."""

    def __init__(self, on_made: Callable[[Connection], None]) -> None:
        self.on_made = on_made
        self.transport: asyncio.Transport | None = None
        self.peer: Peer | None = None
        self.link = 0
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def bind(self, peer: Peer | None, link: int = 0) -> None:
        self.peer, self.link = peer, link

    def local_address(self) -> Address | None:
        sockname = self.transport.get_extra_info("sockname") if self.transport else None
        return ip_address(sockname[0].split("%")[0]) if sockname else None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.on_made(self)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer._received(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if self.peer is not None:
            self.peer._lost(self, exc)


class Peer:
    """A configured neighbor: its :class:`~.neighbor.Neighbor`, sockets and timers."""

    def __init__(self, speaker: Speaker, config: PeerConfig) -> None:
        self.speaker = speaker
        self.neighbor = Neighbor(
            config,
            local_as=speaker.local_as,
            router_id=speaker.router_id,
            restarting=speaker.restarting_for(config.restart_time),
        )
        self.address = self.neighbor.address
        self._connections: dict[int, Connection] = {}  # by link
        self._dials: dict[int, asyncio.Task[None]] = {}
        self._timers: LoopTimers[TimerName] = LoopTimers(self._fire)
        self._incoming: Connection | None = None  # while accepted() orders run
        self._established = asyncio.Event()

    def __repr__(self) -> str:
        return f"Peer({self.address}, AS{self.config.peer_as}, {self.state.value})"

    # -- what it is ---------------------------------------------------------------------------

    @property
    def config(self) -> PeerConfig:
        return self.neighbor.config

    @property
    def local_as(self) -> int:
        return self.neighbor.local_as

    @property
    def counters(self) -> PeerCounters:
        return self.neighbor.counters

    @property
    def rib_in(self) -> AdjRibIn:
        return self.neighbor.rib_in

    @property
    def rib_out(self) -> AdjRibOut:
        return self.neighbor.rib_out

    @property
    def state(self) -> State:
        return self.neighbor.state

    @property
    def established(self) -> bool:
        return self.state == State.ESTABLISHED

    @property
    def negotiated(self) -> Negotiated | None:
        """What the OPEN exchange settled (hold time, families, 4-octet ASN, ...)."""
        return self.neighbor.negotiated

    @property
    def last_error(self) -> str | None:
        return self.neighbor.main.session.last_error

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

    # -- speaker-facing ----------------------------------------------------------------------

    def start(self) -> None:
        self._run(self.neighbor.start())

    def set_desired(
        self, routes: CompiledRoutes, changed: Mapping[Family, Iterable[bytes]] | None = None
    ) -> None:
        self._run(self.neighbor.set_desired(routes, changed))

    def stop(self, notification: Notification | None, reason: str) -> None:
        self._run(self.neighbor.stop(notification, reason))

    def abort(self) -> None:
        """Close without a NOTIFICATION (we restart; a graceful-restart peer keeps our routes)."""
        self._run(self.neighbor.abort())

    def flush_now(self) -> None:
        self._run(self.neighbor.flush_now())

    def withdraw_all(self) -> None:
        self._run(self.neighbor.withdraw_all())

    def bfd_down(self, diagnostic: str) -> None:
        self._run(self.neighbor.bfd_down(diagnostic))

    def accept(self, conn: Connection) -> None:
        """An incoming connection from this peer's address."""
        self._incoming = conn
        try:
            self._run(self.neighbor.accepted(conn.local_address()))
        finally:
            self._incoming = None

    # -- carrying out the neighbor's orders ----------------------------------------------------

    def _run(self, orders: Iterable[Order]) -> None:
        for order in orders:
            try:
                self._do(order)
            except Exception:  # never let one peer's trouble escape into the loop
                _log().exception("bgp action failed", peer=self.address, action=repr(order)[:200])

    def _do(self, order: Order) -> None:
        if isinstance(order, Transmit):
            conn = self._connections.get(order.link)
            if conn is not None and conn.transport is not None:
                conn.transport.write(order.data)
        elif isinstance(order, ArmTimer | CancelTimer):
            self._timers.apply(order)
        elif isinstance(order, Report):
            event = order.event
            if isinstance(event, StateChanged):
                if event.new == State.ESTABLISHED:
                    self._established.set()
                elif event.old == State.ESTABLISHED:
                    self._established.clear()
            self.speaker._emit(self, event)
        elif isinstance(order, Dial):
            self._cancel_dial(order.link)
            self._dials[order.link] = asyncio.get_running_loop().create_task(self._dial(order.link))
        elif isinstance(order, Close):
            self._cancel_dial(order.link)
            self._close(self._connections.pop(order.link, None))
        elif isinstance(order, Release):
            self._cancel_dial(order.link)
            self._timers.cancel(t for t in self._timers.running() if _of_link(t, order.link))
        elif isinstance(order, Adopt):
            self._cancel_dial(order.link)
            conn = self._incoming
            assert conn is not None
            self._close(self._connections.pop(order.link, None))
            self._connections[order.link] = conn
            conn.bind(self, order.link)
        elif isinstance(order, Refuse):
            conn = self._incoming
            assert conn is not None and conn.transport is not None
            conn.transport.write(order.data)
            conn.transport.close()

    def _close(self, conn: Connection | None) -> None:
        if conn is None or conn.transport is None:
            return
        conn.bind(None)
        conn.transport.close()  # flushes what was written (a NOTIFICATION) first
        closing = self.speaker._closing
        closing.add(conn)
        conn.closed.add_done_callback(lambda _: closing.discard(conn))

    def _fire(self, timer: TimerName) -> None:
        self._run(self.neighbor.timer_expired(timer))

    def _cancel_dial(self, link: int) -> None:
        task = self._dials.pop(link, None)
        if task is not None and not task.done():
            task.cancel()

    # -- the network --------------------------------------------------------------------------

    async def _dial(self, link: int) -> None:
        cfg = self.config
        family = socket.AF_INET6 if ip_address(cfg.address).version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if cfg.password:
                set_md5(sock, cfg.address, cfg.password)
            ttl = cfg.ttl(self.local_as)
            if ttl:
                set_ttl(sock, ttl)
            if cfg.ttl_security:
                set_min_ttl(sock, 255)
            if cfg.local_address:
                sock.bind((cfg.local_address, 0))
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, (cfg.address, cfg.port))
            task = asyncio.current_task()
            await loop.create_connection(
                lambda: Connection(lambda conn: self._dialed(link, task, conn)), sock=sock
            )
        except asyncio.CancelledError:
            sock.close()
            raise
        except Exception as exc:
            sock.close()
            self._dials.pop(link, None)
            if isinstance(exc, OSError):
                self._run(self.neighbor.connection_failed(link, str(exc.strerror or exc)))
            else:  # e.g. an MD5 key the kernel refuses: a configuration error, keep retrying
                self._run(self.neighbor.connection_failed(link, str(exc), os_error=False))

    def _dialed(self, link: int, task: asyncio.Task[Any] | None, conn: Connection) -> None:
        """Our connection is up (called before any of its data is delivered)."""
        if self._dials.get(link) is not task:  # abandoned meanwhile (its link adopted one)
            if conn.transport is not None:
                conn.transport.abort()
            return
        self._dials.pop(link, None)  # done: the orders below must not cancel it
        conn.bind(self, link)
        self._connections[link] = conn
        self._run(self.neighbor.connection_made(link, conn.local_address()))

    def _received(self, conn: Connection, data: bytes) -> None:
        if len(data) <= DELIVERY_SLICE:
            self.speaker._inbox.put(self, lambda: self._take(conn, data))
            return
        view = memoryview(data)
        for start in range(0, len(data), DELIVERY_SLICE):
            part = bytes(view[start : start + DELIVERY_SLICE])
            self.speaker._inbox.put(self, functools.partial(self._take, conn, part))

    def _take(self, conn: Connection, data: bytes) -> None:
        if self._connections.get(conn.link) is conn:
            self._run(self.neighbor.data_received(conn.link, data))

    def _lost(self, conn: Connection, exc: Exception | None) -> None:
        # After the bytes that came before it (a NOTIFICATION, then the close).
        self.speaker._inbox.put(self, lambda: self._gone(conn, exc))

    def _gone(self, conn: Connection, exc: Exception | None) -> None:
        if self._connections.get(conn.link) is not conn:
            return
        del self._connections[conn.link]
        reason = f"connection lost: {exc}" if exc else "connection closed by peer"
        self._run(self.neighbor.connection_lost(conn.link, reason))


def _of_link(timer: TimerName, link: int) -> bool:
    return isinstance(timer, tuple) and timer[0] == link
