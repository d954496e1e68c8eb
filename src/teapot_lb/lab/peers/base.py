"""What every daemon wrapper shares: neighbors, originations, RIB entries, waits, the FIB."""

from __future__ import annotations

import abc
import contextlib
import ipaddress
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab.topology import Host

T = TypeVar("T")

HERE = Path(__file__).resolve().parent  # drive_speaker.py and exabgp_api.py are here


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
    bfd: bool = False  # BFD on the session (RFC 5882), at BFD_INTERVAL_MS x BFD_MULT
    # ADD-PATH (RFC 7911) as this side offers it: "off", "send", "receive" or "both"
    # (FRR offers "receive" unless told "off"; the others offer nothing unless told).
    add_path: str | None = None

    @property
    def version(self) -> int:
        return ipaddress.ip_address(self.address).version


BFD_INTERVAL_MS = 100  # desired TX and required RX, both sides
BFD_MULT = 3


@dataclass(frozen=True)
class Origination:
    """A route the daemon announces itself (next hop: its own address).

    Our speaker only: ``next_hop`` names another (a third-party next hop), and a non-empty
    ``path`` makes it one of several paths of the prefix (one per key, ADD-PATH)."""

    prefix: str
    communities: tuple[str, ...] = ()  # "65000:1"
    large_communities: tuple[str, ...] = ()  # "65000:1:2"
    local_pref: int | None = None
    next_hop: str | None = None
    path: str = ""

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


def is_link_local(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_link_local
    except ValueError:
        return False


def global_next_hops(hops: Iterable[str]) -> frozenset[str]:
    hops = [h for h in hops if h]
    globals_ = [h for h in hops if not is_link_local(h)]
    return frozenset(globals_ or hops)


def ip_version(addr: str) -> int:
    return ipaddress.ip_address(addr).version


def community_str(value: int) -> str:
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
            self._ready,
            timeout=timeout,
            what=f"{self.kind} to answer",
            detail=self.log_tail,
            every=0.1,  # each check runs the daemon's CLI
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

    def request_refresh(self, peer: str) -> None:
        """Make the daemon send ROUTE-REFRESH (RFC 2918) for every family to ``peer``."""
        raise NotImplementedError(f"{self.kind}: no route refresh trigger in the harness")

    def last_error(self, peer: str) -> str:
        """Why the session last went down, as the daemon words it ("" if it does not say)."""
        return ""

    def wait_established(self, peer: str, *, timeout: float = 30) -> None:
        wait_for(
            lambda: self.session_state(peer) == "established",
            timeout=timeout,
            every=0.1,
            what=f"{self.kind} session with {peer} to be Established",
            detail=lambda: f"state={self.session_state(peer)}\n{self.log_tail()}",
        )

    def wait_not_established(self, peer: str, *, timeout: float = 30) -> str:
        """Wait until the session is down; returns the state seen."""

        def down() -> str | None:
            state = self.session_state(peer)
            return state if state != "established" else None

        return wait_for(
            down,
            timeout=timeout,
            every=0.1,
            what=f"{self.kind} session with {peer} to leave Established",
            detail=self.log_tail,
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
            every=0.1,
            what=f"{self.kind} RIB: {what}",
            detail=lambda: f"RIB={seen!r}\n{self.log_tail()}",
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


def wait_fib(host: Host, prefix: str, hops: set[str], *, timeout: float = 30) -> None:
    """Wait until the namespace's kernel route for ``prefix`` has exactly these next hops."""
    wait_for(
        lambda: fib_next_hops(host, prefix) == frozenset(hops),
        timeout=timeout,
        every=0.1,
        what=f"kernel route {prefix} via {sorted(hops)} in {host.ns}",
        detail=lambda: f"the FIB has {fib_next_hops(host, prefix)}",
    )
