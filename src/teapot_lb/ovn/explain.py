"""What OVN mode programs for one Service, and whether the Northbound holds it (pure).

``teapot-lb explain`` prints it under the nodes' decisions: per Load_Balancer row its VIPs
and backends, the routers and switches it is attached to (through our group or directly),
its options and health checks, the writer's notes (why a router was not used), and, when
the Northbound was read, whether it holds the row as wanted.
"""

from __future__ import annotations

from dataclasses import dataclass

from teapot_lb.ovn.desired import Desired
from teapot_lb.ovn.diff import COLUMNS
from teapot_lb.ovn.rows import SERVICE_KEY, LoadBalancer, NBState, Target


@dataclass(frozen=True)
class RowExplanation:
    row: LoadBalancer
    attached: tuple[Target, ...]
    via_group: tuple[str, ...]  # our groups through which it is attached
    in_database: str | None  # None: not read; "as wanted", "missing", "differs: vips, ..."


@dataclass(frozen=True)
class ServiceExplanation:
    service: str
    rows: tuple[RowExplanation, ...]
    notes: tuple[str, ...]

    def text(self) -> str:
        if not self.rows and not self.notes:
            return "OVN: no OVNAdvertisement selects the pool of any of its IPs"
        lines = ["OVN Northbound:"]
        for r in self.rows:
            lb = r.row
            where = ", ".join(str(t) for t in r.attached) or "nothing (not attached)"
            group = f" (group {', '.join(r.via_group)})" if r.via_group else ""
            lines.append(f"  Load_Balancer {lb.name} [{lb.protocol}]")
            lines.append(f"    attached to {where}{group}")
            for vip, backends in lb.backends().items():
                lines.append(f"    {vip} -> {', '.join(backends) or 'no backend (rejects)'}")
            if lb.options:
                lines.append("    options " + " ".join(f"{k}={v}" for k, v in lb.options))
            if lb.health_checks:
                hc = lb.health_checks[0]
                opts = " ".join(f"{k}={v}" for k, v in hc.options)
                lines.append(f"    health checks on {len(lb.health_checks)} VIP(s): {opts}")
            if r.in_database is not None:
                lines.append(f"    in the Northbound: {r.in_database}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return {
            "service": self.service,
            "loadBalancers": [
                {
                    "name": r.row.name,
                    "protocol": r.row.protocol,
                    "vips": r.row.backends(),
                    "attached": [str(t) for t in r.attached],
                    "groups": list(r.via_group),
                    "options": dict(r.row.options),
                    "healthChecks": [hc.vip for hc in r.row.health_checks],
                    "inDatabase": r.in_database,
                }
                for r in self.rows
            ],
            "notes": list(self.notes),
        }


def explain_service(
    desired: Desired, service: str, observed: NBState | None = None
) -> ServiceExplanation:
    state = desired.state
    rows = []
    for name in sorted(state.load_balancers):
        row = state.load_balancers[name]
        if dict(row.external_ids).get(SERVICE_KEY) != service:
            continue
        groups = tuple(sorted(g for g, members in state.groups.items() if name in members))
        attached = {t for t, names in state.attached.items() if name in names}
        attached |= {t for t, gs in state.group_attached.items() if set(gs) & set(groups)}
        rows.append(RowExplanation(row, tuple(sorted(attached)), groups, _held(row, observed)))
    return ServiceExplanation(service, tuple(rows), desired.notes.get(service, ()))


def _held(row: LoadBalancer, observed: NBState | None) -> str | None:
    if observed is None:
        return None
    have = observed.load_balancers.get(row.name)
    if have is None:
        return "missing (the writer has not programmed it yet, or is not running)"
    changed = [c for c in COLUMNS if getattr(have, c) != getattr(row, c)]
    return "as wanted" if not changed else "differs: " + ", ".join(changed)
