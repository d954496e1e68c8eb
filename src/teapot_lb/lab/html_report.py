"""The lab's report as one self-contained HTML page (pure: the JSON document in, text out).

Inline CSS and SVG only: no script, no font, no image, nothing fetched. Per mode and
address family: the create → reachable times of the Services (each sample a dot, p50 and
p99 marked), the spread of requests over the nodes, and per failover trial a timeline of
who answered the client's requests (per time bucket, each node's share and the failed
share in red) with the failure and the outage marked. Input:
:func:`teapot_lb.lab.report.to_json`'s document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from teapot_lb.lab.gateway import GatewayResult, gateway_lines
from teapot_lb.lab.relay import relay_lines, relay_result
from teapot_lb.lab.teapot_octavia import octavia_lines, octavia_result

PALETTE = ("#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac")
FAILED = "#e15759"
WIDTH = 720
STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50)  # tick steps

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 760px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 18px 0 4px; }
.ok { color: #2e7d32; } .bad { color: #c62828; } .muted { color: #777; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { padding: 2px 10px 2px 0; text-align: left; }
svg { display: block; margin: 4px 0 10px; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
svg text { paint-order: stroke; stroke: #fff; stroke-width: 3px; }  /* readable over bars */
svg text.inside { fill: #fff; stroke: none; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
"""


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def node_colors(doc: Mapping[str, Any]) -> dict[str, str]:
    """One color per node, in the order of the lab's nodes (then any other name seen)."""
    names: list[str] = list(doc.get("options", {}).get("node_names") or [])
    for family in doc.get("modes", {}).values():
        for result in family.values():
            names += list((result.get("spread") or {}).get("by_node", {}))
            for kind in (result.get("failover") or {}).values():
                for trial in kind.get("trials", []):
                    names += list((trial.get("timeline") or {}).get("served", {}))
    ordered = [n for n in dict.fromkeys(names) if n != "(failed)"]
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(ordered)}


def _axis(x0: float, x1: float, y: float, lo: float, hi: float, unit_ms: bool) -> str:
    """Ticks along the x axis between values lo..hi drawn from x0 to x1."""
    span = hi - lo or 1.0
    raw = span / 6
    step = min((s for s in STEPS if s >= raw), default=raw)
    out = [f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#999"/>']
    first = int(lo / step) * step
    v = first if first >= lo else first + step
    while v <= hi + 1e-9:
        x = x0 + (v - lo) / span * (x1 - x0)
        label = f"{v * 1000:.0f} ms" if unit_ms else f"{v:g} s"
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#999"/>')
        out.append(f'<text x="{x:.1f}" y="{y + 15}" text-anchor="middle">{label}</text>')
        v = round(v + step, 9)
    return "".join(out)


def create_chart(
    services: Sequence[Mapping[str, Any]], p50: float | None, p99: float | None
) -> str:
    """Each Service's create → reachable time as a dot on one axis; p50 and p99 lines."""
    samples = [
        (s["name"], s["create_to_reachable_s"])
        for s in services
        if s.get("create_to_reachable_s") is not None
    ]
    if not samples:
        return '<p class="muted">no create → reachable samples</p>'
    hi = max(t for _, t in samples) * 1.15 or 0.01
    x0, x1, h = 20, WIDTH - 20, 70
    parts = [f'<svg role="img" aria-label="create to reachable" width="{WIDTH}" height="{h}">']
    scale = (x1 - x0) / hi
    for label, value in (("p50", p50), ("p99", p99)):
        if value is not None:
            x = x0 + value * scale
            parts.append(
                f'<line x1="{x:.1f}" y1="6" x2="{x:.1f}" y2="44" stroke="#333" '
                f'stroke-dasharray="3,2"/><text x="{x + 3:.1f}" y="14">{label} '
                f"{_ms(value)}</text>"
            )
    for i, (name, t) in enumerate(samples):
        y = 28 + (i % 3) * 5 - 5
        parts.append(
            f'<circle cx="{x0 + t * scale:.1f}" cy="{y}" r="5" fill="{PALETTE[0]}" '
            f'fill-opacity="0.7"><title>{escape(name)}: {_ms(t)}</title></circle>'
        )
    parts.append(_axis(x0, x1, 48, 0.0, hi, True))
    parts.append("</svg>")
    return "".join(parts)


def spread_chart(spread: Mapping[str, Any] | None, colors: Mapping[str, str]) -> str:
    if not spread:
        return ""
    by_node: Mapping[str, int] = spread.get("by_node", {})
    total = sum(by_node.values()) or 1
    x, parts = 0.0, [f'<svg role="img" aria-label="spread" width="{WIDTH}" height="26">']
    for node, count in by_node.items():
        w = count / total * WIDTH
        color = FAILED if node == "(failed)" else colors.get(node, "#999")
        parts.append(
            f'<rect x="{x:.1f}" y="2" width="{w:.1f}" height="20" fill="{color}">'
            f"<title>{escape(node)}: {count}</title></rect>"
        )
        if w > 60:
            parts.append(
                f'<text x="{x + 4:.1f}" y="16" class="inside">{escape(node)} {count}</text>'
            )
        x += w
    parts.append("</svg>")
    return "".join(parts)


def trial_chart(trial: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    """Per time bucket, the share of requests each node answered and the share that
    failed (stacked to 100 %); the failure at 0 and the outage shaded."""
    tl = trial.get("timeline")
    if not tl or not tl.get("failed"):
        return '<p class="muted">no timeline recorded</p>'
    start, width = float(tl["start_s"]), float(tl["bucket_s"])
    failed: list[int] = tl["failed"]
    served: Mapping[str, list[int]] = tl["served"]
    n = len(failed)
    end = start + width * n
    x0, x1, y0, y1 = 40, WIDTH - 10, 12, 112  # plot area: y1 is the baseline
    sx = (x1 - x0) / (end - start)
    bw = max(width * sx - 0.5, 0.5)
    parts = [f'<svg role="img" aria-label="failover timeline" width="{WIDTH}" height="{y1 + 24}">']
    outage = trial.get("failover_s")
    ox = x0 + (0 - start) * sx
    oend = x0 + ((outage if outage is not None else end) - start) * sx
    parts.append(
        f'<rect x="{ox:.1f}" y="{y0}" width="{max(oend - ox, 1):.1f}" height="{y1 - y0}" '
        f'fill="{FAILED}" fill-opacity="0.12"><title>outage</title></rect>'
    )
    for i in range(n):
        total = failed[i] + sum(v[i] for v in served.values())
        if not total:
            continue
        x = x0 + i * width * sx
        y = float(y1)
        t = start + i * width
        stack = [(node, counts[i], colors.get(node, "#999")) for node, counts in served.items()]
        for name, count, color in [*stack, ("failed", failed[i], FAILED)]:
            if count:
                h = count / total * (y1 - y0)
                y -= h
                parts.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                    f'fill="{color}"><title>{t * 1000:+.0f} ms: {escape(name)} {count} of '
                    f"{total}</title></rect>"
                )
    parts.append(
        f'<line x1="{ox:.1f}" y1="{y0 - 4}" x2="{ox:.1f}" y2="{y1}" stroke="#000" '
        f'stroke-width="1.5"/><text x="{ox - 3:.1f}" y="{y0 + 8}" text-anchor="end">'
        f"{escape(trial['node'])} fails</text>"
    )
    # The outage as a band above the bars too (the bars cover the shading where the
    # client kept sending).
    parts.append(
        f'<rect x="{ox:.1f}" y="{y0 - 7}" width="{max(oend - ox, 1):.1f}" height="4" '
        f'fill="{FAILED}"/>'
    )
    label = f"outage {_ms(outage)}" if outage is not None else "not recovered"
    parts.append(f'<text x="{oend + 3:.1f}" y="{y0 + 8}" class="bad">{label}</text>')
    parts.append(f'<text x="{x0 - 4}" y="{y0 + 8}" text-anchor="end">100%</text>')
    parts.append(f'<text x="{x0 - 4}" y="{y1}" text-anchor="end">0</text>')
    parts.append(_axis(x0, x1, y1, start, end, False))
    parts.append("</svg>")
    return "".join(parts)


def _legend(colors: Mapping[str, str]) -> str:
    items = [f'<span><i style="background:{c}"></i>{escape(n)}</span>' for n, c in colors.items()]
    items.append(f'<span><i style="background:{FAILED}"></i>failed request</span>')
    return f'<p class="legend">{"".join(items)}</p>'


def _heading(title: str, r: Mapping[str, Any]) -> list[str]:
    """A group's heading with its verdict, and why it was skipped."""
    verdict = "skipped" if r.get("skipped") else ("ok" if r.get("ok") else "FAILED")
    css = "ok" if r.get("ok") else "bad"
    out = [f'<h2>{escape(title)} <span class="{css}">{verdict}</span></h2>']
    if r.get("skipped"):
        out.append(f'<p class="muted">{escape(r["skipped"])}</p>')
    return out


def _section(mode: str, family: str, r: Mapping[str, Any], colors: Mapping[str, str]) -> str:
    out = _heading(f"{mode.upper()} {family}", r)
    if r.get("skipped"):
        return "".join(out)
    c = r.get("create_to_reachable_s") or {}
    out.append(
        f"<h3>Create → reachable ({c.get('samples', 0)} Services: p50 {_ms(c.get('p50'))},"
        f" p99 {_ms(c.get('p99'))})</h3>"
    )
    out.append(create_chart(r.get("services", []), c.get("p50"), c.get("p99")))
    if r.get("spread"):
        s = r["spread"]
        out.append(f"<h3>Spread of {s['requests']} requests to {escape(s['ip'])}</h3>")
        out.append(spread_chart(s, colors))
    for kind, f in (r.get("failover") or {}).items():
        out.append(
            f"<h3>Failover, {escape(kind)}: p50 {_ms(f.get('p50_s'))}, max "
            f"{_ms(f.get('max_s'))}</h3>"
        )
        for i, t in enumerate(f.get("trials", []), 1):
            out.append(
                f'<p class="muted">trial {i}: {escape(t["node"])} fails; failover '
                f"{_ms(t.get('failover_s'))}, {t.get('failed_requests', 0)} of "
                f"{t.get('requests', 0)} requests failed</p>"
            )
            out.append(trial_chart(t, colors))
    alerts = r.get("alerts")
    if alerts is not None:
        items = "".join(f"<li>{escape(a)}</li>" for a in alerts) or "<li>none</li>"
        out.append(f"<h3>Alerts that fired (Prometheus)</h3><ul>{items}</ul>")
    d = r.get("delete")
    if d:
        state = f"withdrawn after {_ms(d.get('withdrawn_after_s'))}" if d.get("ok") else "FAILED"
        out.append(f"<h3>Delete {escape(d['name'])}: {state}</h3>")
    for err in r.get("errors", []):
        out.append(f'<pre class="bad">{escape(err)}</pre>')
    return "".join(out)


def _ovn_section(r: Mapping[str, Any]) -> str:
    """The lab's `ovn` group (its JSON, `OVNResult`): the same lines as the text report."""
    out = _heading("OVN", r)
    if r.get("skipped"):
        return "".join(out)
    spread = ", ".join(f"{k} {v}" for k, v in sorted((r.get("spread") or {}).items())) or "-"
    rows = (
        ("Service created → reachable", _ms(r.get("create_to_reachable_s"))),
        ("spread over backends", escape(spread)),
        ("endpoint be1 removed → only be2 answers", _ms(r.get("endpoint_removed_s"))),
        (
            "active gateway chassis killed → served through the other",
            f"{_ms(r.get('failover_s'))} ({r.get('failover_failed_requests', 0)} requests"
            " failed meanwhile)",
        ),
        ("Service deleted → row gone", _ms(r.get("delete_to_no_row_s"))),
        ("Service deleted → unreachable", _ms(r.get("delete_to_unreachable_s"))),
    )
    cells = "".join(f"<tr><td>{name}</td><td>{value}</td></tr>" for name, value in rows)
    out.append(f'<p class="muted">Service {escape(str(r.get("ip", "")))}</p><table>{cells}</table>')
    if r.get("not_done"):
        out.append(f'<p class="muted">not measured: {escape(r["not_done"])}</p>')
    for err in r.get("errors", []):
        out.append(f'<pre class="bad">{escape(err)}</pre>')
    return "".join(out)


def teapot_section(t: Mapping[str, Any]) -> str:
    """The teapot group's directory flow: its timings and the other tenant's refusals (its
    route flow, with traffic, is a mode section of its own: TEAPOT v4)."""
    verdict = "ok" if t.get("ok") else "FAILED"
    hops = ", ".join(t.get("next_hops") or []) or "-"
    steps = (
        f"IP at the agent {_ms(t.get('create_to_ip_s'))}",
        f"route over {hops} {_ms(t.get('create_to_route_s'))}",
        f"n2 gone → route over the rest {_ms(t.get('node_gone_to_route_s'))}",
        f"deleted → withdrawn {_ms(t.get('delete_to_withdrawn_s'))}",
    )
    ip = str(t.get("ip") or "-")
    out = [
        f'<h2>TEAPOT tenancy <span class="{"ok" if t.get("ok") else "bad"}">{verdict}</span></h2>'
    ]
    out.append(f"<p class=\"muted\">acme's Service default/web got {escape(ip)}: "
               f"{escape('; '.join(steps))}</p>")  # fmt: skip
    if t.get("not_done"):
        out.append(f'<p class="muted">not measured: {escape(t["not_done"])}</p>')
    rows = "".join(
        f"<tr><td>{escape(r['attempt'])}</td><td>{escape(r['request'])}</td>"
        f'<td class="{"ok" if r.get("reason") else "bad"}">{escape(r.get("reason") or "NO")}'
        f"</td><td>{escape(r.get('message') or '')}</td></tr>"
        for r in t.get("refused", [])
    )
    out.append(
        "<table><tr><th>globex tried</th><th>request</th><th>refused</th><th>message</th></tr>"
        f"{rows}</table>"
    )
    out += [f'<pre class="bad">{escape(err)}</pre>' for err in t.get("errors", [])]
    return "".join(out)


def gateway_section(g: Mapping[str, Any]) -> str:
    """The gateway group: its text report's lines (refusal reason included)."""
    result = GatewayResult(**{k: v for k, v in g.items() if k != "ok"})
    css = "ok" if g.get("ok") else "bad"
    verdict = "ok" if g.get("ok") else "FAILED"
    lines = escape("\n".join(gateway_lines(result)))
    return f'<h2>Gateway <span class="{css}">{verdict}</span></h2><pre>{lines}</pre>'


def relay_section(doc: Mapping[str, Any]) -> str:
    """The relay group: its text report's lines (each hijack with the relay's rule)."""
    css = "ok" if doc.get("ok") else "bad"
    verdict = "ok" if doc.get("ok") else "FAILED"
    lines = escape("\n".join(relay_lines(relay_result(doc))))
    return f'<h2>BGP relay <span class="{css}">{verdict}</span></h2><pre>{lines}</pre>'


def octavia_section(doc: Mapping[str, Any]) -> str:
    """The octavia group: its text report's lines (one per part)."""
    css, verdict = ("ok", "ok") if doc.get("ok") else ("bad", "FAILED")
    lines = escape("\n".join(octavia_lines(octavia_result(doc))))
    return f'<h2>Octavia provider <span class="{css}">{verdict}</span></h2><pre>{lines}</pre>'


def render_html(doc: Mapping[str, Any]) -> str:
    """The whole page for one lab run."""
    colors = node_colors(doc)
    opts = doc.get("options", {})
    verdict = "interrupted" if doc.get("interrupted") else ("PASSED" if doc.get("ok") else "FAILED")
    css = "ok" if doc.get("ok") else "bad"
    body = [
        f'<h1>teapot-lb lab <span class="{css}">{verdict}</span></h1>',
        f'<p class="muted">{opts.get("nodes", "?")} nodes,'
        f" router {escape(str(opts.get('router')))},"
        f" modes {escape(', '.join(opts.get('modes', [])))}, families"
        f" {escape(', '.join(opts.get('families', [])))}; {doc.get('duration_s', 0):.1f} s</p>",
    ]
    goals = doc.get("goals") or []
    if goals:
        rows = "".join(
            f"<tr><td>{escape(g['name'])}</td><td>{escape(g['target'])}</td>"
            f'<td>{_ms(g.get("value"))}</td><td class="{"ok" if g["met"] else "bad"}">'
            f"{'met' if g['met'] else 'NOT met'}</td></tr>"
            for g in goals
        )
        body.append(
            f"<table><tr><th>goal</th><th>target</th><th>measured</th><th></th></tr>{rows}</table>"
        )
    body.append(_legend(colors))
    for mode, families in doc.get("modes", {}).items():
        for family, result in families.items():
            body.append(_section(mode, family, result, colors))
    if doc.get("ovn"):
        body.append(_ovn_section(doc["ovn"]))
    if doc.get("teapot"):
        body.append(teapot_section(doc["teapot"]))
    if doc.get("gateway"):
        body.append(gateway_section(doc["gateway"]))
    if doc.get("relay"):
        body.append(relay_section(doc["relay"]))
    if doc.get("octavia"):
        body.append(octavia_section(doc["octavia"]))
    for err in doc.get("errors", []):
        body.append(f'<pre class="bad">{escape(err)}</pre>')
    left = doc.get("alerts_firing_after")
    if left is not None:
        css = "bad" if left else "ok"
        text = ", ".join(left) if left else "none"
        body.append(
            f'<p>Alerts still firing at the end: <span class="{css}">{escape(text)}</span></p>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>teapot-lb lab report</title>"
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )
