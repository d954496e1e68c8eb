"""ExaBGP 4.2: static routes from its config, received routes through its JSON API."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .base import (
    HERE,
    BgpDaemon,
    Neighbor,
    Origination,
    PeerError,
    RibEntry,
    global_next_hops,
    ip_version,
    is_link_local,
)

EXABGP_ADD_PATH = {"off": "disable", "send": "send", "receive": "receive", "both": "send/receive"}


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
            caps = []
            if n.graceful_restart:
                caps.append("graceful-restart 120;")
            if n.add_path:
                caps.append(f"add-path {EXABGP_ADD_PATH[n.add_path]};")
            if caps:
                out.append(f"  capability {{ {' '.join(caps)} }}")
            out.append(
                "  api { processes [ recorder ]; neighbor-changes;"
                " receive { parsed; update; notification; } }"
            )
            statics = [o for o in self.originate if f"ipv{o.version}" in n.families]
            if statics:
                out.append("  static {")
                path_ids: dict[str, int] = {}  # a path's key → its Path Identifier
                for o in statics:
                    extra = _exabgp_attrs(o)
                    if o.path:
                        pid = path_ids.setdefault(f"{o.prefix} {o.path}", len(path_ids) + 1)
                        extra += f" path-information {pid}"
                    out.append(f"    route {o.prefix} next-hop {self._next_hop(n, o)}{extra};")
                out.append("  }")
            out.append("}")
        self.conf.write_text("\n".join(out) + "\n")

    def _next_hop(self, n: Neighbor, o: Origination) -> str:
        """``self`` is the session's address: name our own for the other family."""
        if o.next_hop:
            return o.next_hop
        if o.version == n.version:
            return "self"
        for addr in self.local_addresses:
            if ip_version(addr) == o.version:
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
                        if old is not None and is_link_local(hop) and not is_link_local(old[1]):
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
                next_hops=global_next_hops(hop for _, hop in entries),
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
