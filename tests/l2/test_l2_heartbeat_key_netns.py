"""Authenticated heartbeats through the product path: three ``teapot-lb run`` nodes on a
LAN (:mod:`teapot_lb.lab.lan`), two sharing a key file and one with another key.

The odd node stands for a misconfigured node or a host forging heartbeats; it carries the
exclude label, so it never announces and the data path shows only the keyed pair."""

from __future__ import annotations

import functools
import urllib.request
from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path

import pytest

from teapot_lb.announce.election import EXCLUDE_LABEL, ranking
from teapot_lb.lab.lan import LanLab, service_doc
from teapot_lb.lab.manifests import config_doc
from teapot_lb.lab.netns import in_netns
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

V4 = "192.0.2.100"
CONFIG = [
    config_doc("AddressPool", "lan", {"addresses": ["192.0.2.100-192.0.2.109"]}),
    config_doc("L2Advertisement", "lan", {"addressPools": ["lan"]}),
]
METRICS = "127.0.0.1:7472"
KEYED, ODD = ("node-a", "node-b"), "node-c"


def metric(lab: LanLab, node: str, name: str) -> float:
    """One sample of the node's /metrics (served on :data:`METRICS` in its namespace)."""

    def scrape() -> str:
        with urllib.request.urlopen(f"http://{METRICS}/metrics", timeout=5) as reply:
            return str(reply.read().decode())

    text = in_netns(lab.nodes[node].host.ns, scrape)
    (value,) = [line.split()[1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(value)


def live(lab: LanLab, node: str) -> set[str]:
    l2 = lab.status(node).get("l2", {})
    return set(l2.get("live_speakers", [])) if l2.get("ready") else set()


@pytest.fixture
def lab(topology: Topology, tmp_path: Path) -> Iterator[LanLab]:
    lab = LanLab(topology, tmp_path)
    shared, other = tmp_path / "secretkey", tmp_path / "other-secretkey"
    shared.write_bytes(b"the-key-the-cluster-shares-0123456789\n")
    other.write_bytes(b"a-key-nobody-else-knows-9876543210\n")
    for name, node in lab.nodes.items():
        key = other if name == ODD else shared
        node.args = ("--heartbeat-key-file", str(key), "--metrics-address", METRICS)
    lab.nodes[ODD].labels = {EXCLUDE_LABEL: "true"}
    lab.write(CONFIG, [service_doc("web4", V4)])
    lab.start_all()
    try:
        for name in lab.nodes:
            want = {ODD} if name == ODD else set(KEYED)
            wait_for(functools.partial(lambda n, w: live(lab, n) == w, name, want), timeout=60,
                     what=f"{name} hearing exactly {sorted(want)}", detail=lab.logs)  # fmt: skip
        yield lab
    finally:
        print(lab.logs())
        lab.close()


def test_a_node_with_another_key_never_joins_and_its_heartbeats_are_counted(lab: LanLab) -> None:
    odd_address = lab.nodes[ODD].internal
    for name in KEYED:
        counted = wait_for(
            lambda n=name: metric(lab, n, "teapot_lb_speaker_l2_heartbeats_unauthenticated_total"),
            timeout=10,
            what=f"{name} counting the odd node's heartbeats",
        )
        assert counted > 0
        warnings = lab.events(name, "heartbeat_rejected")
        assert {w["source"] for w in warnings} == {odd_address}  # never a keyed peer
        assert warnings[0]["level"] == "warning"
        assert len(warnings) <= 2, "rate-limited: at most one per source every 10 s"
        received = metric(lab, name, "teapot_lb_speaker_l2_heartbeats_received_total")
        assert received > 0  # from its keyed peer
    assert live(lab, ODD) == {ODD}  # nor does it hear the pair


def test_the_keyed_nodes_fail_over_as_usual(lab: LanLab) -> None:
    owner, standby = [n for n in ranking(ip_address(V4), lab.nodes) if n in KEYED]
    wait_for(lambda: lab.who(V4) == owner, timeout=20, what=f"{V4} on {owner}", detail=lab.logs)
    lab.kill(owner)
    lab.link(owner, up=False)
    wait_for(lambda: lab.who(V4) == standby, timeout=10, what=f"{V4} moved to {standby}",
             detail=lab.logs)  # fmt: skip
    assert live(lab, standby) == {standby}
