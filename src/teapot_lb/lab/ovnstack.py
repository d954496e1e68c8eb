"""A real OVN on one host, for tests, the benchmark and the lab: run by hand in a temp dir.

:class:`OVNDatabases` starts the Northbound and Southbound ``ovsdb-server`` (unix sockets
in the directory; no root needed). :class:`OVNStack` adds, in a network namespace of its
own, ``ovn-northd``, ``ovs-vswitchd`` with the userspace datapath (``datapath_type=netdev``:
no kernel module) and ``ovn-controller``, and attaches hosts (namespaces) to logical
switch ports by veth. Nothing runs through systemd; every daemon is told its directories
by ``OVS_RUNDIR`` / ``OVN_RUNDIR`` (ovn-controller 23.03 has no ``--unixctl``).

Gotchas this encodes: TX checksum offload must be off inside each namespace (``ethtool -K
eth0 tx off``) or TCP through the userspace datapath silently times out; ``ovn-trace``
shows the load-balancing stage only with ``--ct=new``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host, Topology

NB_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
SB_SCHEMA = Path("/usr/share/ovn/ovn-sb.ovsschema")
VSWITCH_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
DATABASE_BINARIES = ("ovsdb-server", "ovsdb-tool", "ovn-nbctl")
STACK_BINARIES = (
    *DATABASE_BINARIES,
    "ovn-northd",
    "ovn-controller",
    "ovs-vswitchd",
    "ovs-vsctl",
    "ovn-sbctl",
    "ovn-trace",
    "ethtool",
)
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"
CHASSIS = "chassis-1"


def missing(binaries: Sequence[str] = STACK_BINARIES) -> str | None:
    """Why OVN cannot run here (a program or a schema is missing), or None."""
    for name in binaries:
        if shutil.which(name, path=os.environ.get("PATH", "") + ":" + _SBIN) is None:
            return f"{name} is not installed (scripts/setup.sh installs ovn-central, ovn-host)"
    for schema in (NB_SCHEMA, SB_SCHEMA, VSWITCH_SCHEMA):
        if not schema.exists():
            return f"{schema} is missing (the ovn-central / openvswitch packages ship it)"
    return None


def _which(name: str) -> str:
    found = shutil.which(name, path=os.environ.get("PATH", "") + ":" + _SBIN)
    if found is None:
        raise FileNotFoundError(name)
    return found


def environment(workdir: Path) -> dict[str, str]:
    """Every OVS/OVN directory pointed into `workdir`."""
    env = dict(os.environ)
    for var in (
        "OVS_RUNDIR",
        "OVS_DBDIR",
        "OVS_LOGDIR",
        "OVS_SYSCONFDIR",
        "OVN_RUNDIR",
        "OVN_DBDIR",
        "OVN_LOGDIR",
        "OVN_SYSCONFDIR",
    ):
        env[var] = str(workdir)
    return env


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


class OVNDatabases:
    """The Northbound and Southbound ovsdb-servers on unix sockets in `workdir`."""

    def __init__(self, workdir: Path, *, southbound: bool = True) -> None:
        self.workdir = workdir
        self.env = environment(workdir)
        self.daemons: list[_Daemon] = []
        self.nb_socket = workdir / "nb.sock"
        self.sb_socket = workdir / "sb.sock"
        self._southbound = southbound

    @property
    def nb_remote(self) -> str:
        return f"unix:{self.nb_socket}"

    @property
    def sb_remote(self) -> str:
        return f"unix:{self.sb_socket}"

    def start(self) -> OVNDatabases:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.start_database("nb", NB_SCHEMA, self.nb_socket)
        if self._southbound:
            self.start_database("sb", SB_SCHEMA, self.sb_socket)
        return self

    def start_database(
        self, name: str, schema: Path, socket: Path, host: Host | None = None
    ) -> None:
        db = self.workdir / f"{name}.db"
        if not db.exists():
            subprocess.run([_which("ovsdb-tool"), "create", str(db), str(schema)], check=True)
        self.spawn(
            name,
            [
                _which("ovsdb-server"),
                str(db),
                f"--remote=punix:{socket}",
                f"--unixctl={self.workdir / f'{name}.ctl'}",
                f"--pidfile={self.workdir / f'{name}.pid'}",
            ],
            host,
        )
        wait_for(socket.exists, timeout=10, what=f"{name} ovsdb-server socket {socket}")

    def spawn(self, name: str, argv: list[str], host: Host | None = None) -> _Daemon:
        log = self.workdir / f"{name}.log"
        argv = [*argv, f"--log-file={log}"]
        if host is not None:
            proc = host.popen(
                argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        else:
            proc = subprocess.Popen(
                argv,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        daemon = _Daemon(name, proc, log)
        self.daemons.append(daemon)
        return daemon

    def stop_daemon(self, name: str) -> None:
        """Stop one daemon (a database's server, say: a lost connection for its clients)."""
        for daemon in list(self.daemons):
            if daemon.name == name:
                daemon.proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    daemon.proc.wait(5)
                if daemon.proc.poll() is None:
                    daemon.proc.kill()
                    daemon.proc.wait(5)
                self.daemons.remove(daemon)

    def nbctl(self, *args: str, timeout: float = 30) -> str:
        """ovn-nbctl against our Northbound (tests and the lab only: the product uses the IDL)."""
        return self.tool("ovn-nbctl", f"--db={self.nb_remote}", "--no-leader-only", *args,
                         timeout=timeout)  # fmt: skip

    def sbctl(self, *args: str, timeout: float = 30) -> str:
        return self.tool("ovn-sbctl", f"--db={self.sb_remote}", "--no-leader-only", *args,
                         timeout=timeout)  # fmt: skip

    def tool(self, program: str, *args: str, timeout: float = 30) -> str:
        """Run an OVS/OVN command-line tool in our environment; its output."""
        proc = subprocess.run(
            [_which(program), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def close(self) -> None:
        for daemon in reversed(self.daemons):
            if daemon.proc.poll() is None:
                daemon.proc.terminate()
        for daemon in self.daemons:
            try:
                daemon.proc.wait(5)
            except subprocess.TimeoutExpired:
                daemon.proc.kill()
                daemon.proc.wait(5)
        self.daemons.clear()

    def __enter__(self) -> OVNDatabases:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class OVNStack(OVNDatabases):
    """A one-chassis OVN: databases, northd, ovs-vswitchd (userspace) and ovn-controller,
    the switch daemons in namespace `ovs` of `topology`; VIFs are veths into other hosts."""

    def __init__(self, workdir: Path, topology: Topology) -> None:
        super().__init__(workdir)
        self.topology = topology
        self.switch_host: Host | None = None
        self.ovs_socket = workdir / "db.sock"
        self._ports = 0

    def start(self) -> OVNStack:
        super().start()
        self.switch_host = host = self.topology.add_host("ovs")
        self.spawn(
            "northd",
            [
                _which("ovn-northd"),
                f"--ovnnb-db={self.nb_remote}",
                f"--ovnsb-db={self.sb_remote}",
                f"--unixctl={self.workdir / 'northd.ctl'}",
                f"--pidfile={self.workdir / 'northd.pid'}",
            ],
        )
        self.start_database("ovs", VSWITCH_SCHEMA, self.ovs_socket, host)
        self.vsctl("--no-wait", "init")
        self.spawn(
            "vswitchd",
            [
                _which("ovs-vswitchd"),
                f"unix:{self.ovs_socket}",
                f"--pidfile={self.workdir / 'vswitchd.pid'}",
            ],
            host,
        )
        self.vsctl(
            "set", "open_vswitch", ".",
            f"external_ids:system-id={CHASSIS}",
            f"external_ids:ovn-remote={self.sb_remote}",
            "external_ids:ovn-encap-type=geneve",
            "external_ids:ovn-encap-ip=127.0.0.1",
            "external_ids:ovn-bridge-datapath-type=netdev",
        )  # fmt: skip
        self.vsctl(
            "--may-exist", "add-br", "br-int", "--", "set", "bridge", "br-int",
            "datapath_type=netdev", "fail-mode=secure", "other_config:disable-in-band=true",
        )  # fmt: skip
        self.spawn(
            "controller",
            [
                _which("ovn-controller"),
                f"unix:{self.ovs_socket}",
                f"--pidfile={self.workdir / 'controller.pid'}",
            ],
            host,
        )
        wait_for(
            lambda: CHASSIS in self.sbctl("--columns=name", "list", "chassis"),
            timeout=20,
            what="ovn-controller registering its chassis",
        )
        return self

    def vsctl(self, *args: str, timeout: float = 30) -> str:
        return self.tool("ovs-vsctl", f"--db=unix:{self.ovs_socket}", "--timeout=20", *args,
                         timeout=timeout)  # fmt: skip

    def attach(self, host: Host, switch: str, port: str, address: str, gateway: str) -> str:
        """Give `host` an eth0 on logical switch port `port` of `switch` with `address`
        (a/len) and a default route via `gateway`; waits until OVN has bound the port."""
        assert self.switch_host is not None
        self._ports += 1
        outside = f"vif{self._ports}"
        self.topology.link_pair(
            host, self.switch_host, a_if="eth0", b_if=outside, a_addrs=[address]
        )
        host.run("ethtool", "-K", "eth0", "tx", "off")
        host.ip("route", "add", "default", "via", gateway)
        mac = host.mac("eth0")
        ip = address.partition("/")[0]
        self.nbctl("lsp-add", switch, port, "--", "lsp-set-addresses", port, f"{mac} {ip}")
        self.vsctl(
            "add-port", "br-int", outside, "--",
            "set", "interface", outside, f"external_ids:iface-id={port}",
        )  # fmt: skip
        wait_for(
            lambda: self.nbctl("get", "logical_switch_port", port, "up").strip() == "true",
            timeout=20,
            what=f"logical switch port {port} up",
        )
        return mac

    def trace(self, datapath: str, flow: str) -> str:
        """ovn-trace with a new connection (`--ct=new`: the load-balancing stage shows)."""
        return self.tool("ovn-trace", f"--db={self.sb_remote}", "--ct=new", datapath, flow)


# The gateway lab's addresses (documentation ranges only).
PODS_NET, PODS_GW = "198.51.100.0/24", "198.51.100.1"
EXTERNAL_GW = "192.0.2.1"
CLIENT_ADDRESS = "192.0.2.10/24"
ROUTER, PODS_SWITCH, EXTERNAL_SWITCH = "gr0", "ls-pods", "ls-ext"


@dataclass
class GatewayLab:
    """A gateway router `gr0` bound to the chassis, between the pods' switch (backends on
    198.51.100.0/24) and the external switch (the client, 192.0.2.10, routing the Service
    range 203.0.113.0/24 via the router): north-south traffic as a LoadBalancer gets it."""

    stack: OVNStack
    client: Host
    backends: dict[str, tuple[Host, str]]  # name → (host, address)

    @property
    def router(self) -> str:
        return ROUTER


def gateway_lab(stack: OVNStack, backends: int = 2) -> GatewayLab:
    """Build the logical topology and its hosts on a started stack."""
    nbctl = stack.nbctl
    nbctl("ls-add", PODS_SWITCH)
    nbctl("ls-add", EXTERNAL_SWITCH)
    nbctl("lr-add", ROUTER, "--", "set", "logical_router", ROUTER, f"options:chassis={CHASSIS}")
    for switch, mac, address in (
        (PODS_SWITCH, "02:00:00:00:01:01", f"{PODS_GW}/24"),
        (EXTERNAL_SWITCH, "02:00:00:00:02:01", f"{EXTERNAL_GW}/24"),
    ):
        nbctl("lrp-add", ROUTER, f"{ROUTER}-{switch}", mac, address)
        port = f"{switch}-{ROUTER}"
        nbctl(
            "lsp-add", switch, port, "--", "lsp-set-type", port, "router",
            "--", "lsp-set-addresses", port, "router",
            "--", "lsp-set-options", port, f"router-port={ROUTER}-{switch}",
        )  # fmt: skip
    client = stack.topology.add_host("client")
    stack.attach(client, EXTERNAL_SWITCH, "client", CLIENT_ADDRESS, EXTERNAL_GW)
    found: dict[str, tuple[Host, str]] = {}
    for i in range(1, backends + 1):
        name = f"be{i}"
        host = stack.topology.add_host(name)
        address = f"198.51.100.{10 + i}"
        stack.attach(host, PODS_SWITCH, name, f"{address}/24", PODS_GW)
        found[name] = (host, address)
    return GatewayLab(stack, client, found)
