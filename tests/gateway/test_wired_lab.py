"""`teapot-lb lab --modes gateway`: the gateway group runs end to end and reports every
step (two tenants on one IP by SNI, TCP, UDP, churn under load, a theft refused, a
gateway node killed and its next hop withdrawn by its speaker's BGP/BFD session)."""

from __future__ import annotations

import pytest

from needs import require_root
from teapot_lb.lab.gateway import ACME_HOST, BOLT_HOST, GATEWAYS, gateway_lines, run_gateway
from teapot_lb.lab.manifests import DEFAULT_GROUPS, GROUPS
from teapot_lb.lab.report import LabReport, table, to_json


@pytest.mark.root
@pytest.mark.daemon
def test_the_gateway_group_serves_two_tenants_through_churn_a_theft_and_a_kill() -> None:
    require_root()
    messages: list[str] = []
    result = run_gateway(messages.append)
    if result.skipped is not None:
        pytest.skip(result.skipped)
    assert result.ok, "\n".join([*gateway_lines(result), *messages])
    assert result.https == {ACME_HOST: "acme-a", BOLT_HOST: "bolt"}
    assert (result.churn_failed, result.churn_reloads) == (0, 0)
    # The churn moved traffic: both of acme's pods answered during it.
    assert set(result.churn_names) == {"acme-a", "acme-b"}
    assert "HostnameTaken" in result.theft_refused
    # HA by the speakers: the router learnt both gateway nodes by BGP; gw1's death (link
    # down, speaker and gateway SIGKILLed) withdrew its next hop, and gw2 serves on.
    assert result.hops_before == sorted(GATEWAYS.values())
    assert result.hops_after == [GATEWAYS["gw2"]]
    assert result.withdrawn_s is not None and result.served_after_kill
    assert result.ha.startswith("BGP ECMP by teapot-lb speakers")
    report = LabReport(options={}, gateway=result)
    assert report.ok
    assert to_json(report)["gateway"]["ok"] is True
    assert "another tenant's hostname: " in table(report)


def test_the_gateway_group_is_offered_but_not_run_by_default() -> None:
    assert "gateway" in GROUPS and "gateway" not in DEFAULT_GROUPS


def test_the_html_report_shows_the_gateway_group_with_the_refusal() -> None:
    from teapot_lb.lab.gateway import GatewayResult
    from teapot_lb.lab.html_report import render_html

    result = GatewayResult(theft_refused="host: taken [HostnameTaken]", skipped=None)
    page = render_html(to_json(LabReport(options={}, gateway=result)))
    assert "<h2>Gateway" in page and "[HostnameTaken]" in page
