"""The lab's pure parts: measurements, the report, the layout read from manifests,
the router configurations. No namespaces needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from teapot_lb.cli.lab import lab
from teapot_lb.lab.manifests import (
    BfdSpec,
    LabConfigError,
    announced_view,
    assigned_ips,
    bgp_announcers,
    copy_manifests,
    layout,
    node_doc,
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
    goals,
    table,
    to_json,
)
from teapot_lb.lab.router import (
    RouterConfig,
    Session,
    bird_config,
    frr_bfdd_config,
    frr_config,
)
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


def passing_mode(mode: str, family: str = "v4", created_s: float = 0.05) -> ModeResult:
    ip = "2001:db8::200" if family == "v6" else "192.0.2.200"
    m = ModeResult(mode, family)
    m.services = [ServiceResult("lab/x", ip, True, created_s, True)]
    m.spread = Spread(ip, 10, {"node-1": 10}, True)
    m.failovers = [Failover("hard", [Trial("node-1", 0.2, 20, 70)])]
    m.deletion = Deletion("lab/x", ip, 0.05, True)
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
    assert "l2    v4      ok" in text
    assert "hard 200 ms/200 ms" in text
    assert "goal L2 failover p50 v4 ≤ 0.5 s: 200 ms met" in text
    assert "lab PASSED" in text
    doc = to_json(report)
    assert doc["schema"] == "teapot-lb.lab/v2"
    assert doc["modes"]["l2"]["v4"]["failover"]["hard"]["p50_s"] == 0.2
    assert doc["modes"]["l2"]["v4"]["create_to_reachable_s"] == {
        "p50": 0.05, "p99": 0.05, "max": 0.05, "samples": 1,
    }  # fmt: skip
    goal = {"name": "L2 failover p50 v4", "target": "≤ 0.5 s", "value": 0.2, "met": True}
    assert goal in doc["goals"]


def test_each_family_gets_its_row_and_its_create_to_reachable_goal() -> None:
    modes = [passing_mode("l2", "v4", created_s=0.05), passing_mode("l2", "v6", created_s=0.02)]
    report = LabReport({}, modes, cleanup=Cleanup(ok=True))
    rows = [line for line in table(report).splitlines() if line.startswith("l2 ")]
    assert [row.split()[:3] for row in rows] == [["l2", "v4", "ok"], ["l2", "v6", "ok"]]
    goals = {g.name: (g.value, g.met) for g in report.goals()}
    assert goals["create→reachable p50 v4"] == (0.05, False)  # issue 15: ≤ 0.03 s
    assert goals["create→reachable p50 v6"] == (0.02, True)
    assert set(to_json(report)["modes"]["l2"]) == {"v4", "v6"}


def test_a_family_without_a_pool_is_skipped_with_its_reason_and_passes() -> None:
    skipped = ModeResult("l2", "v6", skipped="no AddressPool with IPv6 addresses is announced")
    report = LabReport({}, [passing_mode("l2"), skipped], cleanup=Cleanup(ok=True))
    assert report.ok
    text = table(report)
    assert "l2    v6      skipped" in text
    assert "l2 v6: skipped: no AddressPool with IPv6 addresses is announced" in text
    assert to_json(report)["modes"]["l2"]["v6"]["skipped"].startswith("no AddressPool")


def test_bgp_failover_is_the_later_of_the_client_and_the_router() -> None:
    trial = Trial("node-1", 0.0, 0, 50, withdrawn_s=0.006)
    assert trial.failover_s == 0.006
    assert Trial("node-1", None, 9, 9, withdrawn_s=0.1).failover_s is None


# --- manifests


def test_examples_lab_gives_three_nodes_a_router_and_a_pool_per_mode(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    lay = layout(read_dir(tmp_path), nodes=None)
    assert [(n.name, n.address, n.address6) for n in lay.nodes] == [
        ("node-1", "192.0.2.11", "2001:db8::11"), ("node-2", "192.0.2.12", "2001:db8::12"),
        ("node-3", "192.0.2.13", "2001:db8::13"),
    ]  # fmt: skip
    assert lay.bgp is not None
    assert (lay.bgp.router_address, lay.bgp.router_asn, lay.bgp.node_asn) == (
        "192.0.2.1", 64500, 64512,
    )  # fmt: skip
    assert lay.bgp.hold_time == 3
    assert lay.bgp.bfd == BfdSpec(transmit_ms=100, receive_ms=100, multiplier=3)
    assert lay.bgp.bfd.detection_s == pytest.approx(0.3)
    assert lay.pools == {
        "bgp": ["lab-bgp", "lab-bgp6"], "l2": ["lab-l2", "lab-l26"], "vip": ["lab-vip", "lab-vip6"],
    }  # fmt: skip
    assert [lay.pools_of(m, "v6") for m in ("bgp", "l2", "vip")] == [
        ["lab-bgp6"], ["lab-l26"], ["lab-vip6"],
    ]  # fmt: skip


def test_a_node_without_an_ipv6_internal_ip_gets_one_written_like_its_ipv4(
    tmp_path: Path,
) -> None:
    (tmp_path / "n.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
        "status: {addresses: [{type: InternalIP, address: 192.0.2.21}]}\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n"
        "status: {addresses: [{type: InternalIP, address: 192.0.2.22},"
        " {type: InternalIP, address: '2001:db8::abc'}]}\n"
    )
    lay = layout(read_dir(tmp_path), nodes=None)
    assert [n.address6 for n in lay.nodes] == ["2001:db8::21", "2001:db8::abc"]
    assert [n.internal6 for n in lay.nodes] == [False, True]


def test_bgp_in_ipv6_needs_an_ipv6_internal_ip_on_every_peered_node(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    assert layout(read_dir(tmp_path), nodes=None).missing_ipv6_next_hop() is None
    nodes = tmp_path / "001-nodes.yaml"
    nodes.write_text(nodes.read_text().replace(', {type: InternalIP, address: "2001:db8::12"}', ""))
    problem = layout(read_dir(tmp_path), nodes=None).missing_ipv6_next_hop()
    assert problem is not None and problem.startswith("Node(s) node-2 have no IPv6 InternalIP")


def test_nodes_option_replaces_the_manifests_nodes(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=True)
    lay = layout(read_dir(tmp_path), nodes=5)
    assert [n.name for n in lay.nodes] == [f"node-{i}" for i in range(1, 6)]
    assert (lay.nodes[4].address, lay.nodes[4].address6) == ("192.0.2.15", "2001:db8::15")
    assert node_doc(lay.nodes[4])["status"]["addresses"] == [
        {"type": "InternalIP", "address": "192.0.2.15"},
        {"type": "InternalIP", "address": "2001:db8::15"},
    ]


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


def test_an_ipv6_service_of_the_lab_gets_its_ip_from_the_ipv6_pool(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    snap = read_dir(tmp_path)
    docs = [service_doc("bgp-v6-1", "lab-bgp6", "v6"), service_doc("l2-v6-1", "lab-l26", "v6")]
    ips = assigned_ips(with_services(snap, docs), snap)
    # Not 2001:db8:100::, the Subnet-Router anycast address of the /64 (RFC 4291 §2.6.1).
    assert ips["demo/web-bgp6"] == ["2001:db8:100::1"]
    assert ips["lab/bgp-v6-1"] == ["2001:db8:100::2"]
    assert ips["lab/l2-v6-1"] == ["2001:db8::201"]


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
    # MP-BGP: IPv6 unicast over each IPv4 session too.
    assert "ipv4 { import all; export none; gateway direct; };" in text
    assert "ipv6 { import all; export none; gateway direct; };" in text


def bfd_config() -> RouterConfig:
    bfd = BfdSpec(transmit_ms=100, receive_ms=200, multiplier=3)
    return RouterConfig(
        64500, "192.0.2.1", tuple(Session(s.address, s.asn, 3, 1, bfd) for s in config().sessions)
    )


def test_without_a_bfd_profile_the_router_runs_no_bfd() -> None:
    assert config().bfd is None
    assert "bfd" not in bird_config(config(), Path("/tmp/x/bird.log"))
    assert "bfd" not in frr_config(config(), "router")


def test_bird_runs_bfd_on_every_session_with_the_profiles_timers() -> None:
    text = bird_config(bfd_config(), Path("/tmp/x/bird.log"))
    assert (
        'protocol bfd { interface "*" { min rx interval 200 ms; min tx interval 100 ms;'
        " multiplier 3; }; }" in text
    )
    assert text.count("  bfd on;") == 2


def test_frr_runs_bfd_on_every_session_with_a_bfdd_profile_of_the_profiles_timers() -> None:
    text = frr_config(bfd_config(), "router")
    assert " neighbor 192.0.2.11 bfd profile lab" in text
    assert " neighbor 192.0.2.12 bfd profile lab" in text
    bfdd = frr_bfdd_config(BfdSpec(100, 200, 3))
    assert bfdd == (
        "bfd\n profile lab\n  transmit-interval 100\n  receive-interval 200\n"
        "  detect-multiplier 3\n"
    )


def test_the_bgp_hard_kill_goal_is_the_bfd_bound_with_a_bfd_profile_else_the_hold_time() -> None:
    m = passing_mode("bgp")
    m.failovers = [Failover("hard", [Trial("node-1", 0.3, 5, 70)])]
    with_bfd = goals(LabReport({"bgp_hold_time_s": 3, "bgp_bfd_detection_s": 0.3}, [m]))
    assert [(g.name, g.target, g.met) for g in with_bfd if g.name.startswith("BGP")] == [
        ("BGP hard kill max v4", "≤ 0.35 s (BFD)", True)
    ]
    without = goals(LabReport({"bgp_hold_time_s": 3}, [m]))
    assert [(g.target, g.met) for g in without if g.name.startswith("BGP")] == [
        ("≤ hold time 3 s (+0.5 s)", True)
    ]


def test_frr_config_allows_ecmp_over_every_node() -> None:
    text = frr_config(config(), "router")
    assert "maximum-paths 16" in text
    assert " neighbor 192.0.2.11 timers 1 3" in text
    v6 = text.split(" address-family ipv6 unicast")[1]
    assert "  neighbor 192.0.2.12 activate" in text.split(" address-family ipv6")[0]
    assert "  neighbor 192.0.2.12 activate" in v6  # MP-BGP: IPv6 over the IPv4 session
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
    view6 = announced_view(read_dir(tmp_path), [service_doc("bgp-v6-1", "lab-bgp6", "v6")])
    assert bgp_announcers(view6, "2001:db8:100::1") == (
        "2001:db8:100::1/128", {"node-1", "node-2", "node-3"},
    )  # fmt: skip


def test_pools_outside_the_documentation_ranges_are_refused(tmp_path: Path) -> None:
    copy_manifests(REPO_EXAMPLES, tmp_path, drop_nodes=False)
    config = tmp_path / "000-config.yaml"
    config.write_text(config.read_text().replace("203.0.113.64/27", "10.1.0.0/27"))
    with pytest.raises(LabConfigError, match=r"lab-bgp: 10\.1\.0\.0-10\.1\.0\.31 is outside"):
        layout(read_dir(tmp_path), nodes=None)


# --- command line


def test_families_option_refuses_an_unknown_family() -> None:
    result = CliRunner().invoke(lab, ["--families", "v4,v5"])
    assert result.exit_code == 2
    assert "unknown address family(ies) v5; use v4, v6" in result.output
