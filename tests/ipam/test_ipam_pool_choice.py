"""Which pool a Service draws from, and which address it gets."""

from __future__ import annotations

from ipam_builders import MatchLabels, ips_of, pool, svc

from teapot_lb.ipam import Allocator, Assigned, RefusalReason, Refused


def test_an_address_is_the_lowest_free_one_of_the_pool() -> None:
    alloc = Allocator([pool("a", "192.0.2.10-192.0.2.20")])
    assert ips_of(alloc.assign(svc("x"))) == ["192.0.2.10"]
    assert ips_of(alloc.assign(svc("y"))) == ["192.0.2.11"]
    alloc.release("default/x")
    assert ips_of(alloc.assign(svc("z"))) == ["192.0.2.10"]


def test_lower_priority_number_is_tried_first_and_unset_priority_last() -> None:
    alloc = Allocator(
        [
            pool("unset", "192.0.2.0/28"),
            pool("second", "198.51.100.0/28", priority=5),
            pool("first", "203.0.113.0/28", priority=1),
        ]
    )
    result = alloc.assign(svc("x"))
    assert isinstance(result, Assigned) and result.pool == "first"


def test_pools_of_equal_priority_are_tried_by_name() -> None:
    alloc = Allocator([pool("b", "192.0.2.0/28"), pool("a", "198.51.100.0/28")])
    result = alloc.assign(svc("x"))
    assert isinstance(result, Assigned) and result.pool == "a"


def test_a_full_pool_spills_into_the_next_one() -> None:
    alloc = Allocator([pool("small", "192.0.2.1/32", priority=1), pool("big", "198.51.100.0/28")])
    assert ips_of(alloc.assign(svc("x"))) == ["192.0.2.1"]
    result = alloc.assign(svc("y"))
    assert isinstance(result, Assigned) and result.pool == "big"


def test_when_every_eligible_pool_is_full_the_refusal_names_them() -> None:
    alloc = Allocator([pool("tiny", "192.0.2.1/32")])
    alloc.assign(svc("x"))
    result = alloc.assign(svc("y"))
    assert isinstance(result, Refused)
    assert result.reason is RefusalReason.NO_FREE_ADDRESS
    assert "default/y" in result.message and "tiny" in result.message


def test_a_namespace_scoped_pool_serves_only_its_namespaces() -> None:
    alloc = Allocator(
        [
            pool("team", "192.0.2.0/28", namespaces=frozenset({"team"}), priority=1),
            pool("shared", "198.51.100.0/28"),
        ]
    )
    inside = alloc.assign(svc("x", "team"))
    outside = alloc.assign(svc("y", "other"))
    assert isinstance(inside, Assigned) and inside.pool == "team"
    assert isinstance(outside, Assigned) and outside.pool == "shared"


def test_a_namespace_selector_admits_namespaces_by_their_labels() -> None:
    scoped = pool(
        "prod", "192.0.2.0/28", namespace_selectors=(MatchLabels({"env": "prod"}),), priority=1
    )
    alloc = Allocator([scoped, pool("rest", "198.51.100.0/28")])
    prod = alloc.assign(svc("x", "shop", namespace_labels={"env": "prod"}))
    dev = alloc.assign(svc("y", "lab", namespace_labels={"env": "dev"}))
    assert isinstance(prod, Assigned) and prod.pool == "prod"
    assert isinstance(dev, Assigned) and dev.pool == "rest"


def test_a_namespace_is_admitted_when_listed_or_selected() -> None:
    scoped = pool(
        "p",
        "192.0.2.0/28",
        namespaces=frozenset({"listed"}),
        namespace_selectors=(MatchLabels({"env": "prod"}),),
    )
    alloc = Allocator([scoped])
    assert isinstance(alloc.assign(svc("a", "listed")), Assigned)
    assert isinstance(
        alloc.assign(svc("b", "labelled", namespace_labels={"env": "prod"})), Assigned
    )
    refused = alloc.assign(svc("c", "neither"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_ELIGIBLE_POOL
    assert "does not admit namespace neither" in refused.message


def test_a_service_selector_admits_services_by_their_labels() -> None:
    scoped = pool("web", "192.0.2.0/28", service_selectors=(MatchLabels({"tier": "web"}),))
    alloc = Allocator([scoped])
    assert isinstance(alloc.assign(svc("a", labels={"tier": "web"})), Assigned)
    refused = alloc.assign(svc("b", labels={"tier": "db"}))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_ELIGIBLE_POOL
    assert "serviceSelector" in refused.message and "default/b" in refused.message


def test_a_pool_without_auto_assign_is_skipped_unless_requested() -> None:
    manual = pool("manual", "192.0.2.0/28", auto_assign=False, priority=1)
    alloc = Allocator([manual, pool("auto", "198.51.100.0/28")])
    plain = alloc.assign(svc("a"))
    by_name = alloc.assign(svc("b", pool="manual"))
    by_ip = alloc.assign(svc("c", ips="192.0.2.7"))
    assert isinstance(plain, Assigned) and plain.pool == "auto"
    assert isinstance(by_name, Assigned) and by_name.pool == "manual"
    assert ips_of(by_ip) == ["192.0.2.7"]


def test_no_auto_assign_pool_alone_refuses_with_the_reason() -> None:
    alloc = Allocator([pool("manual", "192.0.2.0/28", auto_assign=False)])
    refused = alloc.assign(svc("a"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_ELIGIBLE_POOL
    assert "autoAssign off" in refused.message


def test_a_requested_pool_is_the_only_one_tried() -> None:
    alloc = Allocator([pool("a", "192.0.2.1/32", priority=1), pool("b", "198.51.100.0/28")])
    alloc.assign(svc("x", pool="a"))
    refused = alloc.assign(svc("y", pool="a"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_FREE_ADDRESS


def test_an_unknown_requested_pool_is_refused() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    refused = alloc.assign(svc("x", pool="nope"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.UNKNOWN_POOL
    assert "nope" in refused.message


def test_a_requested_pool_out_of_scope_is_refused() -> None:
    alloc = Allocator([pool("team", "192.0.2.0/28", namespaces=frozenset({"team"}))])
    refused = alloc.assign(svc("x", "other", pool="team"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.POOL_NOT_ALLOWED


def test_avoid_buggy_ips_skips_dot_zero_and_dot_255() -> None:
    alloc = Allocator(
        [pool("a", "192.0.2.254-192.0.2.255", "198.51.100.0-198.51.100.1", avoid_buggy_ips=True)]
    )
    got = [ips_of(alloc.assign(svc(f"s{i}")))[0] for i in range(2)]
    assert got == ["192.0.2.254", "198.51.100.1"]
    assert isinstance(alloc.assign(svc("s3")), Refused)


def test_without_avoid_buggy_ips_dot_zero_is_a_normal_address() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/30")])
    assert ips_of(alloc.assign(svc("x"))) == ["192.0.2.0"]


def test_a_pool_of_only_buggy_addresses_is_full_from_the_start() -> None:
    alloc = Allocator([pool("a", "192.0.2.255/32", "198.51.100.0/32", avoid_buggy_ips=True)])
    refused = alloc.assign(svc("x"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_FREE_ADDRESS


def test_no_pools_at_all_is_a_refusal_not_an_error() -> None:
    refused = Allocator().assign(svc("x"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_ELIGIBLE_POOL
    assert "no pools are configured" in refused.message
