"""The lab's HTML page shows the OVN group as the text report does (no OVN needed)."""

from __future__ import annotations

from teapot_lb.lab.html_report import render_html
from teapot_lb.lab.ovn import OVNResult
from teapot_lb.lab.report import LabReport, to_json


def page(result: OVNResult) -> str:
    return render_html(to_json(LabReport(options={}, ovn=result)))


def test_the_page_has_the_ovn_groups_figures() -> None:
    result = OVNResult(
        create_to_reachable_s=0.22,
        spread={"be1": 5, "be2": 5},
        endpoint_removed_s=0.05,
        failover_s=3.4,
        failover_failed_requests=7,
        delete_to_no_row_s=0.06,
        delete_to_unreachable_s=0.08,
    )
    html = page(result)
    assert '<h2>OVN <span class="ok">ok</span></h2>' in html
    assert "be1 5, be2 5" in html
    assert "served through the other</td><td>3.40 s (7 requests failed meanwhile)" in html
    assert "not measured: BGP announcement" in html


def test_a_skipped_or_failed_ovn_group_says_so() -> None:
    assert 'OVN <span class="ok">skipped</span>' in page(OVNResult(skipped="no ovn-northd"))
    failed = page(OVNResult(errors=["northd died"]))
    assert "FAILED" in failed and "northd died" in failed
