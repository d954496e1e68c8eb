"""The chart ships the monitoring files of deploy/monitoring/ unchanged, behind toggles."""

from __future__ import annotations

import json
import os
import re

import yaml

from controller.chart import render_chart, render_objects

from .chart_monitoring import DASHBOARD, RENDERED, RULES, TEMPLATE, monitoring_template

ALL_ON = {
    "monitoring": {
        "podMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
    }
}


def _rendered_manifest() -> str:
    header = (
        "# Generated from deploy/helm/teapot-lb (templates/monitoring.yaml, every monitoring "
        "toggle on) by tests/monitoring/test_chart.py; do not edit.\n"
        "# For clusters without helm: kubectl apply -n teapot-lb-system -f this file.\n"
    )
    text = render_chart(ALL_ON)["monitoring.yaml"]
    docs = [d.strip() for d in re.split(r"^---\s*$", text, flags=re.M) if d.strip()]
    return header + "".join(f"---\n{d}\n" for d in docs)


def test_the_template_and_the_plain_manifest_are_generated_from_deploy_monitoring() -> None:
    """UPDATE_MANIFESTS=1 pytest tests/monitoring/test_chart.py rewrites both."""
    if os.environ.get("UPDATE_MANIFESTS"):
        TEMPLATE.write_text(monitoring_template())
        RENDERED.write_text(_rendered_manifest())
    hint = "run UPDATE_MANIFESTS=1 pytest tests/monitoring/test_chart.py"
    assert TEMPLATE.read_text() == monitoring_template(), hint
    assert RENDERED.read_text() == _rendered_manifest(), hint


def test_monitoring_objects_are_off_by_default() -> None:
    kinds = {o["kind"] for o in render_objects()}
    assert not kinds & {"PrometheusRule", "PodMonitor"}
    assert not any(o["metadata"]["name"] == "teapot-lb-dashboard" for o in render_objects())


def test_the_prometheus_rule_carries_the_rules_file_unchanged() -> None:
    values = {"monitoring": {"prometheusRule": {"enabled": True, "labels": {"release": "kp"}}}}
    (rule,) = [o for o in render_objects(values) if o["kind"] == "PrometheusRule"]
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    assert rule["metadata"]["labels"]["release"] == "kp"
    # Prometheus' own templates survive the Go template escaping.
    summaries = [r["annotations"]["summary"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert "AddressPool {{ $labels.pool }} ({{ $labels.family }}) has no free address." in summaries


def test_the_dashboard_config_map_has_the_sidecar_label_and_the_json_unchanged() -> None:
    (cm,) = [o for o in render_objects(ALL_ON) if o["metadata"]["name"] == "teapot-lb-dashboard"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["teapot-lb.json"]) == json.loads(DASHBOARD.read_text())


def test_the_pod_monitor_scrapes_the_metrics_ports_of_both_components() -> None:
    objects = render_objects(ALL_ON)
    (monitor,) = [o for o in objects if o["kind"] == "PodMonitor"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    pods = [o for o in objects if o["kind"] in ("Deployment", "DaemonSet")]
    assert len(pods) == 2
    for workload in pods:
        template = workload["spec"]["template"]
        assert selector.items() <= template["metadata"]["labels"].items()
        ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in ports
