"""Build and tear down namespace topologies with iproute2."""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

# Every namespace we create starts with this, followed by the creator's pid.
PREFIX = "tlb"
_counter = itertools.count()
_NETNS_DIR = Path("/run/netns")

# Documentation ranges only (RFC 5737, RFC 3849): the only addresses we use.
ALLOWED_NETS = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


class NetlabError(RuntimeError):
    """A topology operation failed; the message carries the command and its stderr."""


def netns_available() -> str | None:
    """None when namespaces can be used here, else the reason why not."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    return None


def check_documentation_address(addr: str) -> None:
    """Refuse any address outside the documentation ranges."""
    iface = ipaddress.ip_interface(addr)
    if iface.ip.is_link_local:
        return
    if not any(iface.ip in net for net in ALLOWED_NETS):
        raise NetlabError(f"address {addr} is outside the documentation ranges {ALLOWED_NETS}")


def _run(argv: Sequence[str], *, timeout: float = 30, check: bool = True) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetlabError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


@dataclass
class Host:
    """One network namespace."""

    name: str
    ns: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def exec_argv(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]

    def run(self, *argv: str, timeout: float = 30, check: bool = True) -> str:
        """Run a command inside the namespace and return its stdout."""
        return _run(self.exec_argv(argv), timeout=timeout, check=check)

    def ip(self, *args: str, check: bool = True) -> str:
        return _run(["ip", "-n", self.ns, *args], check=check)

    def popen(self, argv: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start a long-running process in the namespace; it is killed at teardown."""
        proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
            self.exec_argv(argv), start_new_session=True, **kwargs
        )
        self.procs.append(proc)
        return proc

    def add_address(self, ifname: str, addr: str) -> None:
        check_documentation_address(addr)
        extra = ["nodad"] if ipaddress.ip_interface(addr).version == 6 else []
        self.ip("addr", "add", addr, "dev", ifname, *extra)

    def sysctl(self, key: str, value: str) -> None:
        self.run("sysctl", "-q", "-w", f"{key}={value}")

    def mac(self, ifname: str) -> str:
        out = self.ip("-o", "link", "show", ifname)
        words = out.split()
        return words[words.index("link/ether") + 1]

    def kill_processes(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.procs.clear()
        _kill_ns_pids(self.ns)


def _kill_ns_pids(ns: str) -> None:
    out = _run(["ip", "netns", "pids", ns], check=False)
    for pid in out.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


class Topology:
    """A set of namespaces joined by switches; a context manager that always cleans up.

    >>> with Topology("l2") as topo:               # doctest: +SKIP
    ...     sw = topo.add_switch("lan")
    ...     a = topo.add_host("a")
    ...     topo.connect(a, sw, addrs=["192.0.2.1/24"])
    """

    def __init__(self, label: str) -> None:
        self.tag = f"{PREFIX}{os.getpid()}{label[:6]}{next(_counter)}"
        self.hosts: dict[str, Host] = {}
        self._switch_ports: dict[str, int] = {}

    def __enter__(self) -> Topology:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def add_host(self, name: str) -> Host:
        if name in self.hosts:
            raise NetlabError(f"host {name!r} already exists in this topology")
        ns = f"{self.tag}-{name}"
        _run(["ip", "netns", "add", ns])
        host = Host(name=name, ns=ns)
        self.hosts[name] = host
        host.ip("link", "set", "lo", "up")
        # Keep tests deterministic: no IPv6 DAD delay, no router solicitations.
        host.sysctl("net.ipv6.conf.all.accept_dad", "0")
        host.sysctl("net.ipv6.conf.default.accept_dad", "0")
        return host

    def add_switch(self, name: str) -> Host:
        """A namespace holding one bridge ``br0``; hosts attach with :meth:`connect`."""
        sw = self.add_host(name)
        sw.ip("link", "add", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0")
        sw.ip("link", "set", "br0", "up")
        self._switch_ports[name] = 0
        return sw

    def connect(
        self, host: Host, switch: Host, *, ifname: str = "eth0", addrs: Sequence[str] = ()
    ) -> str:
        """Attach ``host`` to ``switch`` with a veth pair; returns the switch-side port name."""
        for a in addrs:
            check_documentation_address(a)
        port_no = self._switch_ports[switch.name]
        self._switch_ports[switch.name] = port_no + 1
        port = f"p{port_no}"
        _run(
            [
                "ip", "-n", switch.ns, "link", "add", port, "type", "veth",
                "peer", "name", ifname, "netns", host.ns,
            ]
        )  # fmt: skip
        switch.ip("link", "set", port, "master", "br0")
        switch.ip("link", "set", port, "up")
        host.ip("link", "set", ifname, "up")
        for a in addrs:
            host.add_address(ifname, a)
        return port

    def link_pair(
        self, a: Host, b: Host, *, a_if: str, b_if: str, a_addrs: Sequence[str] = (),
        b_addrs: Sequence[str] = (),
    ) -> None:  # fmt: skip
        """A point-to-point veth between two hosts."""
        _run(
            [
                "ip",
                "-n",
                a.ns,
                "link",
                "add",
                a_if,
                "type",
                "veth",
                "peer",
                "name",
                b_if,
                "netns",
                b.ns,
            ]
        )
        a.ip("link", "set", a_if, "up")
        b.ip("link", "set", b_if, "up")
        for addr in a_addrs:
            a.add_address(a_if, addr)
        for addr in b_addrs:
            b.add_address(b_if, addr)

    def close(self) -> None:
        for host in self.hosts.values():
            host.kill_processes()
        for host in self.hosts.values():
            _delete_ns(host.ns)
        self.hosts.clear()


def _delete_ns(ns: str) -> None:
    for _ in range(50):
        _kill_ns_pids(ns)
        proc = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)
        if proc.returncode == 0 or not (_NETNS_DIR / ns).exists():
            return
        time.sleep(0.1)
    raise NetlabError(f"could not delete namespace {ns}")


def cleanup_stale(*, all_owners: bool = False) -> list[str]:
    """Delete namespaces left by runs whose process is gone (or all of ours).

    Returns the names removed. Namespaces of live runs are left alone, so a
    cleanup never disturbs a parallel run.
    """
    removed: list[str] = []
    if not _NETNS_DIR.exists():
        return removed
    for entry in sorted(_NETNS_DIR.iterdir()):
        name = entry.name
        if not name.startswith(PREFIX):
            continue
        digits = "".join(itertools.takewhile(str.isdigit, name[len(PREFIX) :]))
        owner_alive = bool(digits) and Path(f"/proc/{digits}").exists()
        if all_owners or not owner_alive:
            _delete_ns(name)
            removed.append(name)
    return removed
