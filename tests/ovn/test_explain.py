"""`teapot-lb explain` for a Service in OVN mode: its rows, VIPs, backends, attachments."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from ovn.builders import OWNER, POOL, endpoints, ovn, view, web
from ovn.test_nbdb import hold, writing
from teapot_lb.cli.explain import explain_command
from teapot_lb.lab.ovnstack import OVNDatabases
from teapot_lb.ovn.desired import desired_state
from teapot_lb.ovn.explain import explain_service

DOCS = (
    POOL,
    ovn(),
    web("203.0.113.1", ips="203.0.113.1"),
    endpoints("web", ("198.51.100.2", "n1", True), ("198.51.100.3", "n2", False)),
)


def test_the_explanation_names_the_row_its_backends_and_where_it_is_attached() -> None:
    text = explain_service(desired_state(view(*DOCS), OWNER), "default/web").text()
    assert "Load_Balancer teapot-lb/test/default/web/203.0.113.1/tcp [tcp]" in text
    assert "attached to router gr0, switch ls0 (group teapot-lb/test/lb-system/ovn)" in text
    assert "203.0.113.1:80 -> 198.51.100.2:8080" in text
    assert "in the Northbound" not in text  # not read


def test_a_local_service_explains_a_router_it_cannot_use() -> None:
    docs = (POOL, ovn(), web("203.0.113.1", externalTrafficPolicy="Local"))
    text = explain_service(desired_state(view(*docs), OWNER), "default/web").text()
    assert "note: 203.0.113.1/tcp: router gr0 not used" in text


def test_explain_reads_the_northbound_and_says_whether_it_holds_the_rows(
    nb: OVNDatabases, owner: str, tmp_path: Path
) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    (manifests / "all.yaml").write_text(yaml.safe_dump_all([*DOCS, node]))
    args = ["default/web", "--manifests", str(manifests), "--ovn-nb", nb.nb_remote,
            "--cluster-name", owner]  # fmt: skip
    before = CliRunner().invoke(explain_command, args)
    assert before.exit_code == 0, before.output
    assert "in the Northbound: missing" in before.output
    assert "OVN mode: the OVN writer programs it" in before.output  # the nodes' table

    with writing(nb, owner) as loop:
        hold(loop, owner, *DOCS)
    after = CliRunner().invoke(explain_command, [*args, "-o", "json"])
    assert after.exit_code == 0, after.output
    (row,) = json.loads(after.output)["ovn"]["loadBalancers"]
    assert row["inDatabase"] == "as wanted"
    assert row["vips"] == {"203.0.113.1:80": ["198.51.100.2:8080"]}
