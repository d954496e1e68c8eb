"""A small data centre in namespaces for standalone-mode tests and benchmarks.

    client (198.51.100.2) ── router (198.51.100.1 | 192.0.2.1, BIRD, ECMP into its FIB)
                                   │ LAN 192.0.2.0/24 (switch)
                  n1 (192.0.2.11)  n2 (192.0.2.12)  n3 (192.0.2.13)

Each node runs `teapot-lb run` on one shared manifest directory and the lab's HTTP
workload on port 7000 (it answers with the node's name). kube-proxy is emulated: every
Service IP is bound on `lo` of every node with `arp_ignore`/`arp_announce` set, so only
teapot-lb makes an IP reachable
(BGP routes at the router, L2 answers, or keepalived putting the VIP on eth0).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from teapot_lb.lab.client import request
from teapot_lb.lab.manifests import config_doc, endpoints_doc
from teapot_lb.lab.netns import in_netns
from teapot_lb.lab.processes import log_tail, read_status, start_run, start_workload
from teapot_lb.netlab import Host, Topology
from teapot_lb.standalone.directory import write_text

T = TypeVar("T")

NODES = {"n1": "192.0.2.11", "n2": "192.0.2.12", "n3": "192.0.2.13"}
NODES6 = {"n1": "2001:db8::11", "n2": "2001:db8::12", "n3": "2001:db8::13"}
ROUTER_LAN = "192.0.2.1"
ROUTER_LAN6 = "2001:db8::1"
ROUTER_UP = "198.51.100.1"
ROUTER_UP6 = "2001:db8:1::1"
CLIENT = "198.51.100.2"
CLIENT6 = "2001:db8:1::2"
PORT = 7000
POLL = 0.1  # manifest poll interval of the runners (s): used only without inotify
NS = "lb-system"
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


# --- manifests -------------------------------------------------------------------------------


def ours(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return config_doc(kind, name, spec, namespace=NS)


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": NODES[name]},
                {"type": "InternalIP", "address": NODES6[name]},
            ]
        },
    }


def service(name: str, ip: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if ip is not None:
        meta["annotations"] = {"lb.teapot.io/ips": ip}
    body = {"type": "LoadBalancer", "ports": [{"port": PORT, "protocol": "TCP"}], **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": body}


def endpoints(svc: str, *ready_nodes: str) -> dict[str, Any]:
    return endpoints_doc(svc, *ready_nodes, namespace="default")


def write(path: Path, docs: Iterable[dict[str, Any]]) -> None:
    """Write a manifest file atomically (a temporary file renamed in)."""
    write_text(path, yaml.safe_dump_all(list(docs), sort_keys=False))


# --- the lab ---------------------------------------------------------------------------------


class Lab:
    def __init__(self, topo: Topology, workdir: Path) -> None:
        self.topo = topo
        self.workdir = workdir
        self.manifests = workdir / "manifests"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.lan = topo.add_switch("lan")
        self.router = topo.add_host("router")
        self.client = topo.add_host("client")
        topo.connect(self.router, self.lan, addrs=[f"{ROUTER_LAN}/24", f"{ROUTER_LAN6}/64"])
        topo.link_pair(
            self.router,
            self.client,
            a_if="up0",
            b_if="eth0",
            a_addrs=[f"{ROUTER_UP}/24", f"{ROUTER_UP6}/64"],
            b_addrs=[f"{CLIENT}/24", f"{CLIENT6}/64"],
        )
        self.client.ip("route", "add", "default", "via", ROUTER_UP)
        self.client.ip("-6", "route", "add", "default", "via", ROUTER_UP6)
        self.router.sysctl("net.ipv4.ip_forward", "1")
        self.router.sysctl("net.ipv6.conf.all.forwarding", "1")
        self.router.sysctl("net.ipv4.fib_multipath_hash_policy", "1")
        self.nodes: dict[str, Host] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        for name, addr in NODES.items():
            h = topo.add_host(name)
            topo.connect(h, self.lan, addrs=[f"{addr}/24", f"{NODES6[name]}/64"])
            h.ip("route", "add", "default", "via", ROUTER_LAN)
            h.ip("-6", "route", "add", "default", "via", ROUTER_LAN6)
            for key in ("all", "eth0"):
                h.sysctl(f"net.ipv4.conf.{key}.arp_ignore", "1")
                h.sysctl(f"net.ipv4.conf.{key}.arp_announce", "2")
            start_workload(h, name, PORT)
            self.nodes[name] = h

    def bind_service_ip(self, ip: str) -> None:
        """kube-proxy's part: every node accepts traffic for the IP (bound on lo)."""
        length = 128 if ":" in ip else 32
        for h in self.nodes.values():
            h.ip("addr", "add", f"{ip}/{length}", "dev", "lo")

    def state_dir(self, name: str) -> Path:
        return self.workdir / "state" / name

    def start(
        self, name: str, *, modes: str = "bgp,l2,vip", extra: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        proc = start_run(
            self.nodes[name],
            name,
            manifests=self.manifests,
            state_dir=self.state_dir(name),
            modes=modes.split(","),
            poll_interval=POLL,
            log_path=self.workdir / f"{name}.log",
            extra=extra,
        )
        self.procs[name] = proc
        return proc

    def start_all(self, modes: str = "bgp,l2,vip", extra: Sequence[str] = ()) -> None:
        for name in self.nodes:
            self.start(name, modes=modes, extra=extra)

    def fetch(self, name: str, url: str) -> str:
        """GET a URL from inside a node's namespace (e.g. its /metrics)."""
        code = (
            "import urllib.request\n"
            f"print(urllib.request.urlopen({url!r}, timeout=5).read().decode())"
        )
        return self.nodes[name].run(sys.executable, "-c", code, timeout=20)

    def terminate(self, name: str, timeout: float = 20) -> int:
        proc = self.procs[name]
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=timeout)

    def kill_all(self) -> None:
        """Stop every node's process at once (the end of a lab)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)

    def status(self, name: str) -> dict[str, Any]:
        return read_status(self.state_dir(name))

    def log_tail(self, name: str, lines: int = 30) -> str:
        return log_tail(self.workdir / f"{name}.log", lines)

    def generation_at_least(self, gen: int) -> bool:
        return all(self.status(n).get("generation", 0) >= gen for n in self.procs)

    def who(self, ip: str, timeout: float = 1.0) -> str | None:
        """The node answering an HTTP request from the client to ip:7000, or None."""
        attempt = in_netns(
            self.client.ns, lambda: asyncio.run(request(ip, PORT, connect_timeout=timeout))
        )
        return attempt.node
