"""End to end: `teapot-lb lab --modes octavia`, a tenant's Service on Octavia with the real
ovn-octavia-provider on a real OVN, beside route mode, through the real manager and
tenant-agent processes (docs/lab.md, "The octavia group").

The lab runs on the session's OpenStack stack (tests/conftest.py `openstack`), handed to it
as `LabOptions.openstack`, so the suite starts one stack, not two. (Here, not in tests/e2e,
so that the stack's users run one after the other: the stack starts with the first of them
and is closed after the last, not kept idle through the suite between them.) Needs root, OVN,
PostgreSQL and the virtualenv of lab.neutron_server.venv() (skipped naming what is missing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needs import require_root
from teapot_lb.lab.html_report import render_html
from teapot_lb.lab.manifests import DEFAULT_GROUPS, GROUPS
from teapot_lb.lab.octavia_ovn import OctaviaOVN
from teapot_lb.lab.ovnstack import OVNStack
from teapot_lb.lab.report import table, to_json
from teapot_lb.lab.runner import LabOptions, run_lab
from teapot_lb.lab.teapot_octavia import NODES, OpenStack, run_octavia

pytestmark = pytest.mark.timeout(900)  # (the session's first user starts the stack: 1-3 min)


def test_the_octavia_group_is_asked_for_by_name_only() -> None:
    assert "octavia" in GROUPS
    assert "octavia" not in DEFAULT_GROUPS


def test_without_the_openstack_virtualenv_the_group_is_skipped_naming_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_root()
    monkeypatch.setenv("TEAPOT_NEUTRON_VENV", str(tmp_path / "no-venv"))
    lines: list[str] = []

    result = run_octavia(lines.append)

    assert result.skipped is not None
    assert "scripts/setup.sh" in result.skipped, result.skipped
    assert result.ok and not result.errors
    assert any(line.startswith("lab: octavia: skipped:") for line in lines), lines


def test_lab_octavia_serves_a_tenant_service_beside_route_mode_and_leaves_nothing(
    tmp_path: Path, openstack_ovn: OVNStack, openstack: OctaviaOVN
) -> None:
    lines: list[str] = []
    options = LabOptions(modes=("octavia",), workdir=tmp_path / "work",
                         openstack=OpenStack(openstack_ovn, openstack))  # fmt: skip

    report = run_lab(options, lines.append)

    r = report.octavia
    assert r is not None and r.skipped is None and r.stack == "shared"
    assert not r.errors, "\n".join(r.errors)
    # Part by part, so a failure names the part (OctaviaResult.ok is their conjunction).
    assert r.octavia.ip is not None and r.octavia.load_balancer, r.octavia
    assert r.octavia.answered_by == sorted(NODES), r.octavia
    assert r.route.ip is not None and r.route.ip != r.octavia.ip, r.route
    assert r.route.next_hops == sorted(NODES.values()), r.route
    assert r.route.octavia_load_balancers == 0, r.route
    assert r.route.fib_next_hops == sorted(NODES.values()), r.route  # ECMP at the router
    assert r.route.answered_by == sorted(NODES), r.route
    assert r.member_change.answered_by == ["m2"], r.member_change
    assert r.restart.answered_by == sorted(NODES), r.restart
    assert r.restart.load_balancers == 1, r.restart
    assert r.deletion.load_balancers == 0 and r.deletion.northbound_rows == 0, r.deletion
    assert report.ok
    doc = json.loads(json.dumps(to_json(report)))
    assert doc["octavia"]["parts"] == dict.fromkeys(
        ("octavia", "route", "member_change", "restart", "deletion"), True
    )
    assert doc["octavia"]["ok"] is True
    text = table(report)
    for part in ("octavia", "route", "member_change", "restart", "deletion"):
        assert f"  {part} ok:" in text, text
    assert "Octavia provider" in render_html(doc)
