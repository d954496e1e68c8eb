"""BIRD 2: ``bird -f`` with its control socket, config and log in the workdir."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

from .base import (
    BFD_INTERVAL_MS,
    BFD_MULT,
    BgpDaemon,
    PeerError,
    RibEntry,
    global_next_hops,
    ip_version,
)

BIRD_ADD_PATH = {"send": "tx", "receive": "rx", "both": "on"}


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
        if any(n.bfd for n in self.neighbors):
            out.append(
                f'protocol bfd {{ interface "*" {{ interval {BFD_INTERVAL_MS} ms;'
                f" multiplier {BFD_MULT}; }}; }}"
            )
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
            if n.bfd:
                lines.append("  bfd on;")
            if n.passive:
                lines.append("  passive on;")
            lines.append(f"  graceful restart {'on' if n.graceful_restart else 'off'};")
            for fam in n.families:
                # Neighbors are on-link: resolve next hops directly, no IGP needed.
                extra = ""
                other = [a for a in self.local_addresses if f"ipv{ip_version(a)}" == fam]
                if f"ipv{n.version}" != fam and other:
                    # Over the other family's transport BIRD must be told its next hop.
                    extra = f" next hop address {other[0]};"
                if n.add_path and n.add_path != "off":
                    extra += f" add paths {BIRD_ADD_PATH[n.add_path]};"
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

    def request_refresh(self, peer: str) -> None:
        self.ctl.command(f"reload in {self.protocol_name(peer)}")

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
            next_hops=global_next_hops(hops),
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
