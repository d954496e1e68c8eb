"""`teapot-lb lab --prometheus` end to end: a real Prometheus watches the lab's nodes, the
hard kill fires TeapotLBSpeakerDown for its node, and nothing fires once the lab is quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.html_report import render_html
from teapot_lb.lab.report import to_json
from teapot_lb.lab.runner import LabOptions, run_lab
from teapot_lb.lab.scenarios import Sizes

pytestmark = [pytest.mark.root, pytest.mark.daemon]


def test_the_lab_reports_the_alerts_its_failovers_fired(tmp_path: Path) -> None:
    require_root()
    require_binary("prometheus")
    options = LabOptions(
        modes=("l2",),
        families=("v4",),
        nodes=2,
        sizes=Sizes(services=1, requests=10, trials=1),
        workdir=tmp_path / "work",
        prometheus=True,
    )
    lines: list[str] = []
    report = run_lab(options, lines.append)
    (mode,) = report.modes
    assert mode.alerts is not None, lines
    (trial,) = mode.failovers[0].trials
    assert f"TeapotLBSpeakerDown node={trial.node}" in mode.alerts, mode.alerts
    assert report.alerts_firing_after == []
    assert report.ok, (report.errors, mode.errors)
    assert any("Prometheus scrapes every node" in line for line in lines)
    page = render_html(to_json(report))
    assert f"<li>TeapotLBSpeakerDown node={trial.node}</li>" in page
