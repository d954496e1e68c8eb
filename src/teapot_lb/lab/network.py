"""The lab's namespaces and processes.

    client ──── router ──── LAN switch ──┬── node-1
                (BIRD/FRR)               ├── node-2
                                         └── node-3

Every link is dual-stack (IPv4 and IPv6 from the documentation ranges).

Each node runs the HTTP workload (:mod:`teapot_lb.lab.serve`) and `teapot-lb run` on
the lab's manifest directory. kube-proxy is emulated as in IPVS mode: every Service IP
is bound on ``lo`` of every node with ``arp_ignore=1``/``arp_announce=2`` set in the
node's namespace (IPv6 answers NS only for addresses of the receiving interface), so a
node accepts traffic for the IP but never answers ARP/NDP for it itself: only teapot-lb
makes an IP reachable (BGP routes at the router, the L2 responder, or keepalived putting
the VIP on ``eth0``).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import select
import signal
import socket
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teapot_lb.l2 import wire
from teapot_lb.lab.manifests import (
    CLIENT,
    CLIENT6,
    LAN6,
    ROUTER_LAN6,
    ROUTER_UP,
    ROUTER_UP6,
    UPLINK_PREFIX,
    UPLINK_PREFIX6,
    LabLayout,
    host_prefix,
)
from teapot_lb.lab.netns import in_netns
from teapot_lb.lab.processes import log_tail, read_status, start_run, start_workload
from teapot_lb.lab.router import Router, RouterConfig, Session, make_router
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host, Topology
from teapot_lb.netlab.topology import check_documentation_address

_ETH_P_ARP = 0x0806
_ETH_P_IPV6 = 0x86DD
_SIOCGIFADDR = 0x8915


@dataclass
class LabNode:
    name: str
    address: str
    address6: str
    host: Host
    speaker: subprocess.Popen[bytes] | None = None
    server: subprocess.Popen[bytes] | None = None


class LabNetwork:
    """Builds the namespaces and runs the processes; :meth:`close` removes everything."""

    def __init__(
        self,
        topology: Topology,
        layout: LabLayout,
        workdir: Path,
        manifests: Path,
        *,
        router: str,
        modes: tuple[str, ...],
        poll_interval: float | None,
    ) -> None:
        self.topology = topology
        self.layout = layout
        self.workdir = workdir
        self.manifests = manifests
        self.router_kind = router
        self.modes = modes
        self.poll_interval = poll_interval
        self.nodes: dict[str, LabNode] = {}
        self.bound: set[str] = set()
        self.router_daemon: Router | None = None
        # When set, each node's `teapot-lb run` serves /metrics on its LAN address, this port.
        self.metrics_port: int | None = None
        self.lan = topology.add_switch("lan")
        self.router = topology.add_host("router")
        self.client = topology.add_host("client")

    # -- building

    def build(self) -> None:
        topo, router = self.topology, self.router
        lan6 = f"/{LAN6.prefixlen}"
        topo.connect(
            router, self.lan, addrs=[f"{self.layout.router_address}/24", ROUTER_LAN6 + lan6]
        )
        topo.link_pair(
            router, self.client, a_if="up0", b_if="eth0",
            a_addrs=[f"{ROUTER_UP}/{UPLINK_PREFIX}", f"{ROUTER_UP6}/{UPLINK_PREFIX6}"],
            b_addrs=[f"{CLIENT}/{UPLINK_PREFIX}", f"{CLIENT6}/{UPLINK_PREFIX6}"],
        )  # fmt: skip
        self.client.ip("route", "add", "default", "via", ROUTER_UP)
        self.client.ip("-6", "route", "add", "default", "via", ROUTER_UP6)
        router.sysctl("net.ipv4.ip_forward", "1")
        router.sysctl("net.ipv6.conf.all.forwarding", "1")
        # Hash on ports too, so connections from one client spread over ECMP next hops.
        router.sysctl("net.ipv4.fib_multipath_hash_policy", "1")
        router.sysctl("net.ipv6.fib_multipath_hash_policy", "1")
        for spec in self.layout.nodes:
            if spec.name in self.topology.hosts:
                raise ValueError(f"node name {spec.name!r} is taken by a lab namespace")
            host = topo.add_host(spec.name)
            for conf in ("all", "default"):
                host.sysctl(f"net.ipv4.conf.{conf}.arp_ignore", "1")
                host.sysctl(f"net.ipv4.conf.{conf}.arp_announce", "2")
                # A crash takes eth0 down: keep the IPv6 addresses, as IPv4 keeps its own.
                host.sysctl(f"net.ipv6.conf.{conf}.keep_addr_on_down", "1")
            topo.connect(host, self.lan, addrs=[f"{spec.address}/24", spec.address6 + lan6])
            node = LabNode(spec.name, spec.address, spec.address6, host)
            self._default_routes(node)
            self.nodes[spec.name] = node
            self.start_server(node)

    def _default_routes(self, node: LabNode) -> None:
        node.host.ip("route", "replace", "default", "via", self.layout.router_address)
        node.host.ip("-6", "route", "replace", "default", "via", ROUTER_LAN6)

    def address_of(self, name: str, family: str) -> str:
        """The node's LAN address of ``family`` (the next hop of its BGP routes)."""
        node = self.nodes[name]
        return node.address6 if family == "v6" else node.address

    def start_router(self) -> Router:
        bgp = self.layout.bgp
        sessions: tuple[Session, ...] = ()
        asn = 64500
        if bgp is not None and "bgp" in self.modes:
            asn = bgp.router_asn
            sessions = tuple(
                Session(n.address, bgp.node_asn, bgp.hold_time, bgp.keepalive_time, bgp.bfd)
                for n in self.nodes.values()
                if n.name in bgp.nodes
            )
        config = RouterConfig(asn, self.layout.router_address, sessions)
        daemon = make_router(self.router_kind, self.router, self.workdir / "router", config)
        self.router_daemon = daemon
        daemon.start()
        wait_for(daemon.ready, timeout=30, what=f"{daemon.kind} to answer", every=0.1)
        return daemon

    # -- node processes

    def log_path(self, name: str) -> Path:
        return self.workdir / "logs" / f"{name}.log"

    def state_dir(self, name: str) -> Path:
        return self.workdir / "state" / name

    def start_server(self, node: LabNode) -> None:
        node.server = start_workload(node.host, node.name)

    def start_speaker(self, name: str) -> None:
        self.nodes[name].speaker = start_run(
            self.nodes[name].host,
            name,
            manifests=self.manifests,
            state_dir=self.state_dir(name),
            modes=self.modes,
            poll_interval=self.poll_interval,
            log_path=self.log_path(name),
            extra=self.metrics_args(name),
        )

    def metrics_args(self, name: str) -> tuple[str, ...]:
        if self.metrics_port is None:
            return ()
        return ("--metrics-address", f"{self.nodes[name].address}:{self.metrics_port}")

    def speaker_alive(self, name: str) -> bool:
        proc = self.nodes[name].speaker
        return proc is not None and proc.poll() is None

    def terminate_speaker(self, name: str) -> None:
        """SIGTERM (returns at once): the speaker withdraws everything, then exits."""
        proc = self.nodes[name].speaker
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    def stop_speaker(self, name: str, *, timeout: float = 20, signal_it: bool = True) -> int | None:
        """SIGTERM (unless ``signal_it`` is False: it was sent already) and wait: returns
        the speaker's exit status (None if it had to be killed). A second SIGTERM is not
        sent, as it could reach the process after its handler is gone."""
        proc = self.nodes[name].speaker
        if proc is None:
            return None
        if signal_it:
            self.terminate_speaker(name)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
            return None
        finally:
            self.nodes[name].speaker = None

    def crash(self, name: str) -> float:
        """The node fails hard: its link goes down, then every process in it is SIGKILLed
        (speaker, keepalived, the workload); nothing gets a word out. Returns the time."""
        node = self.nodes[name]
        t0 = time.monotonic()
        node.host.ip("link", "set", "eth0", "down")
        out = subprocess.run(
            ["ip", "netns", "pids", node.host.ns], capture_output=True, text=True, check=False
        ).stdout
        for pid in out.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        for proc in (node.speaker, node.server):
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
                with contextlib.suppress(ValueError):
                    node.host.procs.remove(proc)
        node.speaker = node.server = None
        return t0

    def revive(self, name: str) -> None:
        """The node boots again: link up, workload and speaker started."""
        node = self.nodes[name]
        node.host.ip("link", "set", "eth0", "up")
        self._default_routes(node)
        self.start_server(node)
        self.start_speaker(name)

    # -- kube-proxy emulation

    def bind(self, ip: str) -> None:
        check_documentation_address(ip)
        for node in self.nodes.values():
            node.host.ip("addr", "replace", host_prefix(ip), "dev", "lo")
        self.bound.add(ip)

    def unbind(self, ip: str) -> None:
        for node in self.nodes.values():
            node.host.ip("addr", "del", host_prefix(ip), "dev", "lo", check=False)
        self.bound.discard(ip)

    # -- observations

    def status(self, name: str) -> dict[str, Any]:
        return read_status(self.state_dir(name))

    def interface_addresses(self, name: str, ifname: str) -> list[str]:
        out = self.nodes[name].host.ip("-j", "addr", "show", "dev", ifname, check=False)
        try:
            links = json.loads(out or "[]")
        except ValueError:
            return []
        return [a["local"] for link in links for a in link.get("addr_info", []) if "local" in a]

    def log_tail(self, name: str, lines: int = 20) -> str:
        return log_tail(self.log_path(name), lines)

    def neighbor_answered(self, ip: str, timeout: float = 0.1) -> bool:
        """Whether anything on the LAN answers an ARP request (IPv4) or a neighbour
        solicitation (IPv6) for ``ip``, asked from the router's LAN interface, the way the
        router itself would ask."""
        return neighbor_answered(self.router.ns, "eth0", ip, timeout, source6=ROUTER_LAN6)


def neighbor_answered(ns: str, ifname: str, ip: str, timeout: float, *, source6: str) -> bool:
    """Send one ARP who-has (IPv4) or multicast NS (IPv6, RFC 4861 §7.2.2, from
    ``source6``) for ``ip`` from ``ifname`` in namespace ``ns``; True on a reply in time."""
    target = ipaddress.ip_address(ip)
    return in_netns(ns, lambda: _ask(ifname, target, ipaddress.IPv6Address(source6), timeout))


def _ask(
    ifname: str,
    target: ipaddress.IPv4Address | ipaddress.IPv6Address,
    source6: ipaddress.IPv6Address,
    timeout: float,
) -> bool:
    proto = _ETH_P_IPV6 if target.version == 6 else _ETH_P_ARP
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto)) as sock:
        sock.bind((ifname, proto))
        mac = sock.getsockname()[4][:6]
        request: wire.Frame
        if isinstance(target, ipaddress.IPv6Address):
            request = wire.neighbor_solicitation(mac, source6, target)
        else:
            request = wire.arp_request(mac, _ipv4_of(ifname), target)
        sock.send(wire.encode(request))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([sock], [], [], left)
            if not ready:
                break
            try:
                frame = wire.decode(sock.recv(2048))
            except wire.WireError:
                continue
            if _answers(frame, target):
                return True
    return False


def _answers(frame: wire.Frame, target: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """An ARP reply from ``target``, or an NA for it."""
    if isinstance(frame, wire.ArpFrame):
        return frame.arp.op == wire.ArpOp.REPLY and frame.arp.sender_ip == target
    return isinstance(frame.message, wire.NeighborAdvertisement) and frame.message.target == target


def _ipv4_of(ifname: str) -> ipaddress.IPv4Address:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", ifname.encode()[:15]))
    return ipaddress.IPv4Address(packed[20:24])
