"""`teapot-lb lab --modes teapot`: the Teapot group alone, through `run_lab`: the standalone
manager and tenant agent as real processes on directories (no root), then route mode with a
router and traffic (namespaces and BIRD: without root or BIRD that row is skipped with the
reason, and its tests skip)."""

from __future__ import annotations

import json
from ipaddress import ip_address, ip_network
from pathlib import Path

import pytest

from teapot_lb.lab.html_report import render_html
from teapot_lb.lab.report import LabReport, ModeResult, table, to_json
from teapot_lb.lab.runner import LabOptions, run_lab
from teapot_lb.lab.teapot_route import run_teapot_route

ACME_NODES = ["192.0.2.11", "192.0.2.12", "192.0.2.13"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> LabReport:
    messages: list[str] = []
    workdir = tmp_path_factory.mktemp("lab-teapot")
    got = run_lab(LabOptions(modes=("teapot",), workdir=workdir), messages.append)
    assert got.teapot is not None, messages
    assert got.ok, (table(got), messages)
    return got


def test_the_service_gets_an_ip_and_a_route_over_the_tenants_nodes_then_loses_them(
    report: LabReport,
) -> None:
    t = report.teapot
    assert t is not None
    assert t.ip is not None and t.ip.startswith("203.0.113.")  # acme's allocation
    assert t.next_hops == ACME_NODES
    assert t.next_hops_after == ["192.0.2.11", "192.0.2.13"]  # n2 gone
    for figure in (t.create_to_ip_s, t.create_to_route_s, t.node_gone_to_route_s,
                   t.delete_to_withdrawn_s):  # fmt: skip
        assert figure is not None and figure >= 0
    assert [m.mode for m in report.modes] == ["teapot"]  # the route flow's row only


def test_each_attempt_of_the_other_tenant_is_refused_with_its_reason(report: LabReport) -> None:
    t = report.teapot
    assert t is not None
    reasons = {r.request: r.reason for r in t.refused}
    assert reasons == {
        "b-acme-ip": "AddressNotAllocated",
        "c-acme-node": "BackendNotAllowed",
        "d-over-quota": "QuotaExceeded",
        "e-gateway": "ModeNotAllowed",
        "f-forged": "InvalidRequest",
    }
    by_name = {r.request: r.message for r in t.refused}
    assert "not allocated to Tenant globex" in by_name["b-acme-ip"]
    assert "outside the node networks of Tenant globex" in by_name["c-acme-node"]


def test_the_report_has_the_teapot_rows_in_the_table_and_the_json(report: LabReport) -> None:
    text = table(report)
    assert "globex tried" in text and "BackendNotAllowed" in text and "lab PASSED" in text
    doc = json.loads(json.dumps(to_json(report)))
    assert doc["teapot"]["ok"] is True
    assert {r["reason"] for r in doc["teapot"]["refused"]} >= {"QuotaExceeded", "ModeNotAllowed"}


def test_the_work_directory_keeps_the_manager_and_agent_logs(
    report: LabReport, tmp_path_factory: pytest.TempPathFactory
) -> None:
    logs = list(Path(tmp_path_factory.getbasetemp()).glob("lab-teapot*/teapot/*.log"))
    assert {p.name for p in logs} == {"manager.log", "agent.log"}


def route_row(report: LabReport) -> ModeResult:
    [row] = report.modes
    if row.skipped:
        pytest.skip(row.skipped)
    return row


def test_the_client_reaches_each_tenants_ip_over_ecmp_through_its_own_nodes(
    report: LabReport,
) -> None:
    row = route_row(report)  # the flow waited for each IP's FIB entry via its tenant's nodes
    acme, globex = row.services
    assert (acme.name, globex.name) == ("acme default/web", "globex default/web")
    assert ip_address(acme.ip) in ip_network("203.0.113.0/29")  # acme's allocation
    assert ip_address(globex.ip) in ip_network("203.0.113.8/29")  # globex's
    assert all(s.reachable and s.create_to_reachable_s for s in row.services)
    assert row.spread is not None and set(row.spread.by_node) == {"n1", "n2", "n3"}


def test_a_hard_killed_tenant_node_loses_its_traffic_without_the_tenant_telling(
    report: LabReport,
) -> None:
    row = route_row(report)
    [failover] = row.failovers
    [trial] = failover.trials
    assert trial.node == "n2" and trial.outage_s is not None and trial.withdrawn_s is not None
    assert trial.timeline is not None and "n2" in trial.timeline.served
    assert row.deletion is not None and row.deletion.ok  # route withdrawn, IP unreachable
    names = {g.name for g in report.goals()}
    assert {"teapot create→reachable p50", "teapot tenant node killed → traffic moved"} <= names


def test_the_html_report_has_the_route_flow_and_the_refusals(report: LabReport) -> None:
    route_row(report)
    page = render_html(json.loads(json.dumps(to_json(report))))
    assert "TEAPOT v4" in page and "Failover, hard" in page
    assert "globex tried" in page and "QuotaExceeded" in page


def test_a_host_without_namespaces_or_router_gets_a_skipped_route_row_with_the_reason(
    tmp_path: Path,
) -> None:
    row = run_teapot_route(tmp_path, lambda _: None, skip="not installed: bird")
    assert row.mode == "teapot" and row.ok  # a skipped row passes, and says why
    assert row.skipped == "route flow: not installed: bird"
