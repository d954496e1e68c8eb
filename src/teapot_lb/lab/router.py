"""The lab's router: BIRD 2 (default) or FRR 8 in the router namespace.

It peers with every node (the lab derives the sessions from the manifests' BGPPeers),
imports what the nodes announce and installs it into the namespace's kernel FIB with
ECMP: one next hop per announcing node. Each session (IPv4 transport) carries IPv4 and
IPv6 unicast (MP-BGP, RFC 4760): a node's IPv6 routes come over its IPv4 session with
its IPv6 InternalIP as next hop (docs/bgp.md). When the BGPPeer names a BFDProfile the
router runs BFD beside each session with the profile's timers (BIRD: ``protocol bfd`` and
``bfd on``; FRR: bfdd and ``neighbor X bfd profile``), so a dead node's session ends in
BFD time rather than at the hold time (docs/bfd.md). Every file (config, control sockets, logs, pid
files) lives in the lab's work directory, never in /etc or /run.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from teapot_lb.lab.manifests import BfdSpec
from teapot_lb.netlab import Host

FRR_DIR = Path("/usr/lib/frr")
ROUTERS = ("bird", "frr")
BFD_PROFILE = "lab"  # FRR's name for the BFD profile of the lab's sessions


class RouterError(RuntimeError):
    """The router daemon did not start or answer; the message carries its log tail."""


@dataclass(frozen=True)
class Session:
    """One BGP session as the router sees it: a node."""

    address: str
    asn: int
    hold_time: int
    keepalive_time: int
    bfd: BfdSpec | None = None  # BFD beside the session, with the BGPPeer's profile
    add_path: bool = False  # receive several paths per prefix (RFC 7911; the teapot group)


@dataclass(frozen=True)
class RouterConfig:
    asn: int
    router_id: str
    sessions: tuple[Session, ...]

    @property
    def bfd(self) -> BfdSpec | None:
        """The BFD timers (the lab's BGPPeers share one profile); None: no BFD."""
        return next((s.bfd for s in self.sessions if s.bfd is not None), None)


# --------------------------------------------------------------------------- configs (pure)


def bird_config(cfg: RouterConfig, log: Path) -> str:
    """bird.conf: sessions to the nodes, everything learned into the kernel with ECMP."""
    out = [
        f'log "{log}" all;',
        f"router id {cfg.router_id};",
        "protocol device {}",
        # merge paths: equal BGP routes from several nodes become one multipath route.
        "protocol kernel kernel4 { ipv4 { import none; export all; }; merge paths on; }",
        "protocol kernel kernel6 { ipv6 { import none; export all; }; merge paths on; }",
    ]
    if cfg.bfd is not None:
        b = cfg.bfd
        out.append(
            f'protocol bfd {{ interface "*" {{ min rx interval {b.receive_ms} ms;'
            f" min tx interval {b.transmit_ms} ms; multiplier {b.multiplier}; }}; }}"
        )
    for i, s in enumerate(cfg.sessions):
        out += [
            f"protocol bgp node{i} {{",
            f"  local as {cfg.asn};",
            f"  neighbor {s.address} as {s.asn};",
            "  direct;",
            f"  hold time {s.hold_time}; keepalive time {s.keepalive_time};",
            "  connect delay time 1; connect retry time 1; error wait time 1, 2;",
            *(["  bfd on;"] if s.bfd is not None else []),
            *(
                f"  {fam} {{ import all; export none; gateway direct;{rx} }};"
                for rx in [" add paths rx;" if s.add_path else ""]
                for fam in ("ipv4", "ipv6")
            ),
            "}",
        ]
    return "\n".join(out) + "\n"


def frr_config(cfg: RouterConfig, hostname: str) -> str:
    """bgpd.conf: the same sessions; zebra installs up to 16-way ECMP into the kernel."""
    out = [
        "frr defaults traditional",
        f"hostname {hostname}",
        "log timestamp precision 3",
        f"router bgp {cfg.asn}",
        f" bgp router-id {cfg.router_id}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        " bgp bestpath as-path multipath-relax",
    ]
    for s in cfg.sessions:
        out += [
            f" neighbor {s.address} remote-as {s.asn}",
            f" neighbor {s.address} timers {s.keepalive_time} {s.hold_time}",
            f" neighbor {s.address} timers connect 1",
            f" neighbor {s.address} advertisement-interval 0",
        ]
        if s.bfd is not None:
            out.append(f" neighbor {s.address} bfd profile {BFD_PROFILE}")
    for family in ("ipv4", "ipv6"):
        out += [
            f" address-family {family} unicast",
            "  maximum-paths 16",
            "  maximum-paths ibgp 16",
        ]
        out += [f"  neighbor {s.address} activate" for s in cfg.sessions]
        out.append(" exit-address-family")
    return "\n".join(out) + "\n"


def frr_bfdd_config(bfd: BfdSpec) -> str:
    """bfdd.conf: the profile bgpd's sessions name (bgpd asks bfdd through zebra)."""
    return (
        f"bfd\n profile {BFD_PROFILE}\n  transmit-interval {bfd.transmit_ms}\n"
        f"  receive-interval {bfd.receive_ms}\n  detect-multiplier {bfd.multiplier}\n"
    )


# --------------------------------------------------------------------------- FIB (kernel)


def fib_next_hops(host: Host, prefix: str) -> frozenset[str]:
    """Gateways of the namespace's kernel route for exactly ``prefix`` (empty: no route)."""
    family = "-6" if ipaddress.ip_network(prefix).version == 6 else "-4"
    routes = json.loads(host.ip(family, "-j", "route", "show", "exact", prefix) or "[]")
    hops: set[str] = set()
    for route in routes:
        if "gateway" in route:
            hops.add(route["gateway"])
        for nh in route.get("nexthops", []):
            if "gateway" in nh:
                hops.add(nh["gateway"])
        if "nhid" in route and not hops:
            hops |= _nexthop_group(host, int(route["nhid"]))
    return frozenset(hops)


def _nexthop_group(host: Host, nhid: int) -> set[str]:
    hops: set[str] = set()
    for nh in json.loads(host.ip("-j", "nexthop", "show", "id", str(nhid)) or "[]"):
        if "gateway" in nh:
            hops.add(nh["gateway"])
        for member in nh.get("group", []):
            hops |= _nexthop_group(host, int(member["id"]))
    return hops


# --------------------------------------------------------------------------- daemons


class Router:
    """A router daemon in ``host``; ``start()``, ``established()``, ``stop()``."""

    kind = ""

    def __init__(self, host: Host, workdir: Path, config: RouterConfig) -> None:
        self.host = host
        self.workdir = workdir
        self.config = config
        self.procs: list[subprocess.Popen[bytes]] = []
        workdir.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        raise NotImplementedError

    def ready(self) -> bool:
        """True once the daemon answers on its control socket (raises if it died)."""
        raise NotImplementedError

    def established(self) -> set[str]:
        """Addresses of the nodes whose session is Established."""
        raise NotImplementedError

    def bfd_up(self) -> set[str]:
        """Addresses of the nodes whose BFD session is Up (empty without BFD)."""
        raise NotImplementedError

    def log_files(self) -> list[Path]:
        return []

    def log_tail(self, lines: int = 30) -> str:
        text: list[str] = []
        for path in self.log_files():
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def alive(self) -> bool:
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    def _popen(self, argv: Sequence[str], log: Path) -> None:
        with log.open("ab") as out:
            self.procs.append(self.host.popen(argv, stdout=out, stderr=subprocess.STDOUT))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        self.procs.clear()


class Bird(Router):
    kind = "bird"

    @property
    def ctl(self) -> Path:
        return self.workdir / "bird.ctl"

    def log_files(self) -> list[Path]:
        return [self.workdir / "bird.out", self.workdir / "bird.log"]

    def start(self) -> None:
        conf = self.workdir / "bird.conf"
        conf.write_text(bird_config(self.config, self.workdir / "bird.log"))
        self._popen(
            ["bird", "-f", "-c", str(conf), "-s", str(self.ctl), "-P", str(self.workdir / "pid")],
            self.workdir / "bird.out",
        )

    def birdc(self, command: str) -> str:
        proc = subprocess.run(
            ["birdc", "-s", str(self.ctl), *command.split()],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if proc.returncode != 0:
            raise RouterError(f"birdc {command}: {proc.stdout.strip()} {proc.stderr.strip()}")
        return proc.stdout

    def ready(self) -> bool:
        if not self.alive():
            raise RouterError(f"bird exited\n{self.log_tail()}")
        if not self.ctl.exists():
            return False
        try:
            self.birdc("show status")
        except RouterError:
            return False
        return True

    def established(self) -> set[str]:
        try:
            text = self.birdc("show protocols")
        except (RouterError, subprocess.TimeoutExpired):
            return set()
        up: set[str] = set()
        for line in text.splitlines():
            words = line.split()
            if words and words[0].startswith("node") and "Established" in words:
                up.add(self.config.sessions[int(words[0][4:])].address)
        return up

    def bfd_up(self) -> set[str]:
        try:
            text = self.birdc("show bfd sessions")
        except (RouterError, subprocess.TimeoutExpired):
            return set()
        # "192.0.2.11  eth0  Up  10:00:01.123  0.100  0.300" per session
        return {w[0] for w in (line.split() for line in text.splitlines()) if "Up" in w[1:3]}


class Frr(Router):
    kind = "frr"

    def log_files(self) -> list[Path]:
        daemons = ("zebra", "bgpd", *(("bfdd",) if self.config.bfd is not None else ()))
        return [self.workdir / f"{d}.{ext}" for d in daemons for ext in ("out", "log")]

    def _argv(self, daemon: str) -> list[str]:
        # As root FRR wants a user in its vty group; -g frrvty satisfies it without
        # touching /etc/group. Every path points into the work directory.
        return [
            str(FRR_DIR / daemon), "-f", str(self.workdir / f"{daemon}.conf"),
            "-i", str(self.workdir / f"{daemon}.pid"), "-z", str(self.workdir / "zserv.api"),
            "--vty_socket", str(self.workdir), "-u", "root", "-g", "frrvty", "-P", "0",
            "--log", f"file:{self.workdir / (daemon + '.log')}",
        ]  # fmt: skip

    def start(self) -> None:
        (self.workdir / "zebra.conf").write_text(f"hostname {self.host.name}-zebra\n")
        (self.workdir / "bgpd.conf").write_text(frr_config(self.config, self.host.name))
        if self.config.bfd is not None:
            (self.workdir / "bfdd.conf").write_text(frr_bfdd_config(self.config.bfd))
        self._popen(self._argv("zebra"), self.workdir / "zebra.out")
        self._zebra_started = False

    def vtysh(self, command: str, daemon: str = "bgpd") -> str:
        proc = subprocess.run(
            ["vtysh", "--vty_socket", str(self.workdir), "-d", daemon, "-c", command],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if proc.returncode != 0:
            raise RouterError(f"vtysh {command!r}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def ready(self) -> bool:
        if not self.alive():
            raise RouterError(f"FRR exited\n{self.log_tail()}")
        if not self._zebra_started:
            if not (self.workdir / "zserv.api").exists():
                return False
            if self.config.bfd is not None:  # before bgpd, which asks it for sessions
                bfdd = [*self._argv("bfdd"), "--bfdctl", str(self.workdir / "bfdd.sock")]
                self._popen(bfdd, self.workdir / "bfdd.out")
            self._popen(self._argv("bgpd"), self.workdir / "bgpd.out")
            self._zebra_started = True
        if not (self.workdir / "bgpd.vty").exists():
            return False
        try:
            self.vtysh("show bgp summary json")
        except RouterError:
            return False
        return True

    def established(self) -> set[str]:
        try:
            doc = json.loads(self.vtysh("show bgp neighbors json") or "{}")
        except (RouterError, ValueError, subprocess.TimeoutExpired):
            return set()
        return {addr for addr, info in doc.items() if info.get("bgpState") == "Established"}

    def bfd_up(self) -> set[str]:
        if self.config.bfd is None:
            return set()
        try:
            peers = json.loads(self.vtysh("show bfd peers json", "bfdd") or "[]")
        except (RouterError, ValueError, subprocess.TimeoutExpired):
            return set()
        return {p["peer"] for p in peers if p.get("status") == "up" and "peer" in p}


def make_router(kind: str, host: Host, workdir: Path, config: RouterConfig) -> Router:
    if kind == "bird":
        return Bird(host, workdir, config)
    if kind == "frr":
        return Frr(host, workdir, config)
    raise RouterError(f"unknown router {kind!r}; use one of {', '.join(ROUTERS)}")
