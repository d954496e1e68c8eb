"""teapot-lb's own Speaker as a process (``drive_speaker.py``), wrapped like a daemon."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import (
    BFD_INTERVAL_MS,
    BFD_MULT,
    HERE,
    BgpDaemon,
    Neighbor,
    Origination,
    PeerError,
    RibEntry,
    global_next_hops,
    ip_version,
)


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
        if n.add_path:
            fields["add_path"] = n.add_path
        if n.bfd:
            us = BFD_INTERVAL_MS * 1000
            fields["bfd"] = {"desired_min_tx": us, "required_min_rx": us, "detect_mult": BFD_MULT}
        # Next hop self for the session's own family; name ours for the other one.
        for addr in self.local_addresses:
            if ip_version(addr) != n.version:
                fields[f"next_hop_v{ip_version(addr)}"] = addr
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

    def paths_in(self, peer: str) -> set[tuple[str, int | None, str]]:
        """Every path received from ``peer``: prefix, Path Identifier (ADD-PATH), next hop."""
        return {(p, pid, nh) for p, pid, nh in self.call("paths_in", peer=peer)}

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
                next_hops=global_next_hops(p["next_hop"] for p in paths if p["next_hop"]),
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
        key = (o.communities, o.large_communities, o.local_pref, o.next_hop, o.path)
        groups.setdefault(key, []).append(o.prefix)
    out = []
    for (comms, large, local_pref, next_hop, path), prefixes in groups.items():
        group: dict[str, Any] = {
            "prefixes": prefixes,
            "communities": list(comms),
            "large_communities": list(large),
            "local_pref": local_pref,
        }
        if next_hop:
            group["next_hop"] = next_hop
        if path:
            group["path"] = path
        out.append(group)
    return out
