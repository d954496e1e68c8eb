"""Services that ask for specific IPs (`lb.teapot.io/ips`, `spec.loadBalancerIP`)."""

from __future__ import annotations

from ipam_builders import ips_of, pool, svc

from teapot_lb.ipam import Allocator, RefusalReason, Refused, Result


def refusal(result: Result, reason: RefusalReason) -> str:
    assert isinstance(result, Refused), result
    assert result.reason is reason, result
    return result.message


def allocator() -> Allocator:
    return Allocator(
        [
            pool("a", "192.0.2.0/24", "2001:db8:a::/64", avoid_buggy_ips=True),
            pool("b", "198.51.100.0/24", "2001:db8:b::/64"),
            pool("team", "203.0.113.0/24", namespaces=frozenset({"team"})),
        ]
    )


def test_a_requested_ip_inside_a_pool_is_given() -> None:
    alloc = allocator()
    assert ips_of(alloc.assign(svc("x", ips="198.51.100.77"))) == ["198.51.100.77"]


def test_a_requested_ip_is_not_handed_out_automatically_afterwards() -> None:
    alloc = Allocator([pool("a", "192.0.2.1-192.0.2.2")])
    alloc.assign(svc("x", ips="192.0.2.1"))
    assert ips_of(alloc.assign(svc("y"))) == ["192.0.2.2"]


def test_a_requested_ip_outside_every_pool_is_refused() -> None:
    message = refusal(
        allocator().assign(svc("x", ips="2001:db8:ffff::1", families="IPv6")),
        RefusalReason.NOT_IN_ANY_POOL,
    )
    assert "default/x" in message and "2001:db8:ffff::1" in message


def test_a_requested_ip_outside_the_requested_pool_is_refused() -> None:
    message = refusal(
        allocator().assign(svc("x", ips="192.0.2.5", pool="b")), RefusalReason.NOT_IN_REQUESTED_POOL
    )
    assert "pool a" in message and "requested pool b" in message


def test_a_requested_ip_in_a_pool_that_excludes_the_namespace_is_refused() -> None:
    message = refusal(
        allocator().assign(svc("x", "other", ips="203.0.113.5")), RefusalReason.POOL_NOT_ALLOWED
    )
    assert "team" in message and "other" in message


def test_a_requested_ip_in_a_pool_that_admits_the_namespace_is_given() -> None:
    assert ips_of(allocator().assign(svc("x", "team", ips="203.0.113.5"))) == ["203.0.113.5"]


def test_a_requested_buggy_ip_in_an_avoid_buggy_pool_is_refused() -> None:
    refusal(allocator().assign(svc("x", ips="192.0.2.255")), RefusalReason.BUGGY_ADDRESS)


def test_a_requested_ip_held_by_another_service_is_refused_naming_the_holder() -> None:
    alloc = allocator()
    alloc.assign(svc("first", ips="192.0.2.9"))
    message = refusal(alloc.assign(svc("second", ips="192.0.2.9")), RefusalReason.IP_IN_USE)
    assert "default/first" in message and "default/second" in message and "pool a" in message


def test_two_ips_of_one_family_are_an_invalid_request() -> None:
    refusal(
        allocator().assign(svc("x", ips="192.0.2.1,192.0.2.2", policy="PreferDualStack")),
        RefusalReason.INVALID_REQUEST,
    )


def test_single_stack_with_two_requested_ips_is_an_invalid_request() -> None:
    refusal(
        allocator().assign(svc("x", ips="192.0.2.1,2001:db8:a::1")), RefusalReason.INVALID_REQUEST
    )


def test_require_dual_stack_with_one_requested_ip_is_an_invalid_request() -> None:
    refusal(
        allocator().assign(svc("x", ips="192.0.2.1", policy="RequireDualStack")),
        RefusalReason.INVALID_REQUEST,
    )


def test_a_requested_ip_of_a_family_the_service_lacks_is_refused() -> None:
    refusal(allocator().assign(svc("x", ips="2001:db8:a::1")), RefusalReason.FAMILY_MISMATCH)


def test_requested_dual_stack_ips_from_one_pool_are_given_in_the_requested_order() -> None:
    alloc = allocator()
    result = alloc.assign(
        svc("x", ips="2001:db8:b::5,198.51.100.5", policy="RequireDualStack", families="IPv6,IPv4")
    )
    assert ips_of(result) == ["2001:db8:b::5", "198.51.100.5"]


def test_requested_ips_from_two_pools_are_refused() -> None:
    refusal(
        allocator().assign(svc("x", ips="192.0.2.5,2001:db8:b::5", policy="RequireDualStack")),
        RefusalReason.POOLS_DIFFER,
    )


def test_a_refused_request_takes_nothing() -> None:
    alloc = allocator()
    alloc.assign(svc("x", ips="192.0.2.5,2001:db8:b::5", policy="RequireDualStack"))
    assert alloc.assignment("default/x") is None
    assert all(use.assigned == 0 for fams in alloc.usage().values() for use in fams.values())
