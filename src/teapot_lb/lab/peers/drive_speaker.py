"""Run teapot-lb's BGP ``Speaker`` as a process, driven by JSON lines.

Usage: ``drive_speaker.py CONFIG.json`` (inside a network namespace, via ``Host.popen``).

The interop tests and ``bench/bgp_announce.py`` cannot run the asyncio speaker in their
own process, because its sockets must live in the node's namespace. This driver runs it
there and takes one JSON command per line on stdin, answering one JSON line on stdout:
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``. Logs go to stderr.

CONFIG: ``{"asn", "router_id", "listen_port" (null: no listener), "log_level",
"peers": [PeerConfig fields], "routes": [route group]}``; a route group is
``{"prefixes": [...], "communities": ["65000:1"], "large_communities": ["65000:1:2"],
"local_pref": 200, "next_hop": "192.0.2.9", "path": "node-a"}`` (the last two optional:
groups with a ``path`` make their prefixes several paths, one per key). Routes are set
before the peers are added, as a node would at boot.

Commands: ``ping``, ``add_peer {peer}``, ``set_routes {routes, peer?}`` (returns how long
parsing our JSON and the speaker's ``set_routes`` took), ``state {peer}``,
``info {peer}`` (state, last error, counters, families sent with ADD-PATH),
``received {peer}`` (how many routes the peer's Adj-RIB-In holds; O(1), for polling),
``routes_in {peer}``, ``paths_in {peer}`` (every received path: prefix, Path
Identifier or null, next hop), ``stats`` (CPU, peak RSS), ``set_bfd {peer, bfd}`` (new
BFD parameters for a running peer, µs; null: no BFD),
``shutdown {communication?, withdraw?, graceful_restart?}`` (the process then exits).
CONFIG ``"restarting": true`` starts the speaker as a restarting speaker (RFC 4724 R bit).
SIGTERM and end of stdin also shut the speaker down gracefully.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import resource
import signal
import sys
import time
from ipaddress import ip_address, ip_network
from typing import Any

from teapot_lb import log
from teapot_lb.bfd.session import Parameters as BfdParameters
from teapot_lb.bgp.rib import Paths, RouteAttributes
from teapot_lb.bgp.speaker import PeerConfig, Speaker
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    AddPathMode,
    LargeCommunity,
    community,
)

FAMILIES = {"ipv4": IPV4_UNICAST, "ipv6": IPV6_UNICAST}


def parse_routes(groups: list[dict[str, Any]]) -> dict[Any, RouteAttributes | Paths]:
    routes: dict[Any, RouteAttributes | Paths] = {}
    keyed: dict[Any, dict[str, RouteAttributes]] = {}
    for group in groups:
        attrs = RouteAttributes(
            next_hop=ip_address(group["next_hop"]) if group.get("next_hop") else None,
            communities=tuple(
                community(*(int(x) for x in c.split(":"))) for c in group.get("communities", ())
            ),
            large_communities=tuple(
                LargeCommunity(*(int(x) for x in c.split(":")))
                for c in group.get("large_communities", ())
            ),
            local_pref=group.get("local_pref"),
        )
        for prefix in group["prefixes"]:
            if group.get("path"):
                keyed.setdefault(ip_network(prefix), {})[group["path"]] = attrs
            else:
                routes[ip_network(prefix)] = attrs
    for prefix, paths in keyed.items():
        routes[prefix] = Paths.of(paths)
    return routes


def peer_config(fields: dict[str, Any]) -> PeerConfig:
    fields = dict(fields)
    if "families" in fields:
        fields["families"] = frozenset(FAMILIES[f] for f in fields["families"])
    for key in ("next_hop_v4", "next_hop_v6"):
        if fields.get(key):
            fields[key] = ip_address(fields[key])
    if fields.get("bfd"):
        fields["bfd"] = BfdParameters(**fields["bfd"])  # intervals in µs
    if fields.get("add_path"):
        fields["add_path"] = AddPathMode[fields["add_path"].upper()]
    return PeerConfig(**fields)


def describe_path(path: Any) -> dict[str, Any]:
    return {
        "next_hop": str(path.next_hop) if path.next_hop is not None else None,
        "as_path": list(path.as_path),
        "communities": [f"{c >> 16}:{c & 0xFFFF}" for c in path.communities],
        "large_communities": [str(c) for c in path.large_communities],
        "local_pref": getattr(path, "local_pref", None),
    }


class Driver:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.speaker = Speaker(
            local_as=config["asn"],
            router_id=config["router_id"],
            listen_port=config.get("listen_port", 179),
            restarting=config.get("restarting", False),
        )
        self.peers: dict[str, Any] = {}
        self.done = asyncio.Event()
        self.log = log.get("drive_speaker")

    async def start(self) -> None:
        await self.speaker.start()
        self.speaker.set_routes(parse_routes(self.config.get("routes", [])))
        for fields in self.config.get("peers", []):
            self.add_peer(fields)

    def add_peer(self, fields: dict[str, Any]) -> None:
        peer = self.speaker.add_peer(peer_config(fields))
        self.peers[str(ip_address(fields["address"]))] = peer

    async def handle(self, msg: dict[str, Any]) -> Any:
        cmd = msg["cmd"]
        if cmd == "ping":
            return "pong"
        if cmd == "add_peer":
            self.add_peer(msg["peer"])
            return None
        if cmd == "set_routes":
            started = time.perf_counter()
            routes = parse_routes(msg["routes"])
            parsed = time.perf_counter()
            if msg.get("peer"):
                self.speaker.set_routes(routes, peer=msg["peer"])
            else:
                self.speaker.set_routes(routes)
            return {"parse_s": parsed - started, "set_routes_s": time.perf_counter() - parsed}
        if cmd == "state":
            state = self.peers[msg["peer"]].state
            return str(getattr(state, "name", state)).lower()
        if cmd == "info":
            peer = self.peers[msg["peer"]]
            neg = peer.negotiated
            return {
                "state": str(getattr(peer.state, "name", peer.state)).lower(),
                "last_error": peer.last_error,
                "counters": dataclasses.asdict(peer.counters),
                "add_path_send": sorted(str(f) for f in neg.add_path_send) if neg else [],
            }
        if cmd == "set_bfd":
            bfd = msg.get("bfd")
            self.speaker.set_bfd(msg["peer"], BfdParameters(**bfd) if bfd else None)
            return None
        if cmd == "received":
            return self.peers[msg["peer"]].prefixes_received
        if cmd == "paths_in":
            rib_in = self.peers[msg["peer"]].rib_in
            return sorted(
                [str(prefix), path_id, str(path.next_hop)] for prefix, path_id, path in rib_in.paths
            )
        if cmd == "routes_in":
            paths = self.speaker.routes_in(msg["peer"])
            return {str(prefix): describe_path(path) for prefix, path in paths.items()}
        if cmd == "stats":
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return {"cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss}
        if cmd == "shutdown":
            await self.shutdown(
                msg.get("communication", ""),
                withdraw=msg.get("withdraw", False),
                graceful_restart=msg.get("graceful_restart", False),
            )
            return None
        raise ValueError(f"unknown command {cmd!r}")

    async def shutdown(
        self, communication: str, *, withdraw: bool = False, graceful_restart: bool = False
    ) -> None:
        if not self.done.is_set():
            self.done.set()
            await self.speaker.shutdown(
                communication, withdraw=withdraw, graceful_restart=graceful_restart
            )

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 30)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        loop.add_signal_handler(
            signal.SIGTERM, lambda: asyncio.ensure_future(self.shutdown("SIGTERM"))
        )
        await self.start()
        while not self.done.is_set():
            read = asyncio.ensure_future(reader.readline())
            stop = asyncio.ensure_future(self.done.wait())
            await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                read.cancel()
                break
            stop.cancel()
            line = read.result()
            if not line:  # our controller went away
                await self.shutdown("controller gone")
                break
            try:
                reply = {"ok": True, "result": await self.handle(json.loads(line))}
            except Exception as exc:
                self.log.exception("command failed")
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
        await asyncio.sleep(0)  # let the shutdown's last writes go out


def main() -> None:
    with open(sys.argv[1]) as f:
        config = json.load(f)
    log.configure(config.get("log_level", "info"), json=True, component="speaker")
    asyncio.run(Driver(config).serve())


if __name__ == "__main__":
    main()
