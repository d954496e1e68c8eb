"""FRR 8: zebra + bgpd started directly, every path in the workdir."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from teapot_lb.lab.wait import wait_for

from .base import (
    BFD_INTERVAL_MS,
    BFD_MULT,
    BgpDaemon,
    PeerError,
    RibEntry,
    global_next_hops,
)

FRR_DIR = Path("/usr/lib/frr")


def frr_daemon_argv(daemon: str, workdir: Path, zserv: Path) -> list[str]:
    """Run FRR's ``daemon`` with config, pid, vty socket and log in ``workdir``."""
    # Running as root, FRR insists the user belongs to its vty group; joining the
    # group as primary group satisfies it without touching /etc/group.
    return [
        str(FRR_DIR / daemon), "-f", str(workdir / f"{daemon}.conf"),
        "-i", str(workdir / f"{daemon}.pid"), "-z", str(zserv),
        "--vty_socket", str(workdir), "-u", "root", "-g", "frrvty", "-P", "0",
        "--log", f"file:{workdir / (daemon + '.log')}",
    ]  # fmt: skip


# Each FRR daemon keeps a crash-log buffer in /var/tmp/frr/<daemon>.<pid>/ (not
# configurable); it removes it on a clean exit, we remove it after a kill.
FRR_TMP = Path("/var/tmp/frr")


def _remove_tmp_dirs(pids: list[int]) -> None:
    for pid in pids:
        for daemon in ("zebra", "bgpd"):
            shutil.rmtree(FRR_TMP / f"{daemon}.{pid}", ignore_errors=True)


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
        return frr_daemon_argv(daemon, self.workdir, self.zserv)

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
            if n.bfd:
                out.append(f" neighbor {n.address} bfd profile fast")
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
                    # FRR offers ADD-PATH receive unless told not to; sending is asked for.
                    if n.add_path in ("send", "both"):
                        out.append(f"  neighbor {n.address} addpath-tx-all-paths")
                    if n.add_path in ("off", "send"):
                        out.append(f"  neighbor {n.address} disable-addpath-rx")
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
        (self.workdir / "bfdd.conf").write_text(
            f"bfd\n profile fast\n  transmit-interval {BFD_INTERVAL_MS}\n"
            f"  receive-interval {BFD_INTERVAL_MS}\n  detect-multiplier {BFD_MULT}\n"
        )

    def stop(self, *, timeout: float = 15) -> None:
        pids = [p.pid for p in self.procs]
        super().stop(timeout=timeout)
        _remove_tmp_dirs(pids)

    def kill(self) -> None:
        pids = [p.pid for p in self.procs]
        super().kill()
        _remove_tmp_dirs(pids)

    def _launch(self) -> None:
        for name in ("zserv.api", "zebra.vty", "bgpd.vty"):
            with contextlib.suppress(FileNotFoundError):
                (self.workdir / name).unlink()
        self._popen(self._common_args("zebra"), self.workdir / "zebra.out")
        wait_for(
            self._zserv_ready,
            timeout=15,
            what="zebra's API socket",
            detail=self.log_tail,
        )
        if any(n.bfd for n in self.neighbors):  # bgpd asks bfdd for sessions through zebra
            bfdd = [*self._common_args("bfdd"), "--bfdctl", str(self.workdir / "bfdd.sock")]
            self._popen(bfdd, self.workdir / "bfdd.out")
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

    def request_refresh(self, peer: str) -> None:
        self.vtysh(f"clear bgp {peer} soft in")

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
                    next_hops=global_next_hops(hops),
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
