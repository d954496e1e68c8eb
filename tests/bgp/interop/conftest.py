"""Fixtures for the BGP interoperability tests: a LAN in namespaces and real daemons."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary
from teapot_lb.netlab import Topology

from .peers import DAEMONS, BgpDaemon, Lab

DaemonFactory = Callable[..., BgpDaemon]


def require_daemon(kind: str) -> None:
    """Skip unless the daemon ``kind`` (bird, frr, gobgp, exabgp) is installed."""
    require_binary(*DAEMONS[kind].binaries)


@pytest.fixture
def lab(topology: Topology) -> Lab:
    """Hosts on one switch: host i has 192.0.2.(i+1)/24 and 2001:db8::(i+1)/64."""
    return Lab(topology)


@pytest.fixture
def make_daemon(tmp_path: Path, lab: Lab) -> Iterator[DaemonFactory]:
    """``make_daemon(kind, host_name, asn=..., neighbors=[...])``: a started daemon.

    Its files live in ``tmp_path/<kind>-<host>``; it is stopped at teardown (the topology
    then kills whatever is left in the namespaces).
    """
    made: list[BgpDaemon] = []

    def make(kind: str, host_name: str, *, start: bool = True, **kwargs: Any) -> BgpDaemon:
        require_daemon(kind)
        host = lab.hosts[host_name]
        kwargs.setdefault("router_id", lab.v4[host_name])
        kwargs.setdefault("local_addresses", [lab.v4[host_name], lab.v6[host_name]])
        daemon = DAEMONS[kind](host, tmp_path / f"{kind}-{host_name}", **kwargs)
        made.append(daemon)
        if start:
            daemon.start()
        return daemon

    yield make
    for daemon in made:
        daemon.kill()
