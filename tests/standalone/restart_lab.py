"""Two namespaces on one veth: node n1 runs `teapot-lb run --modes bgp` against a router.

Shared by the restart tests: the test starts and stops (SIGTERM or SIGKILL) the node's
process and brings its own router (our speaker or BIRD) on ROUTER_IP.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from teapot_lb.lab.standalone_lab import node, ours, service, write
from teapot_lb.netlab import Host, Topology

ROUTER_IP = "192.0.2.1"
NODE_IP = "192.0.2.11"
LB_IP = "203.0.113.1"
NODE_ASN = 64512
ROUTER_ASN = 64500


class NodeLab:
    def __init__(self, topo: Topology, workdir: Path, *, graceful_restart: bool) -> None:
        self.router: Host = topo.add_host("router")
        self.node: Host = topo.add_host("n1")
        topo.link_pair(
            self.router, self.node, a_if="eth0", b_if="eth0",
            a_addrs=[f"{ROUTER_IP}/24"], b_addrs=[f"{NODE_IP}/24"],
        )  # fmt: skip
        self.workdir = workdir
        self.manifests = workdir / "manifests"
        self.manifests.mkdir()
        self.state = workdir / "state"
        self.log = workdir / "run.log"
        peer = {
            "myASN": NODE_ASN,
            "peerASN": ROUTER_ASN,
            "peerAddress": ROUTER_IP,
            "holdTime": "90s",
            "enableGracefulRestart": graceful_restart,
        }
        write(
            self.manifests / "all.yaml",
            [
                node("n1"),
                ours("AddressPool", "public", {"addresses": ["203.0.113.0/29"]}),
                ours("BGPPeer", "router", peer),
                ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
                service("web", LB_IP),
            ],
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = self.node.popen(
                [
                    sys.executable, "-m", "teapot_lb.cli.run",
                    "--manifests", str(self.manifests), "--node", "n1",
                    "--state-dir", str(self.state), "--modes", "bgp", "--bgp-port", "-1",
                    "--poll-interval", "0.1",
                ],
                stdout=log,
                stderr=log,
            )  # fmt: skip

    def stop(self, sig: signal.Signals) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        self.proc = None
        return code
