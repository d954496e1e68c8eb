"""Standalone Teapot: manager and agents on manifest directories (a tenant's directory is
its identity)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.standalone.teapot import agent_sync, manage

from .builders import pool_body, tenant_body, tlb_body
from .world import endpoints, node, service

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def write(path: Path, *docs: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def teapot_root(tmp: Path) -> Path:
    root = tmp / "teapot"
    write(
        root / "management" / "config.yaml",
        pool_body("shared-v4", ["198.51.100.0/26"]),
        pool_body("shared-v6", ["2001:db8:100::/120"]),
        tenant_body("acme"),
        tenant_body("bolt"),
    )
    (root / "tenants" / "acme").mkdir(parents=True)
    (root / "tenants" / "bolt").mkdir(parents=True)
    return root


def cluster(tmp: Path, name: str, *docs: dict[str, Any]) -> Path:
    path = tmp / name
    write(path / "cluster.yaml", *docs)
    return path


def test_a_service_in_a_cluster_directory_gets_an_ip_through_the_manager(tmp_path: Path) -> None:
    root = teapot_root(tmp_path)
    acme = cluster(
        tmp_path,
        "acme-c1",
        node("n0", "192.0.2.11"),
        node("n1", "192.0.2.12"),
        service("web"),
        endpoints("web", ["n1"]),
    )
    assert agent_sync(acme, root, "acme", "c1") == {"default/web": []}
    run = manage(root, NOW)
    assert run.problems == []
    status = run.statuses["acme"]["requests"]["c1.default.web"]
    assert status["addresses"] == ["198.51.100.0"]
    assert run.statuses["acme"]["routes"] == [
        {"prefix": "198.51.100.0/32", "nextHops": ["192.0.2.11", "192.0.2.12"],
         "request": "c1.default.web"}
    ]  # fmt: skip
    assert agent_sync(acme, root, "acme", "c1") == {"default/web": ["198.51.100.0"]}
    assert run.statuses["acme"]["tenant"]["usage"]["addresses"] == 1


def test_a_file_in_one_tenants_directory_cannot_speak_for_another(tmp_path: Path) -> None:
    root = teapot_root(tmp_path)
    write(root / "tenants" / "acme" / "own.yaml", tlb_body("acme", "web"))
    forged = tlb_body("acme", "forged", requestedIPs=["198.51.100.1"])  # namespace tenant-acme
    write(root / "tenants" / "bolt" / "forged.yaml", forged)
    run = manage(root, NOW)
    refused = run.statuses["bolt"]["requests"]["forged"]["conditions"][0]
    assert (refused["status"], refused["reason"]) == ("False", "InvalidRequest")
    assert "belongs to Tenant bolt" in refused["message"]
    assert run.statuses["acme"]["requests"]["web"]["addresses"] == ["198.51.100.0"]
    assert "forged" not in run.statuses["acme"]["requests"]


def test_ips_stay_where_they_were_across_runs(tmp_path: Path) -> None:
    root = teapot_root(tmp_path)
    write(root / "tenants" / "acme" / "b.yaml", tlb_body("acme", "b"))
    first = manage(root, NOW).statuses["acme"]["requests"]["b"]["addresses"]
    write(root / "tenants" / "acme" / "a.yaml", tlb_body("acme", "a"))  # sorts before b
    again = manage(root, NOW).statuses["acme"]["requests"]
    assert again["b"]["addresses"] == first
    assert again["a"]["addresses"] != first


def test_the_commands_run_a_standalone_pass(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from teapot_lb.cli import main

    root = teapot_root(tmp_path)
    acme = cluster(tmp_path, "acme-c1", node("n0", "192.0.2.11"), service("web"),
                   endpoints("web", ["n0"]))  # fmt: skip
    agent = ["tenant-agent", "--manifests", str(acme), "--teapot-root", str(root),
             "--tenant", "acme", "--cluster-name", "c1", "--once"]  # fmt: skip
    runner = CliRunner()
    for argv in (agent, ["manager", "--manifests", str(root), "--once"], agent):
        result = runner.invoke(main, argv)
        assert result.exit_code == 0, result.output
    ips = json.loads((root / "status" / "acme.c1.services.json").read_text())
    assert ips == {"default/web": ["198.51.100.0"]}


def announcer_config(root: Path) -> None:
    """What the operator puts beside the manager's tenants.yaml: a peer, an advertisement
    of the tenants' pools, and the announcing node."""
    ns = {"namespace": "teapot-lb-system"}
    api = "lb.teapot.io/v1alpha1"
    write(
        root / "announce" / "bgp.yaml",
        {"apiVersion": api, "kind": "BGPPeer", "metadata": {"name": "router", **ns},
         "spec": {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1"}},
        {"apiVersion": api, "kind": "BGPAdvertisement", "metadata": {"name": "tenants", **ns},
         "spec": {"addressPools": ["shared-v4", "shared-v6"]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "m1"}},
    )  # fmt: skip


def test_the_standalone_announcer_plans_a_path_per_next_hop_of_the_managers_decisions(
    tmp_path: Path,
) -> None:
    from teapot_lb.announce.announcement import BGPRoute, Mode
    from teapot_lb.announce.plan import plan
    from teapot_lb.standalone.directory import read

    root = teapot_root(tmp_path)
    write(root / "tenants" / "acme" / "own.yaml", tlb_body("acme", "web"))
    steer = tlb_body("bolt", "steer")
    steer["spec"]["backends"][0]["addresses"] = ["192.0.2.11"]  # acme's node
    write(root / "tenants" / "bolt" / "steer.yaml", steer)
    manage(root, NOW)
    announcer_config(root)
    snap = read(root / "announce")
    assert snap.problems == []
    routes = plan(snap.view(), "m1").of_mode(Mode.BGP)
    got = {(r.prefix, str(r.attributes.next_hop)) for r in routes if isinstance(r, BGPRoute)}
    assert got == {("198.51.100.0/32", h) for h in ("192.0.2.11", "192.0.2.12", "192.0.2.13")}
    before = (root / "announce" / "tenants.yaml").stat().st_mtime_ns
    manage(root, NOW)  # nothing changed: the announcer's input is left alone
    assert (root / "announce" / "tenants.yaml").stat().st_mtime_ns == before
