"""The lab's results: typed records, the report table and the JSON document (pure).

JSON schema (``schema: "teapot-lb.lab/v2"``: results per mode, then per address family)
is documented in docs/lab.md; every time is in seconds, ``null`` when it could not be
measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from teapot_lb.lab.gateway import GatewayResult, gateway_lines
from teapot_lb.lab.manifests import MODES
from teapot_lb.lab.measure import percentile
from teapot_lb.lab.ovn import OVNResult, ovn_lines
from teapot_lb.lab.relay import RelayResult, relay_lines
from teapot_lb.lab.teapot import TeapotResult
from teapot_lb.lab.teapot_octavia import OctaviaResult, octavia_json, octavia_lines
from teapot_lb.lab.timeline import Timeline

SCHEMA = "teapot-lb.lab/v2"
ISSUE15_CREATE_P50_S = 0.03  # issue 15: create → reachable p50 in standalone mode
ISSUE15_BGP_BFD_HARD_MAX_S = 0.35  # issue 15: BGP hard-kill failover with BFD 100 ms x 3
TEAPOT_CREATE_P50_S = 0.5  # issue 12: tenant Service created → reachable, route mode
TEAPOT_NODE_KILL_S = 1.0  # issue 12: tenant node hard-killed → traffic on the rest


@dataclass
class ServiceResult:
    name: str
    ip: str
    created_by_lab: bool
    create_to_reachable_s: float | None = None  # None for the manifests' own Services
    reachable: bool = False


@dataclass
class Trial:
    node: str
    outage_s: float | None  # None: the client was not served well again in time
    failed_requests: int
    requests: int
    withdrawn_s: float | None = None  # BGP: until the router's FIB lost the node's next hop
    return_failed_requests: int = 0  # requests that failed while the node came back
    failures: dict[str, int] = field(default_factory=dict)  # why requests failed, counted
    timeline: Timeline | None = None  # requests per node around the failure (the HTML report)

    @property
    def failover_s(self) -> float | None:
        """Until traffic stopped going to the node: the later of what the client saw and
        (BGP) when the router's FIB dropped the node; None when it did not recover."""
        if self.outage_s is None:
            return None
        return max(self.outage_s, self.withdrawn_s or 0.0)


@dataclass
class Failover:
    kind: str  # "hard" (link down + SIGKILL) or "graceful" (SIGTERM)
    trials: list[Trial] = field(default_factory=list)

    def outages(self) -> list[float]:
        return [f for t in self.trials if (f := t.failover_s) is not None]

    @property
    def ok(self) -> bool:
        return bool(self.trials) and all(t.failover_s is not None for t in self.trials)

    @property
    def p50_s(self) -> float | None:
        return percentile(self.outages(), 50)

    @property
    def max_s(self) -> float | None:
        values = self.outages()
        return max(values) if values else None


@dataclass
class Spread:
    ip: str
    requests: int
    by_node: dict[str, int]
    ok: bool


@dataclass
class Deletion:
    name: str
    ip: str
    withdrawn_after_s: float | None
    unreachable: bool

    @property
    def ok(self) -> bool:
        return self.withdrawn_after_s is not None and self.unreachable


@dataclass
class ModeResult:
    mode: str
    family: str = "v4"  # "v4" or "v6": the Services' address family
    services: list[ServiceResult] = field(default_factory=list)
    spread: Spread | None = None
    failovers: list[Failover] = field(default_factory=list)
    deletion: Deletion | None = None
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None  # why this mode and family did not run (passes)
    alerts: list[str] | None = None  # alerts that fired meanwhile (None: no Prometheus)

    def create_times(self) -> list[float]:
        return [s.create_to_reachable_s for s in self.services if s.create_to_reachable_s]

    @property
    def ok(self) -> bool:
        if self.skipped is not None:
            return not self.errors
        return (
            not self.errors
            and bool(self.services)
            and all(s.reachable for s in self.services)
            and self.spread is not None
            and self.spread.ok
            and all(f.ok for f in self.failovers)
            and bool(self.failovers)
            and self.deletion is not None
            and self.deletion.ok
        )


@dataclass
class Goal:
    name: str
    target: str
    value: float | None
    met: bool


@dataclass
class Cleanup:
    ok: bool
    leftover_namespaces: list[str] = field(default_factory=list)
    leftover_processes: int = 0
    kept: bool = False


@dataclass
class LabReport:
    options: dict[str, Any]
    modes: list[ModeResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cleanup: Cleanup | None = None
    duration_s: float = 0.0
    interrupted: bool = False
    alerts_firing_after: list[str] | None = None  # still firing at the end (None: not watched)
    teapot: TeapotResult | None = None  # the Teapot group (None: not run)
    ovn: OVNResult | None = None  # the OVN group (None: not run)
    gateway: GatewayResult | None = None  # the gateway group (None: not run)
    relay: RelayResult | None = None  # the relay group (None: not run)
    octavia: OctaviaResult | None = None  # the octavia group (None: not run)

    @property
    def ok(self) -> bool:
        cleanup_ok = self.cleanup is None or self.cleanup.ok
        return (
            not self.errors
            and not self.interrupted
            and (
                bool(self.modes)
                or self.teapot is not None
                or self.ovn is not None
                or self.gateway is not None
                or self.relay is not None
                or self.octavia is not None
            )
            and all(m.ok for m in self.modes)
            and (self.teapot is None or self.teapot.ok)
            and (self.ovn is None or self.ovn.ok)
            and (self.gateway is None or self.gateway.ok)
            and (self.relay is None or self.relay.ok)
            and (self.octavia is None or self.octavia.ok)
            and cleanup_ok
            and not self.alerts_firing_after
        )

    def goals(self) -> list[Goal]:
        return goals(self)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def goals(report: LabReport) -> list[Goal]:
    """The issue's goals, each measured against this run's figures."""
    out: list[Goal] = []
    creates = [t for m in report.modes if m.mode in MODES for t in m.create_times()]
    if creates:
        p50, p99 = percentile(creates, 50), percentile(creates, 99)
        out.append(Goal("create→reachable p50", "≤ 0.1 s", p50, p50 is not None and p50 <= 0.1))
        out.append(Goal("create→reachable p99", "≤ 0.5 s", p99, p99 is not None and p99 <= 0.5))
    for family in dict.fromkeys(m.family for m in report.modes):
        times = [
            t
            for m in report.modes
            if m.family == family and m.mode in MODES
            for t in m.create_times()
        ]
        p50 = percentile(times, 50)
        if p50 is not None:
            target = ISSUE15_CREATE_P50_S
            met = p50 <= target
            out.append(Goal(f"create→reachable p50 {family}", f"≤ {target:g} s", p50, met))
    out += teapot_goals(report)
    hold = report.options.get("bgp_hold_time_s")
    bfd = report.options.get("bgp_bfd_detection_s")
    for m in report.modes:
        for f in m.failovers:
            p50 = f.p50_s
            fam = m.family
            if m.mode == "l2" and f.kind == "hard":
                met = p50 is not None and p50 <= 0.5
                out.append(Goal(f"L2 failover p50 {fam}", "≤ 0.5 s", p50, met))
            elif m.mode == "vip" and f.kind == "hard":
                met = p50 is not None and p50 <= 1.0
                out.append(Goal(f"VIP failover p50 {fam}", "≤ 1 s", p50, met))
            elif m.mode == "bgp" and f.kind == "graceful":
                worst = f.max_s
                out.append(
                    Goal(
                        f"BGP graceful stop max {fam}",
                        "≤ 0.1 s",
                        worst,
                        worst is not None and worst <= 0.1,
                    )
                )
            elif m.mode == "bgp" and f.kind == "hard" and bfd is not None:
                # BFD ends the session: the issue's bound (detection 0.3 s + the rest),
                # or the detection time + 50 ms with slower profiles.
                worst = f.max_s
                bound = max(ISSUE15_BGP_BFD_HARD_MAX_S, float(bfd) + 0.05)
                out.append(
                    Goal(
                        f"BGP hard kill max {fam}",
                        f"≤ {bound:g} s (BFD)",
                        worst,
                        worst is not None and worst <= bound,
                    )
                )
            elif m.mode == "bgp" and f.kind == "hard" and hold is not None:
                worst = f.max_s
                bound = float(hold) + 0.5
                out.append(
                    Goal(
                        f"BGP hard kill max {fam}",
                        f"≤ hold time {hold:g} s (+0.5 s)",
                        worst,
                        worst is not None and worst <= bound,
                    )
                )
    return out


def teapot_goals(report: LabReport) -> list[Goal]:
    """Issue 12's lab goals for the teapot group's route flow (skipped: none)."""
    out: list[Goal] = []
    for m in report.modes:
        if m.mode != "teapot" or m.skipped:
            continue
        p50 = percentile(m.create_times(), 50)
        target = TEAPOT_CREATE_P50_S
        met = p50 is not None and p50 <= target
        out.append(Goal("teapot create→reachable p50", f"≤ {target:g} s", p50, met))
        for f in m.failovers:
            worst, bound = f.max_s, TEAPOT_NODE_KILL_S
            met = worst is not None and worst <= bound
            what = "teapot tenant node killed → traffic moved"
            out.append(Goal(what, f"≤ {bound:g} s", worst, met))
    return out


def table(report: LabReport) -> str:
    """The report as a fixed-width table, one row per mode and family, then goals and
    cleanup."""
    head = [
        "mode", "family", "result", "reachable", "spread (requests per node)",
        "create→reach p50/p99", "failover p50/max", "delete",
    ]  # fmt: skip
    rows: list[list[str]] = []
    for m in report.modes:
        creates = m.create_times()
        reach = f"{sum(s.reachable for s in m.services)}/{len(m.services)}"
        spread = "-"
        if m.spread is not None:
            spread = " ".join(f"{n}:{c}" for n, c in m.spread.by_node.items())
        fail = "; ".join(
            f"{f.kind} {_fmt(f.p50_s)}/{_fmt(f.max_s)}"
            + ("" if f.ok else f" ({sum(t.outage_s is None for t in f.trials)} not recovered)")
            for f in m.failovers
        )
        delete = "-"
        if m.deletion is not None:
            d = m.deletion
            delete = f"ok {_fmt(d.withdrawn_after_s)}" if d.ok else "FAILED"
        rows.append(
            [
                m.mode,
                m.family,
                "skipped" if m.skipped else "ok" if m.ok else "FAILED",
                reach,
                spread,
                f"{_fmt(percentile(creates, 50))}/{_fmt(percentile(creates, 99))}",
                fail or "-",
                delete,
            ]
        )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in
             [head, ["-" * w for w in widths], *rows]] if rows else []  # fmt: skip
    for m in report.modes:
        for err in m.errors:
            lines.append(f"{m.mode} {m.family}: {err}")
        if m.skipped:
            lines.append(f"{m.mode} {m.family}: skipped: {m.skipped}")
        if m.alerts is not None:
            lines.append(f"{m.mode} {m.family}: alerts fired: {', '.join(m.alerts) or 'none'}")
    if report.teapot is not None:
        lines += ["", *teapot_lines(report.teapot)] if lines else teapot_lines(report.teapot)
    if report.ovn is not None:
        lines += ["", *ovn_lines(report.ovn)] if lines else ovn_lines(report.ovn)
    if report.gateway is not None:
        lines += ["", *gateway_lines(report.gateway)] if lines else gateway_lines(report.gateway)
    if report.relay is not None:
        lines += ["", *relay_lines(report.relay)] if lines else relay_lines(report.relay)
    if report.octavia is not None:
        lines += ["", *octavia_lines(report.octavia)] if lines else octavia_lines(report.octavia)
    for err in report.errors:
        lines.append(f"error: {err}")
    if report.alerts_firing_after is not None:
        left = ", ".join(report.alerts_firing_after) or "none"
        lines.append(f"alerts still firing at the end: {left}")
    lines.append("")
    for g in report.goals():
        lines.append(f"goal {g.name} {g.target}: {_fmt(g.value)} {'met' if g.met else 'NOT met'}")
    if report.cleanup is not None:
        c = report.cleanup
        if c.kept:
            state = "kept (--keep): remove with `teapot-lb lab --cleanup`"
        elif c.ok:
            state = "ok (all namespaces and processes removed)"
        else:
            state = (
                f"FAILED: namespaces left {c.leftover_namespaces},"
                f" processes left {c.leftover_processes}"
            )
        lines.append(f"cleanup: {state}")
    verdict = "interrupted" if report.interrupted else ("PASSED" if report.ok else "FAILED")
    lines.append(f"lab {verdict} in {report.duration_s:.1f} s")
    return "\n".join(lines)


def teapot_lines(t: TeapotResult) -> list[str]:
    """The Teapot group: its timings, then one row per refused attempt of the other tenant."""
    hops = ", ".join(t.next_hops) or "-"
    after = ", ".join(t.next_hops_after) or "-"
    lines = [
        f"teapot: {'ok' if t.ok else 'FAILED'}; Service default/web of acme got {t.ip or '-'}",
        f"  create → IP at the agent {_fmt(t.create_to_ip_s)}; → route over {hops}"
        f" {_fmt(t.create_to_route_s)}",
        f"  node n2 gone → route over {after} {_fmt(t.node_gone_to_route_s)}",
        f"  Service deleted → route withdrawn {_fmt(t.delete_to_withdrawn_s)}",
        *([f"  not measured: {t.not_done}"] if t.not_done else []),
    ]
    head = ["globex tried", "request", "refused", "reason", "message"]
    rows = [[r.attempt, r.request, "yes" if r.ok else "NO", r.reason or "-", r.message]
            for r in t.refused]  # fmt: skip
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    for row in [head, ["-" * w for w in widths] + ["-------"], *rows]:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        lines.append("  " + "  ".join([*cells, row[-1]]).rstrip())
    lines += [f"teapot: {err}" for err in t.errors]
    return lines


def to_json(report: LabReport) -> dict[str, Any]:
    """The JSON document (see docs/lab.md for the schema)."""
    modes: dict[str, dict[str, Any]] = {}
    for m in report.modes:
        creates = m.create_times()
        modes.setdefault(m.mode, {})[m.family] = {
            "ok": m.ok,
            "skipped": m.skipped,
            "services": [asdict(s) for s in m.services],
            "reachable": {
                "reached": sum(s.reachable for s in m.services),
                "total": len(m.services),
            },
            "create_to_reachable_s": {
                "p50": percentile(creates, 50),
                "p99": percentile(creates, 99),
                "max": max(creates) if creates else None,
                "samples": len(creates),
            },
            "spread": asdict(m.spread) if m.spread is not None else None,
            "failover": {
                f.kind: {
                    "ok": f.ok,
                    "p50_s": f.p50_s,
                    "max_s": f.max_s,
                    "trials": [{**asdict(t), "failover_s": t.failover_s} for t in f.trials],
                }
                for f in m.failovers
            },
            "delete": ({**asdict(m.deletion), "ok": m.deletion.ok} if m.deletion else None),
            "alerts": m.alerts,
            "errors": list(m.errors),
        }
    return {
        "schema": SCHEMA,
        "ok": report.ok,
        "interrupted": report.interrupted,
        "duration_s": report.duration_s,
        "options": report.options,
        "modes": modes,
        "goals": [asdict(g) for g in report.goals()],
        "errors": list(report.errors),
        "alerts_firing_after": report.alerts_firing_after,
        "teapot": (
            {**asdict(report.teapot), "ok": report.teapot.ok} if report.teapot is not None else None
        ),
        "ovn": ({**asdict(report.ovn), "ok": report.ovn.ok} if report.ovn is not None else None),
        "gateway": (
            {**asdict(report.gateway), "ok": report.gateway.ok}
            if report.gateway is not None
            else None
        ),
        "relay": ({**asdict(report.relay), "ok": report.relay.ok} if report.relay else None),
        "octavia": octavia_json(report.octavia) if report.octavia is not None else None,
        "cleanup": asdict(report.cleanup) if report.cleanup is not None else None,
    }
