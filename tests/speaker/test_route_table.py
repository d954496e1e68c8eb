"""The BGP backend's route table: kept between steps, it always equals the routes shaped
from scratch (bgp_routes), however the plan's routes change."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.announce.announcement import BGPRoute
from teapot_lb.bgp.attributes import RouteAttributes
from teapot_lb.speaker.bgp_backend import RouteTable
from teapot_lb.speaker.desired import bgp_routes

routes = st.builds(
    BGPRoute,
    peer=st.sampled_from(["r1", "r2"]),
    prefix=st.sampled_from(["192.0.2.1/32", "192.0.2.2/32", "198.51.100.0/24"]),
    attributes=st.builds(
        RouteAttributes,
        local_pref=st.sampled_from([None, 100, 200]),
        communities=st.sampled_from([(), ((65000 << 16) | 1,)]),
    ),
    path=st.sampled_from(["", "node-a", "node-b"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sets(routes, max_size=12), min_size=1, max_size=12))
def test_the_kept_table_equals_routes_shaped_from_scratch(steps: list[set[BGPRoute]]) -> None:
    table = RouteTable()
    for step in steps:
        assert table.update(set(step)) == bgp_routes(step)


def test_a_route_added_and_removed_among_many_changes_only_its_prefix() -> None:
    many = {BGPRoute("r1", f"203.0.113.{i}/32") for i in range(200)}
    table = RouteTable()
    first = dict(table.update(set(many))["r1"])
    extra = BGPRoute("r1", "192.0.2.9/32")
    after = table.update(many | {extra})["r1"]
    assert after == {**first, "192.0.2.9/32": extra.attributes}
    assert "192.0.2.9/32" not in table.update(set(many)).get("r1", {})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sets(routes, max_size=12), min_size=1, max_size=12))
def test_the_prefixes_said_changed_include_every_prefix_whose_route_changed(
    steps: list[set[BGPRoute]],
) -> None:
    table = RouteTable()
    before: dict[str, dict[str, object]] = {}
    for step in steps:
        after = {peer: dict(t) for peer, t in table.update(set(step)).items()}
        differ = {
            (peer, prefix)
            for peer in before.keys() | after.keys()
            for prefix in before.get(peer, {}).keys() | after.get(peer, {}).keys()
            if before.get(peer, {}).get(prefix) != after.get(peer, {}).get(prefix)
        }
        changed = table.changed
        assert changed is None or differ <= {(p, x) for p, xs in changed.items() for x in xs}
        table.clear_changed()
        before = after


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sets(routes, max_size=12), min_size=1, max_size=12))
def test_a_table_changed_by_deltas_equals_routes_shaped_from_scratch(
    steps: list[set[BGPRoute]],
) -> None:
    """The delta path (what a plan added and removed) and the resync path (the whole
    plan compared) keep the same table."""
    by_delta, by_plan = RouteTable(), RouteTable()
    held: set[BGPRoute] = set()
    for step in steps:
        got = by_delta.change(step - held, held - step)
        assert got == bgp_routes(step) == by_plan.update(set(step))
        held = set(step)
