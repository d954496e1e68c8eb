"""Several paths per prefix with third-party next hops, against BIRD 2 and FRR 8.

Our speaker (host "speaker") announces one /32 and one /128 with a path per backend
(hosts "b1".."b3" on the same segment, each path's next hop one backend's address) to a
router (host "router") whose kernel FIB is checked: with ADD-PATH (RFC 7911) it holds an
ECMP route over every backend and loses exactly the next hop of a withdrawn path; without
ADD-PATH it holds the one path our speaker sends (the first by key), its third-party next
hop accepted because it is on the router's segment (RFC 4271 §5.1.3). The receiving side:
ExaBGP sends us three paths of one prefix with ADD-PATH and our speaker keeps all three.
"""

from __future__ import annotations

import pytest

from teapot_lb.lab.peers import Lab, Neighbor, Origination, Teapot, wait_fib
from teapot_lb.lab.wait import wait_for

from .conftest import OUR_AS, PEER_AS, DaemonFactory

ROUTERS = ["bird", "frr"]
BACKENDS = ["b1", "b2", "b3"]
VIPS = {4: "203.0.113.10/32", 6: "2001:db8:10::10/128"}


def tenant_paths(lab: Lab, backends: list[str]) -> list[Origination]:
    """Each VIP once per backend: the backend's address as next hop, its name as key."""
    return [
        Origination(prefix, next_hop=lab.addr(b, version), path=b)
        for version, prefix in VIPS.items()
        for b in backends
    ]


def setup(lab: Lab, make_daemon: DaemonFactory, router: str, router_add_path: str) -> Teapot:
    for name in ("router", "speaker", *BACKENDS):
        lab.add(name)
    make_daemon(
        router, "router", asn=PEER_AS, fib=True,
        neighbors=[Neighbor(
            lab.v4["speaker"], OUR_AS, local_address=lab.v4["router"], hold_time=30,
            add_path=router_add_path,
        )],
    )  # fmt: skip
    ours = make_daemon(
        "teapot", "speaker", asn=OUR_AS, originate=tenant_paths(lab, BACKENDS),
        neighbors=[Neighbor(
            lab.v4["router"], PEER_AS, local_address=lab.v4["speaker"], hold_time=30,
            add_path="send",
        )],
    )  # fmt: skip
    assert isinstance(ours, Teapot)
    ours.wait_established(lab.v4["router"])
    return ours


@pytest.mark.parametrize("router", ROUTERS)
def test_router_fib_has_an_ecmp_next_hop_per_path_and_loses_only_a_withdrawn_one(
    lab: Lab, make_daemon: DaemonFactory, router: str
) -> None:
    ours = setup(lab, make_daemon, router, "receive")
    assert ours.info(lab.v4["router"])["add_path_send"] == ["ipv4-unicast", "ipv6-unicast"]
    host = lab.hosts["router"]
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr(b, version) for b in BACKENDS})

    ours.set_routes(tenant_paths(lab, ["b1", "b3"]))
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr("b1", version), lab.addr("b3", version)})

    ours.set_routes(tenant_paths(lab, ["b1", "b2", "b3"]))
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr(b, version) for b in BACKENDS})


@pytest.mark.parametrize("router", ROUTERS)
def test_without_add_path_the_router_installs_the_first_path_with_its_third_party_next_hop(
    lab: Lab, make_daemon: DaemonFactory, router: str
) -> None:
    ours = setup(lab, make_daemon, router, "off")
    assert ours.info(lab.v4["router"])["add_path_send"] == []
    host = lab.hosts["router"]
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr("b1", version)})  # not the speaker's own address

    ours.set_routes(tenant_paths(lab, ["b2", "b3"]))  # the first path goes: b2 is first now
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr("b2", version)})


def test_we_keep_every_path_exabgp_sends_with_add_path(
    lab: Lab, make_daemon: DaemonFactory
) -> None:
    for name in ("peer", "node", *BACKENDS):
        lab.add(name)
    vip = VIPS[4]
    make_daemon(
        "exabgp", "peer", asn=PEER_AS,
        originate=[Origination(vip, next_hop=lab.v4[b], path=b) for b in BACKENDS],
        neighbors=[Neighbor(
            lab.v4["node"], OUR_AS, local_address=lab.v4["peer"], families=("ipv4",),
            add_path="send",
        )],
    )  # fmt: skip
    ours = make_daemon(
        "teapot", "node", asn=OUR_AS,
        neighbors=[Neighbor(
            lab.v4["peer"], PEER_AS, local_address=lab.v4["node"], add_path="receive",
        )],
    )  # fmt: skip
    assert isinstance(ours, Teapot)
    peer = lab.v4["peer"]
    wait_for(
        lambda: (
            {(p, nh) for p, _, nh in ours.paths_in(peer)} == {(vip, lab.v4[b]) for b in BACKENDS}
        ),
        timeout=30,
        what="three paths of the prefix in our Adj-RIB-In",
        detail=lambda: f"{ours.paths_in(peer)}",
    )
    assert {pid for _, pid, _ in ours.paths_in(peer)} == {1, 2, 3}  # ExaBGP's identifiers


@pytest.mark.parametrize("router", ROUTERS)
def test_two_speakers_announcing_the_same_paths_keep_every_backend_when_one_stops(
    lab: Lab, make_daemon: DaemonFactory, router: str
) -> None:
    """Several management speakers announce a tenant IP with the same backends (the same
    Path Identifiers, from the same keys): the router's FIB has exactly the backends as
    next hops, keeps them all when one speaker stops, and follows the other's changes."""
    speakers = ["speaker1", "speaker2"]
    for name in ("router", *speakers, *BACKENDS):
        lab.add(name)
    make_daemon(
        router, "router", asn=PEER_AS, fib=True,
        neighbors=[
            Neighbor(lab.v4[s], OUR_AS, local_address=lab.v4["router"], hold_time=30,
                     add_path="receive")
            for s in speakers
        ],
    )  # fmt: skip
    ours = [
        make_daemon(
            "teapot",
            s,
            asn=OUR_AS,
            originate=tenant_paths(lab, BACKENDS),
            neighbors=[
                Neighbor(
                    lab.v4["router"],
                    PEER_AS,
                    local_address=lab.v4[s],
                    hold_time=30,
                    add_path="send",
                )
            ],
        )
        for s in speakers
    ]
    host = lab.hosts["router"]
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr(b, version) for b in BACKENDS})
    ours[0].stop()
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr(b, version) for b in BACKENDS}, timeout=10)
    ours[1].set_routes(tenant_paths(lab, ["b2"]))
    for version, prefix in VIPS.items():
        wait_fib(host, prefix, {lab.addr("b2", version)}, timeout=10)


def test_gobgp_keeps_every_path_we_send_with_add_path(lab: Lab, make_daemon: DaemonFactory) -> None:
    """GoBGP is not wired to a FIB here: its RIB holds the three paths of each prefix."""
    for name in ("router", "speaker", *BACKENDS):
        lab.add(name)
    router = make_daemon(
        "gobgp", "router", asn=PEER_AS,
        neighbors=[Neighbor(
            lab.v4["speaker"], OUR_AS, local_address=lab.v4["router"], add_path="receive",
        )],
    )  # fmt: skip
    ours = make_daemon(
        "teapot", "speaker", asn=OUR_AS, originate=tenant_paths(lab, BACKENDS),
        neighbors=[Neighbor(
            lab.v4["router"], PEER_AS, local_address=lab.v4["speaker"], add_path="send",
        )],
    )  # fmt: skip
    assert isinstance(ours, Teapot)

    def next_hops(backends: list[str]) -> dict[str, frozenset[str]]:
        return {p: frozenset(lab.addr(b, v) for b in backends) for v, p in VIPS.items()}

    router.wait_routes(
        lambda rib: {p: e.next_hops for p, e in rib.items()} == next_hops(BACKENDS),
        what="three paths per prefix",
    )
    ours.set_routes(tenant_paths(lab, ["b1", "b3"]))
    router.wait_routes(
        lambda rib: {p: e.next_hops for p, e in rib.items()} == next_hops(["b1", "b3"]),
        what="the b2 paths withdrawn",
    )
