"""The ``AF_PACKET`` adapter for one interface: moves frames and time for an :class:`Announcer`.

Two packet sockets per interface: one for ARP (``ETH_P_ARP``), one for IPv6 with a
classic BPF filter in the kernel that keeps only ICMPv6 NS/NA without extension headers
(so a busy host does not wake Python for every IPv6 packet). For each owned IPv6 address
we join its solicited-node multicast group on the interface (``IPV6_JOIN_GROUP`` on a
datagram socket), so the NIC delivers the NS for it and MLD-snooping switches forward it;
the membership ends with the release. Frames we sent ourselves (``PACKET_OUTGOING``) are
skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import socket
import struct
import time
from collections.abc import Callable, Container
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Address, IPv6Network

from teapot_lb.l2 import wire
from teapot_lb.l2.announcer import (
    DEFAULT_SCHEDULE,
    Announcer,
    AnnounceTimer,
    Claim,
    Counters,
    IPAddress,
    Output,
)
from teapot_lb.timers import ArmTimer, CancelTimer, LoopTimers


@dataclass(frozen=True)
class InterfaceInfo:
    """The interface a responder binds to (the speaker lists them: ``speaker.interfaces``)."""

    name: str
    index: int
    mac: bytes
    link_local: IPv6Address | None
    networks: tuple[IPv4Network | IPv6Network, ...]  # connected subnets of its addresses


_PACKET_OUTGOING = 4
_SO_ATTACH_FILTER = 26

# ldh [12]; jeq 0x86dd; ldb [20]; jeq 58; ldb [54]; jeq 135 or 136 -> accept, else drop.
_NDP_FILTER = (
    (0x28, 0, 0, 12),
    (0x15, 0, 6, wire.ETH_P_IPV6),
    (0x30, 0, 0, 20),
    (0x15, 0, 4, wire.IPPROTO_ICMPV6),
    (0x30, 0, 0, 54),
    (0x15, 1, 0, wire.NdpType.NEIGHBOR_SOLICITATION),
    (0x15, 0, 1, wire.NdpType.NEIGHBOR_ADVERTISEMENT),
    (0x06, 0, 0, 0x40000),
    (0x06, 0, 0, 0),
)


def _attach_filter(sock: socket.socket, program: tuple[tuple[int, int, int, int], ...]) -> None:
    code = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("HL", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, fprog)


def _packet_socket(ifname: str, ethertype: int) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    sock.setblocking(False)
    sock.bind((ifname, ethertype))
    return sock


class Responder:
    """Answers ARP/NDP for the owned IPs on one interface; reports claims to ``on_claim``."""

    def __init__(
        self,
        info: InterfaceInfo,
        *,
        on_claim: Callable[[Responder, Claim], None] = lambda r, c: None,
        schedule: tuple[float, ...] = DEFAULT_SCHEDULE,
        refresh: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.info = info
        self.announcer = Announcer(
            mac=info.mac, link_local=info.link_local, schedule=schedule, refresh=refresh
        )
        self._on_claim = on_claim
        self._clock = clock
        self.send_errors = 0
        self._arp = _packet_socket(info.name, wire.ETH_P_ARP)
        self._ndp = _packet_socket(info.name, wire.ETH_P_IPV6)
        _attach_filter(self._ndp, _NDP_FILTER)
        self._groups = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        self._timers: LoopTimers[AnnounceTimer] = LoopTimers(self._due)
        self._unarmed: list[ArmTimer[AnnounceTimer] | CancelTimer[AnnounceTimer]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def counters(self) -> Counters:
        return self.announcer.counters

    @property
    def owned(self) -> frozenset[IPAddress]:
        return self.announcer.owned

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for sock in (self._arp, self._ndp):
            self._loop.add_reader(sock.fileno(), self._readable, sock)
        self._apply(self._unarmed)
        self._unarmed = []

    def close(self) -> None:
        self._timers.cancel()
        for sock in (self._arp, self._ndp, self._groups):
            if self._loop is not None and sock is not self._groups:
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(sock.fileno())
            with contextlib.suppress(OSError):
                sock.close()

    def watch(self, ips: Container[IPAddress]) -> None:
        self.announcer.watch(ips)

    def acquire(self, ip: IPAddress) -> None:
        if isinstance(ip, IPv6Address):
            self._membership(socket.IPV6_JOIN_GROUP, ip)
        self._apply(self.announcer.acquire(ip, self._clock()))

    def release(self, ip: IPAddress) -> None:
        self._apply(self.announcer.release(ip))
        if isinstance(ip, IPv6Address):
            self._membership(socket.IPV6_LEAVE_GROUP, ip)

    def defend(self, ip: IPAddress, *, until: float, every: float) -> None:
        self._apply(self.announcer.defend(ip, self._clock(), until=until, every=every))

    def keep_defending(self, ip: IPAddress, *, until: float, every: float) -> None:
        self._apply(self.announcer.keep_defending(ip, self._clock(), until=until, every=every))

    def _membership(self, op: int, ip: IPv6Address) -> None:
        mreq = wire.solicited_node(ip).packed + struct.pack("@I", self.info.index)
        with contextlib.suppress(OSError):  # already joined / already left
            self._groups.setsockopt(socket.IPPROTO_IPV6, op, mreq)

    def _send(self, frames: list[bytes] | tuple[bytes, ...]) -> None:
        for frame in frames:
            sock = self._arp if frame[12:14] == b"\x08\x06" else self._ndp
            try:
                sock.send(frame)
            except OSError:
                self.send_errors += 1  # link down: nothing to answer anyway

    def _readable(self, sock: socket.socket) -> None:
        for _ in range(64):  # bounded, so a flood cannot starve the heartbeats
            try:
                data, addr = sock.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            if addr[2] == _PACKET_OUTGOING:
                continue
            reaction = self.announcer.receive(data, self._clock())
            self._send(reaction.send)
            for claim in reaction.claims:
                self._on_claim(self, claim)

    def _apply(
        self, outputs: list[Output] | list[ArmTimer[AnnounceTimer] | CancelTimer[AnnounceTimer]]
    ) -> None:
        """Send the announcer's frames and carry out its timer orders."""
        for out in outputs:
            if isinstance(out, bytes):
                self._send((out,))
            elif self._loop is None:
                self._unarmed.append(out)  # before start(): armed when the loop runs
            else:
                self._timers.apply(out)

    def _due(self, timer: AnnounceTimer) -> None:
        self._apply(self.announcer.timer_expired(timer, self._clock()))
