"""Heartbeat liveness among speakers, sans-I/O: bytes and timer expiries in, orders out.

Timers are the sans-I/O cores' one style (:mod:`teapot_lb.timers`): :meth:`Membership.start`
and every event return :class:`Beat` (send these bytes to these peers, or to every peer),
:class:`MemberChanged` and :class:`~teapot_lb.timers.ArmTimer` /
:class:`~teapot_lb.timers.CancelTimer` orders; the adapter calls
:meth:`Membership.timer_expired` when one expires. ``receive`` takes ``now`` (when a
member was last heard, for metrics, and to pace refutations) and the datagram's source (to
send to that member again); the core never reads a clock.

Monitors, not a full mesh (docs/l2.md, "Liveness at scale"): the nodes sit on a ring
ordered by ``sha256(name)``; each node sends a small heartbeat each ``interval`` only to
its ``Timing.monitors`` successors on the ring (every peer while it knows none, or while a
peer of an older version that expects a full mesh is alive), so a node sends and receives
about ``2 * monitors`` heartbeats per interval whatever the cluster's size. A monitor that
has heard a member within ``suspect_after`` intervals holds it ALIVE, within
``dead_after`` intervals SUSPECT (still counted as alive by the election: suspicion is for
metrics and logs); beyond that it *accuses* it: an accusation goes to every peer (and again
up to ``Timing.accusations`` times while the silence lasts). A node holds a member DEAD
once a quorum of accusers agree (two, when the member has at least three monitors; one in
clusters of three or fewer, where every node watches every other as before), unless it has
heard the member more recently than the accusation says. An accused node that is alive
*refutes*: it sends its presence to every peer (each interval while a lone accusation's
``refute_after`` window is open, as datagrams may be lost), which clears the accusations;
and if the accuser is no monitor of its own (the accuser's ring lacks a node), it
heartbeats the accuser too for a presence period or two, so that one gap in a view does
not make the same live node accused at every silence. Every node
also sends its presence to every peer each ``Timing.presence`` seconds (and at start, and
to a newcomer when it first hears it): that is how nodes learn the ring, and it revives a
member held DEAD by mistake. A member that announces it is leaving (graceful shutdown) is
DEAD at once.

The messages' bytes are :mod:`teapot_lb.membership.wire`'s.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias

from teapot_lb.membership.wire import (
    MAGIC_ACCUSE,
    Accusation,
    Heartbeat,
    HeartbeatAuthError,
    HeartbeatError,
    decode,
    decode_accusation,
    encode,
    encode_accusation,
)
from teapot_lb.timers import ArmTimer, CancelTimer


class MemberState(Enum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    DEAD = "dead"


@dataclass(frozen=True)
class Timing:
    interval: float = 0.02
    suspect_after: int = 3  # missed intervals
    dead_after: int = 8  # missed intervals: detection takes interval * dead_after
    monitors: int = 4  # successors on the ring each node heartbeats
    presence: float = 30.0  # seconds between presences to every peer
    accusations: int = 3  # accusations sent per silence (the first, then again while silent)
    refute_after: int = 5  # intervals an accused node has to refute one accuser (no quorum)

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
    address: Hashable | None = None  # where its messages come from (the adapter's address)
    monitored: bool = False  # it heartbeats its monitors only (else: every peer)
    accusers: set[str] = field(default_factory=set)  # since we last heard it
    accused: int = 0  # accusations we sent in the current silence
    nudged: int = 0  # our last accusation sent again to it alone (NudgeTimer)
    accusation_seen: tuple[int, int] = (0, 0)  # its last accusation (replay guard)


@dataclass
class MembershipCounters:
    received: int = 0
    rejected: int = 0  # malformed, bad tag, replayed, or our own name
    unauthenticated: int = 0  # of those rejected: no tag, or a wrong one, with a key set
    sent: int = 0


class SendTimer(Enum):
    HEARTBEAT = "heartbeat"  # our next heartbeat is due
    PRESENCE = "presence"  # our next presence to every peer is due
    REFUTE = "refute"  # refute an accusation again, in case the first refutation was lost
    WELCOME = "welcome"  # our presence again to the nodes we heard first lately


@dataclass(frozen=True)
class SilenceTimer:
    """``node`` has not been heard for as long as its state allows: it moves on."""

    node: str


@dataclass(frozen=True)
class RefuteTimer:
    """``node`` was accused and has not refuted it (sent anything newer) in time."""

    node: str


@dataclass(frozen=True)
class NudgeTimer:
    """We accused ``node`` and have not heard it since: tell it again, to it alone (if our
    accusation to it was lost, it cannot refute, and a lone accusation not refuted within
    ``refute_after`` intervals fails it over everywhere the accusation arrived)."""

    node: str


TimerName: TypeAlias = SendTimer | SilenceTimer | RefuteTimer | NudgeTimer


@dataclass(frozen=True)
class Beat:
    """Send ``data`` (a heartbeat, a presence, an accusation) to the peers at ``to`` (the
    addresses :meth:`Membership.receive` was given), or to every peer (``None``)."""

    data: bytes
    to: tuple[Hashable, ...] | None = None


@dataclass(frozen=True)
class Unauthenticated:
    """A heartbeat was dropped for a missing or wrong tag (``reason``): forged, or a node
    with another key. The adapter, which knows the datagram's source, reports it."""

    reason: str


Output: TypeAlias = (
    Beat | MemberChanged | Unauthenticated | ArmTimer[TimerName] | CancelTimer[TimerName]
)


@functools.lru_cache(maxsize=8192)
def ring_position(node: str) -> bytes:
    """Where ``node`` sits on the monitoring ring (the same on every node)."""
    return hashlib.sha256(node.encode()).digest()


# A newcomer's first presence from us is answered at once, then again after 1 s and 3 s
# (to everyone first heard meanwhile, one datagram each): if our one answer were lost,
# it would not know us until our next presence, up to Timing.presence later.
_WELCOME_AFTER = (1.0, 2.0)


def _phase(node: str) -> float:
    """A number in [0, 1) fixed by ``node``'s name."""
    return int.from_bytes(ring_position(node)[:4], "big") / 2**32


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
    _ring: list[tuple[bytes, str]] = field(default_factory=list, init=False)
    _refuted: float | None = field(default=None, init=False)
    _refutes: int = field(default=0, init=False)  # refutations sent for the last accusation
    # accusers we heartbeat beside our monitors -> our presence count when they accused us
    _strays: dict[Hashable, int] = field(default_factory=dict, init=False)
    _accusations_seen: dict[str, tuple[int, int]] = field(default_factory=dict, init=False)
    _targets: tuple[Hashable, ...] | bool | None = field(default=False, init=False)  # cache
    _presences: int = field(default=0, init=False)
    _ring_changed: bool = field(default=False, init=False)
    _welcome: list[Hashable] = field(default_factory=list, init=False)  # newcomers' addresses
    _welcomes: int = field(default=0, init=False)
    _watching: frozenset[str] = field(default=frozenset(), init=False)

    def __post_init__(self) -> None:
        self._ring = [(ring_position(self.node), self.node)]

    # --- sending ---

    def start(self) -> list[Output]:
        """A first heartbeat (also a presence) to every peer at once; the next heartbeat each
        interval after, the next presence after a second (a newcomer's first one may be
        lost), then each ``Timing.presence``."""
        self.counters.sent += 1
        first = self._message(leaving=False, presence=True)
        return [
            Beat(first),
            ArmTimer(SendTimer.HEARTBEAT, self.timing.interval),
            ArmTimer(SendTimer.PRESENCE, min(1.0, self.timing.presence)),
        ]

    def goodbye(self) -> bytes:
        """A last heartbeat telling peers we are leaving: they drop us at once."""
        self.counters.sent += 1
        return self._message(leaving=True, presence=True)

    def _heartbeat(self) -> list[Output]:
        self.counters.sent += 1
        data = self._message(leaving=False, presence=False)
        return [
            Beat(data, self._monitor_addresses()),
            ArmTimer(SendTimer.HEARTBEAT, self.timing.interval),
        ]

    def _presence(self, to: tuple[Hashable, ...] | None = None) -> Beat:
        self.counters.sent += 1
        return Beat(self._message(leaving=False, presence=True), to)

    def _message(self, *, leaving: bool, presence: bool) -> bytes:
        self._sequence += 1
        hb = Heartbeat(
            self.node, self.incarnation, self._sequence, self.macs, leaving, presence, True
        )
        return encode(hb, self.key)

    def _monitor_addresses(self) -> tuple[Hashable, ...] | None:
        """Where our heartbeats go: our monitors, or every peer (``None``) while we know
        nobody, do not know a monitor's address, or a full-mesh peer is alive. Kept until
        the ring or a member's address or version changes."""
        if self._targets is False:
            self._targets = self._find_targets()
        assert self._targets is not True
        return self._targets

    def _find_targets(self) -> tuple[Hashable, ...] | None:
        if not self.members or any(
            not m.monitored for m in self.members.values() if m.state is not MemberState.DEAD
        ):
            return None
        addresses = []
        for name in self.monitors_of(self.node):
            address = self.members[name].address
            if address is None:
                return None
            addresses.append(address)
        addresses += [a for a in self._strays if a not in addresses]
        return tuple(addresses)

    # --- the ring ---

    def monitors_of(self, node: str) -> list[str]:
        """The nodes that watch ``node``: its next ``Timing.monitors`` live successors on the
        ring (``node`` itself need not be on it)."""
        ring, want = self._ring, self.timing.monitors
        start = bisect.bisect_right(ring, (ring_position(node), node))
        out: list[str] = []
        for i in range(len(ring)):
            name = ring[(start + i) % len(ring)][1]
            if name != node:
                out.append(name)
                if len(out) == want:
                    break
        return out

    def quorum(self, node: str) -> int:
        """Accusers needed to hold ``node`` DEAD: two once it has three monitors or more, so
        one monitor that lost its path to a live node cannot fail it over."""
        entry = (ring_position(node), node)
        i = bisect.bisect_left(self._ring, entry)
        on_ring = i < len(self._ring) and self._ring[i] == entry
        others = len(self._ring) - on_ring
        return 2 if min(self.timing.monitors, others) >= 3 else 1

    def _watches(self, member: Member) -> bool:
        return not member.monitored or self.node in self.monitors_of(member.node)

    def _set_state(self, member: Member, state: MemberState) -> None:
        """Change ``member``'s state, keeping the ring to the members not DEAD."""
        entry = (ring_position(member.node), member.node)
        was_on = member.state is not MemberState.DEAD
        member.state = state
        if (state is MemberState.DEAD) == was_on:
            self._targets = False  # the ring changes
            self._ring_changed = True
        if state is MemberState.DEAD and was_on:
            i = bisect.bisect_left(self._ring, entry)
            if i < len(self._ring) and self._ring[i] == entry:
                del self._ring[i]
        elif state is not MemberState.DEAD and not was_on:
            bisect.insort(self._ring, entry)

    # --- receiving and time ---

    def receive(self, data: bytes, now: float, source: Hashable | None = None) -> list[Output]:
        """A datagram from ``source`` (any address the adapter can send to again)."""
        return self._rewatch(self._receive(data, now, source))

    def timer_expired(self, timer: TimerName) -> list[Output]:
        """Our heartbeat or presence is due, or a member stayed silent: ALIVE → SUSPECT →
        accused (→ DEAD with a quorum), and accused again while the silence lasts."""
        return self._rewatch(self._timer_expired(timer))

    def watching(self) -> frozenset[str]:
        """The members this node monitors: its ``Timing.monitors`` predecessors on the ring."""
        ring, want = self._ring, self.timing.monitors
        me = bisect.bisect_left(ring, (ring_position(self.node), self.node))
        out = [ring[(me - i) % len(ring)][1] for i in range(1, min(want, len(ring) - 1) + 1)]
        return frozenset(out)

    def _rewatch(self, out: list[Output]) -> list[Output]:
        """After the ring changed: start a silence timer for each member we now watch, as
        if just heard (it may not know yet that it should heartbeat us: then we accuse it
        once the silence lasts, which is how a partition's far side is found dead)."""
        if not self._ring_changed:
            return out
        self._ring_changed = False
        watching = self.watching()
        new, self._watching = watching - self._watching, watching
        wait = self.timing.interval * self.timing.suspect_after
        arm: list[Output] = [ArmTimer(SilenceTimer(n), wait) for n in sorted(new)]
        return [*out, *arm]

    def _receive(self, data: bytes, now: float, source: Hashable | None) -> list[Output]:
        try:
            if data[:4] == MAGIC_ACCUSE:
                return self._receive_accusation(decode_accusation(data, self.key), now, source)
            return self._receive_heartbeat(decode(data, self.key), now, source)
        except HeartbeatAuthError as err:
            self.counters.rejected += 1
            self.counters.unauthenticated += 1
            return [Unauthenticated(str(err))]
        except HeartbeatError:
            self.counters.rejected += 1
            return []

    def _receive_heartbeat(
        self, hb: Heartbeat, now: float, source: Hashable | None
    ) -> list[Output]:
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
        out: list[Output] = []
        restarted = False
        if member is None:
            member = Member(hb.node, hb.incarnation, hb.sequence, now, hb.macs, MemberState.DEAD)
            self.members[hb.node] = member
            old: MemberState | None = None
        else:
            old = member.state
            if old is not MemberState.DEAD and not hb.presence:
                member.max_gap = max(member.max_gap, now - member.last_heard)
            restarted = hb.incarnation != member.incarnation
            member.incarnation, member.sequence = hb.incarnation, hb.sequence
            member.last_heard, member.macs = now, hb.macs
        # A newcomer, a restart, or back from a partition: it may not know us.
        renewed = old is None or old is MemberState.DEAD or restarted
        if renewed and not hb.leaving and source is not None:
            out.append(self._presence((source,)))
            if not self._welcome:  # and again twice, later: one datagram may be lost
                out.append(ArmTimer(SendTimer.WELCOME, _WELCOME_AFTER[0]))
            self._welcome.append(source)
        if (source is not None and member.address != source) or member.monitored != hb.monitored:
            self._targets = False
        if source is not None:
            member.address = source
        member.monitored = hb.monitored
        if member.accusers:  # heard since: every accusation so far is stale
            member.accusers.clear()
            out.append(CancelTimer(RefuteTimer(hb.node)))
        member.accused = 0
        timer = SilenceTimer(hb.node)
        if hb.leaving:
            self._set_state(member, MemberState.DEAD)
            if old is MemberState.DEAD:
                return out
            return [*out, CancelTimer(timer), MemberChanged(hb.node, old, member.state, "left")]
        if hb.presence:
            if old is None or old is MemberState.DEAD:
                self._set_state(member, MemberState.ALIVE)
                out.append(MemberChanged(hb.node, old, MemberState.ALIVE, "presence received"))
            return out
        self._set_state(member, MemberState.ALIVE)
        out.append(ArmTimer(timer, self.timing.interval * self.timing.suspect_after))
        if old is not MemberState.ALIVE:
            out.append(MemberChanged(hb.node, old, MemberState.ALIVE, "heartbeat received"))
        return out

    def _receive_accusation(
        self, acc: Accusation, now: float, source: Hashable | None
    ) -> list[Output]:
        stamp = (acc.incarnation, acc.sequence)
        if acc.accuser == self.node or stamp <= self._accusations_seen.get(acc.accuser, (0, 0)):
            self.counters.rejected += 1  # ours, stale or replayed
            return []
        self._accusations_seen[acc.accuser] = stamp
        self.counters.received += 1
        out = self._accuser_heard(acc, now, source)
        if acc.subject == self.node:
            if source is not None and acc.accuser not in self.monitors_of(self.node):
                # It watches us though we do not heartbeat it: its ring lacks a node ours
                # has. Heartbeat it too, or it accuses us at every silence until it learns
                # that node (maybe not before a presence, 30 s away).
                if source not in self._strays:
                    self._targets = False
                self._strays[source] = self._presences
            # Refute, once per interval however many accuse us: our presence is newer.
            if self._refuted is not None and now - self._refuted < self.timing.interval:
                return out
            self._refuted, self._refutes = now, 1
            return [*out, self._presence(), ArmTimer(SendTimer.REFUTE, self.timing.interval)]
        member = self.members.get(acc.subject)
        if member is None or (acc.subject_incarnation, acc.subject_sequence) < (
            member.incarnation,
            member.sequence,
        ):
            return []  # unknown here, or heard here since the accuser last did
        member.accusers.add(acc.accuser)
        return [*out, *self._judge(member)]

    def _accuser_heard(self, acc: Accusation, now: float, source: Hashable | None) -> list[Output]:
        """An accuser we did not know (its presence to us was lost) is a member from now on:
        it watches someone, so it is alive, and if it watches us we must heartbeat it."""
        if acc.accuser in self.members or source is None:
            return []
        member = Member(
            acc.accuser, acc.incarnation, acc.sequence, now, (), MemberState.DEAD, address=source
        )
        member.monitored = True
        self.members[acc.accuser] = member
        self._set_state(member, MemberState.ALIVE)
        return [MemberChanged(acc.accuser, None, MemberState.ALIVE, "accusation received")]

    def _judge(self, member: Member, *, refute_expired: bool = False) -> list[Output]:
        """DEAD once enough nodes accuse ``member``, or one did and it did not refute in time
        (the only accuser on our side of a partition); else wait for that."""
        if member.state is MemberState.DEAD or not member.accusers:
            return []
        accusers = ", ".join(sorted(member.accusers))
        t = self.timing
        if len(member.accusers) >= self.quorum(member.node):
            reason = "no heartbeat, accused by " + accusers
        elif refute_expired:
            reason = (
                f"no heartbeat, accused by {accusers}, not refuted in {t.refute_after} intervals"
            )
        else:
            if len(member.accusers) > 1:
                return []  # the timer runs since the first accusation
            return [ArmTimer(RefuteTimer(member.node), t.interval * t.refute_after)]
        if member.accusers == {self.node} and self.quorum(member.node) == 1:
            reason = f"no heartbeat for {t.dead_after} intervals"
        old = member.state
        self._set_state(member, MemberState.DEAD)
        return [
            CancelTimer(RefuteTimer(member.node)),
            MemberChanged(member.node, old, MemberState.DEAD, reason),
        ]

    def _timer_expired(self, timer: TimerName) -> list[Output]:
        if timer is SendTimer.PRESENCE:
            self._presences += 1
            # Accusers we heartbeat beside our monitors: kept a presence period or two, by
            # when the presences have closed the gap in their ring.
            kept = {a: p for a, p in self._strays.items() if p >= self._presences - 1}
            if len(kept) != len(self._strays):
                self._strays, self._targets = kept, False
            # The first periodic presence at a point of the period set by the node's name,
            # so the nodes of a cluster (re)started at once do not all send together.
            period = self.timing.presence
            due = period * (0.05 + 0.95 * _phase(self.node)) if self._presences == 1 else period
            return [self._presence(), ArmTimer(SendTimer.PRESENCE, due)]
        if timer is SendTimer.WELCOME:
            self._welcomes += 1
            again: list[Output] = [self._presence(tuple(dict.fromkeys(self._welcome)))]
            if self._welcomes < len(_WELCOME_AFTER):
                again.append(ArmTimer(SendTimer.WELCOME, _WELCOME_AFTER[self._welcomes]))
            else:
                self._welcome, self._welcomes = [], 0
            return again
        if timer is SendTimer.REFUTE:
            # Again each interval while the accusation's refute window is open: an observer
            # that missed every refutation holds us DEAD (one accuser, not refuted).
            self._refutes += 1
            if self._refutes < self.timing.refute_after - 1:
                return [self._presence(), ArmTimer(SendTimer.REFUTE, self.timing.interval)]
            return [self._presence()]
        if isinstance(timer, SendTimer):
            return self._heartbeat()
        m = self.members.get(timer.node)
        if m is None:
            return []
        if isinstance(timer, RefuteTimer):
            return self._judge(m, refute_expired=True)
        if isinstance(timer, NudgeTimer):
            return self._nudge(m)
        t = self.timing
        if m.state is MemberState.DEAD:
            return self._accuse(m) if 0 < m.accused < t.accusations else []
        if not self._watches(m):
            # It moved its heartbeats to other monitors (the ring changed): not ours to judge.
            if m.state is MemberState.SUSPECT:
                self._set_state(m, MemberState.ALIVE)
                return [MemberChanged(m.node, MemberState.SUSPECT, m.state, "not watched here")]
            return []
        if m.state is MemberState.ALIVE:
            self._set_state(m, MemberState.SUSPECT)
            reason = f"no heartbeat for {t.suspect_after} intervals"
            out: list[Output] = [ArmTimer(timer, t.interval * (t.dead_after - t.suspect_after))]
            return [*out, MemberChanged(m.node, MemberState.ALIVE, m.state, reason)]
        m.accusers.add(self.node)
        return [*self._accuse(m), *self._judge(m)]

    def _accuse(self, m: Member) -> list[Output]:
        """Tell every peer we have not heard ``m`` (again later, while the silence lasts)."""
        m.accused += 1
        self._sequence += 1
        self.counters.sent += 1
        acc = Accusation(
            self.node, self.incarnation, self._sequence, m.node, m.incarnation, m.sequence
        )
        out: list[Output] = [Beat(encode_accusation(acc, self.key))]
        if m.accused < self.timing.accusations:
            out.append(
                ArmTimer(SilenceTimer(m.node), self.timing.interval * self.timing.dead_after)
            )
        m.nudged = 0
        return [*out, ArmTimer(NudgeTimer(m.node), self.timing.interval)]

    def _nudge(self, m: Member) -> list[Output]:
        """Our accusation again, to ``m`` alone, each interval while the refute window is
        open and we have not heard it: at 1 % loss a lone accusation lost on its way to
        the accused would otherwise fail a live node over once in 100 false accusations."""
        if self.node not in m.accusers or m.address is None:
            return []
        m.nudged += 1
        self._sequence += 1
        self.counters.sent += 1
        acc = Accusation(
            self.node, self.incarnation, self._sequence, m.node, m.incarnation, m.sequence
        )
        out: list[Output] = [Beat(encode_accusation(acc, self.key), (m.address,))]
        if m.nudged < self.timing.refute_after - 2:
            out.append(ArmTimer(NudgeTimer(m.node), self.timing.interval))
        return out

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
