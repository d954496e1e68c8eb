"""Route mode: the management speakers' own liveness check of tenant next hops (sans I/O).

Without it a dead tenant node keeps its ADD-PATH path until the tenant's Kubernetes marks
it not ready (the node monitor's grace, 40 s by default) and its agent updates the request.
With it, each management speaker probes every next hop it announces (a TCP connect to the
Service's nodePort on the node's address), all hops together in rounds, and withholds the
path of a hop that fails ``fail_after`` rounds in a row, until it passes ``pass_after``.

Safety (docs/teapot.md, "Tenant-node liveness"): a speaker withholds a failing hop only
while another hop of the same route answered the last round. When none did, the speaker
cannot tell a dead tenant from its own cut-off (a management-side partition): it keeps
every path and leaves the decision to the tenant's readiness, so a probe failure never
withdraws the last path of an IP. Every management speaker probes on its own; the router
keeps a path while any speaker announces it, so a hop goes only when all of them see it
fail.

The core (:class:`HopHealth`) takes the targets, timer expiries and probe results, and
returns orders: :class:`Probe` (connect now), the timer orders of every sans-I/O core, and
:class:`VerdictChanged` (what the planner reads, :class:`HopVerdict`). No clock, no socket.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from teapot_lb.addresses import IPAddress
from teapot_lb.cluster import ClusterView
from teapot_lb.model.service import Protocol
from teapot_lb.tenancy.routes import TenantRoute
from teapot_lb.timers import ArmTimer, CancelTimer


@dataclass(frozen=True, slots=True)
class HealthParameters:
    """How long between probe rounds, how long a probe may take, and how many rounds in a
    row turn a hop failing or passing again."""

    interval_s: float = 0.1
    timeout_s: float = 0.2
    fail_after: int = 3
    pass_after: int = 2

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.timeout_s <= 0:
            raise ValueError("probe interval and timeout must be positive")
        if self.fail_after < 2:
            # One failed round could be the round a partition began in, judged against a
            # hop that still answered in it: two in a row leave no such witness.
            raise ValueError("fail_after must be at least 2 (the partition rule needs it)")
        if self.pass_after < 1:
            raise ValueError("pass_after must be at least 1")


@dataclass(frozen=True, slots=True)
class Probe:
    """Connect to ``address``:``port`` within ``timeout_s``; report the outcome with
    ``probe_result(round, address, ok)``."""

    round: int
    address: IPAddress
    port: int
    timeout_s: float


@dataclass(frozen=True, slots=True)
class HopVerdict:
    """What the planner reads: the hops that failed ``fail_after`` rounds in a row, and the
    hops whose probe succeeded in the last round (the evidence that this speaker still
    reaches the tenant's segment)."""

    failing: frozenset[IPAddress] = frozenset()
    answering: frozenset[IPAddress] = frozenset()


@dataclass(frozen=True, slots=True)
class VerdictChanged:
    verdict: HopVerdict


ROUND = "round"  # the core's one timer: all hops are probed together, round by round

Order: TypeAlias = Probe | VerdictChanged | ArmTimer[str] | CancelTimer[str]


@dataclass
class _Hop:
    port: int
    failing: bool = False
    run: int = 0  # rounds in a row against the current state (failures while passing...)
    answered: bool = False  # the last round's result


@dataclass
class HopHealth:
    """The health of every probed next hop, probed in rounds.

    A round probes every hop at once and ends when each has answered (the adapter bounds
    each probe by ``timeout_s``); then the verdict is updated as one, and the next round is
    armed ``interval_s`` later. Probing in rounds is what makes the partition rule hold: a
    cut-off makes every probe of a round fail together, so no hop is judged against another
    hop's stale success."""

    params: HealthParameters = field(default_factory=HealthParameters)
    _hops: dict[IPAddress, _Hop] = field(default_factory=dict)
    _round: int = 0
    _waiting: dict[IPAddress, bool | None] = field(default_factory=dict)
    _running: bool = False  # a round is in flight or armed
    _verdict: HopVerdict = field(default_factory=HopVerdict)

    @property
    def verdict(self) -> HopVerdict:
        return self._verdict

    @property
    def targets(self) -> frozenset[IPAddress]:
        return frozenset(self._hops)

    def set_targets(self, targets: Mapping[IPAddress, int]) -> list[Order]:
        """Probe exactly these hops (address → TCP port) from the next round on. A new hop
        starts passing; a hop no longer wanted is forgotten."""
        for address in set(self._hops) - set(targets):
            del self._hops[address]
        for address, port in targets.items():
            hop = self._hops.setdefault(address, _Hop(port))
            hop.port = port
        orders: list[Order] = []
        if self._waiting:  # a round in flight: it no longer waits for a forgotten hop
            for address in set(self._waiting) - set(self._hops):
                del self._waiting[address]
            orders += self._maybe_end_round()
        elif self._hops and not self._running:
            self._running = True
            orders.append(ArmTimer(ROUND, 0.0))
        return orders + self._publish()

    def timer_expired(self, timer: str) -> list[Order]:
        if timer != ROUND or not self._hops:
            self._running = False
            return []
        self._round += 1
        self._waiting = dict.fromkeys(self._hops, None)
        p = self.params
        return [
            Probe(self._round, a, self._hops[a].port, p.timeout_s)
            for a in sorted(self._hops, key=_order)
        ]

    def probe_result(self, round_: int, address: IPAddress, ok: bool) -> list[Order]:
        """One probe's outcome (connected, or refused / timed out / unreachable)."""
        if round_ != self._round or address not in self._waiting:
            return []  # a late answer for an earlier round or a hop no longer probed
        self._waiting[address] = ok
        return self._maybe_end_round()

    def stop(self) -> list[Order]:
        self._waiting.clear()
        self._running = False
        self._round += 1
        return [CancelTimer(ROUND)]

    def _maybe_end_round(self) -> list[Order]:
        if any(ok is None for ok in self._waiting.values()):
            return []
        p = self.params
        for address, ok in self._waiting.items():
            hop = self._hops[address]
            hop.answered = bool(ok)
            if hop.answered != hop.failing:  # agrees with the current state
                hop.run = 0
                continue
            hop.run += 1
            if hop.run >= (p.pass_after if hop.failing else p.fail_after):
                hop.failing, hop.run = not hop.failing, 0
        self._waiting.clear()
        if not self._hops:
            self._running = False
            return self._publish()
        return [*self._publish(), ArmTimer(ROUND, p.interval_s)]

    def _publish(self) -> list[Order]:
        verdict = HopVerdict(
            frozenset(a for a, h in self._hops.items() if h.failing),
            frozenset(a for a, h in self._hops.items() if h.answered),
        )
        if verdict == self._verdict:
            return []
        self._verdict = verdict
        return [VerdictChanged(verdict)]


def _order(address: IPAddress) -> tuple[int, int]:
    return address.version, int(address)


def live_routes(routes: Iterable[TenantRoute], verdict: HopVerdict) -> tuple[TenantRoute, ...]:
    """The routes with their failing hops withheld, but only while another hop of the
    same route answered the last round: when none did, every hop stays (a dead tenant and
    a management-side partition look the same from here; the tenant's readiness decides),
    so a probe never withdraws the last path of an IP."""
    if not verdict.failing:
        return tuple(routes)
    out = []
    for route in routes:
        hops = route.next_hops
        kept = tuple(h for h in hops if h not in verdict.failing)
        if kept != hops and any(h in verdict.answering for h in kept):
            route = replace(route, next_hops=kept)
        out.append(route)
    return tuple(out)


def probe_targets(view: ClusterView, routes: Iterable[TenantRoute]) -> dict[IPAddress, int]:
    """Each next hop → the TCP nodePort to probe it on: the lowest TCP nodePort among the
    requests routed through it. A hop of requests without a TCP nodePort (UDP, SCTP only)
    is not probed, so never withheld."""
    out: dict[IPAddress, int] = {}
    for route in routes:
        request = view.tenant_load_balancers.get(route.request)
        if request is None:
            continue
        ports = [
            p.node_port
            for p in request.spec.ports
            if p.protocol is Protocol.TCP and p.node_port is not None
        ]
        if not ports:
            continue
        for hop in route.next_hops:
            out[hop] = min(out.get(hop, 65536), min(ports))
    return out


__all__ = [
    "ROUND",
    "HealthParameters",
    "HopHealth",
    "HopVerdict",
    "Order",
    "Probe",
    "VerdictChanged",
    "live_routes",
    "probe_targets",
]
