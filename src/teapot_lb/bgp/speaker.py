"""The asyncio BGP speaker: listens, and holds the peers (:mod:`.peer`) and their routes.

Protocol logic lives in the sans-I/O cores (:mod:`.fsm` per session, :mod:`.neighbor` per
configured neighbor); :mod:`.peer` moves their bytes and time; this module only accepts
connections, hands them to the right peer, and fans desired routes out to the peers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Any, TypeVar, cast

from teapot_lb import log
from teapot_lb.bfd.session import Parameters as BfdParameters
from teapot_lb.bfd.session import StateChanged as BfdStateChanged
from teapot_lb.bfd.transport import BfdEndpoint, SessionKey

from .attributes import Desired, Paths, ReceivedPath, RouteAttributes
from .config import PeerConfig
from .fsm import Action
from .neighbor import PeerCounters
from .peer import Connection, Peer
from .rib import CompiledRoutes, PrefixKey, change_compiled, compile_routes
from .rib.update_groups import ExportMemo
from .transport import TCP_MD5SIG, TCP_MD5SIG_EXT, md5sig_struct, set_min_ttl, set_ttl
from .wire import CeaseSubcode, Notification, Prefix
from .wire.family import Address, Family

__all__ = ["EventCallback", "Peer", "PeerConfig", "PeerCounters", "Speaker"]

_K = TypeVar("_K", bound=PrefixKey)  # desired routes: by network, or by prefix text


def _log() -> Any:
    # Looked up per use: a module-level logger would freeze the configuration at import.
    return log.get(__name__)


EventCallback = Callable[[Peer, Action], None]
# Who may connect from an address no configured peer has: its configuration (the peer is
# added, passive), or None (refused with Cease/Connection Rejected, RFC 4486).
PeerResolver = Callable[[Address], PeerConfig | None]


@dataclass
class _Listener:
    servers: list[asyncio.Server] = field(default_factory=list)


class _Inbox:
    """What the peers' connections delivered (bytes, a close), each peer's in arrival order.

    With a ``turn`` (seconds), about that much of it at most (one delivery at least) is
    handled per turn of the event loop and the rest in the next turns; without one, each
    delivery as it comes. A transport sends what its socket did not take at once only
    between turns, so a relay whose 200 tenant sessions' bursts all arrive in one turn
    would send the routers nothing more until it had judged every one of them. The peers
    with deliveries waiting are served one delivery each in turn: a peer that sent 100,000
    routes (a tenant's junk, all to be rejected) delays another peer's UPDATE by one
    delivery of its own, not by its whole backlog.
    """

    def __init__(self, turn: float | None) -> None:
        self.turn = turn
        self._queues: dict[Hashable, deque[Callable[[], None]]] = {}
        self._turns: deque[Hashable] = deque()
        self._scheduled = False

    def put(self, source: Hashable, delivered: Callable[[], None]) -> None:
        if self.turn is None:
            delivered()
            return
        queue = self._queues.get(source)
        if queue is None:
            queue = self._queues[source] = deque()
            self._turns.append(source)
        queue.append(delivered)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._handle, self.turn)

    def _handle(self, turn: float) -> None:
        turns, queues = self._turns, self._queues
        ends = time.perf_counter() + turn
        while turns:  # at least one per turn
            source = turns.popleft()
            queue = queues[source]
            delivered = queue.popleft()
            if queue:
                turns.append(source)
            else:
                del queues[source]
            try:
                delivered()
            except Exception:  # one peer's trouble never stops the others' deliveries
                _log().exception("bgp error handling what a connection delivered")
            if time.perf_counter() >= ends:
                break
        if turns:
            asyncio.get_running_loop().call_soon(self._handle, turn)
        else:
            self._scheduled = False


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
        resolve_peer: PeerResolver | None = None,
        listen_min_ttl: int | None = None,
        received_per_turn: float | None = None,
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
        # A relay's listener: peers are found by source address when they connect.
        self.resolve_peer = resolve_peer
        # GTSM on the listener (RFC 5082): SYNs with a lower TTL are dropped by the kernel.
        self.listen_min_ttl = listen_min_ttl
        self._prefix_passwords: dict[IPv4Network | IPv6Network, str | None] = {}
        self.peers: dict[str, Peer] = {}
        self._listener = _Listener()
        # What connections deliver is handled at most this many seconds per turn of the
        # event loop (None: at once); see _Inbox.
        self._inbox = _Inbox(received_per_turn)
        self._routes: CompiledRoutes | None = None
        self._per_peer_routes: dict[str, CompiledRoutes] = {}
        # Peers in step share their UPDATEs (update groups: bgp/rib/update_groups.py).
        self.export_memo = ExportMemo()
        self._closing: set[Connection] = set()
        self._running = False
        self._bfd: BfdEndpoint | None = None  # made when a peer asks for BFD
        self._bfd_keys: dict[str, SessionKey] = {}  # by peer address
        self._bfd_wanted: dict[str, BfdParameters] = {}  # by peer address; see set_bfd

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
                try:
                    server = await loop.create_server(
                        lambda: Connection(self._accept), host=host, port=port, reuse_address=True
                    )
                except PermissionError as err:
                    raise PermissionError(
                        err.errno,
                        f"cannot listen for BGP on [{host}]:{port}: {err.strerror}; a port below"
                        " 1024 needs root or the capability NET_BIND_SERVICE (the speaker's"
                        " DaemonSet adds it to the container's securityContext)",
                    ) from err
                if port == 0:  # bind the other family to the same ephemeral port
                    port = int(server.sockets[0].getsockname()[1])
                if self.listen_min_ttl is not None:
                    for tsock in server.sockets:
                        # The SYN-ACK leaves with the listener's TTL: a GTSM peer drops it
                        # unless it is 255 as well.
                        set_ttl(tsock, 255)
                        set_min_ttl(tsock, self.listen_min_ttl)
                self._listener.servers.append(server)
            for peer in self.peers.values():
                self._listen_md5(peer)
            for net, password in self._prefix_passwords.items():
                self._listen_prefix_md5(net, password)
            _log().info("bgp listening", address=self.listen_address or "*", port=self.listen_port)
        for peer in self.peers.values():
            self._start_bfd(peer)
            peer.start()

    def set_listen_password(self, network: IPv4Network | IPv6Network, password: str | None) -> None:
        """TCP MD5 (RFC 2385) for connections from any address of ``network`` (a relay's
        peers, found by source address); None removes it."""
        if password is None:
            if self._prefix_passwords.pop(network, None) is not None:
                self._listen_prefix_md5(network, None)
            return
        if self._prefix_passwords.get(network) != password:
            self._prefix_passwords[network] = password
            self._listen_prefix_md5(network, password)

    def add_peer(self, config: PeerConfig) -> Peer:
        peer = Peer(self, config)
        if peer.address in self.peers:
            raise ValueError(f"peer {peer.address} is already configured")
        self.peers[peer.address] = peer
        peer.rib_out.memo = self.export_memo
        if config.bfd is not None:
            self._bfd_wanted[peer.address] = config.bfd
        routes = self._per_peer_routes.get(peer.address, self._routes)
        if routes is not None:
            peer.rib_out.set_desired(routes)
        if self._running:
            self._listen_md5(peer)
            self._start_bfd(peer)
            peer.start()
        return peer

    async def remove_peer(self, address: str, communication: str = "") -> None:
        peer = self.peers.pop(str(ip_address(address)))
        self._stop_bfd(peer.address)
        self._bfd_wanted.pop(peer.address, None)
        peer.stop(Notification.cease(CeaseSubcode.PEER_DECONFIGURED, communication), "peer removed")
        await self._drain()

    def set_bfd(self, address: str, parameters: BfdParameters | None) -> None:
        """New BFD parameters for a peer's session without touching BGP (a BFDProfile
        edited, added or removed): a running BFD session changes through a poll sequence
        and stays Up (RFC 5880 §6.8.3); None stops it with AdminDown, which the router
        does not take for a failure (§6.8.16, RFC 5882 §3.2)."""
        peer = self.peer(address)
        if parameters is None:
            self._bfd_wanted.pop(peer.address, None)
            self._stop_bfd(peer.address)
            return
        self._bfd_wanted[peer.address] = parameters
        key = self._bfd_keys.get(peer.address)
        if key is not None and self._bfd is not None:
            self._bfd.change_parameters(key, parameters)
        elif self._running:
            self._start_bfd(peer)

    def peer(self, address: str) -> Peer:
        return self.peers[str(ip_address(address))]

    def set_routes(self, routes: Mapping[_K, Desired | None], peer: str | None = None) -> None:
        """Desired routes for every peer (or one); only the difference is sent. A prefix
        (a network, or its text) maps to its :class:`~.attributes.RouteAttributes`, or to
        :class:`~.attributes.Paths` for several paths (each sent with ADD-PATH, the first
        only to a peer without it)."""
        self._install(compile_routes(routes), peer)

    async def replace_routes(self, routes: Mapping[_K, Desired | None], *, peer: str) -> None:
        """:meth:`set_routes` for one peer, the table encoded in a worker thread: a whole
        table of 10,000 prefixes is parsed and encoded for a second of CPU under load, and
        the event loop must go on meanwhile (BFD, keepalives). Only the difference is sent,
        as by :meth:`set_routes`."""
        self._install(await asyncio.to_thread(compile_routes, routes), peer)

    def _install(self, compiled: CompiledRoutes, peer: str | None) -> None:
        started = time.perf_counter()
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

    def change_routes(
        self, routes: Mapping[_K, Desired | None], withdrawn: Iterable[PrefixKey], *, peer: str
    ) -> None:
        """Change some prefixes of one peer's desired routes (set since
        :meth:`set_routes` for it): ``routes`` as :meth:`set_routes` takes them, and
        ``withdrawn`` no longer desired. Only these prefixes are compiled and diffed: the
        cost follows the change, not the peer's table."""
        address = str(ip_address(peer))
        target = self.peer(peer)
        compiled = self._per_peer_routes.get(address)
        if compiled is None:  # the peer had the shared table (or none): a copy of its own
            compiled = compile_routes({})
            if self._routes is not None:
                for family, table in self._routes.by_family.items():
                    cast(dict[Family, dict[bytes, RouteAttributes]], compiled.by_family)[family] = (
                        dict(table)
                    )
                for family, paths in self._routes.multipath.items():
                    cast(dict[Family, dict[bytes, Paths]], compiled.multipath)[family] = dict(paths)
            self._per_peer_routes[address] = compiled
            target.set_desired(compiled)
        changed = change_compiled(compiled, routes, withdrawn)
        target.set_desired(compiled, changed)

    def set_compiled(
        self, routes: CompiledRoutes, changed: Mapping[Family, Iterable[bytes]] | None = None
    ) -> None:
        """Desired routes for every peer, already in wire form (a relay's table); only the
        difference is sent. ``changed``: the prefixes that may differ from the routes set
        before (the diff then costs what changed, not the table); None: any may."""
        self._routes = routes
        self._per_peer_routes.clear()
        for p in self.peers.values():
            p.set_desired(routes, changed)

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
        if self._bfd is not None:  # AdminDown first (RFC 5880 §6.8.16): no failure seen
            self._bfd.close()
            self._bfd = None
            self._bfd_keys.clear()
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

    def _start_bfd(self, peer: Peer) -> None:
        cfg = peer.config
        parameters = self._bfd_wanted.get(peer.address)
        if parameters is None or peer.address in self._bfd_keys:
            return
        wildcard = "::" if ip_address(peer.address).version == 6 else "0.0.0.0"
        key = SessionKey(
            peer.address, cfg.local_address or wildcard, multihop=cfg.ebgp_multihop is not None
        )
        if self._bfd is None:
            self._bfd = BfdEndpoint(self._bfd_changed)
        self._bfd.add(key, parameters)
        self._bfd_keys[peer.address] = key

    def _stop_bfd(self, address: str) -> None:
        key = self._bfd_keys.pop(address, None)
        if key is not None and self._bfd is not None:
            self._bfd.remove(key)

    def _bfd_changed(self, key: SessionKey, change: BfdStateChanged) -> None:
        peer = self.peers.get(key.peer)
        if peer is not None and change.failed:
            peer.bfd_down(change.diagnostic.name)

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

    def _listen_prefix_md5(self, net: IPv4Network | IPv6Network, password: str | None) -> None:
        family = socket.AF_INET6 if net.version == 6 else socket.AF_INET
        key = md5sig_struct(str(net.network_address), password or "", net.prefixlen)
        for server in self._listener.servers:
            for tsock in server.sockets:
                if tsock.family == family:
                    tsock.setsockopt(socket.IPPROTO_TCP, TCP_MD5SIG_EXT, key)

    def _refuse(self, transport: asyncio.Transport, addr: Address) -> None:
        """An address nobody configured: Cease/Connection Rejected (RFC 4486), then close."""
        _log().info("bgp connection from an unknown address refused", remote=str(addr))
        transport.write(Notification.cease(CeaseSubcode.CONNECTION_REJECTED).pack())
        transport.close()

    def _accept(self, conn: Connection) -> None:
        transport = conn.transport
        assert transport is not None
        peername = transport.get_extra_info("peername")
        try:
            addr = ip_address(peername[0].split("%")[0])
            if isinstance(addr, IPv6Address) and addr.ipv4_mapped is not None:
                addr = addr.ipv4_mapped
            peer = self.peers.get(str(addr))
            if peer is None and self._running and self.resolve_peer is not None:
                config = self.resolve_peer(addr)
                if config is None:
                    self._refuse(transport, addr)
                    return
                peer = self.add_peer(config)
            if peer is None or not self._running:
                _log().info("bgp connection from an unknown address closed", remote=str(addr))
                transport.close()
                return
            sock = transport.get_extra_info("socket")
            ttl = peer.config.ttl(peer.local_as)
            if ttl and sock is not None:
                set_ttl(sock, ttl)
            if peer.config.ttl_security and sock is not None:
                set_min_ttl(sock, 255)
            peer.accept(conn)
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
