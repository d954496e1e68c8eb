"""GoBGP 3: ``gobgpd`` with a TOML config and its gRPC API on the namespace's loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .base import (
    BgpDaemon,
    Origination,
    PeerError,
    RibEntry,
    community_str,
    global_next_hops,
    ip_version,
)

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
                if n.add_path and n.add_path != "off":
                    out.append("    [neighbors.afi-safis.add-paths.config]")
                    if n.add_path in ("receive", "both"):
                        out.append("      receive = true")
                    if n.add_path in ("send", "both"):
                        out.append("      send-max = 8")
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
            if ip_version(addr) == version:
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
            communities = frozenset(community_str(c) for c in attr.get("communities", []))
        elif kind == 32:
            large = frozenset(
                f"{v['ASN']}:{v['LocalData1']}:{v['LocalData2']}" for v in attr.get("value", [])
            )
    return RibEntry(
        next_hops=global_next_hops(hops),
        communities=communities,
        large_communities=large,
        local_pref=local_pref,
        as_path=as_path,
    )
