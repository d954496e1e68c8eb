"""Fixtures for the BGP interoperability tests: a LAN in namespaces and real daemons."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from needs import require_binary
from teapot_lb.lab.peers import DAEMONS, BgpDaemon, Lab, Neighbor, Origination, Teapot
from teapot_lb.netlab import Topology

DaemonFactory = Callable[..., BgpDaemon]


def require_daemon(kind: str) -> None:
    """Skip unless the daemon ``kind`` (bird, frr, gobgp, exabgp) is installed."""
    require_binary(*DAEMONS[kind].binaries)
    if kind == "teapot":
        pytest.importorskip("teapot_lb.bgp.speaker", reason="the BGP speaker is not there yet")


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


PEER_AS = 4_200_000_100  # 4-byte ASNs throughout (RFC 6793)
OUR_AS = 4_200_000_200


@dataclass
class Pair:
    """One daemon (host "peer") and our speaker (host "node") on a LAN."""

    lab: Lab
    peer: BgpDaemon
    ours: Teapot
    transport: int

    @property
    def peer_addr(self) -> str:
        return self.lab.addr("peer", self.transport)

    @property
    def our_addr(self) -> str:
        return self.lab.addr("node", self.transport)

    def wait_up(self, timeout: float = 30) -> None:
        self.ours.wait_established(self.peer_addr, timeout=timeout)
        self.peer.wait_established(self.our_addr, timeout=timeout)


PairFactory = Callable[..., Pair]


@pytest.fixture
def bgp_pair(lab: Lab, make_daemon: DaemonFactory) -> PairFactory:
    """``bgp_pair(kind, transport=4, ibgp=False, ...)``: a daemon and our speaker, peered.

    Options: ``hold_time``, ``peer_password`` / ``our_password`` (TCP MD5),
    ``graceful_restart``, ``peer_originate``, ``our_originate``, ``our_view_of_peer_as``
    (what our speaker expects the peer's ASN to be), ``peer_view_of_our_as``, ``bfd`` (both
    sides run BFD on the session), ``wait``.
    """

    def make(
        kind: str,
        *,
        transport: int = 4,
        ibgp: bool = False,
        hold_time: int = 9,
        peer_password: str | None = None,
        our_password: str | None = None,
        graceful_restart: bool = False,
        peer_originate: Sequence[Origination] = (),
        our_originate: Sequence[Origination] = (),
        our_view_of_peer_as: int | None = None,
        peer_view_of_our_as: int | None = None,
        bfd: bool = False,
        wait: bool = True,
    ) -> Pair:
        lab.add("peer")
        lab.add("node")
        peer_as = OUR_AS if ibgp else PEER_AS
        peer_addr, our_addr = lab.addr("peer", transport), lab.addr("node", transport)
        peer = make_daemon(
            kind, "peer", asn=peer_as, originate=list(peer_originate),
            neighbors=[Neighbor(
                our_addr, peer_view_of_our_as or OUR_AS, local_address=peer_addr,
                password=peer_password, hold_time=hold_time, graceful_restart=graceful_restart,
                bfd=bfd,
            )],
        )  # fmt: skip
        ours = make_daemon(
            "teapot", "node", asn=OUR_AS, originate=list(our_originate),
            neighbors=[Neighbor(
                peer_addr, our_view_of_peer_as or peer_as, local_address=our_addr,
                password=our_password, hold_time=hold_time, graceful_restart=graceful_restart,
                bfd=bfd,
            )],
        )  # fmt: skip
        assert isinstance(ours, Teapot)
        pair = Pair(lab, peer, ours, transport)
        if wait:
            pair.wait_up()
        return pair

    return make
