"""Builders for speaker tests: a Store from manifest documents, and a fake BGP speaker."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from model.builders import parse
from teapot_lb.bgp import PeerConfig, RouteAttributes, State
from teapot_lb.bgp.neighbor import PeerCounters
from teapot_lb.cluster import Kind, Store
from teapot_lb.speaker.bgp_backend import SpeakerLike

NS = "lb-system"
API = "lb.teapot.io/v1alpha1"


def ours(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def node(name: str, address: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"addresses": [{"type": "InternalIP", "address": address}]},
    }


def lb_service(name: str, *ips: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}], **spec},
        "status": {"loadBalancer": {"ingress": [{"ip": ip} for ip in ips]}},
    }


def bgp_setup(communities: list[str] | None = None, **peer_spec: Any) -> list[dict[str, Any]]:
    return [
        node("n1", "192.0.2.11"),
        node("n2", "192.0.2.12"),
        ours("AddressPool", "public", {"addresses": ["203.0.113.0/28"]}),
        ours(
            "BGPPeer",
            "r1",
            {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1", **peer_spec},
        ),
        ours("BGPPeer", "r2", {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.2"}),
        ours(
            "BGPAdvertisement",
            "public",
            {"addressPools": ["public"], "communities": communities or []},
        ),
    ]


def store_of(*docs: dict[str, Any]) -> Store:
    store = Store()
    for d in docs:
        store.put_object(parse(d))
    return store


def put(store: Store, doc: dict[str, Any]) -> None:
    store.put_object(parse(doc))


def remove(store: Store, kind: Kind, key: str) -> None:
    store.delete(kind, key)


@dataclass
class FakePeer:
    """A session the router accepted (Established) unless a test says otherwise."""

    config: PeerConfig
    state: Any = State.ESTABLISHED
    established: bool = True
    prefixes_sent: int = 0
    last_error: str | None = None
    counters: PeerCounters = field(default_factory=PeerCounters)


@dataclass
class FakeSpeaker:
    """Records what the backend asks of a BGP speaker."""

    local_as: int
    router_id: IPv4Address
    peers: dict[str, Any] = field(default_factory=dict)
    # Peer address -> prefix text -> attributes (the backend hands prefixes as text).
    routes: dict[str, dict[str, RouteAttributes | None]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    started: bool = False
    shut_down: dict[str, Any] | None = None
    bfd: dict[str, Any] = field(default_factory=dict)  # set_bfd calls: address -> parameters

    async def start(self) -> None:
        self.started = True

    def add_peer(self, config: PeerConfig) -> Any:
        self.peers[config.address] = FakePeer(config)
        self.calls.append(("add", config.address))
        return self.peers[config.address]

    async def remove_peer(self, address: str, communication: str = "") -> None:
        del self.peers[address]
        self.routes.pop(address, None)
        self.calls.append(("remove", address))

    def set_bfd(self, address: str, parameters: Any) -> None:
        self.bfd[address] = parameters
        self.calls.append(("bfd", address))

    def set_routes(
        self, routes: Mapping[str, RouteAttributes | None], peer: str | None = None
    ) -> None:
        assert peer is not None
        self.routes[peer] = dict(routes)
        self.calls.append(("routes", peer))

    async def replace_routes(
        self, routes: Mapping[str, RouteAttributes | None], *, peer: str
    ) -> None:
        self.set_routes(routes, peer)

    def change_routes(
        self, routes: Mapping[str, RouteAttributes | None], withdrawn: Iterable[str], *,
        peer: str,
    ) -> None:  # fmt: skip
        table = self.routes[peer]  # only after set_routes for the peer
        for prefix in withdrawn:
            del table[prefix]
        table.update(routes)
        self.calls.append(("change", peer))

    async def shutdown(
        self, communication: str = "", *, withdraw: bool = False, graceful_restart: bool = False
    ) -> None:
        self.shut_down = {"withdraw": withdraw, "graceful_restart": graceful_restart}


class FakeFactory:
    def __init__(self) -> None:
        self.made: list[FakeSpeaker] = []

    def __call__(self, local_as: int, router_id: IPv4Address) -> SpeakerLike:
        s = FakeSpeaker(local_as, router_id)
        self.made.append(s)
        return s
