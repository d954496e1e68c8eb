"""BFD over UDP on the asyncio loop: moves bytes and time for :class:`~.session.Session`.

RFC 5881 (single hop): control packets to port 3784, RFC 5883 (multihop) to 4784; the
source port is one of 49152-65535, the same for the life of a session (§4); packets go
out with TTL / hop limit 255 and the received TTL is read with ``IP_RECVTTL`` /
``IPV6_RECVHOPLIMIT`` for the session's GTSM check (RFC 5881 §5). Everything else (state,
timers, what to send) is the session's business.

Sessions are found by Your Discriminator when the packet carries one, else by the
sender's address and the port it came to (RFC 5881 §3, RFC 5883 §3).
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from teapot_lb import log
from teapot_lb.timers import LoopTimers

from .session import BfdTimer, Discarded, Order, Parameters, Session, StateChanged, Transmit
from .wire import Malformed, State, decode, encode

SINGLE_HOP_PORT = 3784  # RFC 5881 §4
MULTIHOP_PORT = 4784  # RFC 5883 §5
SOURCE_PORTS = range(49152, 65536)
_IP_RECVTTL = getattr(socket, "IP_RECVTTL", 12)  # Linux values, absent from some Pythons
_IP_TTL = socket.IP_TTL


def _logger() -> Any:
    """Looked up at use: a module-level logger would predate ``log.configure``."""
    return log.get(__name__)


@dataclass(frozen=True, slots=True)
class SessionKey:
    """One BFD session: the peer, our address towards it, and single hop or multihop."""

    peer: str
    local: str
    multihop: bool = False

    @property
    def family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if ipaddress.ip_address(self.peer).version == 6 else socket.AF_INET


StateListener = Callable[[SessionKey, StateChanged], None]


@dataclass
class _Running:
    key: SessionKey
    session: Session
    sock: socket.socket
    timers: LoopTimers[BfdTimer] = field(init=False)


def _set_ttl(sock: socket.socket, family: socket.AddressFamily) -> None:
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 255)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
    else:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 255)


def _ttl_of(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancillary:
        if (level, kind) in (
            (socket.IPPROTO_IP, _IP_TTL),
            (socket.IPPROTO_IPV6, socket.IPV6_HOPLIMIT),
        ) and len(data) >= 4:
            return int(struct.unpack("=i", data[:4])[0])
    return None


class BfdEndpoint:
    """Every BFD session of one process: listening sockets, one send socket per session.

    ``on_state`` hears every state change. ``random`` is the jitter source (§6.8.7).
    """

    def __init__(
        self,
        on_state: StateListener | None = None,
        *,
        rng: random.Random | None = None,
        single_hop_port: int = SINGLE_HOP_PORT,
        multihop_port: int = MULTIHOP_PORT,
    ) -> None:
        self._on_state = on_state
        self._rng = rng or random.Random()
        self._ports = {False: single_hop_port, True: multihop_port}
        self._sessions: dict[SessionKey, _Running] = {}
        self._by_discriminator: dict[int, _Running] = {}
        self._listeners: dict[tuple[socket.AddressFamily, bool], socket.socket] = {}

    # -- sessions

    def add(self, key: SessionKey, parameters: Parameters) -> Session:
        """Start a session; ``parameters.min_ttl`` applies to multihop ones (RFC 5883 §5)."""
        if key in self._sessions:
            raise ValueError(f"a BFD session to {key.peer} from {key.local} exists already")
        self._listen(key.family, key.multihop)
        discriminator = self._new_discriminator()
        session = Session(
            discriminator,
            parameters,
            random=self._rng.random,
            single_hop=not key.multihop,
        )
        running = _Running(key, session, self._send_socket(key))
        running.timers = LoopTimers(lambda timer: self._expired(running, timer))
        self._sessions[key] = running
        self._by_discriminator[discriminator] = running
        _logger().info("bfd_session_added", peer=key.peer, local=key.local, multihop=key.multihop,
                     discriminator=discriminator)  # fmt: skip
        self._apply(running, session.start())
        return session

    def remove(self, key: SessionKey) -> None:
        """Stop a session: AdminDown first (§6.8.16), so the peer does not see a failure."""
        running = self._sessions.pop(key, None)
        if running is None:
            return
        self._apply(running, running.session.admin_down())
        self._apply(running, running.session.stop())
        self._by_discriminator.pop(running.session.local_discriminator, None)
        running.sock.close()

    def session(self, key: SessionKey) -> Session | None:
        running = self._sessions.get(key)
        return running.session if running else None

    def state(self, key: SessionKey) -> State | None:
        running = self._sessions.get(key)
        return running.session.state if running else None

    def change_parameters(self, key: SessionKey, parameters: Parameters) -> None:
        """New parameters for a running session: a poll sequence if Up (RFC 5880 §6.8.3)."""
        running = self._sessions[key]
        self._apply(running, running.session.change_parameters(parameters))

    def admin_down(self, key: SessionKey) -> None:
        running = self._sessions[key]
        self._apply(running, running.session.admin_down())

    def admin_up(self, key: SessionKey) -> None:
        running = self._sessions[key]
        self._apply(running, running.session.admin_up())

    def close(self) -> None:
        for key in list(self._sessions):
            self.remove(key)
        loop = asyncio.get_running_loop()
        for sock in self._listeners.values():
            loop.remove_reader(sock.fileno())
            sock.close()
        self._listeners.clear()

    # -- I/O

    def _new_discriminator(self) -> int:
        while True:
            value = self._rng.randrange(1, 1 << 32)
            if value not in self._by_discriminator:
                return value

    def _send_socket(self, key: SessionKey) -> socket.socket:
        sock = socket.socket(key.family, socket.SOCK_DGRAM)
        sock.setblocking(False)
        _set_ttl(sock, key.family)
        for _ in range(64):
            try:
                sock.bind((key.local, self._rng.choice(SOURCE_PORTS)))
                return sock
            except OSError:
                continue
        sock.close()
        raise OSError(f"no free UDP source port in 49152-65535 on {key.local}")

    def _listen(self, family: socket.AddressFamily, multihop: bool) -> None:
        if (family, multihop) in self._listeners:
            return
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVHOPLIMIT, 1)
            sock.bind(("::", self._ports[multihop]))
        else:
            sock.setsockopt(socket.IPPROTO_IP, _IP_RECVTTL, 1)
            sock.bind(("0.0.0.0", self._ports[multihop]))
        sock.setblocking(False)
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable, sock, multihop)
        self._listeners[(family, multihop)] = sock

    def _readable(self, sock: socket.socket, multihop: bool) -> None:
        while True:
            try:
                data, ancillary, _flags, source = sock.recvmsg(512, socket.CMSG_SPACE(4))
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                _logger().warning("bfd_receive_failed", error=str(exc))
                return
            self._received(data, _ttl_of(ancillary), str(source[0]), multihop)

    def _received(self, data: bytes, ttl: int | None, source: str, multihop: bool) -> None:
        packet = decode(data)
        if isinstance(packet, Malformed):
            _logger().debug("bfd_packet_malformed", peer=source, reason=packet.reason.name,
                          detail=packet.detail)  # fmt: skip
            return
        running = (
            self._by_discriminator.get(packet.your_discriminator)
            if packet.your_discriminator
            else self._find(source, multihop)
        )
        if running is None or running.key.peer != source or running.key.multihop != multihop:
            _logger().debug("bfd_packet_unknown_session", peer=source, multihop=multihop,
                          your_discriminator=packet.your_discriminator)  # fmt: skip
            return
        self._apply(running, running.session.packet_received(packet, ttl))

    def _find(self, source: str, multihop: bool) -> _Running | None:
        for running in self._sessions.values():
            if running.key.multihop == multihop and running.key.peer == source:
                return running
        return None

    def _expired(self, running: _Running, timer: BfdTimer) -> None:
        self._apply(running, running.session.timer_expired(timer))

    def _apply(self, running: _Running, orders: list[Order]) -> None:
        key = running.key
        for order in orders:
            if isinstance(order, Transmit):
                try:
                    running.sock.sendto(encode(order.packet), (key.peer, self._ports[key.multihop]))
                except OSError as exc:  # no route yet, interface down: the next one may go
                    _logger().debug("bfd_send_failed", peer=key.peer, error=str(exc))
            elif isinstance(order, StateChanged):
                _logger().info("bfd_state_changed", peer=key.peer, local=key.local,
                             old=order.old.name, new=order.new.name,
                             diagnostic=order.diagnostic.name)  # fmt: skip
                if self._on_state is not None:
                    self._on_state(key, order)
            elif isinstance(order, Discarded):
                _logger().debug("bfd_packet_discarded", peer=key.peer, reason=order.reason.name)
            else:
                running.timers.apply(order)
