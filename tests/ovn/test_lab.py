"""`teapot-lb lab --modes ovn`: the OVN group runs end to end and reports every step."""

from __future__ import annotations

import pytest

from needs import require_root
from teapot_lb.lab.ovn import ovn_lines, run_ovn
from teapot_lb.lab.report import LabReport, to_json


def test_the_ovn_group_creates_reaches_spreads_moves_and_deletes() -> None:
    require_root()
    messages: list[str] = []
    result = run_ovn(messages.append)
    if result.skipped is not None:
        pytest.skip(result.skipped)
    assert result.ok, "\n".join([*ovn_lines(result), *messages])
    assert set(result.spread) == {"be1", "be2"}
    report = LabReport(options={}, ovn=result)
    assert report.ok
    assert to_json(report)["ovn"]["ok"] is True
