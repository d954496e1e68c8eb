""":class:`ClusterStatus` as a terminal screen or as JSON (pure)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from teapot_lb.status.summary import ClusterStatus


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, trailing blanks trimmed."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def table(status: ClusterStatus) -> str:
    lines = [f"{status.source}: {len(status.nodes)} node(s): {', '.join(status.nodes) or '-'}"]
    lines += ["", "POOLS"]
    if status.pools:
        rows = [["NAME", "FAMILY", "ASSIGNED", "SIZE", "USED"]]
        for p in status.pools:
            used = "invalid" if p.problem is not None else f"{p.used:.0%}"
            rows.append([p.pool, p.family, str(p.assigned), str(p.size), used])
        lines += columns(rows)
    else:
        lines.append("(none)")
    if status.sessions:
        lines += ["", "BGP SESSIONS"]
        rows = [["NODE", "PEER", "STATE", "ERROR"]]
        for s in status.sessions:
            rows.append([s.node, s.peer, s.state or "-", s.error or ""])
        lines += columns(rows)
    lines += ["", "SERVICE IPS"]
    if status.holders or status.pending:
        rows = [["SERVICE", "IP", "MODE", "HELD BY", "CANDIDATES"]]
        for h in status.holders:
            held = ", ".join(h.nodes) if h.known else "?"
            rows.append([h.service, h.ip, h.mode, held or "NOBODY", ", ".join(h.candidates)])
        rows += [[key, "<pending>", "-", "-", ""] for key in status.pending]
        lines += columns(rows)
    else:
        lines.append("(none)")
    lines += ["", "PROBLEMS"]
    lines += [f"- {p}" for p in status.problems] or ["(none)"]
    return "\n".join(lines)


def as_json(status: ClusterStatus) -> str:
    doc = asdict(status)
    for pool, p in zip(doc["pools"], status.pools, strict=True):
        pool["used"] = round(p.used, 4)
    return json.dumps(doc, indent=1)
