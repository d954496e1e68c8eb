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

from .base import (
    BgpDaemon,
    Neighbor,
    Origination,
    PeerError,
    RibEntry,
    fib_next_hops,
    wait_fib,
)
from .bird import Bird, BirdControl, parse_bird_routes
from .exabgp import ExaBgp
from .frr import Frr
from .gobgp import GoBgp
from .lab import Lab
from .teapot import Teapot, route_groups

DAEMONS: dict[str, type[BgpDaemon]] = {cls.kind: cls for cls in (Bird, Frr, GoBgp, ExaBgp, Teapot)}

__all__ = [
    "DAEMONS",
    "BgpDaemon",
    "Bird",
    "BirdControl",
    "ExaBgp",
    "Frr",
    "GoBgp",
    "Lab",
    "Neighbor",
    "Origination",
    "PeerError",
    "RibEntry",
    "Teapot",
    "fib_next_hops",
    "parse_bird_routes",
    "route_groups",
    "wait_fib",
]
