"""VIP mode end to end: three nodes and a client on a bridge, real keepalived in each node.

teapot-lb's agent (renderer + supervisor) drives keepalived in every node namespace;
each node runs a TCP server answering with its name; the client connects to the VIPs.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary
from teapot_lb.netlab import Topology
from teapot_lb.vrrp.agent import group_from_json
from teapot_lb.vrrp.lab import VipLab, wait_for
from teapot_lb.vrrp.render import InstanceKey, allocate_vrids, group_instances, node_priorities

pytestmark = [pytest.mark.root, pytest.mark.daemon]

NODES = ["n1", "n2", "n3"]


def svc(name: str, vip: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "interface": "eth0", "vips": [vip], "candidate_nodes": NODES, **kw}


WEB = svc("default/web", "192.0.2.200")
WEB6 = svc("default/web6", "2001:db8::200")
PAIR = svc("default/pair", "192.0.2.201", candidate_nodes=["n1", "n2"])


@pytest.fixture
def lab(topology: Topology, tmp_path: Path) -> Iterator[VipLab]:
    require_binary("keepalived")
    yield VipLab(topology, tmp_path).build()


def test_client_reaches_each_vip_on_its_single_master(lab: VipLab) -> None:
    lab.start([WEB, WEB6, PAIR])
    for group, vip in [("default/web", "192.0.2.200"), ("default/web6", "2001:db8::200")]:
        master = lab.settled_master(group)

        def held_by_master_only(vip: str = vip, master: str = master) -> bool:
            return lab.holders(vip) == [master]

        wait_for(held_by_master_only, timeout_s=5, what=f"{vip} on {master} only")
        assert lab.connect(vip) == master
    pair_master = lab.settled_master("default/pair")
    assert pair_master in ("n1", "n2")
    assert lab.connect("192.0.2.201") == pair_master
    # Stays that way: sample for a while, never two masters for an instance.
    for _ in range(20):
        for group in ("default/web", "default/web6", "default/pair"):
            instance = lab.instance_of(group)
            assert instance is not None
            assert len(lab.masters(instance)) <= 1
        time.sleep(0.05)


def test_killing_the_masters_keepalived_moves_the_vip_and_it_is_restarted(lab: VipLab) -> None:
    lab.start([WEB])
    instance = lab.instance_of("default/web")
    assert instance is not None
    old = lab.settled_master("default/web")
    lab.start_prober(["192.0.2.200"])
    wait_for(lambda: lab.attempts(), timeout_s=10, what="the prober to run")
    t0 = lab.kill_keepalived(old)
    # Another node takes the IP and the client reaches it there.
    wait_for(
        lambda: lab.first_answer_after(t0, "192.0.2.200", not_from=old),
        timeout_s=10,
        what="a connect answered by another node",
    )
    # The supervisor removed what the killed keepalived left and restarted it.
    wait_for(
        lambda: lab.counters(old).get("starts") == 2 and lab.keepalived_pid(old),
        timeout_s=15,
        what="keepalived restarted",
    )
    assert lab.counters(old)["unexpected_exits"] == 1
    assert lab.counters(old)["stale_vips_removed"] >= 1
    # And the cluster settles on exactly one holder again.
    master = lab.settled_master("default/web")
    wait_for(lambda: lab.holders("192.0.2.200") == [master], timeout_s=5, what="one holder")
    assert lab.connect("192.0.2.200") == master


def test_link_down_on_the_master_moves_the_vip(lab: VipLab) -> None:
    lab.start([WEB, WEB6])
    old = lab.settled_master("default/web")
    old6 = lab.settled_master("default/web6")
    lab.start_prober(["192.0.2.200", "2001:db8::200"])
    wait_for(lambda: lab.attempts(), timeout_s=10, what="the prober to run")
    t0 = time.monotonic()
    lab.set_link(old, up=False)
    lab.set_link(old6, up=False)
    wait_for(
        lambda: lab.first_answer_after(t0, "192.0.2.200", not_from=old),
        timeout_s=10,
        what="IPv4 VIP answered by another node",
    )
    wait_for(
        lambda: lab.first_answer_after(t0, "2001:db8::200", not_from=old6),
        timeout_s=10,
        what="IPv6 VIP answered by another node",
    )
    down = {old, old6}
    new = [n for n in NODES if n not in down]
    instance = lab.instance_of("default/web")
    assert instance is not None
    assert any(n in lab.masters(instance) for n in new)
    for node in down:
        lab.set_link(node, up=True)
    master = lab.settled_master("default/web")
    assert lab.connect("192.0.2.200") == master


def test_adding_and_removing_services_reloads_without_interrupting_other_vips(
    lab: VipLab,
) -> None:
    lab.start([WEB, WEB6, PAIR])
    masters = {g: lab.settled_master(g) for g in ("default/web", "default/web6", "default/pair")}
    pids = {n: lab.keepalived_pid(n) for n in NODES}
    reloads = {n: lab.counters(n)["reloads"] for n in NODES}
    lab.start_prober(["192.0.2.200", "2001:db8::200", "192.0.2.201"])
    wait_for(lambda: lab.attempts(), timeout_s=10, what="the prober to run")
    t0 = time.monotonic()
    extra = [
        svc("default/joins-web", "192.0.2.210"),  # same instance as web: its VIP list changes
        svc("default/own", "192.0.2.211", candidate_nodes=["n2", "n3"]),  # a new instance
        svc("default/extra6", "2001:db8::211"),
    ]
    for _ in range(5):
        lab.write_config([WEB, WEB6, PAIR, *extra])
        wait_for(lambda: lab.holders("192.0.2.210"), timeout_s=10, what="added VIP")
        time.sleep(0.1)  # pace the changes so the probe sees every configuration
        lab.write_config([WEB, WEB6, PAIR])
        wait_for(lambda: not lab.holders("192.0.2.210"), timeout_s=10, what="removed VIP")
        time.sleep(0.1)
    t1 = time.monotonic()
    # Every attempt started before t1 has finished once the prober's 2 s timeout passed.
    time.sleep(2.2)
    attempts = [a for a in lab.attempts(since=t0) if a.start < t1]
    assert len(attempts) > 100
    failed = [a for a in attempts if not a.ok]
    assert failed == [], f"{len(failed)} failed connects, first: {failed[:3]}"
    # Unchanged VIPs never moved, and keepalived was reloaded, not restarted.
    vip_master = {"192.0.2.200:7000": masters["default/web"]}
    vip_master["[2001:db8::200]:7000"] = masters["default/web6"]
    vip_master["192.0.2.201:7000"] = masters["default/pair"]
    assert {(a.target, a.node) for a in attempts} == set(vip_master.items())
    for n in NODES:
        assert lab.keepalived_pid(n) == pids[n]
        assert lab.counters(n)["reloads"] >= reloads[n] + 10


def test_after_a_dual_master_the_client_follows_the_winner(lab: VipLab) -> None:
    """Two masters, each announcing the VIP; when they see each other again the
    loser steps down and the winner re-announces, so the client does not stay on
    the loser's MAC (keepalived's defaults would leave it there)."""
    lab.start([PAIR])
    instance = lab.instance_of("default/pair")
    assert instance is not None
    winner = lab.settled_master("default/pair")
    loser = "n2" if winner == "n1" else "n1"
    lab.start_prober(["192.0.2.201"])
    wait_for(
        lambda: lab.client_neighbour_mac("192.0.2.201") == lab.nodes[winner].mac("eth0"),
        timeout_s=5,
        what="client on the master's MAC",
    )
    lab.isolate([winner, loser], isolated=True)
    wait_for(
        lambda: sorted(lab.masters(instance)) == sorted([winner, loser]),
        timeout_s=10,
        what="two masters while the nodes cannot hear each other",
    )
    wait_for(
        lambda: lab.client_neighbour_mac("192.0.2.201") == lab.nodes[loser].mac("eth0"),
        timeout_s=5,
        what="client moved to the second master's MAC by its GARP",
    )
    time.sleep(1.5)  # past the second master's delayed GARP burst
    rx_lower = lab.counters(winner).get("dual_master_resolutions", 0)
    lab.isolate([winner, loser], isolated=False)
    wait_for(lambda: lab.masters(instance) == [winner], timeout_s=5, what="loser steps down")
    wait_for(
        lambda: lab.client_neighbour_mac("192.0.2.201") == lab.nodes[winner].mac("eth0"),
        timeout_s=3,
        what="client back on the winner's MAC (re-announced, not left stale)",
    )
    assert lab.counters(winner)["dual_master_resolutions"] > rx_lower
    assert lab.holders("192.0.2.201") == [winner]
    t_back = time.monotonic()
    wait_for(
        lambda: lab.answered_by_since(t_back, "192.0.2.201", winner),
        timeout_s=5,
        what="connects answered by the winner",
    )


def _pair_whose_master_outranks_the_third_node() -> tuple[list[str], str]:
    """Two candidates and a joiner such that the joiner will not rank first."""
    for pair in itertools.combinations(NODES, 2):
        (joiner,) = set(NODES) - set(pair)
        g = group_from_json(svc("default/pair", "192.0.2.201", candidate_nodes=list(pair)))
        vrid = allocate_vrids(group_instances([g])).vrids[InstanceKey.of(g).token()]
        prios = node_priorities(InstanceKey.of(replace(g, candidate_nodes=tuple(NODES))), vrid)
        if max(prios, key=lambda n: prios[n]) != joiner:
            return list(pair), joiner
    raise AssertionError("every joiner ranks first")  # impossible for 3 pairs


def test_a_node_joining_keeps_the_instance_and_its_master(lab: VipLab) -> None:
    pair, joiner = _pair_whose_master_outranks_the_third_node()
    lab.start([svc("default/pair", "192.0.2.201", candidate_nodes=pair)])
    before = lab.instance_of("default/pair")
    old_master = lab.settled_master("default/pair")
    pids = {n: lab.keepalived_pid(n) for n in pair}
    lab.start_prober(["192.0.2.201"])
    wait_for(lambda: lab.attempts(), timeout_s=10, what="the prober to run")
    t0 = time.monotonic()
    lab.write_config([svc("default/pair", "192.0.2.201")])  # all three nodes
    assert lab.instance_of("default/pair", joiner) == before  # same VRID, same name
    assert lab.settled_master("default/pair", all_healthy=True) == old_master
    time.sleep(1.0)  # observe the new configuration for a while
    t1 = time.monotonic()
    time.sleep(2.2)  # every attempt started before t1 has finished (prober timeout 2 s)
    window = [a for a in lab.attempts(since=t0) if a.start < t1]
    assert len(window) > 20
    assert all(a.ok and a.node == old_master for a in window)
    assert {n: lab.keepalived_pid(n) for n in pair} == pids  # reloaded, not restarted


def test_local_policy_endpoint_loss_moves_mastership_without_reload(lab: VipLab) -> None:
    local = svc("default/local", "192.0.2.220", local_traffic_policy=True)
    lab.start([WEB, local], local_endpoints={"default/local": NODES})
    old = lab.settled_master("default/local")
    before = {n: (lab.keepalived_pid(n), lab.counters(n)["reloads"]) for n in NODES}
    remaining = [n for n in NODES if n != old]
    lab.write_config([WEB, local], local_endpoints={"default/local": remaining})
    new = lab.settled_master("default/local")
    assert new in remaining
    wait_for(lambda: lab.holders("192.0.2.220") == [new], timeout_s=5, what="VIP moved")
    assert lab.connect("192.0.2.220") == new
    instance = lab.instance_of("default/local", old)
    assert instance is not None
    assert (lab.status(old) or {})["instances"][instance]["state"] == "FAULT"
    after = {n: (lab.keepalived_pid(n), lab.counters(n)["reloads"]) for n in NODES}
    assert after == before, "endpoint changes must not reload or restart keepalived"


def test_unicast_instance_elects_one_master_and_fails_over(lab: VipLab) -> None:
    lab.start([svc("default/uni", "192.0.2.250", unicast=True)])
    old = lab.settled_master("default/uni", all_healthy=True)
    assert lab.connect("192.0.2.250") == old
    instance = lab.instance_of("default/uni")
    assert instance is not None
    lab.set_link(old, up=False)
    new = wait_for(
        lambda: next((m for m in lab.masters(instance) if m != old), None),
        timeout_s=10,
        what="another node MASTER",
    )
    assert lab.connect("192.0.2.250") == new


def test_a_missing_interface_is_reported_and_other_instances_still_run(lab: VipLab) -> None:
    broken = svc("default/elsewhere", "192.0.2.230", interface="eth9")
    lab.start([WEB, broken])
    master = lab.settled_master("default/web")
    assert lab.connect("192.0.2.200") == master
    for n in NODES:
        errors = (lab.status(n) or {})["errors"]
        assert any("no interface 'eth9'" in e and "default/elsewhere" in e for e in errors)
    assert lab.holders("192.0.2.230") == []


def test_colliding_explicit_vrids_are_reported_by_the_agent(lab: VipLab) -> None:
    a = svc("default/a", "192.0.2.240", vrid=77)
    b = svc("default/b", "192.0.2.241", vrid=77, candidate_nodes=["n1", "n2"])
    lab.start([a, b])
    master = lab.settled_master("default/a")
    assert lab.connect("192.0.2.240") == master
    errors = (lab.status("n1") or {})["errors"]
    assert any("virtual router ID 77" in e and "default/b" in e for e in errors)
    assert lab.holders("192.0.2.241") == []
