"""The speaker of one node: store → plan → the difference applied to the backends.

Level-triggered like a reconcile: sources (Kubernetes informers, or the manifest
directory in standalone mode) put objects into the :class:`~teapot_lb.cluster.Store`
and call :meth:`NodeSpeaker.notify`; after ``debounce_s`` (changes arriving together are
planned once: 5 ms for the informers' one-object events, 0 behind the manifest watch, which
already reloads a burst at once) :meth:`NodeSpeaker.step` computes `plan(view, node)` and
hands each backend its part; each backend changes only what differs from what it holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from ipaddress import ip_address
from typing import Generic, TypeVar

from teapot_lb import log
from teapot_lb.announce.announcement import Decision, Plan
from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.plan import PlanOptions, plan
from teapot_lb.cluster import ClusterView, Store
from teapot_lb.speaker.backend import Backend, Step
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.l2_backend import L2Backend
from teapot_lb.speaker.report import Announcing, Reporting, ServiceEvent, events
from teapot_lb.speaker.vip_backend import VIPBackend

Reporter = Callable[["StepResult"], Awaitable[None]]

# Informer events arrive one object at a time (a Service, then its EndpointSlice): a few
# milliseconds merge them into one step. A source that already delivers a whole change at
# once (the standalone manifest watch) runs with 0: triggers of one loop turn still merge.
DEBOUNCE_S = 0.005
# A step hands the backends what the plan changed (its delta); this often (and after a step
# that failed) they get the whole plan instead and compare it with what they hold, so that
# anything a delta could have missed is put right (level-triggered).
RESYNC_S = 300.0


@dataclass(frozen=True)
class StepResult:
    """One applied plan and what changed in what this node reports."""

    plan: Plan
    view: ClusterView
    announcing: Mapping[str, tuple[Announcing, ...]]
    failures: Mapping[str, Mapping[str, str]]
    events: tuple[ServiceEvent, ...]
    seconds: float
    # Services whose `announcing` or `failures` changed since the previous result: what a
    # reporter has to write (None: consider every Service).
    changed: frozenset[str] | None = None


@dataclass
class SpeakerStats:
    steps: int = 0
    last_step_s: float = 0.0
    step_errors: int = 0
    last_error: str | None = None
    plan_seconds: list[float] = field(default_factory=list)


_B = TypeVar("_B", bound=Backend)


class _BackendOf(Generic[_B]):
    """`speaker.bgp`: the backend of one type, read and replaced in the list."""

    def __init__(self, kind: type[_B]) -> None:
        self.kind = kind

    def __get__(self, speaker: NodeSpeaker, owner: type[NodeSpeaker]) -> _B | None:
        return speaker.backend(self.kind)

    def __set__(self, speaker: NodeSpeaker, backend: _B | None) -> None:
        speaker.set_backend(self.kind, backend)


class NodeSpeaker:
    """Plans for one node and applies the plan through a list of backends (in order; they
    stop in the same order). `bgp`, `l2` and `vip` are shorthands for the backends of those
    types (constructor arguments and attributes)."""

    def __init__(
        self,
        node: str,
        store: Store,
        *,
        backends: Iterable[Backend] = (),
        bgp: BGPBackend | None = None,
        l2: L2Backend | None = None,
        vip: VIPBackend | None = None,
        reporter: Reporter | None = None,
        options: PlanOptions | None = None,
        debounce_s: float = DEBOUNCE_S,
    ) -> None:
        self.node = node
        self.store = store
        self.backends: list[Backend] = [*backends, *(b for b in (bgp, l2, vip) if b is not None)]
        self.reporter = reporter
        self.options = options or PlanOptions()
        self.debounce_s = debounce_s
        self.stats = SpeakerStats()
        self.last: StepResult | None = None
        # Per-Service plans kept between steps: one changed Service is planned alone, and
        # reported alone.
        self.plan_cache = PlanCache()
        self.reporting = Reporting(node)
        self.resync_s = RESYNC_S
        self._next_full: float | None = None  # when the backends get the whole plan again
        self._trusted = False  # the backends applied every step so far: a delta will do
        self.full_steps = 0  # steps whose backends got the whole plan
        self._wake = asyncio.Event()
        self._log = log.get("speaker").bind(node=node)

    # --- backends ---------------------------------------------------------------------------

    def backend(self, kind: type[_B]) -> _B | None:
        """The backend of this type, if the speaker runs one."""
        for b in self.backends:
            if isinstance(b, kind):
                return b
        return None

    def set_backend(self, kind: type[_B], new: _B | None) -> None:
        """Replace the backend of this type in place (keeping the order), or add it last.
        The next step hands every backend the whole plan (a new one holds nothing yet)."""
        self._trusted = False
        at = next((i for i, b in enumerate(self.backends) if isinstance(b, kind)), None)
        if at is None:
            if new is not None:
                self.backends.append(new)
        elif new is None:
            del self.backends[at]
        else:
            self.backends[at] = new

    bgp = _BackendOf(BGPBackend)
    l2 = _BackendOf(L2Backend)
    vip = _BackendOf(VIPBackend)

    # --- triggering -------------------------------------------------------------------------

    def notify(self) -> None:
        """Something changed: plan again soon (idempotent; many calls, one step)."""
        self._wake.set()

    async def run(self) -> None:
        """Plan and apply whenever notified, until cancelled. A step that fails is retried
        after 0.5 s; the same failure again is logged without its traceback."""
        failing: str | None = None
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.debounce_s)
            self._wake.clear()
            try:
                await self.step()
                failing = None
            except Exception as err:
                self.stats.step_errors += 1
                self.stats.last_error = repr(err)
                if failing == repr(err):
                    self._log.warning("speaker step failed again", error=str(err))
                else:
                    self._log.exception("speaker step failed")
                failing = repr(err)
                await asyncio.sleep(0.5)
                self._wake.set()

    # --- one step ---------------------------------------------------------------------------

    def plan_options(self) -> PlanOptions:
        """The configured options, with what each backend knows (live speakers, down
        sessions)."""
        options = replace(self.options, down_peers=(), established_peers=None)
        for backend in self.backends:
            options = backend.plan_options(options)
        return options

    def resync(self) -> None:
        """Have the next step hand the backends the whole plan (not its delta)."""
        self._trusted = False

    async def step(self) -> StepResult:
        started = time.perf_counter()
        view = self.store.view()
        options = self.plan_options()
        the_plan = await self._plan(view, options)
        plan_s = time.perf_counter() - started
        now = time.monotonic()
        full = not self._trusted or self._next_full is None or now >= self._next_full
        # Until the backends have applied this step, the next one cannot trust a delta.
        self._trusted = False
        if full:
            self.full_steps += 1
            self._next_full = now + self.resync_s
        step = Step(self.node, view, the_plan, options, self.plan_cache,
                    None if full else the_plan.delta)  # fmt: skip
        for backend in self.backends:
            await backend.apply_plan(step)
        # Applying may have changed what the backends know (a BGP session the speaker just
        # created and that came up at once): plan once more so the reported decisions say
        # what holds now (for instance, which peers a route is announced to).
        again = self.plan_options()
        if again != options:
            options = again
            the_plan = await self._plan(view, options)
            step = Step(self.node, view, the_plan, options, self.plan_cache, the_plan.delta)
            for backend in self.backends:
                await backend.apply_plan(step)
        self._trusted = True
        inputs = tuple(backend.failure_inputs() for backend in self.backends)
        changed = self.plan_cache.totals.take_changed()
        # In the worker thread too: a session coming up changes what every Service reports.
        report = await asyncio.to_thread(
            self.reporting.update, the_plan, self._failure, inputs, changed
        )
        result = StepResult(
            plan=the_plan,
            view=view,
            announcing=report.announcing,
            failures=report.failures,
            events=report.events,
            seconds=time.perf_counter() - started,
            changed=report.changed,
        )
        self.last = result
        self.stats.steps += 1
        self.stats.last_step_s = result.seconds
        self.stats.plan_seconds.append(plan_s)
        del self.stats.plan_seconds[:-100]
        # A restart with thousands of Services must not flood the log: past a few, one line.
        say = self._log.info if len(result.events) <= 20 else self._log.debug
        for ev in result.events:
            say("event", service=ev.service, reason=ev.reason, message=ev.message)
        if len(result.events) > 20:
            self._log.info("events", count=len(result.events), seconds=round(result.seconds, 3))
        if self.reporter is not None:
            try:
                await self.reporter(result)
            except Exception:
                self._log.exception("reporting failed")
        return result

    async def _plan(self, view: ClusterView, options: PlanOptions) -> Plan:
        """`plan` in a worker thread: a change that touches every Service (a BGP session
        up or down, a pool edited) replans all of them, seconds at 10,000 Services on a
        loaded machine, and the event loop must go on meanwhile — BFD at 100 ms, BGP
        keepalives, the manifest watch — or the sessions it replans for are lost (issue
        37). The view is a snapshot and the plan cache is this step's alone."""
        return await asyncio.to_thread(plan, view, self.node, options, cache=self.plan_cache)

    def _failure(self, decision: Decision) -> str | None:
        """Why an announcing decision does not work here (its mode's backend says)."""
        for backend in self.backends:
            if backend.mode is decision.mode:
                why = backend.failure(decision)
                if why is not None:
                    return why
        return None

    # --- stopping ---------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Each backend withdraws, in order (BGP routes, L2 ownership, keepalived)."""
        self._log.info("shutting down: withdrawing announcements")
        for backend in self.backends:
            try:
                await backend.withdraw()
            except Exception:
                self._log.exception("withdrawing failed", mode=backend.mode.value)
        await self._report_stopped()
        self._log.info("shut down")

    async def _report_stopped(self) -> None:
        """Tell the reporter that this node announces nothing any more."""
        last = self.last
        if last is None:
            return
        result = StepResult(
            plan=Plan(self.node, frozenset(), ()),
            view=last.view,
            announcing={},
            failures={},
            events=tuple(events(self.node, last.announcing, {})),
            seconds=0.0,
            changed=frozenset(last.announcing) | frozenset(last.failures),
        )
        self.last = result
        self.reporting = Reporting(self.node)
        if self.reporter is not None:
            try:
                await self.reporter(result)
            except Exception:
                self._log.exception("reporting failed")


def ip_order(text: str) -> tuple[int, int]:
    ip = ip_address(text)
    return ip.version, int(ip)


def announced_ips(result: StepResult | None) -> dict[str, list[str]]:
    """Mode → IPs this node announces (for status files and tests)."""
    out: dict[str, set[str]] = {}
    if result is None:
        return {}
    for items in result.announcing.values():
        for a in items:
            out.setdefault(a.mode.value, set()).add(a.ip)
    return {m: sorted(ips, key=ip_order) for m, ips in out.items()}
