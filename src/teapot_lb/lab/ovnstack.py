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
import ipaddress
import os
import shutil
import signal
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
        self,
        name: str,
        schema: Path,
        socket: Path,
        host: Host | None = None,
        directory: Path | None = None,
    ) -> None:
        where = directory or self.workdir
        db = where / f"{name}.db"
        if not db.exists():
            subprocess.run([_which("ovsdb-tool"), "create", str(db), str(schema)], check=True)
        self.spawn(
            name,
            [
                _which("ovsdb-server"),
                str(db),
                f"--remote=punix:{socket}",
                f"--unixctl={where / f'{name}.ctl'}",
                f"--pidfile={where / f'{name}.pid'}",
            ],
            host,
            directory,
        )
        wait_for(socket.exists, timeout=10, what=f"{name} ovsdb-server socket {socket}")

    def spawn(
        self, name: str, argv: list[str], host: Host | None = None, directory: Path | None = None
    ) -> _Daemon:
        """Start a daemon logging to `directory` (default: the work dir), its OVS/OVN
        directories pointed there too, in `host`'s namespace if given."""
        where = directory or self.workdir
        env = self.env if directory is None else environment(directory)
        log = where / f"{name}.log"
        argv = [*argv, f"--log-file={log}"]
        if host is not None:
            proc = host.popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            proc = subprocess.Popen(
                argv,
                env=env,
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


@dataclass
class Chassis:
    """One hypervisor: its namespace, its directory and its Open vSwitch database."""

    name: str
    host: Host
    directory: Path
    encap_ip: str

    @property
    def ovs_socket(self) -> Path:
        return self.directory / "db.sock"


# The tunnel underlay between chassis (inside their namespaces only); Service VIPs of the
# tests and the lab stay below it.
UNDERLAY = "203.0.113.240/28"


class OVNStack(OVNDatabases):
    """An OVN: databases and northd, and `chassis` hypervisors, each a namespace running
    its own ovsdb-server, ovs-vswitchd (userspace datapath) and ovn-controller. With
    several, their geneve tunnels run over a bridge between them (the tunnel endpoint on a
    netdev bridge `br-phy`: userspace tunnelling). VIFs are veths into other hosts."""

    def __init__(self, workdir: Path, topology: Topology, chassis: int = 1) -> None:
        super().__init__(workdir)
        self.topology = topology
        self.chassis_count = chassis
        self.chassis: dict[str, Chassis] = {}
        self._ports = 0

    @property
    def switch_host(self) -> Host:
        """The first chassis's namespace."""
        return self.chassis[CHASSIS].host

    @property
    def ovs_socket(self) -> Path:
        return self.chassis[CHASSIS].ovs_socket

    def start(self) -> OVNStack:
        super().start()
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
        underlay = self.topology.add_switch("underlay") if self.chassis_count > 1 else None
        for i in range(1, self.chassis_count + 1):
            self._add_chassis(f"chassis-{i}", i, underlay)
        return self

    def _add_chassis(self, name: str, index: int, underlay: Host | None) -> None:
        host = self.topology.add_host(f"hv{index}")
        directory = self.workdir / name
        directory.mkdir(parents=True, exist_ok=True)
        encap = "127.0.0.1"
        if underlay is not None:
            net = ipaddress.ip_network(UNDERLAY)
            encap = str(net.network_address + index)
        chassis = Chassis(name, host, directory, encap)
        self.chassis[name] = chassis
        self.start_database("ovs", VSWITCH_SCHEMA, chassis.ovs_socket, host, directory)
        self.vsctl("--no-wait", "init", chassis=name)
        self.spawn(
            "vswitchd",
            [
                _which("ovs-vswitchd"),
                f"unix:{chassis.ovs_socket}",
                f"--pidfile={directory / 'vswitchd.pid'}",
            ],
            host,
            directory,
        )
        if underlay is not None:
            self.topology.connect(host, underlay, ifname="phy0")
            self.vsctl(
                "add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev",
                "--", "add-port", "br-phy", "phy0", chassis=name,
            )  # fmt: skip
            host.ip("addr", "add", f"{encap}/{ipaddress.ip_network(UNDERLAY).prefixlen}",
                    "dev", "br-phy")  # fmt: skip
            host.ip("link", "set", "br-phy", "up")
        self.vsctl(
            "set", "open_vswitch", ".",
            f"external_ids:system-id={name}",
            f"external_ids:ovn-remote={self.sb_remote}",
            "external_ids:ovn-encap-type=geneve",
            f"external_ids:ovn-encap-ip={encap}",
            "external_ids:ovn-bridge-datapath-type=netdev",
            chassis=name,
        )  # fmt: skip
        self.vsctl(
            "--may-exist", "add-br", "br-int", "--", "set", "bridge", "br-int",
            "datapath_type=netdev", "fail-mode=secure", "other_config:disable-in-band=true",
            chassis=name,
        )  # fmt: skip
        self.spawn(
            "controller",
            [
                _which("ovn-controller"),
                f"unix:{chassis.ovs_socket}",
                f"--pidfile={directory / 'controller.pid'}",
            ],
            host,
            directory,
        )
        wait_for(
            lambda: name in self.sbctl("--columns=name", "list", "chassis"),
            timeout=20,
            what=f"ovn-controller of {name} registering its chassis",
        )

    def stop_chassis(self, name: str) -> None:
        """A hypervisor dies: its ovn-controller and ovs-vswitchd are killed (SIGKILL)."""
        directory = self.chassis[name].directory
        for daemon in list(self.daemons):
            if daemon.log.parent == directory and daemon.name in ("controller", "vswitchd"):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.proc.pid, signal.SIGKILL)
                daemon.proc.wait(5)
                self.daemons.remove(daemon)

    def vsctl(self, *args: str, chassis: str = CHASSIS, timeout: float = 30) -> str:
        socket = self.chassis[chassis].ovs_socket
        return self.tool("ovs-vsctl", f"--db=unix:{socket}", "--timeout=20", *args,
                         timeout=timeout)  # fmt: skip

    def attach(
        self,
        host: Host,
        switch: str,
        port: str,
        address: str,
        gateway: str,
        chassis: str = CHASSIS,
    ) -> str:
        """Give `host` an eth0 on logical switch port `port` of `switch` with `address`
        (a/len) and a default route via `gateway`, bound on `chassis`; waits until OVN has
        bound the port."""
        return self.bind(host, port, address, gateway, chassis=chassis, add_port=switch)

    def bind(
        self,
        host: Host,
        port: str,
        address: str,
        gateway: str,
        *,
        mac: str | None = None,
        chassis: str = CHASSIS,
        add_port: str | None = None,
    ) -> str:
        """Give `host` an eth0 bound to logical switch port `port` on `chassis` (its
        ``iface-id``), with `address` (a/len), MAC `mac` (default: the veth's own) and a
        default route via `gateway`; the port is added to switch `add_port` first unless
        another writer (Neutron) made it. Waits until OVN has bound the port; its MAC."""
        self._ports += 1
        outside = f"vif{self._ports}"
        self.topology.link_pair(
            host, self.chassis[chassis].host, a_if="eth0", b_if=outside, a_addrs=[address]
        )
        if mac is not None:
            host.ip("link", "set", "eth0", "address", mac)
        host.run("ethtool", "-K", "eth0", "tx", "off")
        host.ip("route", "add", "default", "via", gateway)
        mac = host.mac("eth0")
        if add_port is not None:
            ip = address.partition("/")[0]
            self.nbctl("lsp-add", add_port, port, "--", "lsp-set-addresses", port, f"{mac} {ip}")
        self.vsctl(
            "add-port", "br-int", outside, "--",
            "set", "interface", outside, f"external_ids:iface-id={port}",
            chassis=chassis,
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
    """Routers between the pods' switch (backends on 198.51.100.0/24) and the external
    network (the client, 192.0.2.10, routing the Service range 203.0.113.0/24 via
    192.0.2.1): north-south traffic as a LoadBalancer gets it.

    :func:`gateway_lab`: one chassis, gateway router `gr0` bound to it, the client a VIF of
    the external logical switch. :func:`ha_gateway_lab`: three chassis, distributed router
    `lr0` whose external port has gateway chassis chassis-1 (priority 20) and chassis-2
    (10), the external switch reaching a real bridge through a localnet port on both, the
    client on that bridge outside OVN, the backends on chassis-3 (which keeps chassis-2's
    BFD up when chassis-1 dies: a chassis that sees no other does not claim the port)."""

    stack: OVNStack
    client: Host
    backends: dict[str, tuple[Host, str]]  # name → (host, address)
    router: str = "gr0"

    def active_gateway(self) -> str | None:
        """The chassis holding the distributed router's gateway port (HA lab), if any."""
        uuid = self.stack.sbctl("--bare", "--columns=chassis", "find", "port_binding",
                                "type=chassisredirect").strip()  # fmt: skip
        if not uuid:
            return None
        return self.stack.sbctl("--bare", "--columns=name", "list", "chassis", uuid).strip()


def _router(stack: OVNStack, router: str, gateways: Sequence[str] = ()) -> None:
    """`router` between the pods' and the external switch; with `gateways`, its external
    port is a distributed gateway port on those chassis (first = highest priority)."""
    nbctl = stack.nbctl
    nbctl("ls-add", PODS_SWITCH)
    nbctl("ls-add", EXTERNAL_SWITCH)
    if gateways:
        nbctl("lr-add", router)
    else:
        nbctl("lr-add", router, "--", "set", "logical_router", router, f"options:chassis={CHASSIS}")
    for switch, mac, address in (
        (PODS_SWITCH, "02:00:00:00:01:01", f"{PODS_GW}/24"),
        (EXTERNAL_SWITCH, "02:00:00:00:02:01", f"{EXTERNAL_GW}/24"),
    ):
        nbctl("lrp-add", router, f"{router}-{switch}", mac, address)
        port = f"{switch}-{router}"
        nbctl(
            "lsp-add", switch, port, "--", "lsp-set-type", port, "router",
            "--", "lsp-set-addresses", port, "router",
            "--", "lsp-set-options", port, f"router-port={router}-{switch}",
        )  # fmt: skip
    for i, chassis in enumerate(gateways):
        priority = str(10 * (len(gateways) - i))
        nbctl("lrp-set-gateway-chassis", f"{router}-{EXTERNAL_SWITCH}", chassis, priority)


def _backends(stack: OVNStack, count: int, chassis: str) -> dict[str, tuple[Host, str]]:
    found: dict[str, tuple[Host, str]] = {}
    for i in range(1, count + 1):
        name = f"be{i}"
        host = stack.topology.add_host(name)
        address = f"198.51.100.{10 + i}"
        stack.attach(host, PODS_SWITCH, name, f"{address}/24", PODS_GW, chassis)
        found[name] = (host, address)
    return found


def gateway_lab(stack: OVNStack, backends: int = 2) -> GatewayLab:
    """One chassis, gateway router gr0 (see :class:`GatewayLab`)."""
    _router(stack, ROUTER)
    client = stack.topology.add_host("client")
    stack.attach(client, EXTERNAL_SWITCH, "client", CLIENT_ADDRESS, EXTERNAL_GW)
    return GatewayLab(stack, client, _backends(stack, backends, CHASSIS))


HA_ROUTER = "lr0"
HA_GATEWAYS = ("chassis-1", "chassis-2")


def ha_gateway_lab(stack: OVNStack, backends: int = 2) -> GatewayLab:
    """Three chassis, distributed router lr0 with gateway-chassis failover (see
    :class:`GatewayLab`); `stack` must have been started with ``chassis=3``."""
    topology = stack.topology
    external = topology.add_switch("extnet")
    for name in HA_GATEWAYS:
        topology.connect(stack.chassis[name].host, external, ifname="ex0")
        stack.vsctl("add-br", "br-ex", "--", "set", "bridge", "br-ex", "datapath_type=netdev",
                    "--", "add-port", "br-ex", "ex0", chassis=name)  # fmt: skip
        stack.vsctl("set", "open_vswitch", ".", "external_ids:ovn-bridge-mappings=physnet:br-ex",
                    chassis=name)  # fmt: skip
    _router(stack, HA_ROUTER, HA_GATEWAYS)
    stack.nbctl(
        "lsp-add", EXTERNAL_SWITCH, "ln-ext", "--", "lsp-set-type", "ln-ext", "localnet",
        "--", "lsp-set-addresses", "ln-ext", "unknown",
        "--", "lsp-set-options", "ln-ext", "network_name=physnet",
    )  # fmt: skip
    client = topology.add_host("client")
    topology.connect(client, external, addrs=[CLIENT_ADDRESS])
    client.run("ethtool", "-K", "eth0", "tx", "off")
    client.ip("route", "add", "default", "via", EXTERNAL_GW)
    lab = GatewayLab(stack, client, _backends(stack, backends, "chassis-3"), HA_ROUTER)
    wait_for(lambda: lab.active_gateway() == HA_GATEWAYS[0], timeout=20,
             what=f"{HA_GATEWAYS[0]} holding the gateway port")  # fmt: skip
    return lab
