"""A LAN lab: a client and N nodes on one bridge, every node running ``teapot-lb run``.

    client (192.0.2.10, 2001:db8::10) ── switch ──┬── node-a (192.0.2.1, 2001:db8::1)
                                                  ├── node-b (192.0.2.2, 2001:db8::2)
                                                  └── node-c (192.0.2.3, 2001:db8::3)

The product path, as a cluster of nodes runs it: each node runs ``teapot-lb run`` (the
speaker's L2 and VIP backends, :func:`teapot_lb.speaker.wiring.build_speaker`) on one shared
manifest directory that the lab writes, and the lab's HTTP workload
(:mod:`teapot_lb.lab.serve`). kube-proxy is emulated as in IPVS mode: a Service IP is
bound on ``lo`` of every node with ``arp_ignore=1``/``arp_announce=2`` (IPv6 answers NS
only for addresses of the receiving interface), so only teapot-lb makes it reachable:
the L2 responder answering ARP/NDP, or keepalived putting the VIP on ``eth0``.

With ``heartbeat_network`` the Nodes' InternalIPs are on a second switch (``eth1``,
198.51.100.0/24): the L2 heartbeats go there, so a test can cut them and keep the data
path. Used by the L2 and VIP namespace tests and ``bench/l2_failover.py``,
``bench/vip_failover.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teapot_lb.lab.client import Client
from teapot_lb.lab.manifests import LAB_NAMESPACE, SERVICE_PORT, write_docs
from teapot_lb.lab.processes import log_tail, read_status, start_run, start_workload
from teapot_lb.lab.wait import wait_for
from teapot_lb.model.service import ANNOTATION_IPS
from teapot_lb.netlab import Host, Topology

CLIENT4, CLIENT6 = "192.0.2.10", "2001:db8::10"


def node_names(n: int) -> list[str]:
    return [f"node-{chr(ord('a') + i)}" for i in range(n)]


# --- manifests -------------------------------------------------------------------------------


def service_doc(name: str, ip: str, **spec: Any) -> dict[str, Any]:
    """A LoadBalancer Service asking for ``ip`` (the lab's port, TCP)."""
    meta = {"name": name, "namespace": LAB_NAMESPACE, "annotations": {ANNOTATION_IPS: ip}}
    body = {"type": "LoadBalancer", "ports": [{"port": SERVICE_PORT, "protocol": "TCP"}], **spec}
    if ":" in ip:
        body.setdefault("ipFamilies", ["IPv6"])
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": body}


# --- the lab ---------------------------------------------------------------------------------


@dataclass
class LanNode:
    name: str
    host: Host
    internal: str  # the Node's InternalIP: heartbeats go there
    labels: dict[str, str]
    speaker: subprocess.Popen[bytes] | None = None
    args: tuple[str, ...] = ()  # more `teapot-lb run` options for this node (a key file)


class LanLab:
    def __init__(
        self,
        topology: Topology,
        workdir: Path,
        *,
        nodes: int = 3,
        modes: Sequence[str] = ("l2",),
        heartbeat_network: bool = False,
        poll_interval: float | None = None,
    ) -> None:
        self.topology = topology
        self.workdir = workdir
        self.manifests = workdir / "manifests"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.modes = tuple(modes)
        self.poll_interval = poll_interval
        self.switch = topology.add_switch("sw")
        self.hb_switch = topology.add_switch("hb") if heartbeat_network else None
        self.client = topology.add_host("client")
        self.ports: dict[str, str] = {}  # host -> its port on the switch
        self.ports["client"] = topology.connect(
            self.client, self.switch, addrs=[f"{CLIENT4}/24", f"{CLIENT6}/64"]
        )
        self.nodes: dict[str, LanNode] = {}
        for i, name in enumerate(node_names(nodes), start=1):
            host = topology.add_host(name)
            for conf in ("all", "default"):
                host.sysctl(f"net.ipv4.conf.{conf}.arp_ignore", "1")
                host.sysctl(f"net.ipv4.conf.{conf}.arp_announce", "2")
                # Keep IPv6 addresses across link down/up, as for IPv4 (tests flap links).
                host.sysctl(f"net.ipv6.conf.{conf}.keep_addr_on_down", "1")
            v4, v6 = f"192.0.2.{i}", f"2001:db8::{i}"
            self.ports[name] = topology.connect(host, self.switch, addrs=[f"{v4}/24", f"{v6}/64"])
            internal = v4
            if self.hb_switch is not None:
                internal = f"198.51.100.{i}"
                topology.connect(host, self.hb_switch, ifname="eth1", addrs=[f"{internal}/24"])
            self.nodes[name] = LanNode(name, host, internal, {})
            start_workload(host, name)
        self.http = Client(self.client.ns)
        self.config: list[dict[str, Any]] = []
        self.services: list[dict[str, Any]] = []
        wait_for(
            lambda: all(self._serving(n.host) for n in self.nodes.values()),
            timeout=10,
            what="the HTTP workload listening on every node",
        )

    def close(self) -> None:
        """Stop the speakers (SIGKILL) and the client thread; the topology removes the rest."""
        for name in self.nodes:
            self.kill(name)
        self.http.close()

    @staticmethod
    def _serving(host: Host) -> bool:
        return f":{SERVICE_PORT}" in host.run("ss", "-Hltn", check=False)

    # --- manifests ---------------------------------------------------------------------------

    def node_doc(self, node: LanNode) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "labels": {"kubernetes.io/hostname": node.name, **node.labels},
            },
            "status": {"addresses": [{"type": "InternalIP", "address": node.internal}]},
        }

    def write(
        self,
        config: Iterable[dict[str, Any]] | None = None,
        services: Iterable[dict[str, Any]] | None = None,
    ) -> None:
        """Replace the configuration and/or the Services (atomically; the nodes watch the
        directory), and bind every Service IP on the nodes' ``lo`` (kube-proxy's part)."""
        if config is not None:
            self.config = list(config)
        if services is not None:
            self.services = list(services)
            for doc in self.services:
                if doc["kind"] == "Service":
                    self.bind(doc["metadata"]["annotations"][ANNOTATION_IPS])
        docs = [self.node_doc(n) for n in self.nodes.values()] + self.config + self.services
        write_docs(self.manifests / "lab.yaml", docs)

    def label(self, name: str, **labels: str) -> None:
        self.nodes[name].labels = dict(labels)
        self.write()

    def bind(self, ip: str) -> None:
        length = 128 if ":" in ip else 32
        for node in self.nodes.values():
            node.host.ip("addr", "replace", f"{ip}/{length}", "dev", "lo")

    # --- speakers ----------------------------------------------------------------------------

    def state_dir(self, name: str) -> Path:
        return self.workdir / "state" / name

    def log_path(self, name: str) -> Path:
        return self.workdir / "logs" / f"{name}.log"

    def start(self, name: str) -> subprocess.Popen[bytes]:
        """``teapot-lb run`` for the node, logging JSON lines to :meth:`log_path`."""
        node = self.nodes[name]
        node.speaker = start_run(
            node.host,
            name,
            manifests=self.manifests,
            state_dir=self.state_dir(name),
            modes=self.modes,
            poll_interval=self.poll_interval,
            log_path=self.log_path(name),
            extra=node.args,
        )
        return node.speaker

    def start_all(self) -> None:
        for name in self.nodes:
            self.start(name)

    def speaker(self, name: str) -> subprocess.Popen[bytes]:
        proc = self.nodes[name].speaker
        if proc is None:
            raise LookupError(f"no speaker running on {name}")
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL the speaker (no goodbye, no release): a crashed speaker. keepalived, a
        process group of its own, keeps running, as it would after a crash."""
        proc, self.nodes[name].speaker = self.nodes[name].speaker, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self, name: str, timeout: float = 20) -> int:
        """SIGTERM and wait: the speaker withdraws everything first. Its exit status."""
        proc = self.speaker(name)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=timeout)
        self.nodes[name].speaker = None
        return code

    def link(self, name: str, up: bool, ifname: str = "eth0") -> None:
        self.nodes[name].host.ip("link", "set", ifname, "up" if up else "down")

    def isolate(self, names: Sequence[str], isolated: bool) -> None:
        """Bridge port isolation: isolated nodes cannot reach each other (only the rest)."""
        for name in names:
            self.switch.run(
                "bridge", "link", "set", "dev", self.ports[name], "isolated",
                "on" if isolated else "off",
            )  # fmt: skip

    # --- observations ------------------------------------------------------------------------

    def status(self, name: str) -> dict[str, Any]:
        """The node's ``status.json`` ({} while there is none)."""
        return read_status(self.state_dir(name))

    def events(self, name: str, event: str) -> list[dict[str, Any]]:
        """The node's log records with this ``event`` name, oldest first."""
        out = []
        try:
            text = self.log_path(name).read_text(errors="replace")
        except OSError:
            return []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and rec.get("event") == event:
                    out.append(rec)
        return out

    def log_tail(self, name: str, lines: int = 40) -> str:
        return log_tail(self.log_path(name), lines)

    def logs(self) -> str:
        """Every node's log tail (for a failing test's output)."""
        return "\n".join(f"--- {n} ---\n{self.log_tail(n)}" for n in self.nodes)

    def who(self, ip: str) -> str | None:
        """One HTTP request from the client to ``ip``: the answering node, or None."""
        return self.http.get(ip, SERVICE_PORT).node

    def mac(self, name: str, ifname: str = "eth0") -> str:
        return self.nodes[name].host.mac(ifname)

    def client_neighbor(self, ip: str) -> str | None:
        """The MAC in the client's neighbour table for ``ip`` (None if absent or failed)."""
        words = self.client.ip("neigh", "show", ip, "dev", "eth0").split()
        return words[words.index("lladdr") + 1] if "lladdr" in words else None

    def holders(self, ip: str) -> list[str]:
        """Nodes that have ``ip`` on ``eth0`` (where keepalived puts a VIP)."""
        out = []
        for name, node in self.nodes.items():
            text = node.host.ip("-o", "addr", "show", "dev", "eth0", check=False)
            if any(word.split("/")[0] == ip for word in text.split()):
                out.append(name)
        return out

    # --- VIP mode: what each node's status.json says keepalived runs -------------------------

    def vip_instances(self, name: str) -> dict[str, dict[str, Any]]:
        """The node's VRRP instances: name → vrid, priority, vips, groups, state."""
        states = self.status(name).get("vip", {}).get("instance_states", {})
        return states if isinstance(states, dict) else {}

    def vip_instance(self, ip: str, name: str | None = None) -> str | None:
        """The instance that runs ``ip`` (as any node, or node ``name``, renders it)."""
        for node in [name] if name else list(self.nodes):
            for instance, info in self.vip_instances(node).items():
                if ip in info.get("vips", []):
                    return instance
        return None

    def vip_applied(self, ip: str, present: bool) -> bool:
        """Whether every node runs ``ip`` (or none does) and it is held on the LAN (or not):
        a change of the Services applied everywhere, not only on the VIP's master."""
        rendered = all((self.vip_instance(ip, n) is not None) == present for n in self.nodes)
        return rendered and bool(self.holders(ip)) == present

    def vip_masters(self, instance: str) -> list[str]:
        """Nodes whose keepalived reports MASTER for ``instance``."""
        return [
            n
            for n in self.nodes
            if self.vip_instances(n).get(instance, {}).get("state") == "MASTER"
        ]

    def settled_master(self, ip: str, *, timeout: float = 20.0, all_healthy: bool = False) -> str:
        """Wait until the single MASTER of ``ip``'s instance is its highest-priority healthy
        node (right after a start the first keepalived up may win before a higher-priority
        one preempts it); ``all_healthy``: and every node of the instance is MASTER or
        BACKUP (none restarting or in FAULT). Returns that master.

        Every node must have reported first (its status has a VIP part, and a node that
        renders the instance has its keepalived's state for it): a higher-priority node
        still starting would otherwise not be counted, and preempt the master afterwards."""

        def check() -> str | None:
            instance = self.vip_instance(ip)
            if instance is None:
                return None
            masters = self.vip_masters(instance)
            if len(masters) != 1:
                return None
            healthy: dict[str, int] = {}
            for n in self.nodes:
                if "vip" not in self.status(n):
                    return None
                info = self.vip_instances(n).get(instance)
                if info is not None and info.get("state") is None:
                    return None
                if info and info.get("state") in ("MASTER", "BACKUP"):
                    healthy[n] = int(info["priority"])
                elif info and all_healthy:
                    return None
            return masters[0] if max(healthy, key=lambda n: healthy[n]) == masters[0] else None

        return wait_for(check, timeout=timeout, what=f"the top-priority MASTER of {ip}",
                        detail=self.logs)  # fmt: skip

    def keepalived_pid(self, name: str) -> int | None:
        pid = self.status(name).get("vip", {}).get("keepalived_pid")
        return int(pid) if pid else None

    def vip_counters(self, name: str) -> dict[str, Any]:
        return dict(self.status(name).get("vip", {}).get("counters", {}))

    def kill_keepalived(self, name: str) -> float:
        """SIGKILL the node's keepalived (parent and VRRP child); the monotonic time."""
        pid = self.keepalived_pid(name)
        if pid is None:
            raise LookupError(f"{name} runs no keepalived")
        now = time.monotonic()
        os.killpg(pid, signal.SIGKILL)
        return now
