"""UDP transport for the heartbeat core: unicast to a static peer list, on asyncio.

The loop wakes exactly when the core has something to do (next heartbeat, next member
deadline). Before judging anyone dead it drains every heartbeat already queued in the
socket: when this process was starved of CPU, the peers' heartbeats are still waiting in
the kernel buffer and must count, so a busy *receiver* never declares spurious deaths.
Heartbeats are marked CS6 (network control) so switches that honour DSCP queue them first.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Callable, Sequence

from teapot_lb.membership.core import MemberChanged, Membership

DEFAULT_PORT = 7480
_DSCP_CS6 = 48 << 2
_SO_PRIORITY_CONTROL = 6


def _family(addresses: Sequence[str]) -> socket.AddressFamily:
    versions = {ipaddress.ip_address(a).version for a in addresses}
    return socket.AF_INET6 if 6 in versions else socket.AF_INET


def _mapped(address: str, family: socket.AddressFamily) -> str:
    ip = ipaddress.ip_address(address)
    if family == socket.AF_INET6 and ip.version == 4:
        return f"::ffff:{ip}"
    return address


class UdpHeartbeats:
    """Runs ``membership`` over UDP; ``on_change`` gets every batch of state changes."""

    def __init__(
        self,
        membership: Membership,
        peers: Sequence[str],
        *,
        on_change: Callable[[list[MemberChanged]], None],
        port: int = DEFAULT_PORT,
        bind: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.membership = membership
        self._on_change = on_change
        self._clock = clock
        family = _family([*peers, *([bind] if bind else [])])
        self._peers = [(_mapped(p, family), port) for p in peers]
        self.send_errors = 0
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        if family == socket.AF_INET6:
            self._sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            self._sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, _DSCP_CS6)
        else:
            self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, _DSCP_CS6)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, _SO_PRIORITY_CONTROL)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        default_bind = "::" if family == socket.AF_INET6 else "0.0.0.0"
        self._sock.bind((_mapped(bind, family) if bind else default_bind, port))

    def _emit(self, changes: list[MemberChanged]) -> None:
        if changes:
            self._on_change(changes)

    def _drain(self) -> None:
        for _ in range(4096):  # bounded, so a flood on the port cannot wedge the loop
            try:
                data = self._sock.recv(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. ICMP port unreachable reported on the socket: not our problem
            self._emit(self.membership.receive(data, self._clock()))

    def _send(self, data: bytes) -> None:
        for peer in self._peers:
            try:
                self._sock.sendto(data, peer)
            except OSError:
                self.send_errors += 1  # link down, no route: the peer will judge us dead

    async def run(self) -> None:
        """Send and receive heartbeats until cancelled."""
        loop = asyncio.get_running_loop()
        loop.add_reader(self._sock.fileno(), self._drain)
        try:
            while True:
                self._drain()
                now = self._clock()
                self._emit(self.membership.tick(now))
                beat = self.membership.poll(now)
                if beat is not None:
                    self._send(beat)
                delay = self.membership.next_deadline() - self._clock()
                await asyncio.sleep(max(delay, 0.0))
        finally:
            loop.remove_reader(self._sock.fileno())

    def goodbye(self) -> None:
        """Tell peers we are leaving (graceful shutdown), so they take over at once."""
        self._send(self.membership.goodbye())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
