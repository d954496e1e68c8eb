"""Services keep their IPs across repeats, restarts and unrelated config changes."""

from __future__ import annotations

import pytest
from ipam_builders import ip, ips_of, pool, svc

from teapot_lb.ipam import (
    Allocator,
    Assigned,
    ChangeReason,
    Holding,
    RefusalReason,
    Refused,
)


def test_assigning_a_service_again_returns_the_same_ips() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    first = alloc.assign(svc("x"))
    alloc.assign(svc("y"))
    alloc.release("default/y")
    assert alloc.assign(svc("x")) == first


def test_a_service_keeps_its_ip_when_a_higher_priority_pool_appears() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    first = alloc.assign(svc("x"))
    changes = alloc.reconfigure(
        [pool("a", "192.0.2.0/28"), pool("new", "198.51.100.0/28", priority=1)]
    )
    assert changes == []
    assert alloc.assign(svc("x")) == first
    fresh = alloc.assign(svc("y"))
    assert isinstance(fresh, Assigned) and fresh.pool == "new"


def test_rebuilding_from_what_services_hold_gives_the_same_assignments() -> None:
    pools = [pool("a", "192.0.2.0/28", "2001:db8::/64"), pool("b", "198.51.100.0/28")]
    alloc = Allocator(pools)
    for i in range(6):
        alloc.assign(svc(f"s{i}", policy="PreferDualStack" if i % 2 else "SingleStack"))
    alloc.release("default/s2")
    restarted = Allocator(pools)
    assert restarted.rebuild(alloc.holdings()) == []
    assert restarted.assignments() == alloc.assignments()
    assert restarted.usage() == alloc.usage()
    # And it continues exactly as the original would.
    assert restarted.assign(svc("new")) == alloc.assign(svc("new"))


def test_rebuild_reassigns_a_second_holder_of_an_ip_it_may_not_share() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    taken = (ip("192.0.2.5"),)
    changes = alloc.rebuild([Holding(svc("b"), taken), Holding(svc("a"), taken)])
    assert ips_of(alloc.assign(svc("a"))) == ["192.0.2.5"]  # the first by key keeps it
    [change] = changes
    assert change.key == "default/b" and change.reason is ChangeReason.CONFLICT
    assert ips_of(change.result) == ["192.0.2.0"]


def test_rebuild_keeps_an_ip_in_a_pool_that_has_auto_assign_off() -> None:
    alloc = Allocator([pool("manual", "192.0.2.0/28", auto_assign=False)])
    assert alloc.rebuild([Holding(svc("x"), (ip("192.0.2.9"),))]) == []
    assert ips_of(alloc.assign(svc("x"))) == ["192.0.2.9"]


def test_a_service_whose_pool_disappears_is_reassigned_with_the_reason() -> None:
    alloc = Allocator([pool("old", "192.0.2.0/28"), pool("other", "198.51.100.0/28")])
    alloc.assign(svc("x", pool="old"))
    alloc.assign(svc("y", pool="other"))
    changes = alloc.reconfigure([pool("other", "198.51.100.0/28")])
    [change] = changes
    assert change.key == "default/x" and change.reason is ChangeReason.POOL_GONE
    assert change.previous == (ip("192.0.2.0"),)
    assert isinstance(change.result, Refused)  # it asked for pool "old", which is gone
    assert change.result.reason is RefusalReason.UNKNOWN_POOL


def test_a_service_outside_its_shrunk_pool_moves_and_the_others_stay() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    for i in range(4):
        alloc.assign(svc(f"s{i}"))  # .0 .1 .2 .3
    changes = alloc.reconfigure([pool("a", "192.0.2.0-192.0.2.2", "192.0.2.8/29")])
    [change] = changes
    assert change.key == "default/s3" and change.reason is ChangeReason.POOL_GONE
    assert ips_of(change.result) == ["192.0.2.8"]
    assert [ips_of(alloc.assign(svc(f"s{i}"))) for i in range(3)] == [
        ["192.0.2.0"],
        ["192.0.2.1"],
        ["192.0.2.2"],
    ]


def test_a_service_no_longer_admitted_by_its_pool_is_moved() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28"), pool("b", "198.51.100.0/28")])
    alloc.assign(svc("x", "dev"))
    [change] = alloc.reconfigure(
        [pool("a", "192.0.2.0/28", namespaces=frozenset({"prod"})), pool("b", "198.51.100.0/28")]
    )
    assert change.reason is ChangeReason.POOL_NOT_ALLOWED
    assert "does not admit namespace dev" in change.message
    assert ips_of(change.result) == ["198.51.100.0"]


def test_turning_on_avoid_buggy_ips_moves_services_off_dot_zero() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    alloc.assign(svc("x"))
    [change] = alloc.reconfigure([pool("a", "192.0.2.0/28", avoid_buggy_ips=True)])
    assert change.reason is ChangeReason.BUGGY_ADDRESS and ips_of(change.result) == ["192.0.2.1"]


def test_a_pool_gaining_ipv6_completes_prefer_dual_stack_services() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    alloc.assign(svc("x", policy="PreferDualStack"))
    [change] = alloc.reconfigure([pool("a", "192.0.2.0/28", "2001:db8::/64")])
    assert change.reason is ChangeReason.FAMILY_ADDED
    assert ips_of(change.result) == ["192.0.2.0", "2001:db8::1"]


def test_a_dual_stack_service_losing_its_ipv6_range_keeps_its_ipv4_and_gets_new_ipv6() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8:1::/64", "2001:db8:2::/64")])
    alloc.assign(svc("x", policy="RequireDualStack"))
    [change] = alloc.reconfigure([pool("a", "192.0.2.0/28", "2001:db8:2::/64")])
    assert change.reason is ChangeReason.POOL_GONE
    assert ips_of(change.result) == ["192.0.2.0", "2001:db8:2::1"]


def test_a_service_asking_for_another_pool_moves_there() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28"), pool("b", "198.51.100.0/28")])
    alloc.assign(svc("x"))
    moved = alloc.assign(svc("x", pool="b"))
    assert isinstance(moved, Assigned) and moved.pool == "b"
    assert alloc.holders(ip("192.0.2.0")) == ()


def test_a_service_asking_for_an_impossible_change_is_refused_and_holds_nothing() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    alloc.assign(svc("x"))
    refused = alloc.assign(svc("x", pool="missing"))
    assert isinstance(refused, Refused) and alloc.assignment("default/x") is None


def test_release_returns_the_ips_and_they_can_be_assigned_again() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/32")])
    alloc.assign(svc("x"))
    assert alloc.release("default/x") == (ip("192.0.2.0"),)
    assert alloc.release("default/x") == ()
    assert ips_of(alloc.assign(svc("y"))) == ["192.0.2.0"]


def test_overlapping_pools_are_a_programming_error_that_changes_nothing() -> None:
    # Validation rejects overlapping pools before they reach the IPAM; if one slips
    # through, the allocator says which pools and keeps its state.
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    before = alloc.assign(svc("x"))
    with pytest.raises(ValueError, match=r"pools a and b overlap at 192\.0\.2\.8"):
        alloc.reconfigure([pool("a", "192.0.2.0/28"), pool("b", "192.0.2.8/29")])
    with pytest.raises(ValueError, match="two pools are named a"):
        alloc.reconfigure([pool("a", "192.0.2.0/28"), pool("a", "198.51.100.0/28")])
    assert alloc.pools == (pool("a", "192.0.2.0/28"),)
    assert alloc.assign(svc("x")) == before


def test_rebuild_completes_a_service_holding_part_of_its_requested_ips() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/64")])
    wants_both = svc("x", ips="192.0.2.5,2001:db8::5", policy="RequireDualStack")
    [change] = alloc.rebuild([Holding(wants_both, (ip("192.0.2.5"),))])
    assert change.reason is ChangeReason.FAMILY_ADDED
    assert ips_of(change.result) == ["192.0.2.5", "2001:db8::5"]
    assert ips_of(alloc.assign(wants_both)) == ["192.0.2.5", "2001:db8::5"]


def test_a_restart_completes_a_prefer_dual_stack_service_once_its_missing_family_is_free() -> None:
    # Found by the allocator state machine: the pool's IPv4 was full when the Service came,
    # so it got IPv6 only; an IPv4 address is released; after a restart the rebuild gives
    # the Service the freed IPv4 (as a reconcile would) and keeps its IPv6.
    alloc = Allocator([pool("a", "192.0.2.0/32", "2001:db8::/126")])
    alloc.assign(svc("first"))
    assert ips_of(alloc.assign(svc("x", policy="PreferDualStack"))) == ["2001:db8::1"]
    alloc.release("default/first")
    restarted = Allocator(alloc.pools)
    [change] = restarted.rebuild(alloc.holdings())
    assert change.reason is ChangeReason.FAMILY_ADDED
    assert ips_of(change.result) == ["192.0.2.0", "2001:db8::1"]


def test_a_require_dual_stack_service_whose_pool_lacks_a_family_moves_whole() -> None:
    alloc = Allocator(
        [pool("a", "192.0.2.0/28", priority=1), pool("b", "198.51.100.0/28", "2001:db8::/64")]
    )
    both = svc("x", policy="RequireDualStack")
    [change] = alloc.rebuild([Holding(both, (ip("192.0.2.3"),))])
    assert change.reason is ChangeReason.INCOMPLETE
    assert ips_of(change.result) == ["198.51.100.0", "2001:db8::1"]
    assert alloc.holders(ip("192.0.2.3")) == ()
