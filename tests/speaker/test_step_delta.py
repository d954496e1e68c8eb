"""A speaker whose backends get each plan's delta holds what a speaker handed the whole
plan holds, however the Services and the shared configuration change (the delta path and
the resync path come to the same state)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.announce.plan import plan
from teapot_lb.cluster import Kind, Store
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.node import NodeSpeaker

from .builders import FakeFactory, bgp_setup, lb_service, ours, put, remove, store_of

NAMES = ["a", "b", "c", "d"]
IPS = ["203.0.113.1", "203.0.113.2", "203.0.113.3"]  # .1 and .2 share a /30 when aggregated
AGGREGATE = ours(
    "BGPAdvertisement",
    "aggregate",
    {"addressPools": ["public"], "aggregationLength": 30, "communities": ["64512:9"]},
)

# One change: a Service put (name, IP), a Service deleted, the aggregating advertisement
# put or deleted (a shared object: the plan walks every Service then).
CHANGE = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMES), st.sampled_from(IPS)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.sampled_from(["aggregate", "no-aggregate"]), st.just(""), st.just("")),
)


def change(store: Store, what: tuple[str, str, str]) -> None:
    verb, name, ip = what
    if verb == "put":
        put(store, lb_service(name, ip))
    elif verb == "delete":
        if store.get(Kind.SERVICE, f"default/{name}") is not None:
            remove(store, Kind.SERVICE, f"default/{name}")
    elif verb == "aggregate":
        put(store, AGGREGATE)
    elif store.get(Kind.BGP_ADVERTISEMENT, "teapot-system/aggregate") is not None:
        remove(store, Kind.BGP_ADVERTISEMENT, "teapot-system/aggregate")


async def routes_from_scratch(store: Store) -> dict[str, Any]:
    """What a new speaker (no delta: the whole plan) hands its BGP speaker."""
    factory = FakeFactory()
    await NodeSpeaker("n1", store, bgp=BGPBackend(factory)).step()
    return factory.made[0].routes if factory.made else {}


@settings(max_examples=60, deadline=None)
@given(st.lists(CHANGE, min_size=1, max_size=10))
def test_steps_with_deltas_hold_what_a_whole_plan_gives(
    changes: list[tuple[str, str, str]],
) -> None:
    store = store_of(*bgp_setup(), lb_service("z", "203.0.113.4"))
    factory = FakeFactory()
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))

    async def run() -> None:
        await speaker.step()
        for what in changes:
            change(store, what)
            result = await speaker.step()
            uncached = plan(store.view(), "n1", speaker.plan_options())
            assert set(result.plan.announcements) == set(uncached.announcements)
            assert tuple(result.plan.decisions) == uncached.decisions
            assert factory.made[0].routes == await routes_from_scratch(store)

    asyncio.run(run())
    assert speaker.full_steps == 1  # only the first step was handed the whole plan


def test_a_step_after_a_failed_one_hands_the_backends_the_whole_plan() -> None:
    store = store_of(*bgp_setup(), lb_service("a", "203.0.113.1"))
    factory = FakeFactory()
    backend = BGPBackend(factory)
    speaker = NodeSpeaker("n1", store, bgp=backend)

    async def run() -> None:
        await speaker.step()
        put(store, lb_service("b", "203.0.113.2"))
        real = backend.apply_plan

        async def failing(step: object) -> None:
            raise RuntimeError("backend down")

        backend.apply_plan = failing  # type: ignore[method-assign]
        with contextlib.suppress(RuntimeError):
            await speaker.step()
        backend.apply_plan = real  # type: ignore[method-assign]
        await speaker.step()  # the delta of the failed step is lost: the whole plan
        assert factory.made[0].routes == await routes_from_scratch(store)

    asyncio.run(run())
    assert speaker.full_steps == 2
