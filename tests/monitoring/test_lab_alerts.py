"""The alert rules as the lab runs them, and how the lab judges what fired."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import cast

import pytest
import yaml

from needs import require_binary
from teapot_lb.lab.alerts import (
    RULES,
    describe,
    expected,
    fired,
    lab_rules,
    missing,
    scaled,
)
from teapot_lb.lab.html_report import render_html
from teapot_lb.lab.prometheus import Prometheus
from teapot_lb.lab.report import Failover, LabReport, ModeResult, Trial, table, to_json
from teapot_lb.netlab import Host


def shipped() -> dict[str, object]:
    doc: dict[str, object] = yaml.safe_load(RULES.read_text())
    return doc


def test_the_lab_runs_the_speaker_rules_a_minute_to_the_second() -> None:
    lab = lab_rules(shipped(), scale=60)
    (group,) = lab["groups"]
    assert group["name"] == "teapot-lb.speaker"  # no controller in standalone mode
    rules = {r["alert"]: r for r in group["rules"]}
    flapping = rules["TeapotLBBGPSessionFlapping"]
    assert flapping["expr"] == (
        "increase(teapot_lb_speaker_bgp_sessions_established_total[15000ms]) > 2"
    )
    assert rules["TeapotLBSpeakerDown"]["for"] == "1000ms"
    assert rules["TeapotLBBGPSessionDown"]["for"] == "2000ms"
    assert "for" not in flapping
    # The shipped file is left as it is.
    assert "[15m]" in RULES.read_text()


def test_durations_are_scaled_to_whole_milliseconds() -> None:
    assert scaled("30s", 60) == "500ms"
    assert scaled("2h", 3600) == "2000ms"
    assert scaled("1ms", 60) == "1ms"
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        scaled("1.5m")


def test_the_lab_rules_are_valid_for_prometheus(tmp_path: Path) -> None:
    require_binary("promtool")
    path = tmp_path / "lab.rules.yaml"
    path.write_text(yaml.safe_dump(lab_rules(shipped())))
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_fired_alerts_are_named_with_the_labels_that_say_where() -> None:
    series = [
        {"metric": {"alertname": "TeapotLBSpeakerDown", "node": "node-2", "instance": "x:1"}},
        {"metric": {"alertname": "TeapotLBSpeakerDown", "node": "node-2", "instance": "x:1"}},
        {"metric": {"alertname": "TeapotLBVRIDCollision", "ip": "192.0.2.230"}},
    ]
    assert fired(series) == [
        "TeapotLBSpeakerDown node=node-2",
        "TeapotLBVRIDCollision ip=192.0.2.230",
    ]
    assert describe({"alertname": "TeapotLBBGPSessionDown", "node": "n1", "peer": "r"}) == (
        "TeapotLBBGPSessionDown node=n1 peer=r"
    )


def test_a_hard_kill_must_fire_speaker_down_for_its_node() -> None:
    m = ModeResult("l2", "v4")
    m.failovers = [Failover("hard", [Trial("node-2", 0.2, 1, 9), Trial("node-3", 0.2, 1, 9)])]
    assert expected(m) == ["TeapotLBSpeakerDown node=node-2", "TeapotLBSpeakerDown node=node-3"]
    assert missing(m, ["TeapotLBSpeakerDown node=node-2"]) == ["TeapotLBSpeakerDown node=node-3"]
    graceful = ModeResult("bgp", "v4")
    graceful.failovers = [Failover("graceful", [Trial("node-1", 0.0, 0, 9)])]
    assert expected(graceful) == []


def test_the_report_lists_alerts_per_mode_and_those_left_firing() -> None:
    m = ModeResult("l2", "v4")
    m.alerts = ["TeapotLBSpeakerDown node=node-2"]
    report = LabReport({}, [m], alerts_firing_after=["TeapotLBNoNodeAnnouncing ip=192.0.2.9"])
    text = table(report)
    assert "l2 v4: alerts fired: TeapotLBSpeakerDown node=node-2" in text
    assert "alerts still firing at the end: TeapotLBNoNodeAnnouncing ip=192.0.2.9" in text
    assert not report.ok
    doc = to_json(report)
    assert doc["modes"]["l2"]["v4"]["alerts"] == ["TeapotLBSpeakerDown node=node-2"]
    page = render_html(doc)
    assert "<li>TeapotLBSpeakerDown node=node-2</li>" in page
    assert "TeapotLBNoNodeAnnouncing ip=192.0.2.9" in page


def test_prometheus_is_configured_with_whole_unit_intervals_and_target_labels(
    tmp_path: Path,
) -> None:
    prom = Prometheus(cast(Host, None), tmp_path, scrape_interval=0.5)
    config = prom.config({"speaker": {"192.0.2.11:7472": "node-1"}}, [tmp_path / "r.yaml"])
    assert config["global"] == {"scrape_interval": "500ms", "evaluation_interval": "500ms"}
    (job,) = config["scrape_configs"]
    assert job["static_configs"] == [
        {"targets": ["192.0.2.11:7472"], "labels": {"component": "speaker", "node": "node-1"}}
    ]
