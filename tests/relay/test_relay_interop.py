"""The relay between real tenant speakers (ours, BIRD, FRR, GoBGP) and real routers (BIRD 2
and FRR 8 with ADD-PATH receive and multipath): each accepted route reaches both routers'
kernel FIBs with every tenant node that announces it as a next hop; a Tenant change or a
session going down changes only what it must. One world per module (tests/relay/world.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.peers import Origination
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

from .world import (
    ACME_NODES,
    ACME_V4,
    ACME_V6,
    BOLT_NODES,
    BOLT_PASSWORD,
    BOLT_V4,
    BOLT_V6,
    GtsmBird,
    GtsmFrr,
    GtsmGoBgp,
    GtsmTeapot,
    World,
    acme_doc,
    build,
    manifests,
    tenant_speaker,
    v4,
    v6,
)

SPEAKERS = {"a1": GtsmTeapot, "a2": GtsmBird, "a3": GtsmFrr, "a4": GtsmGoBgp}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_root()
    require_binary("bird", "/usr/lib/frr/bgpd", "gobgpd")
    with Topology("relay") as topo:
        w = build(topo, tmp_path_factory.mktemp("relay-interop"))
        try:
            w.start_relay()
            for name, cls in SPEAKERS.items():
                tenant_speaker(w, name, cls, "acme", [Origination(ACME_V4), Origination(ACME_V6)])
            for name in BOLT_NODES:
                tenant_speaker(
                    w, name, GtsmTeapot, "bolt", [Origination(BOLT_V4), Origination(BOLT_V6)],
                    password=BOLT_PASSWORD,
                )  # fmt: skip
            yield w
        finally:
            w.stop()


def nodes4(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(v4(n) for n in names)


def nodes6(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(v6(n) for n in names)


def test_every_speakers_routes_reach_both_fibs_with_ecmp_over_the_tenants_nodes(
    world: World,
) -> None:
    world.wait_fib(ACME_V4, nodes4(ACME_NODES), timeout=60)
    world.wait_fib(ACME_V6, nodes6(ACME_NODES))
    world.wait_fib(BOLT_V4, nodes4(BOLT_NODES))
    world.wait_fib(BOLT_V6, nodes6(BOLT_NODES))
    assert world.metric("teapot_lb_relay_sessions_established", tenant="acme") == 8
    assert world.metric("teapot_lb_relay_sessions_established", tenant="bolt") == 4


def test_explain_lists_each_route_with_its_speaker_and_verdict(world: World) -> None:
    world.wait_fib(ACME_V4, nodes4(ACME_NODES), timeout=60)
    doc = world.explain("acme")
    seen = {(r["prefix"], r["from"]) for r in doc["routes"] if r["verdict"] == "accepted"}
    assert {(ACME_V4, v4(n)) for n in ACME_NODES} <= seen
    assert {(ACME_V6, v6(n)) for n in ACME_NODES} <= seen
    assert {s["state"] for s in doc["sessions"]} == {"Established"}


def test_a_shrunk_allocation_withdraws_the_difference_without_resetting_a_session(
    world: World,
) -> None:
    world.wait_fib(ACME_V4, nodes4(ACME_NODES), timeout=60)
    established = world.metric("teapot_lb_relay_sessions_established", tenant="acme")
    docs = [d for d in manifests() if d["kind"] != "Tenant" or d["metadata"]["name"] != "acme"]
    world.write_manifests([*docs, acme_doc("203.0.113.8/29")])
    try:
        world.wait_fib(ACME_V4, None)
        assert world.fib(ACME_V6) == dict.fromkeys(world.routers, nodes6(ACME_NODES))
        assert world.fib(BOLT_V4) == dict.fromkeys(world.routers, nodes4(BOLT_NODES))
        doc = world.explain("acme")
        reasons = {r["reason"] for r in doc["routes"] if r["prefix"] == ACME_V4}
        assert reasons == {"outside-allocation"}
    finally:
        world.write_manifests(manifests())
    # Back from the Adj-RIB-In the relay kept: no speaker resent anything.
    world.wait_fib(ACME_V4, nodes4(ACME_NODES))
    assert world.metric("teapot_lb_relay_sessions_established", tenant="acme") == established
    for name in ACME_NODES:
        for addr in (v4("relay"), v6("relay")):
            assert world.tenants[name].session_state(addr) == "established"


def test_a_tenant_session_going_down_withdraws_its_paths_at_once(world: World) -> None:
    world.wait_fib(ACME_V4, nodes4(ACME_NODES), timeout=60)
    frr = world.tenants["a3"]
    frr.stop()
    rest = tuple(n for n in ACME_NODES if n != "a3")
    world.wait_fib(ACME_V4, nodes4(rest), timeout=20)
    world.wait_fib(ACME_V6, nodes6(rest), timeout=20)
    frr.start()
    world.wait_fib(ACME_V4, nodes4(ACME_NODES), timeout=30)
    wait_for(lambda: world.fib(ACME_V6) == dict.fromkeys(world.routers, nodes6(ACME_NODES)),
             timeout=30, what="a3's IPv6 path back")  # fmt: skip
