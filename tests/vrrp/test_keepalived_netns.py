"""VIP mode end to end: three nodes and a client on a bridge, real keepalived in each node.

Every node runs ``teapot-lb run --modes vip`` (the speaker's VIP backend, the product
path: plan → renderer → supervisor → keepalived) on one manifest directory; each node
runs the lab's HTTP workload; the client sends requests to the VIPs.
"""

from __future__ import annotations

import ipaddress
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary
from teapot_lb.lab.client import Probe, target_of
from teapot_lb.lab.lan import LanLab, node_names, service_doc
from teapot_lb.lab.manifests import SERVICE_PORT, config_doc, endpoints_doc
from teapot_lb.lab.measure import first_success
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.vrrp.group import VipGroup
from teapot_lb.vrrp.instances import InstanceKey, node_priorities
from teapot_lb.vrrp.vrid_book import Need, VridBook, VridOwner

pytestmark = [pytest.mark.root, pytest.mark.daemon]

NODES = node_names(3)
WEB, WEB6, JOINS, EXTRA6, LOCAL = (
    "192.0.2.200", "2001:db8::200", "192.0.2.210", "2001:db8::211", "192.0.2.220",
)  # fmt: skip
PAIR, OWN, UNI, ELSEWHERE = "192.0.2.230", "192.0.2.235", "192.0.2.240", "192.0.2.245"


def hostname_in(*nodes: str) -> dict[str, Any]:
    expr = {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}
    return {"matchExpressions": [expr]}


VRIDS = {"all": (1, 50), "pair": (51, 100), "own": (101, 150), "uni": (151, 200),
         "elsewhere": (201, 250)}  # fmt: skip


def advertisement(name: str, pool: list[str], **spec: Any) -> list[dict[str, Any]]:
    """A pool and the VIPAdvertisement of it (eth0, advert 0.1 s unless given; VRIDs from a
    range of its own, as validation asks of advertisements sharing nodes and a link)."""
    first, last = VRIDS[name]
    body = {
        "addressPools": [name],
        "interface": "eth0",
        "advertisementInterval": "0.1s",
        "vridRange": {"start": first, "end": last},
        **spec,
    }
    return [
        config_doc("AddressPool", name, {"addresses": pool}),
        config_doc("VIPAdvertisement", name, body),
    ]


def config(pair_nodes: tuple[str, ...] = ("node-a", "node-b")) -> list[dict[str, Any]]:
    pair = {"nodeSelectors": [hostname_in(*pair_nodes)]} if pair_nodes else {}
    return [
        *advertisement("all", ["192.0.2.200-192.0.2.229", "2001:db8::200-2001:db8::22f"]),
        *advertisement("pair", ["192.0.2.230-192.0.2.234"], **pair),
        *advertisement("own", ["192.0.2.235-192.0.2.239"],
                       nodeSelectors=[hostname_in("node-b", "node-c")]),
        *advertisement("uni", ["192.0.2.240-192.0.2.244"], unicastPeers=True),
        *advertisement("elsewhere", ["192.0.2.245-192.0.2.249"], interface="eth9"),
    ]  # fmt: skip


def services(*ips: str) -> list[dict[str, Any]]:
    return [service_doc(f"svc-{ipaddress.ip_address(ip).packed.hex()}", ip) for ip in ips]


@pytest.fixture
def lab(topology: Topology, tmp_path: Path) -> Iterator[LanLab]:
    require_binary("keepalived")
    lab = LanLab(topology, tmp_path, modes=("vip",))
    try:
        yield lab
    finally:
        print(lab.logs())  # shown by pytest when a test fails
        lab.close()


def start(lab: LanLab, docs: list[dict[str, Any]], **kw: Any) -> None:
    lab.write(config(**kw), docs)
    lab.start_all()


def wait_holders(lab: LanLab, ip: str, nodes: list[str], timeout: float = 10) -> None:
    wait_for(lambda: lab.holders(ip) == nodes, timeout=timeout, what=f"{ip} on {nodes} only")


def answered_after(probe: Probe, t0: float, ip: str, *, not_from: str) -> float | None:
    target = target_of(ip, SERVICE_PORT)
    return first_success(
        probe.snapshot(), t0, accept=lambda a: a.target == target and a.node != not_from
    )


def test_client_reaches_each_vip_on_its_single_master(lab: LanLab) -> None:
    start(lab, services(WEB, WEB6, PAIR))
    for ip in (WEB, WEB6):
        master = lab.settled_master(ip)
        wait_holders(lab, ip, [master])
        assert lab.who(ip) == master
    pair_master = lab.settled_master(PAIR)
    assert pair_master in ("node-a", "node-b")
    assert lab.who(PAIR) == pair_master
    # Stays that way: sample for a while, never two masters for an instance.
    for _ in range(20):
        for ip in (WEB, WEB6, PAIR):
            instance = lab.vip_instance(ip)
            assert instance is not None
            assert len(lab.vip_masters(instance)) <= 1
        time.sleep(0.05)


def test_killing_the_masters_keepalived_moves_the_vip_and_it_is_restarted(lab: LanLab) -> None:
    start(lab, services(WEB))
    old = lab.settled_master(WEB)
    probe = lab.http.probe([(WEB, SERVICE_PORT)], 0.01)
    try:
        wait_for(lambda: probe.snapshot(), timeout=10, what="the probe to run")
        t0 = lab.kill_keepalived(old)
        # Another node takes the IP and the client reaches it there.
        wait_for(lambda: answered_after(probe, t0, WEB, not_from=old), timeout=10,
                 what="a request answered by another node")  # fmt: skip
    finally:
        probe.stop()
    # The supervisor removed what the killed keepalived left and restarted it.
    wait_for(
        lambda: lab.vip_counters(old).get("starts") == 2 and lab.keepalived_pid(old),
        timeout=15,
        what="keepalived restarted",
    )
    assert lab.vip_counters(old)["unexpected_exits"] == 1
    assert lab.vip_counters(old)["stale_vips_removed"] >= 1
    # And the cluster settles on exactly one holder again.
    master = lab.settled_master(WEB)
    wait_holders(lab, WEB, [master])
    assert lab.who(WEB) == master


def test_link_down_on_the_master_moves_the_vip(lab: LanLab) -> None:
    start(lab, services(WEB, WEB6))
    old, old6 = lab.settled_master(WEB), lab.settled_master(WEB6)
    probe = lab.http.probe([(WEB, SERVICE_PORT), (WEB6, SERVICE_PORT)], 0.01)
    try:
        wait_for(lambda: probe.snapshot(), timeout=10, what="the probe to run")
        t0 = time.monotonic()
        lab.link(old, up=False)
        lab.link(old6, up=False)
        wait_for(lambda: answered_after(probe, t0, WEB, not_from=old), timeout=10,
                 what="IPv4 VIP answered by another node")  # fmt: skip
        wait_for(lambda: answered_after(probe, t0, WEB6, not_from=old6), timeout=10,
                 what="IPv6 VIP answered by another node")  # fmt: skip
    finally:
        probe.stop()
    down = {old, old6}
    instance = lab.vip_instance(WEB)
    assert instance is not None
    assert any(n in lab.vip_masters(instance) for n in NODES if n not in down)
    for node in down:
        lab.link(node, up=True)
    master = lab.settled_master(WEB)
    wait_for(lambda: lab.who(WEB) == master, timeout=10, what=f"{WEB} served by {master}")


def test_adding_and_removing_services_reloads_without_interrupting_other_vips(
    lab: LanLab,
) -> None:
    base = services(WEB, WEB6, PAIR)
    start(lab, base)
    masters = {ip: lab.settled_master(ip) for ip in (WEB, WEB6, PAIR)}
    runs = _keepalived_runs(lab)  # (a node may not have reported its keepalived yet)
    probe = lab.http.probe([(ip, SERVICE_PORT) for ip in (WEB, WEB6, PAIR)], 0.01)
    try:
        wait_for(lambda: probe.snapshot(), timeout=10, what="the probe to run")
        t0 = time.monotonic()
        # JOINS joins web's instance (its VIP list changes), OWN gets an instance of its own.
        extra = services(JOINS, OWN, EXTRA6)
        for _ in range(5):
            lab.write(services=base + extra)
            wait_for(lambda: lab.vip_applied(JOINS, True), timeout=10, what="added VIP")
            time.sleep(0.1)  # pace the changes so the probe sees every configuration
            lab.write(services=base)
            wait_for(lambda: lab.vip_applied(JOINS, False), timeout=10, what="removed VIP")
            time.sleep(0.1)
        t1 = time.monotonic()
    finally:
        attempts = [a for a in probe.stop() if t0 <= a.start < t1]
    assert len(attempts) > 100
    failed = [a for a in attempts if not a.ok]
    assert failed == [], f"{len(failed)} failed requests, first: {failed[:3]}"
    # Unchanged VIPs never moved, and keepalived was reloaded, not restarted.
    expected = {(target_of(ip, SERVICE_PORT), node) for ip, node in masters.items()}
    assert {(a.target, a.node) for a in attempts} == expected
    after = _keepalived_runs(lab)
    for n in NODES:
        pid, reloads = runs[n]
        assert after[n][0] == pid
        assert after[n][1] >= reloads + 10


def test_after_a_dual_master_the_client_follows_the_winner(lab: LanLab) -> None:
    """Two masters, each announcing the VIP; when they see each other again the
    loser steps down and the winner re-announces, so the client does not stay on
    the loser's MAC (keepalived's defaults would leave it there)."""
    start(lab, services(PAIR))
    winner = lab.settled_master(PAIR)
    instance = lab.vip_instance(PAIR)
    assert instance is not None
    loser = "node-b" if winner == "node-a" else "node-a"
    # Settled before the nodes are cut apart: the loser a BACKUP for longer than an
    # advertisement interval (right after a start, the first keepalived up may be MASTER
    # while its status.json does not say so yet; cut apart then, it never hears the winner).
    since: list[float] = []

    def settled() -> bool:
        states = (lab.vip_masters(instance), lab.vip_instances(loser).get(instance, {}))
        if states[0] != [winner] or states[1].get("state") != "BACKUP":
            since.clear()
            return False
        since[:] = since or [time.monotonic()]
        return time.monotonic() - since[0] >= 1.5

    wait_for(settled, timeout=15, what=f"{loser} a BACKUP of {winner} for 1.5 s")
    probe = lab.http.probe([(PAIR, SERVICE_PORT)], 0.01)
    try:
        wait_for(lambda: lab.client_neighbor(PAIR) == lab.mac(winner), timeout=5,
                 what="client on the master's MAC")  # fmt: skip
        lab.isolate([winner, loser], isolated=True)
        wait_for(lambda: sorted(lab.vip_masters(instance)) == sorted([winner, loser]),
                 timeout=10, what="two masters while the nodes cannot hear each other")  # fmt: skip
        wait_for(lambda: lab.client_neighbor(PAIR) == lab.mac(loser), timeout=5,
                 what="client moved to the second master's MAC by its GARP")  # fmt: skip
        time.sleep(1.5)  # past the second master's delayed GARP burst
        rx_lower = lab.vip_counters(winner).get("dual_master_resolutions", 0)
        lab.isolate([winner, loser], isolated=False)
        wait_for(lambda: lab.vip_masters(instance) == [winner], timeout=5,
                 what="loser steps down")  # fmt: skip
        wait_for(lambda: lab.client_neighbor(PAIR) == lab.mac(winner), timeout=3,
                 what="client back on the winner's MAC (re-announced, not left stale)")  # fmt: skip
        assert lab.vip_counters(winner)["dual_master_resolutions"] > rx_lower
        assert lab.holders(PAIR) == [winner]
        t_back = time.monotonic()
        wait_for(lambda: any(a.node == winner for a in probe.snapshot() if a.start >= t_back),
                 timeout=5, what="requests answered by the winner")  # fmt: skip
    finally:
        probe.stop()


def _pair_whose_master_outranks_the_third_node() -> tuple[tuple[str, str], str]:
    """Two candidates and a joiner such that the joiner will not rank first."""
    # The VRID the controller core gives the advertisement's Cluster Services (its range
    # is its own, so no other advertisement competes for it).
    need = Need(VridOwner("pair"), VRIDS["pair"])
    vrid = VridBook().assign("default/svc", [need], {}).vrids["pair"]
    for pair in itertools.combinations(NODES, 2):
        (joiner,) = set(NODES) - set(pair)
        ip = (ipaddress.ip_address(PAIR),)
        everyone = VipGroup("pair", "eth0", ip, tuple(NODES), vrid_range=VRIDS["pair"], vrid=vrid)
        prios = node_priorities(InstanceKey.of(everyone), vrid)
        if max(prios, key=lambda n: prios[n]) != joiner:
            return (pair[0], pair[1]), joiner
    raise AssertionError("every joiner ranks first")  # impossible for 3 pairs


def test_a_node_joining_keeps_the_instance_and_its_master(lab: LanLab) -> None:
    pair, joiner = _pair_whose_master_outranks_the_third_node()
    start(lab, services(PAIR), pair_nodes=pair)
    old_master = lab.settled_master(PAIR)
    before = lab.vip_instance(PAIR)
    pids = {n: lab.keepalived_pid(n) for n in pair}
    probe = lab.http.probe([(PAIR, SERVICE_PORT)], 0.01)
    t0 = t1 = time.monotonic()
    try:
        wait_for(lambda: probe.snapshot(), timeout=10, what="the probe to run")
        t0 = time.monotonic()
        lab.write(config(pair_nodes=()))  # all three nodes
        wait_for(lambda: lab.vip_instance(PAIR, joiner), timeout=20, what=f"{joiner} joining")
        assert lab.vip_instance(PAIR, joiner) == before  # same VRID, same name
        assert lab.settled_master(PAIR, all_healthy=True) == old_master
        time.sleep(1.0)  # observe the new configuration for a while
        t1 = time.monotonic()
    finally:
        window = [a for a in probe.stop() if t0 <= a.start < t1]
    assert len(window) > 20
    assert all(a.ok and a.node == old_master for a in window)
    assert {n: lab.keepalived_pid(n) for n in pair} == pids  # reloaded, not restarted


def test_a_node_joining_runs_the_same_instance_as_the_others(lab: LanLab) -> None:
    """What the speaker does guarantee when a node joins a VIP's candidates: every node
    renders the same instance (name and VRID), which elects exactly one master."""
    pair, joiner = _pair_whose_master_outranks_the_third_node()
    start(lab, services(PAIR), pair_nodes=pair)
    lab.settled_master(PAIR)
    lab.write(config(pair_nodes=()))  # all three nodes
    wait_for(lambda: lab.vip_instance(PAIR, joiner), timeout=20, what=f"{joiner} joining")
    wait_for(
        lambda: len({lab.vip_instance(PAIR, n) for n in NODES}) == 1,
        timeout=20,
        what="every node running the same instance",
    )
    master = lab.settled_master(PAIR, all_healthy=True)
    wait_holders(lab, PAIR, [master])
    wait_for(lambda: lab.who(PAIR) == master, timeout=10, what=f"{PAIR} served by {master}")


def _keepalived_runs(lab: LanLab) -> dict[str, tuple[int, int]]:
    """Each node's keepalived pid and reload count, once every node reports them (a node
    just started has written no status.json yet, or one without its keepalived)."""

    def read() -> dict[str, tuple[int, int]] | None:
        runs = {n: (lab.keepalived_pid(n), lab.vip_counters(n).get("reloads")) for n in NODES}
        if any(pid is None or reloads is None for pid, reloads in runs.values()):
            return None
        return {n: (int(pid), int(reloads)) for n, (pid, reloads) in runs.items() if pid}

    return wait_for(read, timeout=10, what="every node reporting its keepalived")


def test_local_policy_endpoint_loss_moves_mastership_without_reload(lab: LanLab) -> None:
    local = service_doc("local", LOCAL, externalTrafficPolicy="Local")
    start(lab, [*services(WEB), local, endpoints_doc("local", *NODES)])
    old = lab.settled_master(LOCAL)
    before = _keepalived_runs(lab)
    remaining = [n for n in NODES if n != old]
    lab.write(services=[*services(WEB), local, endpoints_doc("local", *remaining)])
    new = wait_for(lambda: next((m for m in [lab.settled_master(LOCAL)] if m != old), None),
                   timeout=20, what="another master")  # fmt: skip
    assert new in remaining
    wait_holders(lab, LOCAL, [new])
    assert lab.who(LOCAL) == new
    instance = lab.vip_instance(LOCAL, old)
    assert instance is not None
    assert lab.vip_instances(old)[instance]["state"] == "FAULT"
    after = _keepalived_runs(lab)
    assert after == before, "endpoint changes must not reload or restart keepalived"


def test_unicast_instance_elects_one_master_and_fails_over(lab: LanLab) -> None:
    start(lab, services(UNI))
    old = lab.settled_master(UNI, all_healthy=True)
    assert lab.who(UNI) == old
    instance = lab.vip_instance(UNI)
    assert instance is not None
    lab.link(old, up=False)
    new = wait_for(
        lambda: next((m for m in lab.vip_masters(instance) if m != old), None),
        timeout=10,
        what="another node MASTER",
    )
    wait_for(lambda: lab.who(UNI) == new, timeout=10, what=f"{UNI} served by {new}")


def test_a_missing_interface_is_reported_and_other_instances_still_run(lab: LanLab) -> None:
    start(lab, services(WEB, ELSEWHERE))
    master = lab.settled_master(WEB)
    assert lab.who(WEB) == master
    for n in NODES:
        # A node's status.json has no "vip" part until its first step has built the
        # backend (under load a node may still be starting): wait for it too.
        wait_for(
            lambda n=n: any("eth9" in e for e in lab.status(n).get("vip", {}).get("errors", ())),
            timeout=10,
            what=f"{n} reporting the missing interface",
        )
        services_ = lab.status(n)["services"]
        (failures,) = [s["failures"] for s in services_.values() if ELSEWHERE in s["ips"]]
        assert "eth9" in failures[ELSEWHERE]  # the Service's status says why
    assert lab.holders(ELSEWHERE) == []
