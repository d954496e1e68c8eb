"""Real BGP daemons (BIRD 2, FRR 8, GoBGP 3, ExaBGP 4) run inside netlab namespaces.

Each daemon gets its own directory (config, pid file, control sockets, logs), never the
distribution's /etc or /run defaults, so several instances run side by side. All of them
answer the same small interface:

    daemon = Bird(host, workdir, asn=65000, router_id="192.0.2.1",
                  neighbors=[Neighbor("192.0.2.2", asn=65001)])
    daemon.start()
    daemon.wait_established("192.0.2.2", timeout=30)
    daemon.routes()   # {"198.51.100.1/32": RibEntry(next_hops=..., communities=...)}
    daemon.stop()

`routes()` is the daemon's view of what it learned over BGP (locally originated routes are
left out), normalised so that tests compare the same thing whatever the daemon.
Every wait polls a condition against a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import abc
import contextlib
import ipaddress
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from teapot_lb.netlab.topology import Host

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
FRR_DIR = Path("/usr/lib/frr")


class PeerError(RuntimeError):
    """A daemon did not start, answer, or reach the awaited state; carries its log tail."""


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Neighbor:
    """One BGP session as the daemon sees it."""

    address: str  # the other side's address
    asn: int  # the other side's ASN
    local_address: str | None = None  # our source address (ExaBGP needs it)
    password: str | None = None  # TCP MD5 (RFC 2385)
    hold_time: int = 9
    passive: bool = False  # wait for the other side to connect
    graceful_restart: bool = False  # advertise GR (RFC 4724) and act as helper
    families: tuple[str, ...] = ("ipv4", "ipv6")

    @property
    def version(self) -> int:
        return ipaddress.ip_address(self.address).version


@dataclass(frozen=True)
class Origination:
    """A route the daemon announces itself (next hop: its own address)."""

    prefix: str
    communities: tuple[str, ...] = ()  # "65000:1"
    large_communities: tuple[str, ...] = ()  # "65000:1:2"
    local_pref: int | None = None

    @property
    def version(self) -> int:
        return ipaddress.ip_network(self.prefix).version


@dataclass(frozen=True)
class RibEntry:
    """What a daemon holds for one prefix learned over BGP.

    ``next_hops`` is the union over all paths (one per announcing peer); the other
    attributes are those of the best path. IPv6 link-local next hops are dropped when
    a global one is present.
    """

    next_hops: frozenset[str]
    communities: frozenset[str] = frozenset()
    large_communities: frozenset[str] = frozenset()
    local_pref: int | None = None
    as_path: tuple[int, ...] = ()


def wait_for(
    condition: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            detail = on_timeout() if on_timeout else ""
            raise PeerError(
                f"timed out after {timeout:g}s waiting for {what}; last={last!r}\n{detail}"
            )
        time.sleep(interval)


def _is_link_local(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_link_local
    except ValueError:
        return False


def _global_next_hops(hops: Iterable[str]) -> frozenset[str]:
    hops = [h for h in hops if h]
    globals_ = [h for h in hops if not _is_link_local(h)]
    return frozenset(globals_ or hops)


def _version(addr: str) -> int:
    return ipaddress.ip_address(addr).version


def _community_str(value: int) -> str:
    return f"{value >> 16}:{value & 0xFFFF}"


def fib_next_hops(host: Host, prefix: str) -> frozenset[str] | None:
    """Gateways of the kernel route for exactly ``prefix`` in the host's namespace.

    None when the FIB has no such route. Handles single-path routes, ``nexthop via``
    multipath routes and nexthop-object routes (shown expanded by the kernel).
    """
    family = "-6" if ipaddress.ip_network(prefix).version == 6 else "-4"
    out = host.ip(family, "-j", "route", "show", "exact", prefix)
    routes = json.loads(out or "[]")
    for route in routes:
        hops: set[str] = set()
        if "gateway" in route:
            hops.add(route["gateway"])
        for nh in route.get("nexthops", []):
            if "gateway" in nh:
                hops.add(nh["gateway"])
        if not hops and "nhid" in route:
            hops |= _nexthop_object_gateways(host, family, int(route["nhid"]))
        return frozenset(hops)
    return None


def _nexthop_object_gateways(host: Host, family: str, nhid: int) -> set[str]:
    out = json.loads(host.ip("-j", "nexthop", "show", "id", str(nhid)) or "[]")
    hops: set[str] = set()
    for nh in out:
        if "gateway" in nh:
            hops.add(nh["gateway"])
        for member in nh.get("group", []):
            hops |= _nexthop_object_gateways(host, family, int(member["id"]))
    return hops


# --------------------------------------------------------------------------- base


class BgpDaemon(abc.ABC):
    """A BGP daemon in one namespace, configured from neighbors and originations."""

    kind: ClassVar[str]
    binaries: ClassVar[tuple[str, ...]]

    def __init__(
        self,
        host: Host,
        workdir: Path,
        *,
        asn: int,
        router_id: str,
        neighbors: Sequence[Neighbor],
        originate: Sequence[Origination] = (),
        fib: bool = False,
        local_addresses: Sequence[str] = (),
    ) -> None:
        """``fib``: install learned routes into the namespace's kernel FIB, with ECMP.

        ``local_addresses``: the host's own addresses, for daemons that must be told the
        next hop of a family other than the session's transport.
        """
        self.host = host
        self.workdir = workdir
        self.asn = asn
        self.router_id = router_id
        self.neighbors = list(neighbors)
        self.originate = list(originate)
        self.fib = fib
        self.local_addresses = list(local_addresses)
        self.procs: list[subprocess.Popen[bytes]] = []
        workdir.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} as{self.asn} in {self.host.ns}>"

    # -- lifecycle

    def start(self, *, timeout: float = 30) -> None:
        """Write the config, launch the daemon in its namespace, wait until it answers."""
        if self.running:
            raise PeerError(f"{self!r} is already running")
        self._write_config()
        self._launch()
        wait_for(
            self._ready, timeout=timeout, what=f"{self.kind} to answer", on_timeout=self.log_tail
        )

    def stop(self, *, timeout: float = 15) -> None:
        """SIGTERM (the daemon closes its sessions its own way), SIGKILL after ``timeout``."""
        for proc in reversed(self.procs):
            self._signal(proc, signal.SIGCONT)
            self._signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(proc, signal.SIGKILL, group=True)
                proc.wait(timeout=5)
        self._reap()

    def kill(self) -> None:
        """SIGKILL: the daemon vanishes without a word (its sessions drop with TCP)."""
        for proc in self.procs:
            self._signal(proc, signal.SIGKILL, group=True)
        for proc in self.procs:
            proc.wait(timeout=5)
        self._reap()

    def pause(self) -> None:
        """SIGSTOP: the daemon goes silent while its TCP sessions stay open."""
        for proc in self.procs:
            self._signal(proc, signal.SIGSTOP)

    def resume(self) -> None:
        for proc in self.procs:
            self._signal(proc, signal.SIGCONT)

    def restart(self, *, timeout: float = 30) -> None:
        self.stop()
        self.start(timeout=timeout)

    @property
    def running(self) -> bool:
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    # -- queries

    @abc.abstractmethod
    def session_state(self, peer: str) -> str:
        """The session's state in lower case, ``"established"`` when up."""

    @abc.abstractmethod
    def routes(self) -> dict[str, RibEntry]:
        """Routes learned over BGP (both families), keyed by prefix."""

    def last_error(self, peer: str) -> str:
        """Why the session last went down, as the daemon words it ("" if it does not say)."""
        return ""

    def wait_established(self, peer: str, *, timeout: float = 30) -> None:
        wait_for(
            lambda: self.session_state(peer) == "established",
            timeout=timeout,
            what=f"{self.kind} session with {peer} to be Established",
            on_timeout=lambda: f"state={self.session_state(peer)}\n{self.log_tail()}",
        )

    def wait_not_established(self, peer: str, *, timeout: float = 30) -> str:
        """Wait until the session is down; returns the state seen."""

        def down() -> str | None:
            state = self.session_state(peer)
            return state if state != "established" else None

        return wait_for(
            down,
            timeout=timeout,
            what=f"{self.kind} session with {peer} to leave Established",
            on_timeout=self.log_tail,
        )

    def wait_routes(
        self, check: Callable[[dict[str, RibEntry]], bool], *, timeout: float = 30, what: str
    ) -> dict[str, RibEntry]:
        """Poll ``routes()`` until ``check`` holds; returns the RIB that satisfied it."""
        seen: dict[str, RibEntry] = {}

        def probe() -> dict[str, RibEntry] | None:
            nonlocal seen
            seen = self.routes()
            return seen if check(seen) else None

        # An empty RIB can be the awaited state: wrap it so it is truthy.
        result = wait_for(
            lambda: (r,) if (r := probe()) is not None else None,
            timeout=timeout,
            what=f"{self.kind} RIB: {what}",
            on_timeout=lambda: f"RIB={seen!r}\n{self.log_tail()}",
        )
        return result[0]

    def log_text(self) -> str:
        """Everything the daemon logged so far."""
        parts = []
        for path in self.log_files():
            with contextlib.suppress(OSError):
                parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_text().splitlines()[-lines:]
        return f"--- {self.kind} log ({self.workdir}) ---\n" + "\n".join(text)

    # -- per-daemon parts

    @abc.abstractmethod
    def _write_config(self) -> None: ...

    @abc.abstractmethod
    def _launch(self) -> None: ...

    @abc.abstractmethod
    def _ready(self) -> bool: ...

    @abc.abstractmethod
    def log_files(self) -> list[Path]: ...

    # -- helpers

    def _popen(self, argv: Sequence[str], log: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
        out = log.open("ab")
        try:
            proc = self.host.popen(argv, stdout=out, stderr=subprocess.STDOUT, **kwargs)
        finally:
            out.close()
        self.procs.append(proc)
        return proc

    def _check_alive(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise PeerError(f"{self.kind} exited with {proc.returncode}\n{self.log_tail()}")

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: int, *, group: bool = False) -> None:
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)

    def _reap(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ValueError):
                self.host.procs.remove(proc)
        self.procs.clear()


# --------------------------------------------------------------------------- BIRD 2


class BirdControl:
    """A client for BIRD's control socket (what birdc speaks), without a subprocess.

    Each reply line is ``DDDD-text`` (more follows), ``DDDD text`` (the reply ends)
    or `` text`` (continues the previous code). Returns the text with the codes removed.
    """

    def __init__(self, path: Path, *, timeout: float = 30) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buf = b""

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(str(self.path))
            except OSError:
                sock.close()
                raise
            self._sock = sock
            self._buf = b""
            self._read_reply()  # the "0001 BIRD x.y ready." greeting
        return self._sock

    def _read_line(self) -> bytes:
        assert self._sock is not None
        while b"\n" not in self._buf:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("BIRD closed the control socket")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _read_reply(self) -> tuple[int, str]:
        lines: list[str] = []
        code = 0
        while True:
            raw = self._read_line().decode(errors="replace")
            if len(raw) >= 5 and raw[:4].isdigit() and raw[4] in " -":
                code = int(raw[:4])
                lines.append(raw[5:])
                if raw[4] == " ":
                    return code, "\n".join(lines)
            else:
                lines.append(raw[1:] if raw.startswith(" ") else raw)

    def command(self, cmd: str) -> str:
        """Run one command; raises PeerError on BIRD's error replies (8xxx, 9xxx)."""
        try:
            sock = self._connect()
            sock.sendall(cmd.encode() + b"\n")
            code, text = self._read_reply()
        except OSError:
            self.close()
            raise
        if code >= 8000:
            raise PeerError(f"birdc {cmd!r}: {code} {text}")
        return text


class Bird(BgpDaemon):
    """BIRD 2: ``bird -f`` with its control socket and log in the workdir."""

    kind = "bird"
    binaries = ("bird", "birdc")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conf = self.workdir / "bird.conf"
        self.ctl_path = self.workdir / "bird.ctl"
        self.log = self.workdir / "bird.log"
        self.ctl = BirdControl(self.ctl_path)

    def protocol_name(self, peer: str) -> str:
        for i, n in enumerate(self.neighbors):
            if n.address == peer:
                return f"peer{i}"
        raise KeyError(f"{peer} is not a configured neighbor of {self!r}")

    def _write_config(self) -> None:
        out = [
            f'log "{self.log}" all;',
            f"router id {self.router_id};",
            # Epoch seconds with milliseconds: benchmarks read when sessions came up.
            'timeformat protocol "%s.%3f";',
            "protocol device {}",
        ]
        if self.fib:
            for fam in ("ipv4", "ipv6"):
                out.append(
                    f"protocol kernel kernel_{fam} {{ {fam} {{ import none; export all; }};"
                    " merge paths on; }"
                )
        for version in (4, 6):
            routes = [o for o in self.originate if o.version == version]
            if not routes:
                continue
            out.append(f"protocol static static{version} {{ ipv{version};")
            for o in routes:
                sets = [f"bgp_community.add(({c.replace(':', ',')}));" for c in o.communities]
                sets += [
                    f"bgp_large_community.add(({c.replace(':', ',')}));"
                    for c in o.large_communities
                ]
                if o.local_pref is not None:
                    sets.append(f"bgp_local_pref = {o.local_pref};")
                block = f" {{ {' '.join(sets)} }}" if sets else ""
                out.append(f"  route {o.prefix} blackhole{block};")
            out.append("}")
        for i, n in enumerate(self.neighbors):
            local = f" {n.local_address}" if n.local_address else ""
            lines = [
                f"protocol bgp peer{i} {{",
                f"  local{local} as {self.asn};",
                f"  neighbor {n.address} as {n.asn};",
                "  direct;",  # every neighbor is on-link (BIRD makes iBGP multihop otherwise)
                f"  hold time {n.hold_time}; keepalive time {max(1, n.hold_time // 3)};",
                "  connect delay time 1; connect retry time 2; error wait time 1, 4;",
            ]
            if n.password:
                lines.append(f'  password "{n.password}";')
            if n.passive:
                lines.append("  passive on;")
            lines.append(f"  graceful restart {'on' if n.graceful_restart else 'off'};")
            for fam in n.families:
                # Neighbors are on-link: resolve next hops directly, no IGP needed.
                extra = ""
                other = [a for a in self.local_addresses if f"ipv{_version(a)}" == fam]
                if f"ipv{n.version}" != fam and other:
                    # Over the other family's transport BIRD must be told its next hop.
                    extra = f" next hop address {other[0]};"
                lines.append(
                    f"  {fam} {{ import all; export where source = RTS_STATIC;"
                    f" next hop self; gateway direct;{extra} }};"
                )
            lines.append("}")
            out.extend(lines)
        self.conf.write_text("\n".join(out) + "\n")

    def _launch(self) -> None:
        self.ctl.close()
        with contextlib.suppress(FileNotFoundError):
            self.ctl_path.unlink()
        self._popen(
            ["bird", "-f", "-c", str(self.conf), "-s", str(self.ctl_path), "-P",
             str(self.workdir / "bird.pid")],
            self.workdir / "bird.out",
        )  # fmt: skip

    def _ready(self) -> bool:
        self._check_alive()
        try:
            self.ctl.command("show status")
        except (OSError, PeerError):
            self.ctl.close()
            return False
        return True

    def stop(self, *, timeout: float = 15) -> None:
        self.ctl.close()
        super().stop(timeout=timeout)

    def kill(self) -> None:
        self.ctl.close()
        super().kill()

    def log_files(self) -> list[Path]:
        return [self.workdir / "bird.out", self.log]

    def protocol_info(self, peer: str) -> str:
        return self.ctl.command(f"show protocols all {self.protocol_name(peer)}")

    def session_state(self, peer: str) -> str:
        try:
            info = self.protocol_info(peer)
        except (OSError, PeerError):
            self.ctl.close()
            return "unreachable"
        for line in info.splitlines():
            if line.strip().startswith("BGP state:"):
                return line.split(":", 1)[1].strip().lower()
        return "unknown"

    def last_error(self, peer: str) -> str:
        for line in self.protocol_info(peer).splitlines():
            if line.strip().startswith("Last error:"):
                return line.split(":", 1)[1].strip()
        return ""

    def route_count(self) -> int:
        """Routes in all tables (learned and local), cheaply."""
        text = self.ctl.command("show route count")
        for line in text.splitlines():
            if line.startswith("Total:"):
                return int(line.split()[1])
        return 0

    def routes(self) -> dict[str, RibEntry]:
        return parse_bird_routes(self.ctl.command("show route all"))

    def imported(self, peer: str) -> dict[str, int]:
        """Routes imported from ``peer`` per channel (O(1) for BIRD, unlike counting)."""
        counts: dict[str, int] = {}
        channel = ""
        for line in self.protocol_info(peer).splitlines():
            words = line.split()
            if words[:1] == ["Channel"]:
                channel = words[1]
            elif words[:1] == ["Routes:"] and channel:
                counts[channel] = int(words[1])
        return counts

    def established_at(self, peer: str) -> float | None:
        """Wall-clock time (epoch) the session last became Established, or None if down."""
        head = self.ctl.command(f"show protocols {self.protocol_name(peer)}").splitlines()
        for line in head[1:]:
            words = line.split()
            if len(words) >= 6 and words[3] == "up" and words[5] == "Established":
                return float(words[4])
        return None


def parse_bird_routes(text: str) -> dict[str, RibEntry]:
    """Parse ``show route all`` into learned BGP routes (static and others are skipped)."""
    paths: dict[str, list[dict[str, Any]]] = {}
    prefix = ""
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("Table "):
            continue
        if not line.startswith("\t"):
            # A route line; a blank first column means "same prefix as above".
            if not line.startswith(" "):
                prefix = line.split()[0]
            current = {"best": " * " in line or line.rstrip().endswith("*"), "attrs": {}}
            paths.setdefault(prefix, []).append(current)
            continue
        if current is None:
            continue
        key, _, value = line.strip().partition(":")
        current["attrs"][key] = value.strip()
    rib: dict[str, RibEntry] = {}
    for pfx, plist in paths.items():
        learned = [p for p in plist if p["attrs"].get("Type", "").startswith("BGP")]
        if not learned:
            continue
        best = next((p for p in learned if p["best"]), learned[0])
        hops = [p["attrs"].get("BGP.next_hop", "").split()[0] for p in learned]
        attrs = best["attrs"]
        rib[pfx] = RibEntry(
            next_hops=_global_next_hops(hops),
            communities=frozenset(
                c.strip("()").replace(",", ":").replace(" ", "")
                for c in attrs.get("BGP.community", "").split(") (")
                if c.strip("()")
            ),
            large_communities=frozenset(
                c.strip("()").replace(",", ":").replace(" ", "")
                for c in attrs.get("BGP.large_community", "").split(") (")
                if c.strip("()")
            ),
            local_pref=int(attrs["BGP.local_pref"]) if "BGP.local_pref" in attrs else None,
            as_path=tuple(int(a) for a in attrs.get("BGP.as_path", "").split() if a.isdigit()),
        )
    return rib


# --------------------------------------------------------------------------- FRR 8


class Frr(BgpDaemon):
    """FRR: zebra + bgpd started directly from /usr/lib/frr with every path in the workdir.

    ``fib=True`` lets zebra install the best paths (up to 8-way ECMP) into the kernel.
    """

    kind = "frr"
    binaries = ("/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "vtysh")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zserv = self.workdir / "zserv.api"

    def _common_args(self, daemon: str) -> list[str]:
        # Running as root, FRR insists the user belongs to its vty group; joining the
        # group as primary group satisfies it without touching /etc/group.
        return [
            str(FRR_DIR / daemon), "-f", str(self.workdir / f"{daemon}.conf"),
            "-i", str(self.workdir / f"{daemon}.pid"), "-z", str(self.zserv),
            "--vty_socket", str(self.workdir), "-u", "root", "-g", "frrvty", "-P", "0",
            "--log", f"file:{self.workdir / (daemon + '.log')}",
        ]  # fmt: skip

    def _write_config(self) -> None:
        (self.workdir / "zebra.conf").write_text(f"hostname {self.host.name}-zebra\n")
        out = [
            "frr defaults traditional",
            f"hostname {self.host.name}",
            "log timestamp precision 3",
            f"router bgp {self.asn}",
            f" bgp router-id {self.router_id}",
            " no bgp ebgp-requires-policy",
            " no bgp network import-check",
            " no bgp default ipv4-unicast",
            " bgp bestpath as-path multipath-relax",
            " coalesce-time 0",
        ]
        if any(n.graceful_restart for n in self.neighbors):
            out.append(" bgp graceful-restart")
        for n in self.neighbors:
            keep = max(1, n.hold_time // 3)
            out += [
                f" neighbor {n.address} remote-as {n.asn}",
                f" neighbor {n.address} timers {keep} {n.hold_time}",
                f" neighbor {n.address} timers connect 1",
                f" neighbor {n.address} advertisement-interval 0",
            ]
            if n.local_address:
                out.append(f" neighbor {n.address} update-source {n.local_address}")
            if n.password:
                out.append(f" neighbor {n.address} password {n.password}")
            if n.passive:
                out.append(f" neighbor {n.address} passive")
        route_maps: dict[tuple[Any, ...], str] = {}
        for fam in ("ipv4", "ipv6"):
            out.append(f" address-family {fam} unicast")
            out += [" maximum-paths 8", " maximum-paths ibgp 8"]
            for o in self.originate:
                if f"ipv{o.version}" != fam:
                    continue
                key = (o.communities, o.large_communities, o.local_pref)
                if any(key):
                    name = route_maps.setdefault(key, f"ORIG{len(route_maps)}")
                    out.append(f"  network {o.prefix} route-map {name}")
                else:
                    out.append(f"  network {o.prefix}")
            for n in self.neighbors:
                if fam in n.families:
                    out.append(f"  neighbor {n.address} activate")
                    if n.asn == self.asn:
                        out.append(f"  neighbor {n.address} next-hop-self")
            out.append(" exit-address-family")
        for (comms, large, lp), name in route_maps.items():
            out.append(f"route-map {name} permit 10")
            if comms:
                out.append(f" set community {' '.join(comms)} additive")
            if large:
                out.append(f" set large-community {' '.join(large)} additive")
            if lp is not None:
                out.append(f" set local-preference {lp}")
        (self.workdir / "bgpd.conf").write_text("\n".join(out) + "\n")

    def _launch(self) -> None:
        for name in ("zserv.api", "zebra.vty", "bgpd.vty"):
            with contextlib.suppress(FileNotFoundError):
                (self.workdir / name).unlink()
        self._popen(self._common_args("zebra"), self.workdir / "zebra.out")
        wait_for(
            self._zserv_ready,
            timeout=15,
            what="zebra's API socket",
            on_timeout=self.log_tail,
        )
        bgpd = self._common_args("bgpd")
        if not self.fib:
            bgpd.append("-n")  # keep the namespace's kernel FIB untouched
        self._popen(bgpd, self.workdir / "bgpd.out")

    def _zserv_ready(self) -> bool:
        self._check_alive()
        return self.zserv.exists()

    def vtysh(self, command: str) -> str:
        proc = subprocess.run(
            ["vtysh", "--vty_socket", str(self.workdir), "-d", "bgpd", "-c", command],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            raise PeerError(f"vtysh {command!r}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def vtysh_json(self, command: str) -> Any:
        return json.loads(self.vtysh(command) or "{}")

    def _ready(self) -> bool:
        self._check_alive()
        if not (self.workdir / "bgpd.vty").exists():
            return False
        try:
            self.vtysh("show bgp summary json")
        except PeerError:
            return False
        return True

    def log_files(self) -> list[Path]:
        return [self.workdir / f for f in ("zebra.out", "zebra.log", "bgpd.out", "bgpd.log")]

    def neighbor_info(self, peer: str) -> dict[str, Any]:
        info: dict[str, Any] = self.vtysh_json(f"show bgp neighbors {peer} json").get(peer, {})
        return info

    def session_state(self, peer: str) -> str:
        try:
            return str(self.neighbor_info(peer).get("bgpState", "unknown")).lower()
        except (PeerError, json.JSONDecodeError):
            return "unreachable"

    def last_error(self, peer: str) -> str:
        info = self.neighbor_info(peer)
        return " ".join(
            str(info[k])
            for k in ("lastResetDueTo", "lastNotificationReason", "lastErrorCodeSubcode")
            if k in info
        )

    def routes(self) -> dict[str, RibEntry]:
        rib: dict[str, RibEntry] = {}
        for fam in ("ipv4", "ipv6"):
            data = self.vtysh_json(f"show bgp {fam} unicast json detail")
            for prefix, entries in data.get("routes", {}).items():
                paths = [e for e in entries if "aspath" in e and not e.get("sourced")]
                paths = [
                    p for p in paths if p.get("peer", {}).get("peerId") not in (None, "0.0.0.0")
                ]
                if not paths:
                    continue
                best = next((p for p in paths if p.get("bestpath", {}).get("overall")), paths[0])
                hops = [nh["ip"] for p in paths for nh in p.get("nexthops", [])]
                rib[prefix] = RibEntry(
                    next_hops=_global_next_hops(hops),
                    communities=frozenset(best.get("community", {}).get("list", [])),
                    large_communities=frozenset(best.get("largeCommunity", {}).get("list", [])),
                    local_pref=best.get("locPrf"),
                    as_path=tuple(
                        asn
                        for seg in best["aspath"].get("segments", [])
                        for asn in seg.get("list", [])
                    ),
                )
        return rib


# --------------------------------------------------------------------------- GoBGP 3


_GOBGP_STATES = {
    0: "unknown",
    1: "idle",
    2: "connect",
    3: "active",
    4: "opensent",
    5: "openconfirm",
    6: "established",
}


class GoBgp(BgpDaemon):
    """GoBGP: ``gobgpd`` with a TOML config, its gRPC API on the namespace's loopback.

    Originations are added with ``gobgp global rib add`` once gobgpd answers.
    """

    kind = "gobgp"
    binaries = ("gobgpd", "gobgp")

    def __init__(
        self, *args: Any, api_port: int = 50051, admin_down: bool = False, **kwargs: Any
    ) -> None:
        """``admin_down``: configure the sessions disabled (load routes, then :meth:`enable`)."""
        super().__init__(*args, **kwargs)
        self.api_port = api_port
        self.admin_down = admin_down
        self.conf = self.workdir / "gobgpd.toml"

    def _write_config(self) -> None:
        out = [
            "[global.config]",
            f"  as = {self.asn}",
            f'  router-id = "{self.router_id}"',
            "[global.apply-policy.config]",
            '  default-import-policy = "accept-route"',
            '  default-export-policy = "accept-route"',
        ]
        if self.fib:
            raise PeerError("GoBGP is not wired to a FIB here; use BIRD or FRR as router")
        for n in self.neighbors:
            out += [
                "[[neighbors]]",
                "  [neighbors.config]",
                f'    neighbor-address = "{n.address}"',
                f"    peer-as = {n.asn}",
            ]
            if self.admin_down:
                out.append("    admin-down = true")
            if n.password:
                out.append(f'    auth-password = "{n.password}"')
            out += [
                "  [neighbors.timers.config]",
                "    connect-retry = 1",
                f"    hold-time = {n.hold_time}",
                f"    keepalive-interval = {max(1, n.hold_time // 3)}",
                "    idle-hold-time-after-reset = 1",
                "  [neighbors.transport.config]",
                f"    passive-mode = {'true' if n.passive else 'false'}",
            ]
            if n.local_address:
                out.append(f'    local-address = "{n.local_address}"')
            if n.graceful_restart:
                out += [
                    "  [neighbors.graceful-restart.config]",
                    "    enabled = true",
                    "    restart-time = 120",
                ]
            for fam in n.families:
                out += [
                    "  [[neighbors.afi-safis]]",
                    "    [neighbors.afi-safis.config]",
                    f'      afi-safi-name = "{fam}-unicast"',
                ]
                if n.graceful_restart:
                    out += [
                        "    [neighbors.afi-safis.mp-graceful-restart.config]",
                        "      enabled = true",
                    ]
        self.conf.write_text("\n".join(out) + "\n")

    def _launch(self) -> None:
        self._popen(
            ["gobgpd", "-f", str(self.conf), "--api-hosts", f"127.0.0.1:{self.api_port}",
             "--pprof-disable", "--log-plain"],
            self.workdir / "gobgpd.log",
        )  # fmt: skip

    def gobgp(self, *args: str) -> str:
        return self.host.run("gobgp", "-u", "127.0.0.1", "-p", str(self.api_port), *args)

    def _ready(self) -> bool:
        self._check_alive()
        try:
            self.gobgp("global")
        except Exception:
            return False
        for o in self.originate:
            self.add_route(o)
        return True

    def add_route(self, o: Origination) -> None:
        fam = f"ipv{o.version}"
        # gobgpd replaces an unspecified next hop by its own address towards each peer.
        args = [
            "global",
            "rib",
            "add",
            "-a",
            fam,
            o.prefix,
            "origin",
            "igp",
            "nexthop",
            self._next_hop(o.version),
        ]
        if o.communities:
            args += ["community", ",".join(o.communities)]
        if o.large_communities:
            args += ["large-community", ",".join(o.large_communities)]
        if o.local_pref is not None:
            args += ["local-pref", str(o.local_pref)]
        self.gobgp(*args)

    def _next_hop(self, version: int) -> str:
        # Our own address of the route's family. Left unspecified, gobgpd picks the
        # session's address: an IPv4-mapped one for IPv6 routes over IPv4 and an IPv6
        # one for IPv4 routes over IPv6 (RFC 8950 style, even when not negotiated).
        for addr in self.local_addresses:
            if _version(addr) == version:
                return addr
        return "0.0.0.0" if version == 4 else "::"

    def rib_count(self, family: str) -> int:
        """Destinations in the global RIB for ``family`` ("ipv4"/"ipv6")."""
        out = self.gobgp("global", "rib", "summary", "-a", family)
        for word, nxt in zip(out.split(), out.split()[1:], strict=False):
            if word == "Destination:":
                return int(nxt.rstrip(","))
        return 0

    def enable(self, peer: str) -> None:
        self.gobgp("neighbor", peer, "enable")

    def inject_mrt(self, path: Path) -> None:
        """Load a TABLE_DUMP_V2 file into the global RIB (``gobgp mrt inject global``)."""
        self.host.run(
            "gobgp", "-u", "127.0.0.1", "-p", str(self.api_port), "mrt", "inject", "global",
            str(path), timeout=600,
        )  # fmt: skip

    def log_files(self) -> list[Path]:
        return [self.workdir / "gobgpd.log"]

    def neighbor_info(self, peer: str) -> dict[str, Any]:
        info: dict[str, Any] = json.loads(self.gobgp("neighbor", peer, "-j"))
        return info

    def session_state(self, peer: str) -> str:
        try:
            state = self.neighbor_info(peer).get("state", {}).get("session_state", 0)
        except Exception:
            return "unreachable"
        return _GOBGP_STATES.get(int(state), str(state))

    def routes(self) -> dict[str, RibEntry]:
        rib: dict[str, RibEntry] = {}
        for fam in ("ipv4", "ipv6"):
            data = json.loads(self.gobgp("global", "rib", "-a", fam, "-j") or "{}")
            for prefix, paths in data.items():
                learned = [p for p in paths if p.get("neighbor-ip")]
                if not learned:
                    continue
                best = next((p for p in learned if p.get("best")), learned[0])
                hops = [_gobgp_next_hop(p) for p in learned]
                rib[prefix] = _gobgp_entry(best, hops)
        return rib


def _gobgp_next_hop(path: dict[str, Any]) -> str:
    for attr in path.get("attrs", []):
        if attr.get("type") in (3, 14) and "nexthop" in attr:
            return str(attr["nexthop"])
    return ""


def _gobgp_entry(best: dict[str, Any], hops: list[str]) -> RibEntry:
    communities: frozenset[str] = frozenset()
    large: frozenset[str] = frozenset()
    local_pref = None
    as_path: tuple[int, ...] = ()
    for attr in best.get("attrs", []):
        kind = attr.get("type")
        if kind == 2:
            as_path = tuple(a for seg in attr.get("as_paths", []) for a in seg.get("asns", []))
        elif kind == 5:
            local_pref = int(attr["value"])
        elif kind == 8:
            communities = frozenset(_community_str(c) for c in attr.get("communities", []))
        elif kind == 32:
            large = frozenset(
                f"{v['ASN']}:{v['LocalData1']}:{v['LocalData2']}" for v in attr.get("value", [])
            )
    return RibEntry(
        next_hops=_global_next_hops(hops),
        communities=communities,
        large_communities=large,
        local_pref=local_pref,
        as_path=as_path,
    )


# --------------------------------------------------------------------------- ExaBGP 4


class ExaBgp(BgpDaemon):
    """ExaBGP 4.2 (Debian): static routes in its config, received routes through its API.

    An API process (``exabgp_api.py``) records every JSON message ExaBGP sends it to
    ``api.jsonl``; ``routes()`` replays that record. Session state comes from the same
    record (``neighbor-changes``). ExaBGP is not a graceful-restart helper: on session
    loss it forgets the peer's routes, and so does ``routes()``.
    """

    kind = "exabgp"
    binaries = ("exabgp",)

    def __init__(self, *args: Any, api_commands: Path | None = None, **kwargs: Any) -> None:
        """``api_commands``: a file of API commands the API process sends once up."""
        super().__init__(*args, **kwargs)
        self.conf = self.workdir / "exabgp.conf"
        self.record = self.workdir / "api.jsonl"
        self.log = self.workdir / "exabgp.log"
        self.api_commands = api_commands
        self._offset = 0
        self._rib: dict[str, dict[str, tuple[dict[str, Any], str]]] = {}
        self._states: dict[str, str] = {}
        self.notifications: list[dict[str, Any]] = []

    def _write_config(self) -> None:
        api = [sys.executable, str(HERE / "exabgp_api.py"), str(self.record)]
        if self.api_commands is not None:
            api.append(str(self.api_commands))
        out = [
            "process recorder {",
            f"  run {' '.join(api)};",
            "  encoder json;",
            "}",
        ]
        for n in self.neighbors:
            if not n.local_address:
                raise PeerError("ExaBGP needs Neighbor.local_address")
            out += [
                f"neighbor {n.address} {{",
                f"  router-id {self.router_id};",
                f"  local-address {n.local_address};",
                f"  local-as {self.asn};",
                f"  peer-as {n.asn};",
                f"  hold-time {n.hold_time};",
                "  group-updates true;",
            ]
            if n.password:
                out.append(f'  md5-password "{n.password}";')
            if n.passive:
                out.append("  passive true;")
            out.append("  family { " + " ".join(f"{f} unicast;" for f in n.families) + " }")
            if n.graceful_restart:
                out.append("  capability { graceful-restart 120; }")
            out.append(
                "  api { processes [ recorder ]; neighbor-changes;"
                " receive { parsed; update; notification; } }"
            )
            statics = [o for o in self.originate if f"ipv{o.version}" in n.families]
            if statics:
                out.append("  static {")
                for o in statics:
                    out.append(
                        f"    route {o.prefix} next-hop {self._next_hop(n, o)}{_exabgp_attrs(o)};"
                    )
                out.append("  }")
            out.append("}")
        self.conf.write_text("\n".join(out) + "\n")

    def _next_hop(self, n: Neighbor, o: Origination) -> str:
        """``self`` is the session's address: name our own for the other family."""
        if o.version == n.version:
            return "self"
        for addr in self.local_addresses:
            if _version(addr) == o.version:
                return addr
        raise PeerError(f"no IPv{o.version} local address to announce {o.prefix} over {n}")

    def _launch(self) -> None:
        self.record.write_text("")
        self._offset = 0
        self._rib.clear()
        self._states.clear()
        env = dict(os.environ)
        env.update(
            {
                "exabgp.daemon.user": "root",
                "exabgp.daemon.drop": "false",
                "exabgp.daemon.pid": str(self.workdir / "exabgp.pid"),
                "exabgp.log.destination": str(self.log),
                "exabgp.api.cli": "false",
                "exabgp.api.ack": "false",
                "exabgp.api.respawn": "false",
            }
        )
        passive = [n for n in self.neighbors if n.passive]
        if passive:
            env["exabgp.tcp.bind"] = " ".join(sorted({n.local_address or "" for n in passive}))
        self._popen(["exabgp", str(self.conf)], self.workdir / "exabgp.out", env=env)

    def _ready(self) -> bool:
        self._check_alive()
        return (
            self.workdir / "exabgp.pid"
        ).exists() and "loaded new configuration" in self.log_text()

    def log_files(self) -> list[Path]:
        return [self.workdir / "exabgp.out", self.log]

    def _replay(self) -> None:
        """Apply the messages recorded since the last call."""
        try:
            with self.record.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self._offset += end
        for raw in data[:end].splitlines():
            try:
                msg = json.loads(raw)
            except json.JSONDecodeError:
                continue
            self._apply(msg)

    def _apply(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        neighbor = msg.get("neighbor", {})
        peer = neighbor.get("address", {}).get("peer", "")
        if kind == "state":
            state = neighbor.get("state", "")
            self._states[peer] = state
            if state == "down":
                self._rib.pop(peer, None)
        elif kind == "notification":
            self.notifications.append(msg)
        elif kind == "update":
            update = neighbor.get("message", {}).get("update", {})
            attrs = update.get("attribute", {})
            rib = self._rib.setdefault(peer, {})
            for _family, by_hop in update.get("announce", {}).items():
                for hop, nlris in by_hop.items():
                    for nlri in nlris:
                        prefix = nlri["nlri"]
                        old = rib.get(prefix)
                        # IPv6 routes arrive keyed by both global and link-local next hops.
                        if old is not None and _is_link_local(hop) and not _is_link_local(old[1]):
                            continue
                        rib[prefix] = (attrs, hop)
            for _family, nlris in update.get("withdraw", {}).items():
                for nlri in nlris:
                    rib.pop(nlri["nlri"], None)

    def session_state(self, peer: str) -> str:
        self._check_alive()
        self._replay()
        state = self._states.get(peer, "idle")
        return "established" if state == "up" else state

    def routes(self) -> dict[str, RibEntry]:
        self._replay()
        by_prefix: dict[str, list[tuple[dict[str, Any], str]]] = {}
        for rib in self._rib.values():
            for prefix, entry in rib.items():
                by_prefix.setdefault(prefix, []).append(entry)
        out: dict[str, RibEntry] = {}
        for prefix, entries in by_prefix.items():
            attrs = entries[0][0]
            out[prefix] = RibEntry(
                next_hops=_global_next_hops(hop for _, hop in entries),
                communities=frozenset(f"{a}:{b}" for a, b in attrs.get("community", [])),
                large_communities=frozenset(
                    f"{a}:{b}:{c}" for a, b, c in attrs.get("large-community", [])
                ),
                local_pref=attrs.get("local-preference"),
                as_path=tuple(int(a) for a in attrs.get("as-path", [])),
            )
        return out


def _exabgp_attrs(o: Origination) -> str:
    parts = []
    if o.communities:
        parts.append(f" community [ {' '.join(o.communities)} ]")
    if o.large_communities:
        parts.append(f" large-community [ {' '.join(o.large_communities)} ]")
    if o.local_pref is not None:
        parts.append(f" local-preference {o.local_pref}")
    return "".join(parts)


# --------------------------------------------------------------------------- ours


class Teapot(BgpDaemon):
    """teapot-lb's own ``Speaker`` in a process of its own (``drive_speaker.py``).

    Configured like the daemons; on top, :meth:`set_routes` changes what it announces
    while it runs and :meth:`stats` reports its CPU time and peak RSS. ``stop()`` sends
    SIGTERM (graceful: the speaker withdraws / sends Cease); ``kill()`` is a crash.
    """

    kind = "teapot"
    binaries = ()

    def __init__(
        self, *args: Any, listen_port: int | None = 179, restarting: bool = False, **kwargs: Any
    ) -> None:
        """``restarting``: come up as a restarting speaker (RFC 4724 R bit)."""
        super().__init__(*args, **kwargs)
        self.listen_port = listen_port
        self.restarting = restarting
        self.conf = self.workdir / "speaker.json"
        self.log = self.workdir / "speaker.log"
        self._buf = b""

    def peer_fields(self, n: Neighbor) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "address": n.address,
            "peer_as": n.asn,
            "hold_time": n.hold_time,
            "passive": n.passive,
            "graceful_restart": n.graceful_restart,
            "families": list(n.families),
        }
        if n.local_address:
            fields["local_address"] = n.local_address
        if n.password:
            fields["password"] = n.password
        # Next hop self for the session's own family; name ours for the other one.
        for addr in self.local_addresses:
            if _version(addr) != n.version:
                fields[f"next_hop_v{_version(addr)}"] = addr
        return fields

    def _write_config(self) -> None:
        config = {
            "asn": self.asn,
            "router_id": self.router_id,
            "listen_port": self.listen_port,
            "restarting": self.restarting,
            "peers": [self.peer_fields(n) for n in self.neighbors],
            "routes": route_groups(self.originate),
        }
        self.conf.write_text(json.dumps(config))

    def _launch(self) -> None:
        self._buf = b""
        with self.log.open("ab") as err:
            proc = self.host.popen(
                [sys.executable, str(HERE / "drive_speaker.py"), str(self.conf)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self.procs.append(proc)

    def _ready(self) -> bool:
        self._check_alive()
        return bool(self.call("ping", timeout=60) == "pong")

    def log_files(self) -> list[Path]:
        return [self.log]

    @property
    def pid(self) -> int:
        return self.procs[0].pid

    def call(self, cmd: str, *, timeout: float = 30, **args: Any) -> Any:
        """Send one command to the driver and return its result (raises on errors)."""
        if not self.procs:
            raise PeerError("the speaker is not running")
        proc = self.procs[0]
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            raise PeerError(f"the speaker died\n{self.log_tail()}") from None
        reply = json.loads(self._readline(proc, timeout))
        if not reply["ok"]:
            raise PeerError(f"speaker {cmd}: {reply['error']}")
        return reply["result"]

    def _readline(self, proc: subprocess.Popen[bytes], timeout: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerError(f"the speaker did not answer within {timeout:g}s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise PeerError(f"the speaker exited\n{self.log_tail()}")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def set_routes(
        self, originate: Sequence[Origination], *, peer: str | None = None
    ) -> dict[str, float]:
        """Replace everything announced (to ``peer`` only, if given).

        Returns the driver's timing: ``parse_s`` (its JSON), ``set_routes_s`` (the speaker).
        """
        self.originate = list(originate)
        timing: dict[str, float] = self.call(
            "set_routes", routes=route_groups(originate), peer=peer, timeout=120
        )
        return timing

    def info(self, peer: str) -> dict[str, Any]:
        """State, last error and counters of the session with ``peer``."""
        result: dict[str, Any] = self.call("info", peer=peer)
        return result

    def shutdown(
        self, communication: str = "", *, withdraw: bool = False, graceful_restart: bool = False
    ) -> None:
        """Shut the speaker down through its API and wait for the process to exit."""
        self.call(
            "shutdown",
            communication=communication,
            withdraw=withdraw,
            graceful_restart=graceful_restart,
        )
        for proc in self.procs:
            proc.wait(timeout=15)
        self._reap()

    def stats(self) -> dict[str, float]:
        result: dict[str, float] = self.call("stats")
        return result

    def session_state(self, peer: str) -> str:
        if not self.running:
            return "not running"
        return str(self.call("state", peer=peer))

    def routes(self) -> dict[str, RibEntry]:
        by_prefix: dict[str, list[dict[str, Any]]] = {}
        for n in self.neighbors:
            for prefix, path in self.call("routes_in", peer=n.address).items():
                by_prefix.setdefault(prefix, []).append(path)
        return {
            prefix: RibEntry(
                next_hops=_global_next_hops(p["next_hop"] for p in paths if p["next_hop"]),
                communities=frozenset(paths[0]["communities"]),
                large_communities=frozenset(paths[0]["large_communities"]),
                local_pref=paths[0]["local_pref"],
                as_path=tuple(paths[0]["as_path"]),
            )
            for prefix, paths in by_prefix.items()
        }


def route_groups(originate: Sequence[Origination]) -> list[dict[str, Any]]:
    """Originations grouped by attributes, the driver's compact route format."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for o in originate:
        groups.setdefault((o.communities, o.large_communities, o.local_pref), []).append(o.prefix)
    return [
        {
            "prefixes": prefixes,
            "communities": list(comms),
            "large_communities": list(large),
            "local_pref": local_pref,
        }
        for (comms, large, local_pref), prefixes in groups.items()
    ]


DAEMONS: dict[str, type[BgpDaemon]] = {cls.kind: cls for cls in (Bird, Frr, GoBgp, ExaBgp, Teapot)}


@dataclass
class Lab:
    """A LAN (one switch) of hosts with addresses from 192.0.2.0/24 and 2001:db8::/64.

    Host ``i`` gets ``192.0.2.{i+1}`` and ``2001:db8::{i+1}``; see :meth:`add`.
    """

    topology: Any
    switch: Host | None = None
    hosts: dict[str, Host] = field(default_factory=dict)
    v4: dict[str, str] = field(default_factory=dict)
    v6: dict[str, str] = field(default_factory=dict)

    def add(self, name: str) -> Host:
        if self.switch is None:
            self.switch = self.topology.add_switch("lan")
        index = len(self.hosts) + 1
        host: Host = self.topology.add_host(name)
        self.v4[name] = f"192.0.2.{index}"
        self.v6[name] = f"2001:db8::{index}"
        self.topology.connect(
            host, self.switch, addrs=[f"192.0.2.{index}/24", f"2001:db8::{index}/64"]
        )
        self.hosts[name] = host
        return host

    def addr(self, name: str, version: int) -> str:
        return self.v4[name] if version == 4 else self.v6[name]


def wait_fib(host: Host, prefix: str, hops: set[str], *, timeout: float = 30) -> None:
    """Wait until the namespace's kernel route for ``prefix`` has exactly these next hops."""
    wait_for(
        lambda: fib_next_hops(host, prefix) == frozenset(hops),
        timeout=timeout,
        what=f"kernel route {prefix} via {sorted(hops)} in {host.ns}",
        on_timeout=lambda: f"the FIB has {fib_next_hops(host, prefix)}",
    )
