"""Heartbeat liveness among speakers, sans-I/O: bytes and timer expiries in, orders out.

Timers are the sans-I/O cores' one style (:mod:`teapot_lb.timers`): :meth:`Membership.start`
and every event return :class:`Beat` (send these bytes to every peer),
:class:`MemberChanged` and :class:`~teapot_lb.timers.ArmTimer` /
:class:`~teapot_lb.timers.CancelTimer` orders; the adapter calls
:meth:`Membership.timer_expired` when one expires. ``receive`` takes ``now`` only to
record when a member was last heard (metrics); the core never reads a clock.

Every node sends a small heartbeat to every peer each ``interval``. A member heard within
``suspect_after`` intervals is ALIVE, within ``dead_after`` intervals SUSPECT (still
counted as alive by the election: suspicion is for metrics and logs), beyond that DEAD.
A member that announces it is leaving (graceful shutdown) is DEAD at once.

Heartbeat format (network byte order)::

    magic "TLB1" | flags u8 | name length u8 | incarnation u64 | sequence u64 |
    name (UTF-8) | MAC count u8 | MACs (6 bytes each) | [HMAC-SHA256, first 16 bytes]

``incarnation`` is fixed for the life of a process (the agent uses its start time in
nanoseconds, so a restarted node supersedes its former self); ``sequence`` increases by
one per heartbeat. With a shared key, messages without the right tag and replays (an old
incarnation, or a sequence not above the last one) are dropped; a heartbeat without the
right tag is also reported (:class:`Unauthenticated`), so the adapter can name its source.
Without a key every heartbeat is accepted, authenticated ones too (the tag is not checked).
The MACs let peers map a
gratuitous ARP back to the node that sent it (split-brain arbitration).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias

from teapot_lb.timers import ArmTimer, CancelTimer

MAGIC = b"TLB1"
_HEAD = struct.Struct("!4sBBQQ")
_TAG_LEN = 16
FLAG_AUTH = 0x01
FLAG_LEAVING = 0x02


class HeartbeatError(ValueError):
    """Bytes that are not a valid heartbeat; the message says why."""


class HeartbeatAuthError(HeartbeatError):
    """A heartbeat without the right tag while a key is configured (forged, or another key)."""


class MemberState(Enum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    DEAD = "dead"


@dataclass(frozen=True)
class Heartbeat:
    node: str
    incarnation: int
    sequence: int
    macs: tuple[bytes, ...] = ()
    leaving: bool = False


@dataclass(frozen=True)
class Timing:
    interval: float = 0.02
    suspect_after: int = 3  # missed intervals
    dead_after: int = 8  # missed intervals: detection takes interval * dead_after

    @property
    def detection(self) -> float:
        return self.interval * self.dead_after


@dataclass(frozen=True)
class MemberChanged:
    node: str
    old: MemberState | None  # None: first heard
    new: MemberState
    reason: str

    def log_fields(self) -> dict[str, str | None]:
        """The change as structured-log fields (one shape for every component that logs it)."""
        return {
            "member": self.node,
            "old": self.old.value if self.old else None,
            "new": self.new.value,
            "reason": self.reason,
        }


@dataclass
class Member:
    node: str
    incarnation: int
    sequence: int
    last_heard: float
    macs: tuple[bytes, ...]
    state: MemberState
    max_gap: float = 0.0  # longest silence between two heartbeats received (for tuning)


@dataclass
class MembershipCounters:
    received: int = 0
    rejected: int = 0  # malformed, bad tag, replayed, or our own name
    unauthenticated: int = 0  # of those rejected: no tag, or a wrong one, with a key set
    sent: int = 0


def encode(hb: Heartbeat, key: bytes | None = None) -> bytes:
    name = hb.node.encode()
    if not 0 < len(name) <= 255 or len(hb.macs) > 255 or any(len(m) != 6 for m in hb.macs):
        raise HeartbeatError("node name must be 1..255 bytes and MACs 6 bytes each (<= 255)")
    flags = (FLAG_AUTH if key else 0) | (FLAG_LEAVING if hb.leaving else 0)
    body = (
        _HEAD.pack(MAGIC, flags, len(name), hb.incarnation, hb.sequence)
        + name
        + bytes((len(hb.macs),))
        + b"".join(hb.macs)
    )
    if key:
        body += hmac.new(key, body, hashlib.sha256).digest()[:_TAG_LEN]
    return body


def decode(data: bytes, key: bytes | None = None) -> Heartbeat:
    """Decode and authenticate; raises :class:`HeartbeatError` (only)."""
    if len(data) < _HEAD.size:
        raise HeartbeatError(f"{len(data)} bytes is shorter than a heartbeat header")
    magic, flags, name_len, incarnation, sequence = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise HeartbeatError("not a teapot-lb heartbeat (bad magic)")
    pos = _HEAD.size
    name_raw = data[pos : pos + name_len]
    pos += name_len
    if len(name_raw) != name_len or pos >= len(data):
        raise HeartbeatError("truncated heartbeat")
    count = data[pos]
    pos += 1
    macs = tuple(data[pos + 6 * i : pos + 6 * i + 6] for i in range(count))
    pos += 6 * count
    if pos > len(data):
        raise HeartbeatError("truncated MAC list")
    if key:
        if not flags & FLAG_AUTH or len(data) != pos + _TAG_LEN:
            raise HeartbeatAuthError("heartbeat is not authenticated and a key is configured")
        tag = hmac.new(key, data[:pos], hashlib.sha256).digest()[:_TAG_LEN]
        if not hmac.compare_digest(tag, data[pos:]):
            raise HeartbeatAuthError("heartbeat authentication tag mismatch")
    elif len(data) != pos + (_TAG_LEN if flags & FLAG_AUTH else 0):
        raise HeartbeatError("trailing bytes after heartbeat")
    try:
        node = name_raw.decode()
    except UnicodeDecodeError as exc:
        raise HeartbeatError("node name is not UTF-8") from exc
    if not node:
        raise HeartbeatError("empty node name")
    return Heartbeat(node, incarnation, sequence, macs, bool(flags & FLAG_LEAVING))


class SendTimer(Enum):
    HEARTBEAT = "heartbeat"  # our next heartbeat is due


@dataclass(frozen=True)
class SilenceTimer:
    """``node`` has not been heard for as long as its state allows: it moves on."""

    node: str


TimerName: TypeAlias = SendTimer | SilenceTimer


@dataclass(frozen=True)
class Beat:
    """Send ``data`` (a heartbeat) to every peer."""

    data: bytes


@dataclass(frozen=True)
class Unauthenticated:
    """A heartbeat was dropped for a missing or wrong tag (``reason``): forged, or a node
    with another key. The adapter, which knows the datagram's source, reports it."""

    reason: str


Output: TypeAlias = (
    Beat | MemberChanged | Unauthenticated | ArmTimer[TimerName] | CancelTimer[TimerName]
)


@dataclass
class Membership:
    """The view of one node (``node``) of its peers' liveness."""

    node: str
    incarnation: int
    macs: tuple[bytes, ...] = ()
    timing: Timing = field(default_factory=Timing)
    key: bytes | None = None
    counters: MembershipCounters = field(default_factory=MembershipCounters)
    members: dict[str, Member] = field(default_factory=dict)
    _sequence: int = field(default=0, init=False)

    # --- sending ---

    def start(self) -> list[Output]:
        """The first heartbeat, at once; the next one each interval after."""
        return self._heartbeat()

    def goodbye(self) -> bytes:
        """A last heartbeat telling peers we are leaving: they drop us at once."""
        return self._beat(leaving=True)

    def _heartbeat(self) -> list[Output]:
        return [
            Beat(self._beat(leaving=False)),
            ArmTimer(SendTimer.HEARTBEAT, self.timing.interval),
        ]

    def _beat(self, *, leaving: bool) -> bytes:
        self._sequence += 1
        self.counters.sent += 1
        hb = Heartbeat(self.node, self.incarnation, self._sequence, self.macs, leaving)
        return encode(hb, self.key)

    # --- receiving and time ---

    def receive(self, data: bytes, now: float) -> list[Output]:
        try:
            hb = decode(data, self.key)
        except HeartbeatAuthError as err:
            self.counters.rejected += 1
            self.counters.unauthenticated += 1
            return [Unauthenticated(str(err))]
        except HeartbeatError:
            self.counters.rejected += 1
            return []
        if hb.node == self.node:
            self.counters.rejected += 1
            return []
        member = self.members.get(hb.node)
        if member is not None and (hb.incarnation, hb.sequence) <= (
            member.incarnation,
            member.sequence,
        ):
            self.counters.rejected += 1  # stale or replayed
            return []
        self.counters.received += 1
        if member is None:
            member = Member(hb.node, hb.incarnation, hb.sequence, now, hb.macs, MemberState.DEAD)
            self.members[hb.node] = member
            old: MemberState | None = None
        else:
            old = member.state
            if old is not MemberState.DEAD:
                member.max_gap = max(member.max_gap, now - member.last_heard)
            member.incarnation, member.sequence = hb.incarnation, hb.sequence
            member.last_heard, member.macs = now, hb.macs
        timer = SilenceTimer(hb.node)
        if hb.leaving:
            member.state = MemberState.DEAD
            if old is MemberState.DEAD:
                return []
            return [CancelTimer(timer), MemberChanged(hb.node, old, member.state, "left")]
        member.state = MemberState.ALIVE
        out: list[Output] = [ArmTimer(timer, self.timing.interval * self.timing.suspect_after)]
        if old is not MemberState.ALIVE:
            out.append(MemberChanged(hb.node, old, MemberState.ALIVE, "heartbeat received"))
        return out

    def timer_expired(self, timer: TimerName) -> list[Output]:
        """Our heartbeat is due, or a member stayed silent: ALIVE → SUSPECT → DEAD."""
        if isinstance(timer, SendTimer):
            return self._heartbeat()
        m = self.members.get(timer.node)
        if m is None or m.state is MemberState.DEAD:
            return []
        t = self.timing
        if m.state is MemberState.ALIVE:
            m.state = MemberState.SUSPECT
            reason = f"no heartbeat for {t.suspect_after} intervals"
            out: list[Output] = [ArmTimer(timer, t.interval * (t.dead_after - t.suspect_after))]
            return [*out, MemberChanged(m.node, MemberState.ALIVE, m.state, reason)]
        m.state = MemberState.DEAD
        reason = f"no heartbeat for {t.dead_after} intervals"
        return [MemberChanged(m.node, MemberState.SUSPECT, m.state, reason)]

    def alive(self) -> frozenset[str]:
        """This node and every member not DEAD (SUSPECT members still count)."""
        return frozenset(
            [self.node, *(m.node for m in self.members.values() if m.state is not MemberState.DEAD)]
        )

    def node_of_mac(self, mac: bytes) -> str | None:
        """The node (dead or alive) whose heartbeats listed ``mac``."""
        if mac in self.macs:
            return self.node
        for m in self.members.values():
            if mac in m.macs:
                return m.node
        return None

    def known(self) -> Sequence[str]:
        """This node and every member ever heard."""
        return [self.node, *self.members]
