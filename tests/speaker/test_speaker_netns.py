"""`teapot-lb speaker` processes against an API server, announcing to a real BIRD router.

The fake API server runs in the router's namespace (the nodes reach it over the LAN, as
speakers reach a real one); the test drives it with a tiny kubectl run in that
namespace. No controller runs: Services carry their IPs in status, as if it had.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.peers import Bird, Neighbor, fib_next_hops
from teapot_lb.lab.standalone_lab import NODES, ROUTER_LAN, ROUTER_LAN6, Lab, node, ours, service
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.speaker.report import annotation_key

TESTS = Path(__file__).resolve().parents[1]
API_PORT = 6443
WEB = "203.0.113.10"


class Cluster:
    def __init__(self, lab: Lab, workdir: Path) -> None:
        self.lab = lab
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig"
        self.speakers: dict[str, subprocess.Popen[bytes]] = {}
        self._n = 0

    def kubectl(self, *args: str) -> str:
        argv = ["env", f"PYTHONPATH={TESTS}", sys.executable, "-m", "speaker.kubectl"]
        return self.lab.router.run(*argv, str(self.kubeconfig), *args, timeout=30)

    def apply(self, docs: list[dict[str, Any]], verb: str = "apply") -> None:
        self._n += 1
        path = self.workdir / f"docs{self._n}.json"
        path.write_text(json.dumps(docs))
        self.kubectl(verb, str(path))

    def service(self, name: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", "services", "default", name)) or {})

    def annotations(self, name: str) -> dict[str, str]:
        meta = self.service(name).get("metadata", {})
        return {k: v for k, v in (meta.get("annotations") or {}).items() if "announce" in k}

    def start_speaker(self, name: str) -> None:
        log = (self.workdir / f"speaker-{name}.log").open("ab")
        self.speakers[name] = self.lab.nodes[name].popen(
            [
                sys.executable, "-m", "teapot_lb.cli.speaker", "--node", name,
                "--kubeconfig", str(self.kubeconfig), "--modes", "bgp",
                "--config-namespace", "lb-system",
                "--state-dir", str(self.workdir / f"state-{name}"),
                "--metrics-address", "127.0.0.1:7472",
            ],
            stdout=log, stderr=log,
        )  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Bird]]:
    require_root()
    require_binary("bird", "birdc")
    workdir = tmp_path_factory.mktemp("kube-lab")
    with Topology("kspk") as topo:
        lab = Lab(topo, workdir)
        lab.bind_service_ip(WEB)
        c = Cluster(lab, workdir)
        lab.router.popen(
            [sys.executable, "-m", "teapot_lb.lab.fakeapi", "--host", ROUTER_LAN,
             "--port", str(API_PORT), "--kubeconfig", str(c.kubeconfig)],
            stdout=subprocess.DEVNULL, stderr=(workdir / "api.log").open("ab"),
        )  # fmt: skip
        wait_for(lambda: c.kubeconfig.exists(), timeout=20, what="the API server")
        namespaces = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
            for n in ("default", "lb-system")
        ]
        nodes = [node(n) for n in NODES]
        web = service("web")
        c.apply(namespaces)
        c.apply(nodes)
        c.apply(nodes, "status")  # a create keeps no status: addresses come as kubelet's do
        c.apply(
            [
                ours("AddressPool", "public", {"addresses": ["203.0.113.0/28"]}),
                ours(
                    "BGPPeer",
                    "router",
                    {"myASN": 64512, "peerASN": 64500, "peerAddress": ROUTER_LAN, "holdTime": "9s"},
                ),
                ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
                web,
            ]
        )
        c.apply([{**web, "status": {"loadBalancer": {"ingress": [{"ip": WEB}]}}}], "status")
        bird = Bird(
            lab.router,
            workdir / "bird",
            asn=64500,
            router_id=ROUTER_LAN,
            neighbors=[Neighbor(address=a, asn=64512, hold_time=9) for a in NODES.values()],
            fib=True,
            local_addresses=[ROUTER_LAN, ROUTER_LAN6],
        )
        bird.start()
        for name in NODES:
            c.start_speaker(name)
        try:
            yield c, bird
        finally:
            for proc in c.speakers.values():
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)
            bird.stop()


def hops(c: Cluster) -> frozenset[str]:
    return fib_next_hops(c.lab.router, f"{WEB}/32") or frozenset()


def test_speakers_announce_from_the_api_with_ecmp_and_annotate_the_service(
    cluster: tuple[Cluster, Bird],
) -> None:
    c, _ = cluster
    wait_for(lambda: hops(c) == frozenset(NODES.values()), timeout=30, what="ECMP via 3 nodes")
    assert wait_for(lambda: c.lab.who(WEB), timeout=10, what="client reaches web") in NODES
    want = {annotation_key(n): f"bgp {WEB} to router" for n in NODES}
    wait_for(lambda: c.annotations("web") == want, timeout=10, what="one annotation per node")


def test_metrics_of_a_cluster_speaker(cluster: tuple[Cluster, Bird]) -> None:
    c, _ = cluster
    text = wait_for(
        lambda: (
            (t := c.lab.fetch("n2", "http://127.0.0.1:7472/metrics"))
            and 'teapot_lb_speaker_bgp_session_up{peer="router"} 1.0' in t
            and t
        ),
        timeout=20,
        what="session up in the metrics",
    )
    assert 'teapot_lb_speaker_announced_ips{mode="bgp"} 1.0' in text
    assert c.lab.fetch("n2", "http://127.0.0.1:7472/readyz").strip() == "ok"


def test_sigterm_withdraws_and_removes_the_nodes_annotation(cluster: tuple[Cluster, Bird]) -> None:
    c, _ = cluster
    wait_for(lambda: hops(c) == frozenset(NODES.values()), timeout=30, what="3 next hops")
    proc = c.speakers["n1"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    rest = frozenset({NODES["n2"], NODES["n3"]})
    wait_for(lambda: hops(c) == rest, timeout=4, what="n1's next hop withdrawn")
    assert annotation_key("n1") not in c.annotations("web")
    assert set(c.annotations("web")) == {annotation_key("n2"), annotation_key("n3")}
