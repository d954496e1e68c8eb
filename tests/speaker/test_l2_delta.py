"""The L2 backend applying each plan's delta holds exactly what applying the whole plan
holds (issue 19: a step at 25k L2 IPs resolved every one of them), whatever else changes
between steps: interfaces, claims judged on the wire, silences."""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address, ip_network
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.announce.announcement import L2Claim, Plan
from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.announce.totals import PlanDelta
from teapot_lb.cluster import Store
from teapot_lb.l2.announcer import Claim
from teapot_lb.membership.core import Member, MemberState, Timing
from teapot_lb.speaker.backend import Step
from teapot_lb.speaker.desired import l2_claims
from teapot_lb.speaker.interfaces import LISTING_TTL_S, InterfaceInfo, TimedListing
from teapot_lb.speaker.l2_backend import L2Backend

from .test_l2_backend import ETH0, OTHER_MAC, Clock, FakeResponder

ETH1 = InterfaceInfo("eth1", 3, b"\x02\x00\x00\x00\x00\x02", None, (ip_network("192.0.2.0/25"),))
IPS = ("192.0.2.10", "192.0.2.200", "192.0.2.201", "203.0.113.5")  # the last: no subnet
IFACES = ((), (), ("eth0",), ("eth1",), ("eth0", "eth1"), ("eth9",))

claims = st.frozensets(st.builds(L2Claim, st.sampled_from(IPS), st.sampled_from(IFACES)))
ops = st.one_of(
    st.tuples(st.just("plan"), claims),
    st.tuples(st.just("plan"), claims),
    st.tuples(st.just("eth1"), st.booleans()),  # an interface appears or goes
    st.tuples(st.just("claim"), st.sampled_from(IPS[:3])),  # another node claims an IP
    st.tuples(st.just("resync"), claims),  # the whole plan handed again (after a failure)
)


def backend(clock: Clock, listing: dict[str, InterfaceInfo]) -> L2Backend:
    async def interfaces() -> dict[str, InterfaceInfo]:
        return dict(listing)

    b = L2Backend(
        "n1",
        on_change=lambda: None,
        timing=Timing(interval=0.01, dead_after=3),
        port=0,
        list_interfaces=interfaces,
        responder=FakeResponder,
        clock=clock,
    )
    b.set_peers([])
    # A node that may claim on the wire (dead in heartbeats: the plan keeps us).
    b.membership.members["n2"] = Member("n2", 1, 1, clock.now, (OTHER_MAC,), MemberState.DEAD)
    return b


def held(b: L2Backend) -> dict[str, Any]:
    return {
        "owned": dict(b.owned),
        "errors": dict(b.errors),
        "answering": {n: set(r.owned) for n, r in b.responders.items()},  # type: ignore[attr-defined]
    }


async def scenario(steps: list[tuple[Any, ...]]) -> list[int]:
    clock = Clock()
    listing = {"eth0": ETH0}
    by_delta, whole = backend(clock, listing), backend(clock, listing)
    clock.now += 1  # past the detection interval: both answer
    view = Store().view()
    before: frozenset[L2Claim] = frozenset()
    delta: PlanDelta | None = None  # the first step: the whole plan
    resolved = []
    try:
        for what, arg in steps:
            now = before
            if what in ("plan", "resync"):
                now = arg
            elif what == "eth1":
                clock.now += LISTING_TTL_S  # (the listing is asked again after this long)
                if arg:
                    listing["eth1"] = ETH1
                else:
                    listing.pop("eth1", None)
            else:
                for b in (by_delta, whole):
                    r = b.responders.get("eth0")
                    if r is not None:
                        r.on_claim(r, Claim(IPv4Address(arg), OTHER_MAC))
            if what == "resync":
                delta = None
            elif delta is not None:
                delta = PlanDelta(added=now - before, removed=before - now)
            step = Step("n1", view, Plan("n1", now, ()), PlanOptions(), PlanCache(), delta)
            await by_delta.apply_plan(step)
            await whole.apply(l2_claims(now), {})
            assert held(by_delta) == held(whole), (what, arg)
            resolved.append(by_delta.resolved)
            before, delta = now, PlanDelta(frozenset(), frozenset())
    finally:
        by_delta.shutdown()
        whole.shutdown()
    return resolved


@settings(max_examples=200, deadline=None)
@given(st.lists(ops, min_size=1, max_size=20))
def test_applying_deltas_holds_what_the_whole_plan_holds(steps: list[tuple[Any, ...]]) -> None:
    asyncio.run(scenario(steps))


def test_a_delta_of_one_claim_resolves_that_ip_alone() -> None:
    many = frozenset(L2Claim(f"192.0.2.{i}", ()) for i in range(1, 100))
    one_more = many | {L2Claim("192.0.2.150", ())}
    resolved = asyncio.run(scenario([("plan", many), ("plan", one_more), ("plan", many)]))
    assert resolved == [99, 1, 0]  # (a claim gone: released, nothing to resolve)
    # Something besides the plan changed (an interface): every IP again.
    resolved = asyncio.run(scenario([("plan", many), ("eth1", True), ("plan", one_more)]))
    assert resolved == [99, 99, 1]


def test_the_interfaces_are_listed_again_only_after_the_ttl() -> None:
    listed: list[int] = []

    async def listing() -> dict[str, InterfaceInfo]:
        listed.append(1)
        return {"eth0": ETH0}

    async def go() -> None:
        clock = Clock()
        timed = TimedListing(listing, clock=clock)
        for _ in range(3):
            assert await timed() == {"eth0": ETH0}
        clock.now += LISTING_TTL_S
        await timed()

    asyncio.run(go())
    assert len(listed) == 2
