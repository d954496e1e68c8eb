"""IPv6 routes over an IPv4 router session: each router (BIRD 2 and FRR 8) has one session
with the relay, over IPv4, with both families; the tenant's IPv6 routes reach both routers'
kernel FIBs over it (MP_REACH_NLRI, RFC 4760) with the tenant node's own IPv6 next hop,
as its IPv4 routes do. A router that does not negotiate ipv6-unicast is named in the
relay's log with what to configure. One world for the module (tests/relay/world.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.peers import Frr, Origination
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

from .world import (
    ACME_V4,
    ACME_V6,
    ROUTER_AS,
    GtsmBird,
    GtsmTeapot,
    World,
    build,
    router_neighbors,
    tenant_speaker,
    v4,
    v6,
)

SPEAKERS = {"a1": GtsmTeapot, "a2": GtsmBird}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_root()
    require_binary("bird", "/usr/lib/frr/bgpd")
    with Topology("v6ov4") as topo:
        w = build(topo, tmp_path_factory.mktemp("relay-v6-over-v4"), v6_over_v4=True)
        try:
            w.start_relay()
            for name, cls in SPEAKERS.items():
                tenant_speaker(w, name, cls, "acme", [Origination(ACME_V4), Origination(ACME_V6)])
            yield w
        finally:
            w.stop()


def full_log(world: World) -> str:
    return (world.workdir / "relay.log").read_text()


def test_ipv6_routes_reach_both_routers_over_their_ipv4_session_with_the_nodes_next_hops(
    world: World,
) -> None:
    world.wait_fib(ACME_V6, frozenset(v6(n) for n in SPEAKERS), timeout=60)
    world.wait_fib(ACME_V4, frozenset(v4(n) for n in SPEAKERS))
    for router in world.routers.values():
        assert all(n.address == v4("relay") for n in router.neighbors)  # no IPv6 session
    assert "address to give as next hop" not in full_log(world)
    assert "FamilyNotNegotiated" not in full_log(world)


def test_a_router_without_ipv6_on_the_session_is_named_with_what_to_configure(
    world: World,
) -> None:
    # Stopped, not killed: zebra takes its routes out of the kernel as it goes, so the FIB
    # read below is the new router's alone (a killed one leaves its IPv6 route behind).
    world.routers.pop("rfrr").stop()
    frr = Frr(
        world.hosts["rfrr"], world.workdir / "rfrr-v4-only", asn=ROUTER_AS, router_id=v4("rfrr"),
        neighbors=router_neighbors(v6_over_v4=True, families=("ipv4",)),
        fib=True, local_addresses=[v4("rfrr"), v6("rfrr")],
    )  # fmt: skip
    frr.start()
    world.routers["rfrr"] = frr
    wait_for(
        lambda: f"router {v4('rfrr')} did not negotiate ipv6-unicast" in full_log(world),
        timeout=60, what="the relay naming the router without ipv6-unicast",
        detail=world.relay_log,
    )  # fmt: skip
    line = next(ln for ln in full_log(world).splitlines() if "did not negotiate ipv6-unicast" in ln)
    assert "FamilyNotNegotiated" in line
    assert "address-family ipv6 unicast" in line and "leave ipv6-unicast out" in line
    # Its IPv4 routes still go; the IPv6 ones stay with BIRD.
    wait_for(lambda: world.fib(ACME_V4)["rfrr"] == frozenset(v4(n) for n in SPEAKERS),
             timeout=30, what="acme's IPv4 route in FRR's FIB")  # fmt: skip
    assert world.fib(ACME_V6) == {
        "rbird": frozenset(v6(n) for n in SPEAKERS), "rfrr": None,
    }  # fmt: skip
