"""What one interface answers and announces: a pure state machine over frames and time.

The adapter hands every received frame to :meth:`Announcer.receive` and sends the bytes it
returns. Repeated announcements are timed in the sans-I/O cores' one style
(:mod:`teapot_lb.timers`): the announcer's methods return frames (bytes) and
:class:`~teapot_lb.timers.ArmTimer` / :class:`~teapot_lb.timers.CancelTimer` orders for
one :class:`AnnounceTimer` per IP, and the adapter calls
:meth:`Announcer.timer_expired` when one expires. ``now`` arguments are data (the
schedule counts from the takeover); the announcer never reads a clock.
Ownership comes from outside (:meth:`acquire` / :meth:`release`): the announcer answers
ARP requests and neighbour solicitations only for owned IPs and reports *claims* — another
station saying that a watched IP is at its MAC — which the split-brain arbiter judges.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address
from typing import TypeAlias

from teapot_lb.l2 import wire
from teapot_lb.timers import ArmTimer, CancelTimer

IPAddress = IPv4Address | IPv6Address

# Announce at once, again after 50 ms (one lost frame costs 50 ms, still inside the
# failover budget), after 250 ms (a switch port or bridge that was still settling when the
# first two went out) and after 1 s (slow learners; RFC 4861 10 allows up to three
# unsolicited NAs, RFC 5227 two announcements — four frames per takeover is cheap).
DEFAULT_SCHEDULE: tuple[float, ...] = (0.0, 0.05, 0.25, 1.0)


@dataclass(frozen=True)
class Claim:
    """Another station on the link said that ``ip`` is at ``mac``."""

    ip: IPAddress
    mac: bytes


@dataclass(frozen=True)
class Reaction:
    """What to do about one received frame."""

    send: tuple[bytes, ...] = ()
    claims: tuple[Claim, ...] = ()


@dataclass(frozen=True)
class AnnounceTimer:
    """The next announcement of ``ip`` is due."""

    ip: IPAddress


# A frame to send, or a timer order.
Output: TypeAlias = bytes | ArmTimer[AnnounceTimer] | CancelTimer[AnnounceTimer]


@dataclass
class Counters:
    requests_seen: int = 0  # ARP requests / NS for an owned IP
    replies_sent: int = 0
    gratuitous_sent: int = 0  # gratuitous ARP and unsolicited NA
    claims_seen: int = 0
    malformed: int = 0
    ignored: int = 0  # well-formed frames that were none of our business


@dataclass
class _Repeat:
    at: float  # when the next announcement is due
    start: float  # when the IP was acquired; the schedule counts from here
    step: int  # index in the schedule of the announcement due at ``at``
    every: float = 0.0  # defending: interval of re-announcements ...
    until: float | None = None  # ... until this time


@dataclass
class Announcer:
    """ARP/NDP answers and announcements for one interface with ``mac``.

    ``link_local`` is the source of our NAs (RFC 4861 7.2.4 wants an address of the
    interface); without one we use the target itself. ``refresh`` re-announces every
    owned IP periodically, for switches whose MAC tables age faster than ARP caches.
    """

    mac: bytes
    link_local: IPv6Address | None = None
    schedule: tuple[float, ...] = DEFAULT_SCHEDULE
    refresh: float | None = None
    counters: Counters = field(default_factory=Counters)
    _owned: set[IPAddress] = field(default_factory=set, init=False)
    _watched: Container[IPAddress] = field(default_factory=frozenset, init=False)
    _repeats: dict[IPAddress, _Repeat] = field(default_factory=dict, init=False)

    @property
    def owned(self) -> frozenset[IPAddress]:
        return frozenset(self._owned)

    def watch(self, ips: Container[IPAddress]) -> None:
        """Report claims by others for these IPs (in addition to the owned ones): asked at
        each frame, not copied, so the caller may hand a view of state it keeps."""
        self._watched = ips

    def acquire(self, ip: IPAddress, now: float) -> list[Output]:
        """Start answering for ``ip``: the first announcement, to send at once, and the
        timer for the next one."""
        if ip in self._owned:
            return []
        self._owned.add(ip)
        rep = _Repeat(at=now, start=now - self.schedule[0], step=0)
        return self._send(ip, rep, now)

    def release(self, ip: IPAddress) -> list[Output]:
        """Stop answering for ``ip`` at once; pending announcements are dropped."""
        self._owned.discard(ip)
        if self._repeats.pop(ip, None) is None:
            return []
        return [CancelTimer(AnnounceTimer(ip))]

    def defend(self, ip: IPAddress, now: float, *, until: float, every: float) -> list[Output]:
        """Announce ``ip`` now and every ``every`` seconds until ``until`` (after a claim)."""
        if ip not in self._owned:
            return []
        rep = _Repeat(at=now, start=now, step=len(self.schedule), every=every, until=until)
        return self._send(ip, rep, now)

    def keep_defending(
        self, ip: IPAddress, now: float, *, until: float, every: float
    ) -> list[Output]:
        """Extend (or start, first frame after ``every``) the defence of ``ip`` to ``until``."""
        if ip not in self._owned:
            return []
        rep = self._repeats.get(ip)
        if rep is not None and rep.until is not None:
            rep.until = max(rep.until, until)
            return []
        start = len(self.schedule)
        self._repeats[ip] = _Repeat(now + every, now, start, every=every, until=until)
        return [ArmTimer(AnnounceTimer(ip), every)]

    def timer_expired(self, timer: AnnounceTimer, now: float) -> list[Output]:
        """The announcement of ``timer.ip`` whose time has come, and the timer for the next."""
        rep = self._repeats.get(timer.ip)
        if rep is None:
            return []
        return self._send(timer.ip, rep, now)

    def _send(self, ip: IPAddress, rep: _Repeat, now: float) -> list[Output]:
        frame = wire.encode(self._announcement(ip))
        self.counters.gratuitous_sent += 1
        nxt = rep.step + 1
        if rep.until is not None and now + rep.every <= rep.until:
            self._repeats[ip] = _Repeat(now + rep.every, rep.start, nxt, rep.every, rep.until)
        elif rep.until is None and nxt < len(self.schedule):
            self._repeats[ip] = _Repeat(rep.start + self.schedule[nxt], rep.start, nxt)
        elif self.refresh is not None:
            self._repeats[ip] = _Repeat(now + self.refresh, rep.start, nxt)
        else:
            self._repeats.pop(ip, None)
            return [frame, CancelTimer(AnnounceTimer(ip))]
        # Due times count from the takeover, so a late wake-up does not shift the rest.
        return [frame, ArmTimer(AnnounceTimer(ip), max(0.0, self._repeats[ip].at - now))]

    def _announcement(self, ip: IPAddress) -> wire.Frame:
        if isinstance(ip, IPv4Address):
            return wire.gratuitous_arp(self.mac, ip)
        return wire.unsolicited_advertisement(self.mac, self.link_local or ip, ip)

    def receive(self, data: bytes, now: float) -> Reaction:
        """React to one frame received on the interface (ours included; they are ignored)."""
        try:
            frame = wire.decode(data)
        except wire.NotNeighborDiscovery:
            self.counters.ignored += 1
            return Reaction()
        except wire.WireError:
            self.counters.malformed += 1
            return Reaction()
        if frame.eth_src == self.mac:
            return Reaction()
        if isinstance(frame, wire.ArpFrame):
            return self._receive_arp(frame.arp)
        return self._receive_ndp(frame)

    def _claim(self, ip: IPAddress, mac: bytes) -> tuple[Claim, ...]:
        if mac == self.mac or mac == wire.ZERO_MAC:
            return ()
        if ip in self._owned or ip in self._watched:
            self.counters.claims_seen += 1
            return (Claim(ip, mac),)
        return ()

    def _receive_arp(self, arp: wire.Arp) -> Reaction:
        claims = self._claim(arp.sender_ip, arp.sender_mac)
        if arp.op == wire.ArpOp.REQUEST and not arp.is_gratuitous and arp.target_ip in self._owned:
            self.counters.requests_seen += 1
            self.counters.replies_sent += 1
            return Reaction(send=(wire.encode(wire.arp_reply(self.mac, arp)),), claims=claims)
        if not claims:
            self.counters.ignored += 1
        return Reaction(claims=claims)

    def _receive_ndp(self, frame: wire.NdpFrame) -> Reaction:
        if frame.hop_limit != 255:  # RFC 4861 7.1.1/7.1.2: not from this link
            self.counters.malformed += 1
            return Reaction()
        msg = frame.message
        if isinstance(msg, wire.NeighborAdvertisement):
            if frame.dst_ip.is_multicast and msg.solicited:  # 7.1.2
                self.counters.malformed += 1
                return Reaction()
            claims = self._claim(msg.target, msg.target_lladdr or frame.eth_src)
            if not claims:
                self.counters.ignored += 1
            return Reaction(claims=claims)
        if frame.src_ip == wire.UNSPECIFIED and (
            msg.source_lladdr is not None or frame.dst_ip != wire.solicited_node(msg.target)
        ):
            self.counters.malformed += 1  # 7.1.1: a DAD probe goes to the solicited-node group
            return Reaction()
        claims = (
            ()
            if frame.src_ip == wire.UNSPECIFIED
            else self._claim(frame.src_ip, msg.source_lladdr or frame.eth_src)
        )
        if msg.target in self._owned:
            self.counters.requests_seen += 1
            self.counters.replies_sent += 1
            reply = wire.neighbor_advertisement(self.mac, self.link_local or msg.target, frame)
            return Reaction(send=(wire.encode(reply),), claims=claims)
        if not claims:
            self.counters.ignored += 1
        return Reaction(claims=claims)
