"""`teapot-lb lab --modes relay`: tenant bolt's speakers (ours and BIRD) through the real
`teapot-lb relay` to the lab router; ECMP over bolt's nodes, its hijacks refused by rule."""

from __future__ import annotations

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.html_report import render_html
from teapot_lb.lab.relay import HIJACKS, NODES, SERVICE_IP
from teapot_lb.lab.report import table, to_json
from teapot_lb.lab.runner import LabOptions, run_lab


def test_the_relay_group_gives_ecmp_over_the_tenant_nodes_and_refuses_its_hijacks() -> None:
    require_root()
    require_binary("bird", "birdc")
    messages: list[str] = []
    report = run_lab(LabOptions(modes=("relay",)), messages.append)
    result = report.relay
    assert result is not None
    if result.skipped is not None:
        pytest.skip(result.skipped)
    text = table(report)
    assert report.ok, "\n".join([text, *messages])
    assert result.fib_next_hops == sorted(NODES.values())  # ECMP: both of bolt's nodes
    assert sum(result.answered_by.values()) > 0 and set(result.answered_by) <= set(NODES)
    assert {r.prefix: r.reason for r in result.refusals} == {
        prefix: reason for prefix, (_, reason) in HIJACKS.items()
    }
    assert result.leaked == []
    for prefix, (_, reason) in HIJACKS.items():
        assert f"hijack {prefix}" in text and "refused, rule" in text and reason in text
        assert result.rejected_metric.get(reason, 0) >= 1
    doc = to_json(report)
    assert doc["relay"]["ok"] is True and doc["relay"]["ip"] == SERVICE_IP
    html = render_html(doc)
    assert "BGP relay" in html and "next-hop-outside-node-networks" in html
