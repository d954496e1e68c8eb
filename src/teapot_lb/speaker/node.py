"""The speaker of one node: store → plan → the difference applied to the backends.

Level-triggered like a reconcile: sources (Kubernetes informers, or the manifest
directory in standalone mode) put objects into the :class:`~teapot_lb.cluster.Store`
and call :meth:`NodeSpeaker.notify`; a few milliseconds later (changes arriving together
are planned once) :meth:`NodeSpeaker.step` computes `plan(view, node)` and hands each
backend its part; each backend changes only what differs from what it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any

from teapot_lb import log
from teapot_lb.announce.plan import (
    Mode,
    Plan,
    PlanCache,
    PlanOptions,
    l2_election_orders,
    plan,
)
from teapot_lb.bgp import State
from teapot_lb.bgp.fsm import StateChanged
from teapot_lb.cluster import ClusterView, Store
from teapot_lb.l2.responder import InterfaceInfo, interfaces
from teapot_lb.speaker.bgp_backend import BGPBackend, peer_setups, router_id_of
from teapot_lb.speaker.desired import desired
from teapot_lb.speaker.l2_backend import L2Backend
from teapot_lb.speaker.report import Announcing, ServiceEvent, announcing, events
from teapot_lb.speaker.vip_backend import (
    VIPBackend,
    cluster_vip_input,
    node_addresses,
    vip_groups,
)

Reporter = Callable[["StepResult"], Awaitable[None]]


@dataclass(frozen=True)
class StepResult:
    """One applied plan and what changed in what this node reports."""

    plan: Plan
    view: ClusterView
    announcing: Mapping[str, tuple[Announcing, ...]]
    failures: Mapping[str, Mapping[str, str]]
    events: tuple[ServiceEvent, ...]
    seconds: float


@dataclass
class SpeakerStats:
    steps: int = 0
    last_step_s: float = 0.0
    step_errors: int = 0
    last_error: str | None = None
    plan_seconds: list[float] = field(default_factory=list)


def peer_addresses(view: ClusterView, node: str) -> list[str]:
    """The other nodes' InternalIPs of this node's heartbeat family (IPv4 first)."""
    me = view.nodes.get(node)
    mine = me.addresses() if me is not None else []
    if not mine:
        return []
    family = min(a.version for a in mine)
    out: list[str] = []
    for name, other in sorted(view.nodes.items()):
        if name == node:
            continue
        out.extend(str(a) for a in other.addresses() if a.version == family)
    return out


class NodeSpeaker:
    def __init__(
        self,
        node: str,
        store: Store,
        *,
        bgp: BGPBackend | None = None,
        l2: L2Backend | None = None,
        vip: VIPBackend | None = None,
        reporter: Reporter | None = None,
        options: PlanOptions | None = None,
        debounce_s: float = 0.005,
        list_interfaces: Callable[[], Awaitable[dict[str, InterfaceInfo]]] = interfaces,
    ) -> None:
        self.node = node
        self.store = store
        self.bgp = bgp
        self.l2 = l2
        self.vip = vip
        self.reporter = reporter
        self.options = options or PlanOptions()
        self.debounce_s = debounce_s
        self.stats = SpeakerStats()
        self.last: StepResult | None = None
        self._list_interfaces = list_interfaces
        # Per-Service plans kept between steps: one changed Service is planned alone.
        self.plan_cache = PlanCache()
        self._wake = asyncio.Event()
        self._log: Any = log.get("speaker").bind(node=node)

    # --- triggering -------------------------------------------------------------------------

    def notify(self) -> None:
        """Something changed: plan again soon (idempotent; many calls, one step)."""
        self._wake.set()

    def on_bgp_event(self, _peer: Any, action: Any) -> None:
        """bgp.Speaker callback: a session coming up or going down changes the explanations
        (and the status); routes the router sends us do not concern the plan."""
        if isinstance(action, StateChanged) and State.ESTABLISHED in (action.old, action.new):
            self.notify()

    async def run(self) -> None:
        """Plan and apply whenever notified, until cancelled."""
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.debounce_s)
            self._wake.clear()
            try:
                await self.step()
            except Exception as err:
                self.stats.step_errors += 1
                self.stats.last_error = repr(err)
                self._log.exception("speaker step failed")
                await asyncio.sleep(0.5)
                self._wake.set()

    # --- one step ---------------------------------------------------------------------------

    def plan_options(self) -> PlanOptions:
        live = self.l2.live_speakers() if self.l2 is not None else self.options.live_speakers
        down: list[str] = []
        if self.bgp is not None and self.bgp.speaker is not None:
            for name in self.bgp.setups:
                address = self.bgp.address_of(name)
                peer = self.bgp.speaker.peers.get(address) if address else None
                if peer is None or getattr(peer, "state", None) is not State.ESTABLISHED:
                    down.append(name)
        return PlanOptions(
            live_speakers=live,
            down_peers=tuple(down),
            load_balancer_class=self.options.load_balancer_class,
            handle_unclassed=self.options.handle_unclassed,
        )

    async def step(self) -> StepResult:
        started = time.perf_counter()
        view = self.store.view()
        options = self.plan_options()
        the_plan = plan(view, self.node, options, cache=self.plan_cache)
        plan_s = time.perf_counter() - started
        want = desired(the_plan)
        if self.bgp is not None:
            setups = peer_setups(view, self.node)
            node = view.nodes.get(self.node)
            peers = [view.bgp_peers[k] for k in sorted(view.bgp_peers)]
            selected = [p for p in peers if p.name in setups]
            await self.bgp.apply(setups, want.bgp, router_id_of(node, self.node, selected))
        if self.l2 is not None:
            self.l2.set_peers(peer_addresses(view, self.node))
            orders = (
                l2_election_orders(view, options, cache=self.plan_cache)
                if view.l2_advertisements
                else {}
            )
            await self.l2.apply(want.l2, orders)
        if self.vip is not None:
            vip_input = cluster_vip_input(view, options)
            if vip_input.memberships or self.vip.rendered is not None:
                infos = await self._list_interfaces()
                groups, errors = vip_groups(vip_input, infos)
                await self.vip.apply(
                    groups, node_addresses(view), sorted(infos), errors, vip_input.local
                )
        now = announcing(the_plan)
        failures = self._failures(the_plan)
        before = self.last.announcing if self.last is not None else {}
        failures_before = self.last.failures if self.last is not None else {}
        result = StepResult(
            plan=the_plan,
            view=view,
            announcing=now,
            failures=failures,
            events=tuple(events(self.node, before, now, failures, failures_before)),
            seconds=time.perf_counter() - started,
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

    def _failures(self, the_plan: Plan) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        l2_errors = self.l2.errors if self.l2 is not None else {}
        bgp_errors = self.bgp.errors() if self.bgp is not None else {}
        vip_failed = self.vip.failed if self.vip is not None else {}
        for d in the_plan.decisions:
            if not d.announces:
                continue
            why: str | None = None
            if d.mode is Mode.L2 and d.ip in l2_errors:
                why = l2_errors[d.ip]
            if d.mode is Mode.VIP:
                why = vip_failed.get(d.ip)
            if d.mode is Mode.BGP:
                bad = [f"BGPPeer {p}: {bgp_errors[p]}" for p in d.peers if p in bgp_errors]
                why = "; ".join(bad) or None
            if why is not None:
                out.setdefault(d.service, {})[d.ip] = why
        return out

    # --- stopping ---------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Withdraw BGP routes, release L2 ownership, stop keepalived — in that order."""
        self._log.info("shutting down: withdrawing announcements")
        if self.bgp is not None:
            with contextlib.suppress(Exception):
                await self.bgp.shutdown()
        if self.l2 is not None:
            self.l2.shutdown()
        if self.vip is not None:
            with contextlib.suppress(Exception):
                await self.vip.shutdown()
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
        )
        self.last = result
        if self.reporter is not None:
            try:
                await self.reporter(result)
            except Exception:
                self._log.exception("reporting failed")


def _ip_order(text: str) -> tuple[int, int]:
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
    return {m: sorted(ips, key=_ip_order) for m, ips in out.items()}
