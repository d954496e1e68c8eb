"""The Grafana dashboard's shape (its queries are run against a real Prometheus in
test_dashboard_netns.py)."""

from __future__ import annotations

import json
from typing import Any

from .chart_monitoring import DASHBOARD


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of the dashboard."""
    return [(p["title"], t["expr"]) for p in panels() for t in p["targets"]]


def test_every_panel_queries_the_selectable_prometheus_data_source() -> None:
    (variable,) = dashboard()["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    for p in panels():
        assert p["targets"], p["title"]
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"]), p["title"]


def test_panels_have_unique_ids_and_fit_the_grid_without_overlap() -> None:
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    taken: set[tuple[int, int]] = set()
    for p in dashboard()["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        cells = {(g["y"] + dy, g["x"] + dx) for dy in range(g["h"]) for dx in range(g["w"])}
        assert not cells & taken, f"{p['title']} overlaps another panel"
        taken |= cells


def test_the_dashboard_covers_pools_sessions_announcements_failovers_and_latency() -> None:
    rows = [p["title"] for p in dashboard()["panels"] if p["type"] == "row"]
    assert rows == [
        "Controller and pools",
        "BGP sessions",
        "Announcements per node",
        "Failovers",
        "Latency",
    ]
    text = " ".join(expr for _, expr in expressions())
    for metric in (
        "teapot_lb_controller_pool_addresses_in_use",
        "teapot_lb_speaker_bgp_session_up",
        "teapot_lb_speaker_announced_ips",
        "teapot_lb_speaker_l2_claims_total",
        "teapot_lb_controller_reconcile_duration_seconds_bucket",
    ):
        assert metric in text
