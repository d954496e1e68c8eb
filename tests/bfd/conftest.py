"""Fixtures for BFD interoperability: a LAN in namespaces, our BFD and a real daemon."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary
from teapot_lb.lab.bfd import OurBfd
from teapot_lb.lab.peers.bird import BirdControl
from teapot_lb.lab.peers.frr import frr_daemon_argv
from teapot_lb.lab.peers.lab import Lab
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host, Topology


def is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class BirdBfd:
    """BIRD 2 with ``protocol bfd`` (and optionally a BGP peer using it)."""

    def __init__(self, host: Host, workdir: Path) -> None:
        self.host = host
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.conf = workdir / "bird.conf"
        self.ctl_path = workdir / "bird.ctl"
        self.log = workdir / "bird.log"
        self.ctl = BirdControl(self.ctl_path)
        self.proc: subprocess.Popen[bytes] | None = None

    def configure(self, body: str, router_id: str) -> None:
        """Write the config (``body`` after the common head); reload if running."""
        self.conf.write_text(
            f'log "{self.log}" all;\nrouter id {router_id};\nprotocol device {{}}\n{body}\n'
        )
        if self.proc is not None:
            self.ctl.command("configure")

    def start(self) -> None:
        with (self.workdir / "bird.out").open("ab") as out:
            self.proc = self.host.popen(
                ["bird", "-f", "-c", str(self.conf), "-s", str(self.ctl_path)],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait_for(self._ready, timeout=15, what="BIRD to answer", detail=self.log_tail)

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"bird exited\n{self.log_tail()}")
        try:
            self.ctl.command("show status")
        except OSError:
            self.ctl.close()
            return False
        return True

    def log_tail(self) -> str:
        parts = [p.read_text()[-2000:] for p in (self.log, self.workdir / "bird.out") if p.exists()]
        return "\n".join(parts)

    def kill(self) -> None:
        self.ctl.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=5)
        self.proc = None

    def sessions(self) -> dict[str, dict[str, str]]:
        """``show bfd sessions``: address -> {state, interval, timeout} (seconds as text)."""
        found: dict[str, dict[str, str]] = {}
        for line in self.ctl.command("show bfd sessions").splitlines():
            cols = line.split()
            # address, interface, state, since (may hold a space), interval, timeout
            if len(cols) >= 5 and is_address(cols[0]):
                found[cols[0]] = {"state": cols[2], "interval": cols[-2], "timeout": cols[-1]}
        return found

    def session(self, peer: str) -> dict[str, str]:
        return self.sessions().get(peer, {"state": "absent"})


class FrrBfd:
    """FRR's zebra + bfdd, sockets and config in the workdir (as the BGP harness runs FRR)."""

    def __init__(self, host: Host, workdir: Path) -> None:
        self.host = host
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.zserv = workdir / "zserv.api"
        self.procs: list[subprocess.Popen[bytes]] = []

    def configure(self, peers: list[tuple[str, str]], *, tx_ms: int, rx_ms: int, mult: int,
                  multihop: bool = False) -> None:  # fmt: skip
        """Write bfdd's config; when running, apply the same through vtysh."""
        lines = ["bfd"]
        for peer, local in peers:
            lines += [
                f" peer {peer} local-address {local}{' multihop' if multihop else ''}",
                f"  receive-interval {rx_ms}", f"  transmit-interval {tx_ms}",
                f"  detect-multiplier {mult}", " exit",
            ]  # fmt: skip
        (self.workdir / "bfdd.conf").write_text("\n".join(lines) + "\n")
        (self.workdir / "zebra.conf").write_text(f"hostname {self.host.name}-zebra\n")
        if self.procs:
            argv = ["vtysh", "--vty_socket", str(self.workdir), "-d", "bfdd", "-c", "configure"]
            for line in lines:
                argv += ["-c", line.strip()]
            subprocess.run(argv, check=True, capture_output=True, timeout=30)

    def start(self) -> None:
        for name in ("zserv.api", "zebra.vty", "bfdd.vty"):
            with contextlib.suppress(FileNotFoundError):
                (self.workdir / name).unlink()
        for daemon in ("zebra", "bfdd"):
            argv = frr_daemon_argv(daemon, self.workdir, self.zserv)
            if daemon == "bfdd":
                argv += ["--bfdctl", str(self.workdir / "bfdd.sock")]
            with (self.workdir / f"{daemon}.out").open("ab") as out:
                self.procs.append(self.host.popen(argv, stdout=out, stderr=subprocess.STDOUT))
            vty = self.workdir / f"{daemon}.vty"
            wait_for(vty.exists, timeout=15, what=f"FRR {daemon} to answer",
                     detail=self.log_tail)  # fmt: skip

    def log_tail(self) -> str:
        parts = [p.read_text()[-1500:] for p in sorted(self.workdir.glob("*.log"))]
        parts += [p.read_text()[-500:] for p in sorted(self.workdir.glob("*.out"))]
        return "\n".join(parts)

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=5)
        self.procs.clear()

    def kill_bfdd(self) -> None:
        proc = self.procs[-1]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=5)

    def peers(self) -> list[dict[str, Any]]:
        proc = subprocess.run(
            ["vtysh", "--vty_socket", str(self.workdir), "-d", "bfdd",
             "-c", "show bfd peers json"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        try:
            found: list[dict[str, Any]] = json.loads(proc.stdout or "[]")
        except json.JSONDecodeError:
            return []
        return found

    def peer(self, address: str) -> dict[str, Any]:
        for entry in self.peers():
            if entry.get("peer") == address:
                return entry
        return {"status": "absent"}


def bird_bfd_block(peers: list[tuple[str, str]], *, tx_ms: int, rx_ms: int, mult: int,
                   multihop: bool = False) -> str:  # fmt: skip
    options = f"min rx interval {rx_ms} ms; min tx interval {tx_ms} ms; multiplier {mult};"
    scope = f"multihop {{ {options} }};" if multihop else f'interface "*" {{ {options} }};'
    lines = [f"protocol bfd bfd1 {{ {scope}"]
    for peer, local in peers:
        lines.append(f"  neighbor {peer} local {local}{' multihop on' if multihop else ''};")
    lines.append("}")
    return "\n".join(lines)


@pytest.fixture
def lab(topology: Topology) -> Lab:
    """Host "peer" (192.0.2.1, 2001:db8::1) runs the daemon, "node" (.2, ::2) ours."""
    lab = Lab(topology)
    lab.add("peer")
    lab.add("node")
    return lab


@pytest.fixture
def bird(lab: Lab, tmp_path: Path) -> Iterator[BirdBfd]:
    require_binary("bird", "birdc")
    daemon = BirdBfd(lab.hosts["peer"], tmp_path / "bird")
    yield daemon
    daemon.kill()


@pytest.fixture
def ours(lab: Lab, tmp_path: Path) -> Iterator[list[OurBfd]]:
    """A list to append started drivers to; all are killed at teardown."""
    made: list[OurBfd] = []
    yield made
    for driver in made:
        driver.kill()
