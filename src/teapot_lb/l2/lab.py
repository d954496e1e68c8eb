"""An L2 lab in network namespaces, shared by the L2 tests and ``bench/l2_failover.py``.

A client and N nodes on one bridge. Each node emulates kube-proxy in IPVS mode: the
Service IPs are bound on ``lo`` (``arp_ignore=1``/``arp_announce=2`` in the namespace, so
the kernel never answers ARP for them on ``eth0``; IPv6 only answers NS for addresses of
the receiving interface) and a tiny TCP server answers every connection with the node's
name. Only an ARP/NDP responder therefore makes a Service IP reachable from the client.

``python -m teapot_lb.l2.lab serve NAME PORT`` is that TCP server.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from teapot_lb.netlab import Host, Topology

V4 = "192.0.2.100"
V6 = "2001:db8::100"
SERVE_PORT = 8080
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def in_netns(ns: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a fresh thread that entered network namespace ``ns``; return its result.

    ``setns()`` affects only the calling thread, and this thread ends with ``fn``, so the
    rest of the process stays where it was; sockets ``fn`` creates stay in ``ns``.
    """
    result: dict[str, Any] = {}

    def enter_and_run() -> None:
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if _libc.setns(fd, _CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns({ns}): {os.strerror(err)}")
            result["value"] = fn()
        except BaseException as exc:
            result["error"] = exc
        finally:
            os.close(fd)

    t = threading.Thread(target=enter_and_run)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    value: T = result["value"]
    return value


def netns_socket(ns: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket created inside network namespace ``ns`` (usable from this process)."""
    return in_netns(ns, lambda: socket.socket(family, kind, proto))


def node_names(n: int) -> list[str]:
    return [f"node-{chr(ord('a') + i)}" for i in range(n)]


@dataclass
class L2Lab:
    topology: Topology
    switch: Host
    client: Host
    nodes: dict[str, Host]
    v4: dict[str, str]  # node -> its eth0 IPv4 address
    heartbeat: dict[str, str]  # node -> the address its peers send heartbeats to
    ports: dict[str, str]  # host -> its port on the bridge
    ips: tuple[str, ...]
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def mac(self, node: str) -> str:
        return self.nodes[node].mac("eth0")

    def peers_of(self, node: str) -> list[str]:
        return [a for n, a in self.heartbeat.items() if n != node]

    def start_agent(self, node: str, log_dir: Path, *extra: str) -> subprocess.Popen[bytes]:
        """Start ``python -m teapot_lb.l2.agent`` in the node's namespace, logging to a file."""
        path = log_dir / f"{node}.log"
        self.logs[node] = path
        out: IO[bytes] = path.open("ab")
        argv = [
            sys.executable, "-m", "teapot_lb.l2.agent", "--node", node,
            "--peers", ",".join(self.peers_of(node)), "--ips", ",".join(self.ips), *extra,
        ]  # fmt: skip
        proc = self.nodes[node].popen(argv, stdout=out, stderr=out)
        out.close()
        self.agents[node] = proc
        return proc

    def kill_agent(self, node: str) -> None:
        """SIGKILL the agent (no goodbye, no release): a crashed speaker."""
        proc = self.agents.pop(node)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=10)

    def link(self, node: str, up: bool, ifname: str = "eth0") -> None:
        self.nodes[node].ip("link", "set", ifname, "up" if up else "down")

    def connect(self, ip: str, timeout: float = 0.5) -> str | None:
        """One TCP connection from the client; the answering node's name, or None."""
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        sock = netns_socket(self.client.ns, family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect((ip, SERVE_PORT))
            return sock.recv(64).decode().strip() or None
        except OSError:
            return None
        finally:
            sock.close()

    def client_neighbor(self, ip: str) -> str | None:
        """The MAC in the client's neighbour table for ``ip`` (None if absent/failed)."""
        words = self.client.ip("neigh", "show", ip, "dev", "eth0").split()
        return words[words.index("lladdr") + 1] if "lladdr" in words else None


def build(
    topology: Topology,
    *,
    n_nodes: int = 3,
    ips: Sequence[str] = (V4, V6),
    serve: bool = True,
    heartbeat_network: bool = False,
) -> L2Lab:
    """The lab; with ``heartbeat_network`` the heartbeats use a second switch (``eth1``,
    198.51.100.0/24), so a test can cut the heartbeat path and keep the data path."""
    switch = topology.add_switch("sw")
    hb_switch = topology.add_switch("hb") if heartbeat_network else None
    client = topology.add_host("client")
    ports = {"client": topology.connect(client, switch, addrs=["192.0.2.10/24", "2001:db8::10/64"])}
    nodes: dict[str, Host] = {}
    v4: dict[str, str] = {}
    heartbeat: dict[str, str] = {}
    for i, name in enumerate(node_names(n_nodes), start=1):
        host = topology.add_host(name)
        for conf in ("all", "default"):
            host.sysctl(f"net.ipv4.conf.{conf}.arp_ignore", "1")
            host.sysctl(f"net.ipv4.conf.{conf}.arp_announce", "2")
            # Keep IPv6 addresses across link down/up, as for IPv4 (the tests flap links).
            host.sysctl(f"net.ipv6.conf.{conf}.keep_addr_on_down", "1")
        ports[name] = topology.connect(host, switch, addrs=[f"192.0.2.{i}/24", f"2001:db8::{i}/64"])
        for ip in ips:
            host.add_address("lo", f"{ip}/{128 if ':' in ip else 32}")
        if serve:
            host.popen(
                [sys.executable, "-m", "teapot_lb.l2.lab", "serve", name, str(SERVE_PORT)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        nodes[name] = host
        v4[name] = f"192.0.2.{i}"
        if hb_switch is not None:
            topology.connect(host, hb_switch, ifname="eth1", addrs=[f"198.51.100.{i}/24"])
            heartbeat[name] = f"198.51.100.{i}"
        else:
            heartbeat[name] = v4[name]
    lab = L2Lab(topology, switch, client, nodes, v4, heartbeat, ports, tuple(ips))
    if serve:
        wait_for(lambda: all(_serving(h) for h in nodes.values()), 10, "TCP servers listening")
    return lab


def _serving(host: Host) -> bool:
    return f":{SERVE_PORT}" in host.run("ss", "-Hltn", check=False)


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.02) -> Any:
    """Poll ``cond`` until it returns a truthy value; raise TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class Sniffer:
    """Captures every frame crossing one bridge port (in the switch namespace) with times."""

    def __init__(self, switch_ns: str, port: str) -> None:
        self._sock = netns_socket(switch_ns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        self._sock.bind((port, 0))
        self._sock.settimeout(0.1)
        self.frames: list[tuple[float, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.frames.append((time.monotonic(), data))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()


def serve(name: str, port: int) -> None:
    """Answer every TCP connection (IPv4 and IPv6) with ``name``."""
    srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("::", port))
    srv.listen(128)
    reply = f"{name}\n".encode()
    while True:
        conn, _ = srv.accept()
        with contextlib.suppress(OSError):
            conn.sendall(reply)
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("usage: python -m teapot_lb.l2.lab serve NAME PORT")
