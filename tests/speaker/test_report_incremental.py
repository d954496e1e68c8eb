"""Reporting told which Services changed (by the plan cache) says what a full walk says."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from announce.test_plan_cache import NODE_NAMES, SERVICE_NAMES, apply, base_store, changes
from teapot_lb.announce.announcement import Decision
from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.plan import PlanOptions, plan
from teapot_lb.speaker.report import Reporting


def failing_ips(broken: int) -> Any:
    """A backend that cannot announce some IPs (which ones: `broken`, its failure inputs)."""

    def failure(decision: Decision) -> str | None:
        return "cannot" if broken and hash(decision.ip) % broken == 0 else None

    return failure


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(changes, st.sampled_from([0, 0, 0, 2, 3])), min_size=1, max_size=30))
def test_reporting_only_the_changed_services_equals_the_full_walk(
    steps: list[tuple[tuple[Any, ...], int]],
) -> None:
    store = base_store()
    options = PlanOptions()
    for name, ip in zip(SERVICE_NAMES, ("192.0.2.1", "198.51.100.1", "2001:db8::1"), strict=True):
        options = apply(store, ("service", name, [ip], False, True), options)
    node = NODE_NAMES[0]
    cache = PlanCache()
    told, walking = Reporting(node), Reporting(node)
    for change, broken in steps:
        options = apply(store, change, options)
        view = store.view()
        the_plan = plan(view, node, options, cache=cache)
        if broken == 3:
            the_plan = plan(view, node, options, cache=cache)  # planned twice in one step
        failure = failing_ips(broken)
        got = told.update(the_plan, failure, broken, cache.totals.take_changed())
        want = walking.update(the_plan, failure, broken)
        assert got == want
        fresh = Reporting(node).update(the_plan, failure, broken)
        assert (got.announcing, got.failures) == (fresh.announcing, fresh.failures)
