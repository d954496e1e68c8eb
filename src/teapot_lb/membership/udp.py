"""UDP transport for the heartbeat core: unicast to a static peer list, on asyncio.

A :class:`~teapot_lb.membership.core.Beat` goes to every peer of the list, or to the
addresses the core names (its monitors: the sources their own datagrams came from).

The core's timer orders run on the loop (:class:`~teapot_lb.timers.LoopTimers`). Before a
member's silence timer counts, every heartbeat already queued in the socket is drained:
when this process was starved of CPU, the peers' heartbeats are still waiting in the
kernel buffer and must count, so a busy *receiver* never declares spurious deaths (a
heartbeat found there re-arms the timer, and the expiry is void); the same before an
accused member's time to refute runs out.
Heartbeats are marked CS6 (network control) so switches that honour DSCP queue them first.
A heartbeat dropped for a missing or wrong tag is logged as ``heartbeat_rejected`` with its
source address, at most once per source every :data:`WARN_EVERY_S` (a forger, or a node
with another key, sends 50 a second), with the count left unlogged meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from teapot_lb import log
from teapot_lb.membership.core import (
    Beat,
    MemberChanged,
    Membership,
    Output,
    RefuteTimer,
    SilenceTimer,
    TimerName,
    Unauthenticated,
)
from teapot_lb.timers import LoopTimers

DEFAULT_PORT = 7480
WARN_EVERY_S = 10.0
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


def _unmapped(address: str) -> str:
    """An IPv4 peer as it sent, not as the dual-stack socket shows it (``::ffff:a.b.c.d``)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return str(mapped or ip)


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
        self._warned: dict[str, tuple[float, int]] = {}  # source -> (last warning, unlogged)
        self._log = log.get("membership").bind(node=membership.node)
        self._timers: LoopTimers[TimerName] = LoopTimers(self._fire)
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

    def _apply(self, outputs: list[Output], source: Any = None) -> None:
        changes: list[MemberChanged] = []
        for out in outputs:
            if isinstance(out, Beat):
                self._send(out.data, out.to)
            elif isinstance(out, MemberChanged):
                changes.append(out)
            elif isinstance(out, Unauthenticated):
                self._warn(out, source)
            else:
                self._timers.apply(out)
        if changes:
            self._on_change(changes)

    def _fire(self, timer: TimerName) -> None:
        if isinstance(timer, SilenceTimer | RefuteTimer):
            self._drain()
            if timer in self._timers.running():
                return  # heard meanwhile: re-armed
        self._apply(self.membership.timer_expired(timer))

    def _warn(self, rejected: Unauthenticated, source: Any) -> None:
        address = _unmapped(source[0]) if source else "?"
        now = self._clock()
        last, unlogged = self._warned.get(address, (None, 0))
        if last is not None and now - last < WARN_EVERY_S:
            self._warned[address] = (last, unlogged + 1)
            return
        if len(self._warned) >= 1024:  # bounded: spoofed sources must not grow it forever
            self._warned.clear()
        self._warned[address] = (now, 0)
        self._log.warning(
            "heartbeat_rejected", source=address, reason=rejected.reason, unlogged=unlogged
        )

    def _drain(self) -> None:
        for _ in range(4096):  # bounded, so a flood on the port cannot wedge the loop
            try:
                data, source = self._sock.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. ICMP port unreachable reported on the socket: not our problem
            self._apply(self.membership.receive(data, self._clock(), source[:2]), source)

    def _send(self, data: bytes, to: Sequence[Any] | None = None) -> None:
        """To every configured peer, or to the sources the core chose (its monitors)."""
        for peer in self._peers if to is None else to:
            try:
                self._sock.sendto(data, peer)
            except OSError:
                self.send_errors += 1  # link down, no route: the peer will judge us dead

    async def run(self) -> None:
        """Send and receive heartbeats until cancelled."""
        loop = asyncio.get_running_loop()
        loop.add_reader(self._sock.fileno(), self._drain)
        try:
            self._drain()
            self._apply(self.membership.start())
            await asyncio.Event().wait()
        finally:
            self._timers.cancel()
            loop.remove_reader(self._sock.fileno())

    def goodbye(self) -> None:
        """Tell peers we are leaving (graceful shutdown), so they take over at once."""
        self._send(self.membership.goodbye())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
