"""The chart's monitoring template, generated from the files in deploy/monitoring/.

The rules and the dashboard are kept once, as plain files; the template embeds them with
Prometheus' and Grafana's own `{{` escaped for Go templates (`{{ "{{" }}` prints `{{`, and a
`}}` outside an action is plain text).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "teapot-lb.rules.yaml"
DASHBOARD = MONITORING / "teapot-lb-dashboard.json"
TEMPLATE = ROOT / "deploy" / "helm" / "teapot-lb" / "templates" / "monitoring.yaml"
RENDERED = MONITORING / "teapot-lb-monitoring.yaml"

HEADER = """\
{{/* Generated from deploy/monitoring/ by tests/monitoring/test_chart.py
     (UPDATE_MANIFESTS=1 pytest tests/monitoring/test_chart.py); do not edit. */}}
"""

POD_MONITOR = """\
{{- if .Values.monitoring.podMonitor.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: teapot-lb
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: teapot-lb
    {{- if .Values.monitoring.podMonitor.labels }}
    {{- toYaml .Values.monitoring.podMonitor.labels | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: teapot-lb
  podMetricsEndpoints:
    - port: metrics
      interval: {{ .Values.monitoring.podMonitor.interval }}
      relabelings:
        - sourceLabels: [__meta_kubernetes_pod_label_app_kubernetes_io_component]
          targetLabel: component
        - sourceLabels: [__meta_kubernetes_pod_node_name]
          targetLabel: node
{{- end }}
"""

RULE_HEAD = """\
{{- if .Values.monitoring.prometheusRule.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: teapot-lb
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: teapot-lb
    {{- if .Values.monitoring.prometheusRule.labels }}
    {{- toYaml .Values.monitoring.prometheusRule.labels | nindent 4 }}
    {{- end }}
spec:
"""

DASHBOARD_HEAD = """\
{{- if .Values.monitoring.grafanaDashboard.enabled }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: teapot-lb-dashboard
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: teapot-lb
    grafana_dashboard: "1"
    {{- if .Values.monitoring.grafanaDashboard.labels }}
    {{- toYaml .Values.monitoring.grafanaDashboard.labels | nindent 4 }}
    {{- end }}
data:
  teapot-lb.json: |-
"""


def escape(text: str) -> str:
    return text.replace("{{", '{{ "{{" }}')


def _indented(text: str, n: int) -> str:
    return "".join(" " * n + line if line.strip() else line for line in text.splitlines(True))


def _without_comment_header(text: str) -> str:
    lines = text.splitlines(True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)


def monitoring_template() -> str:
    parts = [HEADER, POD_MONITOR]
    rules = _without_comment_header(RULES.read_text())
    parts += [RULE_HEAD, escape(_indented(rules, 2)).rstrip("\n") + "\n", "{{- end }}\n"]
    if DASHBOARD.exists():
        dashboard = DASHBOARD.read_text().rstrip("\n") + "\n"
        parts += [DASHBOARD_HEAD, escape(_indented(dashboard, 4)), "{{- end }}\n"]
    return "".join(parts)
