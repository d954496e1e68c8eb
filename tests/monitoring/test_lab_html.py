"""The lab report as an HTML page: the timeline data, the page, and the page in Chromium."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from needs import require_binary
from teapot_lb.lab.html_report import FAILED, PALETTE, render_html
from teapot_lb.lab.measure import Attempt
from teapot_lb.lab.report import (
    Cleanup,
    Deletion,
    Failover,
    LabReport,
    ModeResult,
    ServiceResult,
    Spread,
    Trial,
    to_json,
)
from teapot_lb.lab.timeline import timeline

from .pngpixels import pixels


def probe(t0: float, outage: float, *, served_by: tuple[str, ...], after: str) -> list[Attempt]:
    """Requests every 10 ms for 1.5 s around a failure at ``t0``: round robin over
    ``served_by`` before, failures for ``outage`` seconds, then ``after`` alone."""
    out: list[Attempt] = []
    for i in range(150):
        start = t0 - 0.5 + i * 0.01
        if start < t0:
            node: str | None = served_by[i % len(served_by)]
        elif start < t0 + outage:
            node = None
        else:
            node = after
        out.append(Attempt(start, start + 0.002, "192.0.2.200", node, None if node else "timeout"))
    return out


def lab_report() -> LabReport:
    m = ModeResult("l2", "v4")
    m.services = [
        ServiceResult(f"teapot-lab/l2-v4-{i}", f"192.0.2.20{i}", True, 0.02 + i * 0.004, True)
        for i in range(5)
    ]
    m.spread = Spread("192.0.2.200", 30, {"node-2": 30}, True)
    trials = []
    for node, outage in (("node-2", 0.17), ("node-3", 0.21)):
        tl = timeline(probe(100.0, outage, served_by=(node,), after="node-1"), 100.0)
        trials.append(Trial(node, outage, int(outage * 100), 150, timeline=tl))
    m.failovers = [Failover("hard", trials)]
    m.deletion = Deletion("teapot-lab/l2-v4-0", "192.0.2.200", 0.01, True)
    options = {"nodes": 3, "node_names": ["node-1", "node-2", "node-3"], "router": "bird",
               "modes": ["l2"], "families": ["v4"]}  # fmt: skip
    return LabReport(options, [m], cleanup=Cleanup(ok=True), duration_s=12.5)


def test_the_timeline_counts_requests_per_node_and_failures_per_bucket() -> None:
    tl = timeline(probe(10.0, 0.1, served_by=("a", "b"), after="c"), 10.0, before=0.205)
    assert tl.start_s == pytest.approx(-0.2)  # the first request in the window
    assert sum(tl.failed) == 10
    assert sum(tl.served["a"]) == sum(tl.served["b"]) == 10  # 0.2 s before, round robin
    assert sum(tl.served["c"]) == 150 - 50 - 10
    first_failure = next(i for i, n in enumerate(tl.failed) if n)
    assert abs(tl.start_s + first_failure * tl.bucket_s) < tl.bucket_s  # at the failure
    assert tl.end_s >= 0.99 - 1e-9
    assert tl.bucket_s >= 0.02  # a few probes per bucket


def test_the_timeline_starts_with_the_probing_when_it_starts_late() -> None:
    tries = [a for a in probe(10.0, 0.1, served_by=("a",), after="c") if a.start >= 9.9]
    assert timeline(tries, 10.0, before=0.5).start_s == pytest.approx(-0.1)


def test_the_page_is_self_contained_and_shows_every_trial() -> None:
    page = render_html(to_json(lab_report()))
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|src=", page)
    assert not re.search(r"https?://", page)
    assert page.count('aria-label="failover timeline"') == 2
    assert page.count('aria-label="create to reachable"') == 1
    assert "outage 170 ms" in page and "outage 210 ms" in page
    assert "node-3 fails" in page
    assert page.count("<circle") == 5  # one dot per Service


def test_a_trial_without_recovery_is_marked_not_recovered() -> None:
    report = lab_report()
    report.modes[0].failovers[0].trials[0].outage_s = None
    page = render_html(to_json(report))
    assert "not recovered" in page and "FAILED" in page


def chromium(page: Path, shot: Path) -> str:
    """Render ``page`` headless into ``shot``; return Chromium's log (stderr)."""
    done = subprocess.run(
        [
            "chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
            "--hide-scrollbars", "--no-first-run", "--disable-extensions",
            "--enable-logging=stderr", "--v=0",
            f"--user-data-dir={page.parent / 'profile'}",
            "--window-size=800,1400", f"--screenshot={shot}", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def test_chromium_reports_a_console_error_of_a_broken_page(tmp_path: Path) -> None:
    """The check below can fail: a page with a script error shows in the log."""
    require_binary("chromium")
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>notDefined();</script></body></html>")
    assert console_errors(chromium(page, tmp_path / "broken.png"))


def test_chromium_renders_the_report_with_its_charts_and_no_console_error(
    tmp_path: Path,
) -> None:
    require_binary("chromium")
    page = tmp_path / "report.html"
    page.write_text(render_html(to_json(lab_report())))
    shot = tmp_path / "report.png"
    log = chromium(page, shot)
    assert not console_errors(log), console_errors(log)
    width, height, rgb = pixels(shot)
    assert (width, height) == (800, 1400)
    colors = Counter(rgb)
    white = colors[(255, 255, 255)]
    assert white < len(rgb) * 0.97, "the screenshot is (nearly) blank"

    def present(hex_color: str, at_least: int) -> bool:
        want = tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
        return colors[want] >= at_least  # type: ignore[index]

    # The charts are there: bars of each node's color and the failed requests' red.
    for color in PALETTE[:3]:
        assert present(color, 200), color
    assert present(FAILED, 100)
