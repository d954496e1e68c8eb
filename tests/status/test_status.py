"""`teapot-lb status` on a standalone directory and on a cluster (the fake API server)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from speaker.builders import FakeFactory, bgp_setup, lb_service, store_of
from speaker.test_kube_speaker import seed
from teapot_lb.bgp import State
from teapot_lb.cli import main
from teapot_lb.cli.status import CLEAR, cluster_status, watch
from teapot_lb.httpserve import MonitoringServer
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.speaker.report import annotation_key

LAB = Path(__file__).resolve().parents[2] / "examples" / "lab"


def node_status(
    announcing: dict[str, str],
    *,
    peers: dict[str, tuple[str, str | None]] | None = None,
    masters: list[str] | None = None,
) -> dict[str, Any]:
    """A node's status.json as `teapot-lb run` writes it (the parts status reads)."""
    doc: dict[str, Any] = {
        "stopped": False,
        "problems": [],
        "services": {k: {"announcing": v, "failures": {}} for k, v in announcing.items()},
        "vip": {"masters": masters or []},
    }
    if peers is not None:
        doc["bgp"] = {"peers": {n: {"state": s, "error": e} for n, (s, e) in peers.items()}}
    return doc


def standalone(tmp_path: Path) -> Path:
    """The lab's manifests, node-1 and node-2 reporting, node-3 silent."""
    manifests = tmp_path / "lab"
    shutil.copytree(LAB, manifests)
    reports = {
        "node-1": node_status(
            {"demo/web-bgp": "bgp 203.0.113.64 to router"},
            peers={"router": ("Established", None)},
            masters=["192.0.2.230"],
        ),
        "node-2": node_status(
            {"demo/web-l2": "l2 192.0.2.200"},
            peers={"router": ("Active", "connection refused")},
            masters=["192.0.2.230"],
        ),
    }
    for node, doc in reports.items():
        (manifests / ".state" / node).mkdir(parents=True)
        (manifests / ".state" / node / "status.json").write_text(json.dumps(doc))
    return manifests


def run(*args: str) -> str:
    result = CliRunner().invoke(main, ["status", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_standalone_status_shows_pools_sessions_holders_and_problems(tmp_path: Path) -> None:
    out = run("--manifests", str(standalone(tmp_path)))
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert "lab-bgp IPv4 1 32 3%" in lines
    assert "node-1 router Established" in lines
    assert "node-2 router Active connection refused" in lines
    assert "demo/web-bgp 203.0.113.64 bgp node-1 node-1, node-2, node-3" in lines
    assert "demo/web-l2 192.0.2.200 l2 node-2 node-2" in lines
    assert "demo/web-vip 192.0.2.230 vip node-1, node-2 node-1, node-2, node-3" in lines
    problems = lines[lines.index("PROBLEMS") + 1 :]
    assert problems == [
        "- node node-3: no report (no status.json)",
        "- BGP session node-2 -> router is Active: connection refused",
        "- no node holds 2001:db8:100::1 of demo/web-bgp6 (bgp)",
        "- no node holds 2001:db8::200 of demo/web-l26 (l2)",
        "- 192.0.2.230 of demo/web-vip is held by 2 nodes (vip): node-1, node-2",
        "- no node holds 2001:db8::230 of demo/web-vip6 (vip)",
    ]


def test_standalone_status_as_json(tmp_path: Path) -> None:
    doc = json.loads(run("--manifests", str(standalone(tmp_path)), "-o", "json"))
    pools = {(p["pool"], p["family"]): p for p in doc["pools"]}
    assert pools["lab-l2", "IPv4"] == {
        "pool": "lab-l2", "family": "IPv4", "assigned": 1, "size": 20, "problem": None, "used": 0.05
    }  # fmt: skip
    holders = {(h["service"], h["mode"]): h for h in doc["holders"]}
    assert holders["demo/web-bgp", "bgp"]["nodes"] == ["node-1"]
    assert holders["demo/web-vip", "vip"]["nodes"] == ["node-1", "node-2"]
    assert {
        "node": "node-2",
        "peer": "router",
        "state": "Active",
        "error": "connection refused",
    } in doc["sessions"]


def test_a_full_pool_and_a_pending_service_are_problems(tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "all.yaml").write_text(
        """\
apiVersion: lb.teapot.io/v1alpha1
kind: AddressPool
metadata: {name: tiny, namespace: lb-system}
spec: {addresses: [198.51.100.7/32]}
---
apiVersion: v1
kind: Service
metadata: {name: first, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: second, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80}]}
"""
    )
    doc = json.loads(run("--manifests", str(manifests), "-o", "json"))
    assert doc["pending"] == ["default/second"]
    assert "AddressPool tiny (IPv4) is full: 1/1" in doc["problems"]
    assert "Service default/second has no IP" in doc["problems"]


def test_watch_redraws_the_screen_until_stopped() -> None:
    screens = iter(["one", "two", "three"])
    shown: list[str] = []
    slept: list[float] = []
    watch(lambda: next(screens), 1.5, shown.append, sleep=slept.append, times=3)
    assert [s.split("\n")[0] for s in shown] == [CLEAR + "one", CLEAR + "two", CLEAR + "three"]
    assert slept == [1.5, 1.5]


async def test_cluster_status_reads_annotations_and_the_speakers_metrics(
    fake_api: FakeApiServer,
) -> None:
    # The speaker of n1 runs (its /metrics on 127.0.0.1); n2 has no InternalIP.
    factory = FakeFactory()
    speaker = NodeSpeaker(
        "n1", store_of(*bgp_setup(), lb_service("web", "203.0.113.10")), bgp=BGPBackend(factory)
    )
    await speaker.step()
    for peer in factory.made[0].peers.values():
        up = peer.config.address == "192.0.2.1"
        peer.state, peer.established = (State.ESTABLISHED if up else State.ACTIVE), up
    monitoring = MonitoringServer(speaker_registry(speaker))
    port = await monitoring.start("127.0.0.1", 0)
    web = lb_service("web", "203.0.113.10")
    web["metadata"]["annotations"] = {annotation_key("n1"): "bgp 203.0.113.10 to r1,r2"}
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}},
    ]  # fmt: skip
    seed(fake_api, *nodes, *bgp_setup()[2:], web, lb_service("pending"))
    try:
        status = await cluster_status(str(fake_api.kubeconfig_path), port, 5.0)
    finally:
        await monitoring.stop()
    assert [(s.node, s.peer, s.state) for s in status.sessions] == [
        ("n1", "r1", "Established"),
        ("n1", "r2", "Active"),
    ]
    (holder,) = status.holders
    assert (holder.service, holder.ip, holder.nodes) == ("default/web", "203.0.113.10", ("n1",))
    assert [(p.pool, p.assigned, p.size) for p in status.pools] == [("public", 1, 16)]
    assert status.pending == ("default/pending",)
    assert "BGP session n1 -> r2 is Active" in status.problems
    assert "node n2: speaker metrics not read: the node has no InternalIP" in status.problems
