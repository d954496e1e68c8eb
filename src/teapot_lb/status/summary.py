"""The cluster at a glance: pools and usage, BGP sessions, who holds each IP, problems (pure).

Pool usage comes from the controller's own core (:func:`teapot_lb.controller.state.rebuild`
over the IPs the Services hold), the modes and candidate nodes of each Service IP from the
planner (:func:`teapot_lb.announce.plan.explain`, as ``teapot-lb explain``), and what is
actually announced from the nodes' reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from teapot_lb.announce.announcement import Mode
from teapot_lb.announce.plan import PlanOptions, explain
from teapot_lb.cluster import ClusterView
from teapot_lb.controller.convert import held_ips
from teapot_lb.controller.options import ControllerOptions
from teapot_lb.controller.state import rebuild
from teapot_lb.status.reports import NodeReport

NEARLY_FULL = 0.9  # the TeapotLBPoolNearlyFull alert's threshold


@dataclass(frozen=True)
class PoolUsage:
    pool: str
    family: str
    assigned: int
    size: int
    problem: str | None = None  # the pool is invalid (then left out of assignment)

    @property
    def used(self) -> float:
        return self.assigned / self.size if self.size else 0.0


@dataclass(frozen=True)
class SessionState:
    node: str
    peer: str
    state: str | None  # None: unknown (no report, or no session object yet)
    error: str | None = None

    @property
    def established(self) -> bool:
        return self.state == "Established"


@dataclass(frozen=True)
class Holder:
    """Who holds one Service IP in one mode: ``nodes`` announce it (BGP), answer for it
    (L2) or are VRRP master of it (VIP); ``candidates`` may (the plan's yes)."""

    service: str
    ip: str
    mode: str
    nodes: tuple[str, ...]
    candidates: tuple[str, ...]
    known: bool = True  # False: no node's report tells (e.g. VIP masters in a cluster)


@dataclass(frozen=True)
class ClusterStatus:
    source: str
    nodes: tuple[str, ...]
    pools: tuple[PoolUsage, ...] = ()
    sessions: tuple[SessionState, ...] = ()
    holders: tuple[Holder, ...] = ()
    pending: tuple[str, ...] = ()  # handled LoadBalancer Services without an IP
    problems: tuple[str, ...] = field(default_factory=tuple)


def pool_usage(view: ClusterView, options: ControllerOptions) -> list[PoolUsage]:
    state = rebuild(view, options)
    usage = state.allocator.usage()
    out: list[PoolUsage] = []
    for key in sorted(view.pools):
        pool = view.pools[key]
        problems = state.config.problems.get(key)
        if problems:
            out.append(PoolUsage(pool.name, "-", 0, 0, "; ".join(str(p) for p in problems)))
            continue
        for family, counts in sorted(usage.get(pool.name, {}).items()):
            size = counts.assigned + counts.available
            out.append(PoolUsage(pool.name, family.value, counts.assigned, size))
    return out


def _holders(view: ClusterView, reports: Mapping[str, NodeReport]) -> list[Holder]:
    out: list[Holder] = []
    for key in sorted(view.services):
        decisions = explain(view, key, PlanOptions())
        planned: dict[tuple[str, str], list[str]] = {}
        for d in decisions:
            if d.ip and d.mode is not None:
                nodes = planned.setdefault((d.ip, d.mode.value), [])
                if d.announces:
                    nodes.append(d.node)
        for (ip, mode), candidates in sorted(planned.items()):
            if not candidates:
                continue  # this mode does not serve the IP (no advertisement of the mode)
            holding, known = _holding(key, ip, mode, reports)
            out.append(Holder(key, ip, mode, holding, tuple(candidates), known))
    return out


def _holding(
    service: str, ip: str, mode: str, reports: Mapping[str, NodeReport]
) -> tuple[tuple[str, ...], bool]:
    nodes: list[str] = []
    known = False
    for name in sorted(reports):
        r = reports[name]
        if mode == Mode.VIP.value:
            if r.vip_masters is None:
                continue
            known = True
            if ip in r.vip_masters:
                nodes.append(name)
            continue
        if not r.reported and not r.stopped:
            continue
        known = True
        if (mode, ip) in r.announcing.get(service, frozenset()) and ip not in r.failures.get(
            service, {}
        ):
            nodes.append(name)
    return tuple(nodes), known


def _sessions(reports: Mapping[str, NodeReport]) -> list[SessionState]:
    out: list[SessionState] = []
    for name in sorted(reports):
        sessions = reports[name].sessions or {}
        for peer in sorted(sessions):
            state, error = sessions[peer]
            out.append(SessionState(name, peer, state, error))
    return out


def _problems(
    pools: Sequence[PoolUsage],
    sessions: Sequence[SessionState],
    holders: Sequence[Holder],
    pending: Sequence[str],
    reports: Mapping[str, NodeReport],
) -> list[str]:
    out: list[str] = []
    for p in pools:
        if p.problem is not None:
            out.append(f"AddressPool {p.pool} is invalid: {p.problem}")
        elif p.size and p.assigned >= p.size:
            out.append(f"AddressPool {p.pool} ({p.family}) is full: {p.assigned}/{p.size}")
        elif p.used >= NEARLY_FULL:
            out.append(f"AddressPool {p.pool} ({p.family}) is {p.used:.0%} used")
    out += [f"Service {key} has no IP" for key in pending]
    for name in sorted(reports):
        r = reports[name]
        if r.stopped:
            out.append(f"node {name}: speaker stopped")
        elif not r.reported:
            out.append(f"node {name}: no report ({r.why})")
        elif r.why:
            out.append(f"node {name}: {r.why}")
        for service, ips in sorted(r.failures.items()):
            for ip, why in sorted(ips.items()):
                out.append(f"node {name} cannot announce {ip} of {service}: {why}")
    for s in sessions:
        if not s.established:
            error = f": {s.error}" if s.error else ""
            out.append(f"BGP session {s.node} -> {s.peer} is {s.state or 'not set up'}{error}")
    for h in holders:
        if not h.known:
            continue
        if not h.nodes:
            out.append(f"no node holds {h.ip} of {h.service} ({h.mode})")
        elif h.mode in (Mode.VIP.value, Mode.L2.value) and len(h.nodes) > 1:
            out.append(
                f"{h.ip} of {h.service} is held by {len(h.nodes)} nodes ({h.mode}): "
                + ", ".join(h.nodes)
            )
    first = next((r for r in reports.values() if r.problems), None)
    if first is not None:
        out += [f"manifest: {p}" for p in first.problems]
    return out


def summarize(
    view: ClusterView,
    reports: Mapping[str, NodeReport],
    *,
    source: str,
    options: ControllerOptions | None = None,
) -> ClusterStatus:
    """The status of the cluster in ``view`` with what its nodes report (by node name)."""
    options = options or ControllerOptions()
    pools = pool_usage(view, options)
    pending = [
        key
        for key in sorted(view.services)
        if options.handles(view.services[key]) and not held_ips(view.services[key])
    ]
    sessions = _sessions(reports)
    holders = _holders(view, reports)
    return ClusterStatus(
        source=source,
        nodes=tuple(sorted(view.nodes)),
        pools=tuple(pools),
        sessions=tuple(sessions),
        holders=tuple(holders),
        pending=tuple(pending),
        problems=tuple(_problems(pools, sessions, holders, pending, reports)),
    )
