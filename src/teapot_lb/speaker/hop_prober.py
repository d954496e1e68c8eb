"""The speaker backend that probes tenant next hops (`speaker --tenancy`): the I/O of
:mod:`teapot_lb.announce.hop_health`.

Each step it takes the targets from the view (every Programmed route's next hops, with
their TCP nodePort), runs the core's timers on the loop, carries out its probes as TCP
connects from this node, and hands the planner the failing hops
(`PlanOptions.tenant_hops`); a changed verdict wakes the speaker, whose next plan
withholds or restores exactly the changed hops' paths.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace

from teapot_lb import log
from teapot_lb.announce.announcement import Decision, Mode
from teapot_lb.announce.hop_health import (
    HealthParameters,
    HopHealth,
    Order,
    Probe,
    VerdictChanged,
    probe_targets,
)
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.speaker.backend import Step
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.tenancy.programmed import programmed_routes
from teapot_lb.timers import LoopTimers


async def connects(probe: Probe) -> bool:
    """Whether a TCP connection to the probe's address and port opens in time."""
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(str(probe.address), probe.port), probe.timeout_s
        )
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


class TenantHopProber:
    """Probes the next hops of the tenant routes this speaker plans from."""

    def __init__(
        self,
        notify: Callable[[], None],
        params: HealthParameters | None = None,
        *,
        connect: Callable[[Probe], Awaitable[bool]] = connects,
    ) -> None:
        self.health = HopHealth(params or HealthParameters())
        self._notify = notify
        self._connect = connect
        self._timers: LoopTimers[str] = LoopTimers(self._expired)
        self._probes: set[asyncio.Task[None]] = set()
        self._log = log.get("speaker.tenant_hops")
        self._failing: list[str] = []

    @property
    def mode(self) -> Mode:
        return Mode.BGP  # it shapes BGP paths; it fails none of them

    def plan_options(self, options: PlanOptions) -> PlanOptions:
        return replace(options, tenant_hops=self.health.verdict)

    async def apply_plan(self, step: Step) -> None:
        self._carry(self.health.set_targets(probe_targets(step.view, programmed_routes(step.view))))

    def failure(self, decision: Decision) -> str | None:
        return None

    def failure_inputs(self) -> object:
        return None

    async def withdraw(self) -> None:
        self._carry(self.health.stop())
        for task in list(self._probes):
            task.cancel()

    def _expired(self, timer: str) -> None:
        self._carry(self.health.timer_expired(timer))

    def _carry(self, orders: list[Order]) -> None:
        for order in orders:
            if isinstance(order, Probe):
                task = asyncio.get_running_loop().create_task(self._probe(order))
                self._probes.add(task)
                task.add_done_callback(self._probes.discard)
            elif isinstance(order, VerdictChanged):
                failing = sorted(str(a) for a in order.verdict.failing)
                if failing != self._failing:
                    self._log.info("tenant next hops failing", failing=failing)
                    self._failing = failing
                self._notify()
            else:
                self._timers.apply(order)

    async def _probe(self, probe: Probe) -> None:
        # Every probe must report, or its round never ends: a connect that overruns its
        # timeout or fails in an unforeseen way counts as a failed probe.
        try:
            ok = await asyncio.wait_for(self._connect(probe), 2 * probe.timeout_s)
        except Exception:
            self._log.debug("probe failed", address=str(probe.address), exc_info=True)
            ok = False
        self._carry(self.health.probe_result(probe.round, probe.address, ok))


HOP_INTERVAL_S = 0.1  # between probe rounds; a probe may take twice that


def attach_hop_prober(speaker: NodeSpeaker, interval_s: float = HOP_INTERVAL_S) -> None:
    """Give the speaker its prober of tenant next hops (nothing when ``interval_s`` is 0)."""
    if interval_s > 0:
        params = HealthParameters(interval_s, timeout_s=2 * interval_s)
        speaker.set_backend(TenantHopProber, TenantHopProber(speaker.notify, params))


__all__ = ["HOP_INTERVAL_S", "TenantHopProber", "attach_hop_prober", "connects"]
