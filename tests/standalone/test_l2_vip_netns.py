"""L2 and VIP modes end to end: three `teapot-lb run` nodes on a LAN, a router, a client.

The router is a plain Linux router (no BGP): it reaches the Service IPs on its LAN by
ARP, so only the L2 responder (L2 mode) or keepalived (VIP mode) makes them reachable.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.standalone_lab import NODES, Lab, endpoints, node, ours, service, write
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

L2_IP = "192.0.2.200"
L2_LOCAL = "192.0.2.201"
VIP_IP = "192.0.2.230"
VIP_LOCAL = "192.0.2.231"
L2_V6 = "2001:db8::200"


def services_docs(l2local: str = "n1", viplocal: str = "n1") -> list[dict[str, object]]:
    return [
        service("l2web", L2_IP),
        service("l2local", L2_LOCAL, externalTrafficPolicy="Local"),
        endpoints("l2local", l2local),
        service("vipweb", VIP_IP),
        service("viplocal", VIP_LOCAL, externalTrafficPolicy="Local"),
        endpoints("viplocal", viplocal),
        service("l2web6", L2_V6, ipFamilies=["IPv6"]),
    ]


def explain_rows(lab: Lab, svc: str, mode: str) -> dict[str, dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-m", "teapot_lb.cli.explain", svc, "--manifests", str(lab.manifests),
         "-o", "json"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    return {str(r["node"]): r for r in json.loads(out.stdout)["decisions"] if r["mode"] == mode}


def owners(lab: Lab, ip: str) -> list[str]:
    """Nodes whose status says they answer ARP for ip."""
    return sorted(n for n in lab.procs if ip in lab.status(n).get("l2", {}).get("owned", []))


def vip_masters(lab: Lab, ip: str) -> list[str]:
    return sorted(n for n in lab.procs if ip in lab.status(n).get("vip", {}).get("masters", []))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_root()
    require_binary("keepalived")
    workdir = tmp_path_factory.mktemp("l2-lab")
    with Topology("sl2") as topo:
        lab = Lab(topo, workdir)
        for ip in (L2_IP, L2_LOCAL, VIP_IP, VIP_LOCAL, L2_V6):
            lab.bind_service_ip(ip)
        write(
            lab.manifests / "config.yaml",
            [
                ours(
                    "AddressPool",
                    "lan",
                    {"addresses": ["192.0.2.200-192.0.2.209", "2001:db8::200-2001:db8::20f"]},
                ),
                ours("AddressPool", "vip", {"addresses": ["192.0.2.230-192.0.2.239"]}),
                ours("L2Advertisement", "lan", {"addressPools": ["lan"]}),
                ours(
                    "VIPAdvertisement",
                    "vip",
                    {"addressPools": ["vip"], "interface": "eth0", "advertisementInterval": "0.1s"},
                ),
            ],
        )
        write(lab.manifests / "nodes.yaml", [node(n) for n in NODES])
        write(lab.manifests / "services.yaml", services_docs())
        lab.start_all(modes="l2,vip")
        try:
            yield lab
        finally:
            for proc in lab.procs.values():
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)


def test_l2_service_is_answered_by_exactly_the_elected_node(lab: Lab) -> None:
    rows = wait_for(
        lambda: (r := explain_rows(lab, "default/l2web", "l2")) and r, timeout=10, what="explain"
    )
    elected = [n for n, r in rows.items() if r["announces"]]
    assert len(elected) == 1
    owner = elected[0]
    for n, r in rows.items():
        if n != owner:
            assert f"owner is {owner}" in str(r["reason"])
    wait_for(lambda: owners(lab, L2_IP) == [owner], timeout=20, what=f"{owner} owns {L2_IP}")
    assert wait_for(lambda: lab.who(L2_IP), timeout=10, what="client reaches the L2 IP") == owner
    router_mac = lab.router.ip("-j", "neigh", "show", L2_IP)
    assert lab.nodes[owner].mac("eth0") in router_mac


def judged(lab: Lab, name: str, verdict: str) -> int:
    return int(lab.status(name).get("l2", {}).get("claims_judged", {}).get(verdict, 0))


def test_l2_ipv6_service_is_answered_by_ndp_from_the_elected_node(lab: Lab) -> None:
    rows = explain_rows(lab, "default/l2web6", "l2")
    (owner,) = [n for n, r in rows.items() if r["announces"]]
    wait_for(lambda: owners(lab, L2_V6) == [owner], timeout=20, what=f"{owner} owns {L2_V6}")
    assert wait_for(lambda: lab.who(L2_V6), timeout=10, what="client reaches it") == owner
    assert lab.nodes[owner].mac("eth0") in lab.router.ip("-6", "-j", "neigh", "show", L2_V6)


def test_heartbeat_partition_the_owner_defends_and_the_standby_yields(lab: Lab) -> None:
    """Heartbeats from the owner are dropped (the data path works): the others think it
    dead and one takes the IP; the owner sees that claim and defends, the standby yields;
    the client stays on the owner."""
    owner = wait_for(lambda: owners(lab, L2_IP), timeout=20, what="an owner")[0]
    others = sorted(set(lab.procs) - {owner})
    host = lab.nodes[owner]
    # Blackhole routes to the other nodes: the owner's heartbeats are lost, while ARP
    # (not routed) and the client's traffic (via the router) still work.
    peers = [NODES[n] for n in others]
    for addr in peers:
        host.ip("route", "add", "blackhole", f"{addr}/32")
    try:
        standby = wait_for(
            lambda: next((n for n in others if judged(lab, n, "yield")), None),
            timeout=15,
            what="a standby yielding to the owner",
        )
        # Status files are written after each step: wait for them, do not race them.
        wait_for(lambda: judged(lab, owner, "defend"), timeout=5, what="the owner defending")
        wait_for(
            lambda: "yielded" in lab.status(standby).get("l2", {}).get("errors", {}).get(L2_IP, ""),
            timeout=5,
            what="the standby reporting it yielded",
        )
        assert owners(lab, L2_IP) == [owner]
        assert lab.who(L2_IP) == owner
        assert lab.nodes[owner].mac("eth0") in lab.router.ip("-j", "neigh", "show", L2_IP)
    finally:
        for addr in peers:
            host.ip("route", "del", "blackhole", f"{addr}/32", check=False)
    wait_for(
        lambda: all(owner in lab.status(n).get("l2", {}).get("live_speakers", ()) for n in others),
        timeout=10,
        what="the owner heard again",
    )
    assert lab.who(L2_IP) == owner


def test_l2_local_policy_owner_has_the_endpoint_and_moves_with_it(lab: Lab) -> None:
    wait_for(lambda: owners(lab, L2_LOCAL) == ["n1"], timeout=20, what="n1 owns the Local IP")
    assert wait_for(lambda: lab.who(L2_LOCAL), timeout=10, what="reach") == "n1"
    write(lab.manifests / "services.yaml", services_docs(l2local="n2"))
    wait_for(lambda: owners(lab, L2_LOCAL) == ["n2"], timeout=20, what="n2 takes the Local IP")
    wait_for(lambda: lab.who(L2_LOCAL) == "n2", timeout=10, what="client follows to n2")


def test_vip_service_has_one_master_and_is_reachable(lab: Lab) -> None:
    master = wait_for(
        lambda: (m := vip_masters(lab, VIP_IP)) and len(m) == 1 and m[0],
        timeout=30,
        what="one VRRP master for the VIP",
    )
    assert wait_for(lambda: lab.who(VIP_IP), timeout=10, what="client reaches the VIP") == master
    rows = explain_rows(lab, "default/vipweb", "vip")
    assert all(r["announces"] for r in rows.values()), rows


def test_vip_local_policy_master_follows_endpoints_without_reloading(lab: Lab) -> None:
    wait_for(lambda: vip_masters(lab, VIP_LOCAL) == ["n1"], timeout=30, what="n1 master")
    assert wait_for(lambda: lab.who(VIP_LOCAL), timeout=10, what="reach") == "n1"
    reloads = {n: lab.status(n)["vip"]["reloads"] for n in lab.procs}
    write(lab.manifests / "services.yaml", services_docs(l2local="n2", viplocal="n3"))
    wait_for(lambda: vip_masters(lab, VIP_LOCAL) == ["n3"], timeout=30, what="n3 master")
    wait_for(lambda: lab.who(VIP_LOCAL) == "n3", timeout=10, what="client follows to n3")
    assert {n: lab.status(n)["vip"]["reloads"] for n in lab.procs} == reloads
    rows = explain_rows(lab, "default/viplocal", "vip")
    assert rows["n3"]["announces"] is True
    assert "no local endpoint" in str(rows["n1"]["reason"])


def test_killing_the_l2_owner_moves_the_ip_to_a_live_node(lab: Lab) -> None:
    owner = wait_for(lambda: owners(lab, L2_IP), timeout=20, what="an owner")[0]
    lab.procs[owner].kill()
    lab.procs[owner].wait(timeout=10)
    others = sorted(set(lab.procs) - {owner})
    new = wait_for(
        lambda: (o := [n for n in owners(lab, L2_IP) if n in others]) and o[0],
        timeout=10,
        what="another node takes over",
    )
    wait_for(lambda: lab.who(L2_IP) == new, timeout=10, what=f"client served by {new}")
    lab.start(owner, modes="l2,vip")


def test_sigterm_releases_l2_and_stops_keepalived(lab: Lab) -> None:
    master = wait_for(
        lambda: (m := vip_masters(lab, VIP_IP)) and len(m) == 1 and m[0],
        timeout=30,
        what="one VRRP master",
    )
    pid = wait_for(
        lambda: lab.status(master).get("vip", {}).get("keepalived_pid"),
        timeout=10,
        what="keepalived pid in status",
    )
    assert lab.terminate(master) == 0
    status = lab.status(master)
    assert status["stopped"] is True
    assert status["l2"]["owned"] == []
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(int(pid), 0)
    others = sorted(set(lab.procs) - {master})
    wait_for(
        lambda: (m := vip_masters(lab, VIP_IP)) and m[0] in others,
        timeout=15,
        what="another VRRP master",
    )
    wait_for(lambda: lab.who(VIP_IP) in others, timeout=10, what="client served by another")
