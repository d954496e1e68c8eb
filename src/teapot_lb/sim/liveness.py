"""N heartbeat cores (:mod:`teapot_lb.membership.core`) on a simulated network.

Every node is a real :class:`~teapot_lb.membership.core.Membership` (same bytes, same HMAC,
same timers) whose datagrams go through :class:`~teapot_lb.sim.network.Network` and whose
timers run on a :class:`~teapot_lb.sim.clock.VirtualClock`. The cluster counts datagrams
sent and received per node and records every state change with its virtual time, which is
what detection times and false positives are computed from. A node can be killed (silent
at once, as on a power loss), paused (a slow node: it neither sends nor processes for a
while, then handles what queued up) and restarted with a new incarnation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from teapot_lb.membership.core import (
    Beat,
    MemberChanged,
    Membership,
    MemberState,
    Output,
    TimerName,
    Timing,
)
from teapot_lb.sim.clock import CoreTimers, VirtualClock
from teapot_lb.sim.network import Network
from teapot_lb.timers import ArmTimer, CancelTimer


@dataclass(frozen=True)
class Change:
    """``observer`` saw ``change`` at virtual time ``at``."""

    at: float
    observer: str
    change: MemberChanged


@dataclass
class SimNode:
    name: str
    core: Membership
    timers: CoreTimers[TimerName]
    up: bool = False  # started and not killed
    paused_until: float = 0.0
    sent: int = 0  # datagrams
    received: int = 0  # datagrams handed to the core
    backlog: list[tuple[bytes, str]] = field(default_factory=list)  # queued while paused


class LivenessCluster:
    """``names`` running heartbeats with ``timing`` (and ``key``) over ``network``."""

    def __init__(
        self,
        names: Iterable[str],
        *,
        timing: Timing | None = None,
        network: Network | None = None,
        key: bytes | None = b"simulated-shared-key",
    ) -> None:
        self.clock = VirtualClock()
        self.network = network or Network()
        self.timing = timing or Timing()
        self.key = key
        self.changes: list[Change] = []
        self.nodes: dict[str, SimNode] = {}
        self._incarnation = 1
        for name in names:
            self.nodes[name] = self._new_node(name)

    def _new_node(self, name: str) -> SimNode:
        core = Membership(name, self._incarnation, timing=self.timing, key=self.key)
        self._incarnation += 1
        timers: CoreTimers[TimerName] = CoreTimers(self.clock, lambda t: self._fire(name, t))
        return SimNode(name, core, timers)

    # --- running ---

    def start(self, stagger: float = 0.0) -> None:
        """Start every node, spread over ``stagger`` seconds (as a DaemonSet rolls out)."""
        count = max(len(self.nodes), 1)
        for i, name in enumerate(self.nodes):
            self.clock.after(stagger * i / count, self._start, name)

    def _start(self, name: str) -> None:
        node = self.nodes[name]
        node.up = True
        self._apply(node, node.core.start())

    def run(self, seconds: float) -> None:
        self.clock.run_until(self.clock.now + seconds)

    # --- faults ---

    def kill(self, name: str) -> None:
        """The node stops at once: no goodbye, nothing sent or handled any more."""
        node = self.nodes[name]
        node.up = False
        node.timers.cancel()

    def pause(self, name: str, seconds: float) -> None:
        """The node is starved of CPU for ``seconds``: its timers and datagrams wait."""
        node = self.nodes[name]
        node.paused_until = self.clock.now + seconds
        self.clock.after(seconds, self._resume, name)

    def restart(self, name: str) -> None:
        """A new process (new incarnation) on a killed node."""
        old = self.nodes[name]
        old.timers.cancel()
        node = self._new_node(name)
        node.sent, node.received = old.sent, old.received
        self.nodes[name] = node
        self._start(name)

    # --- the adapter's job: bytes and time ---

    def _fire(self, name: str, timer: TimerName) -> None:
        node = self.nodes[name]
        if not node.up:
            return
        if node.paused_until > self.clock.now:
            self.clock.at(node.paused_until, self._fire_late, name, timer, node)
            return
        self._apply(node, node.core.timer_expired(timer))

    def _fire_late(self, name: str, timer: TimerName, node: SimNode) -> None:
        if self.nodes[name] is node and node.up:
            self._apply(node, node.core.timer_expired(timer))

    def _resume(self, name: str) -> None:
        node = self.nodes[name]
        if node.paused_until > self.clock.now or not node.up:
            return
        backlog, node.backlog = node.backlog, []
        for data, source in backlog:  # as the UDP adapter drains the socket first
            self._handle(node, data, source)

    def _apply(self, node: SimNode, outputs: list[Output]) -> None:
        for out in outputs:
            kind = type(out)  # the most frequent first: a timer re-armed per heartbeat
            if kind is ArmTimer or kind is CancelTimer:
                node.timers.apply(out)  # type: ignore[arg-type]
            elif kind is Beat:
                self._send(node, out)  # type: ignore[arg-type]
            elif kind is MemberChanged:
                self.changes.append(Change(self.clock.now, node.name, out))  # type: ignore[arg-type]

    def _send(self, node: SimNode, beat: Beat) -> None:
        targets = self.nodes if beat.to is None else beat.to
        delay, after, deliver = self.network.delay, self.clock.after, self._deliver
        name, data = node.name, beat.data
        for target in targets:
            if target == name:
                continue
            node.sent += 1
            d = delay(name, str(target))
            if d is not None:
                after(d, deliver, str(target), data, name)

    def _deliver(self, name: str, data: bytes, source: str) -> None:
        node = self.nodes.get(name)
        if node is None or not node.up:
            return
        now = self.clock.now
        if node.paused_until > now:
            node.backlog.append((data, source))
            return
        node.received += 1
        self._apply(node, node.core.receive(data, now, source))

    def _handle(self, node: SimNode, data: bytes, source: str) -> None:
        node.received += 1
        self._apply(node, node.core.receive(data, self.clock.now, source))

    # --- what was seen ---

    def deaths(self, subject: str, since: float = 0.0) -> dict[str, float]:
        """Observer → when it first held ``subject`` DEAD after ``since``."""
        out: dict[str, float] = {}
        for c in self.changes:
            if c.at >= since and c.change.node == subject and c.change.new is MemberState.DEAD:
                out.setdefault(c.observer, c.at)
        return out

    def false_deaths(self, since: float = 0.0) -> list[Change]:
        """Every DEAD seen after ``since`` of a node that is up."""
        return [
            c
            for c in self.changes
            if c.at >= since
            and c.change.new is MemberState.DEAD
            and self.nodes[c.change.node].up
            and c.change.reason != "left"
        ]

    def converged(self) -> bool:
        """Every node up holds exactly the nodes up alive."""
        up = frozenset(n for n, node in self.nodes.items() if node.up)
        return all(node.core.alive() == up for node in self.nodes.values() if node.up)

    def datagrams(self) -> int:
        return sum(n.sent + n.received for n in self.nodes.values())
