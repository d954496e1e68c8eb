"""The alert rules: `promtool test rules` passes, every alert is tested and has a runbook."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from needs import require_binary

from .chart_monitoring import ROOT, RULES

HERE = Path(__file__).resolve().parent
TESTS = HERE / "rules_test.yaml"
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"


def alerts() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_checks_and_unit_tests_pass() -> None:
    require_binary("promtool")
    for args in (["check", "rules", str(RULES)], ["test", "rules", str(TESTS)]):
        done = subprocess.run(
            ["promtool", *args], cwd=HERE, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_firing_case_in_the_unit_tests() -> None:
    doc = yaml.safe_load(TESTS.read_text())
    fired = {
        case["alertname"]
        for test in doc["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    missing = [a["alert"] for a in alerts() if a["alert"] not in fired]
    assert not missing, f"alerts without a firing test in {TESTS.name}: {missing}"


def test_every_alert_links_to_its_runbook_section() -> None:
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", m.group(1).strip().lower()).replace(" ", "-")
        for m in re.finditer(r"^#+ (.*)$", TROUBLESHOOTING.read_text(), flags=re.M)
    }
    for alert in alerts():
        annotations = alert["annotations"]
        assert isinstance(annotations, dict)
        url = annotations["runbook_url"]
        anchor = url.rsplit("#", 1)[1]
        assert anchor == str(alert["alert"]).lower(), url
        assert anchor in anchors, f"docs/troubleshooting.md has no section {alert['alert']}"
