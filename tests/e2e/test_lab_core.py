"""The lab's pure parts: measurements, the report, the layout read from manifests,
the router configurations. No namespaces needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from teapot_lb.lab.manifests import (
    LabConfigError,
    announced_view,
    assigned_ips,
    bgp_announcers,
    copy_manifests,
    layout,
    read_dir,
    service_doc,
    with_services,
)
from teapot_lb.lab.measure import Attempt, first_success, outage, percentile, spread
from teapot_lb.lab.report import (
    Cleanup,
    Deletion,
    Failover,
    LabReport,
    ModeResult,
    ServiceResult,
    Spread,
    Trial,
    table,
    to_json,
)
from teapot_lb.lab.router import RouterConfig, Session, bird_config, frr_config
from teapot_lb.lab.runner import REPO_EXAMPLES


def attempts(*spec: tuple[float, str | None]) -> list[Attempt]:
    """(start, node or None for a failure); each lasts 1 ms."""
    return [Attempt(t, t + 0.001, "ip:80", node) for t, node in spec]


def every_10ms(start: float, stop: float, node: str | None) -> list[tuple[float, str | None]]:
    n = round((stop - start) / 0.01)
    return [(round(start + i * 0.01, 3), node) for i in range(n)]


# --- measure


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0
    assert percentile([0.1, 0.2], 99) == 0.2


def test_outage_runs_from_the_event_to_the_first_good_request_after_the_last_bad_one() -> None:
    tries = attempts(
        *every_10ms(0.0, 1.0, "n1"), *every_10ms(1.0, 1.3, None), *every_10ms(1.3, 2.0, "n2")
    )
    o = outage(tries, 1.0)
    assert o.recovered_after == pytest.approx(0.3)
    assert o.failed == o.bad == 30


def test_requests_started_before_the_event_do_not_count() -> None:
    tries = attempts((0.5, None), *every_10ms(1.0, 2.0, "n1"))
    assert outage(tries, 1.0).recovered_after == 0.0


def test_a_lucky_request_during_an_ecmp_outage_does_not_end_it() -> None:
    # One next hop is dead: failures interleave with successes until the router drops it.
    mixed = [(round(1.0 + i * 0.01, 3), None if i % 3 == 0 else "n2") for i in range(200)]
    tries = attempts(*mixed, *every_10ms(3.0, 3.8, "n2"))
    assert outage(tries, 1.0).recovered_after == pytest.approx(2.0, abs=0.011)


def test_no_recovery_without_a_settled_run_of_good_requests() -> None:
    tries = attempts(*every_10ms(1.0, 1.5, None), *every_10ms(1.5, 1.7, "n2"))
    assert outage(tries, 1.0, settle=0.5).recovered_after is None


def test_graceful_counts_requests_to_the_leaving_node_as_bad() -> None:
    tries = attempts(*every_10ms(1.0, 1.05, "n1"), *every_10ms(1.05, 2.0, "n2"))
    o = outage(tries, 1.0, bad=lambda a: not a.ok or a.node == "n1")
    assert o.recovered_after == pytest.approx(0.05)
    assert o.failed == 0


def test_first_success_is_measured_to_the_end_of_the_request() -> None:
    tries = attempts((0.9, "n1"), (1.0, None), (1.02, "n1"))
    assert first_success(tries, 1.0) == pytest.approx(0.021)
    assert first_success(attempts((1.0, None)), 1.0) is None


def test_spread_counts_per_node_and_failures() -> None:
    tries = attempts((0, "b"), (0, "a"), (0, "b"), (0, None))
    assert spread(tries) == {"(failed)": 1, "a": 1, "b": 2}


# --- report


def passing_mode(mode: str) -> ModeResult:
    m = ModeResult(mode)
    m.services = [ServiceResult("lab/x", "192.0.2.200", True, 0.05, True)]
    m.spread = Spread("192.0.2.200", 10, {"node-1": 10}, True)
    m.failovers = [Failover("hard", [Trial("node-1", 0.2, 20, 70)])]
    m.deletion = Deletion("lab/x", "192.0.2.200", 0.05, True)
    return m


def test_report_passes_only_when_every_mode_and_the_cleanup_pass() -> None:
    report = LabReport({}, [passing_mode("l2")], cleanup=Cleanup(ok=True))
    assert report.ok
    report.cleanup = Cleanup(ok=False, leftover_namespaces=["tlb1lab0-node-1"])
    assert not report.ok
    report.cleanup = Cleanup(ok=True)
    report.modes[0].failovers[0].trials.append(Trial("node-2", None, 500, 500))
    assert not report.ok


def test_table_and_json_show_the_same_figures_and_the_goals() -> None:
    report = LabReport({"bgp_hold_time_s": 3}, [passing_mode("l2")], cleanup=Cleanup(ok=True))
    text = table(report)
    assert "l2    ok" in text
    assert "hard 200 ms/200 ms" in text
    assert "goal L2 failover p50 ≤ 0.5 s: 200 ms met" in text
    assert "lab PASSED" in text
    doc = to_json(report)
    assert doc["schema"] == "teapot-lb.lab/v1"
    assert doc["modes"]["l2"]["failover"]["hard"]["p50_s"] == 0.2
    assert doc["modes"]["l2"]["create_to_reachable_s"] == {
        "p50": 0.05, "p99": 0.05, "max": 0.05, "samples": 1,
    }  # fmt: skip
    assert {"name": "L2 failover p50", "target": "≤ 0.5 s", "value": 0.2, "met": True} in doc[
        "goals"
    ]


def test_bgp_failover_is_the_later_of_the_client_and_the_router() -> None:
    trial = Trial("node-1", 0.0, 0, 50, withdrawn_s=0.006)
    assert trial.failover_s == 0.006
    assert Trial("node-1", None, 9, 9, withdrawn_s=0.1).failover_s is None


# --- manifests


def test_examples_lab_gives_three_nodes_a_router_and_a_pool_per_mode(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    lay = layout(read_dir(tmp_path), nodes=None)
    assert [(n.name, n.address) for n in lay.nodes] == [
        ("node-1", "192.0.2.11"), ("node-2", "192.0.2.12"), ("node-3", "192.0.2.13"),
    ]  # fmt: skip
    assert lay.bgp is not None
    assert (lay.bgp.router_address, lay.bgp.router_asn, lay.bgp.node_asn) == (
        "192.0.2.1", 64500, 64512,
    )  # fmt: skip
    assert lay.bgp.hold_time == 3
    assert lay.pools == {"bgp": ["lab-bgp"], "l2": ["lab-l2"], "vip": ["lab-vip"]}


def test_nodes_option_replaces_the_manifests_nodes(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=True)
    lay = layout(read_dir(tmp_path), nodes=5)
    assert [n.name for n in lay.nodes] == [f"node-{i}" for i in range(1, 6)]
    assert lay.nodes[4].address == "192.0.2.15"


def test_a_node_outside_the_lab_lan_is_refused(tmp_path: Path) -> None:
    (tmp_path / "n.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: far}\n"
        "status: {addresses: [{type: InternalIP, address: 198.51.100.7}]}\n"
    )
    with pytest.raises(LabConfigError, match="Node far: the lab needs an InternalIP in its LAN"):
        layout(read_dir(tmp_path), nodes=None)


def test_the_lab_knows_a_new_services_ip_before_any_node_reports_it(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    snap = read_dir(tmp_path)
    view = with_services(snap, [service_doc("bgp-1", "lab-bgp"), service_doc("l2-1", "lab-l2")])
    ips = assigned_ips(view, snap)
    assert ips["demo/web-bgp"] == ["203.0.113.64"]
    assert ips["lab/bgp-1"] == ["203.0.113.65"]
    assert ips["lab/l2-1"] == ["192.0.2.201"]


# --- router configs


def config() -> RouterConfig:
    return RouterConfig(
        64500,
        "192.0.2.1",
        (Session("192.0.2.11", 64512, 3, 1), Session("192.0.2.12", 64512, 3, 1)),
    )


def test_bird_config_merges_paths_into_the_kernel_and_peers_every_node() -> None:
    text = bird_config(config(), Path("/tmp/x/bird.log"))
    assert "merge paths on" in text
    assert text.count("protocol bgp node") == 2
    assert "neighbor 192.0.2.12 as 64512;" in text
    assert "hold time 3; keepalive time 1;" in text
    assert "import all; export none;" in text


def test_frr_config_allows_ecmp_over_every_node() -> None:
    text = frr_config(config(), "router")
    assert "maximum-paths 16" in text
    assert " neighbor 192.0.2.11 timers 1 3" in text
    assert "  neighbor 192.0.2.12 activate" in text
    assert "no bgp ebgp-requires-policy" in text


def test_the_router_peers_only_with_nodes_a_bgppeer_selects(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    config = tmp_path / "000-config.yaml"
    config.write_text(
        config.read_text().replace(
            "  connectTime: 1s\n",
            "  connectTime: 1s\n  nodeSelectors:\n"
            "    - matchLabels: {kubernetes.io/hostname: node-2}\n",
        )
    )
    lay = layout(read_dir(tmp_path), nodes=None)
    assert lay.bgp is not None and lay.bgp.nodes == ("node-2",)


def test_bgp_announcers_come_from_the_nodes_own_plan(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    view = announced_view(read_dir(tmp_path), [service_doc("bgp-1", "lab-bgp")])
    assert bgp_announcers(view, "203.0.113.65") == (
        "203.0.113.65/32", {"node-1", "node-2", "node-3"},
    )  # fmt: skip
    assert bgp_announcers(view, "192.0.2.200") == (None, set())  # an L2 address


def test_pools_outside_the_documentation_ranges_are_refused(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    config = tmp_path / "000-config.yaml"
    config.write_text(config.read_text().replace("203.0.113.64/27", "10.1.0.0/27"))
    with pytest.raises(LabConfigError, match=r"lab-bgp: 10\.1\.0\.0-10\.1\.0\.31 is outside"):
        layout(read_dir(tmp_path), nodes=None)
