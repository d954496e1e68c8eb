"""The VIP orphan sweep's core: which requests are old enough to ask Octavia about, and
which of those Octavia does not have (an unknown answer deletes nothing)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from teapot_lb.octavia.mapping import desired_request
from teapot_lb.octavia.sweep import Request, due, orphans, requests_of
from teapot_lb.octavia.tree import LoadBalancer

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=300)


def request(lb_id: str, age_s: float | None) -> Request:
    created = None if age_s is None else NOW - timedelta(seconds=age_s)
    return Request("tenant-acme", lb_id, created)


def test_only_requests_past_the_grace_and_not_in_flight_are_due() -> None:
    found = [request("old", 301), request("young", 10), request("unknown", None),
             request("creating", 900), request("edge", 300)]  # fmt: skip
    assert [r.lb_id for r in due(found, now=NOW, grace=GRACE, in_flight={"creating"})] == [
        "old",
        "edge",
    ]


def test_an_orphan_is_a_due_request_octavia_says_it_does_not_have() -> None:
    answers = {"gone": False, "kept": True, "unknown": None}
    found = [request(i, 400) for i in answers]
    assert [r.lb_id for r in orphans(found, answers.__getitem__)] == ["gone"]


def test_requests_are_read_from_the_driver_s_tenant_load_balancers() -> None:
    created = NOW - timedelta(minutes=10)
    written = desired_request(LoadBalancer(id="a", project_id="p"), "tenant-acme")
    stamped = written.metadata.model_copy(update={"creation_timestamp": created})
    ours = written.model_copy(update={"metadata": stamped})
    other = ours.model_copy(update={"metadata": stamped.model_copy(update={"labels": {}})})
    assert requests_of([ours, other]) == [Request("tenant-acme", "a", created)]
