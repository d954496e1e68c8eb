"""IPv6 and dual-stack Services (`ipFamilyPolicy`, `ipFamilies`)."""

from __future__ import annotations

from ipam_builders import ips_of, pool, svc

from teapot_lb.ipam import Allocator, Assigned, IPFamily, RefusalReason, Refused


def test_single_stack_ipv6_gets_one_ipv6_address() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/64")])
    assert ips_of(alloc.assign(svc("x", families="IPv6"))) == ["2001:db8::1"]


def test_require_dual_stack_gets_both_families_primary_first_from_one_pool() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/64")])
    result = alloc.assign(svc("x", policy="RequireDualStack", families="IPv6,IPv4"))
    assert ips_of(result) == ["2001:db8::1", "192.0.2.0"]
    assert isinstance(result, Assigned) and result.pool == "a"


def test_require_dual_stack_skips_pools_that_lack_a_family() -> None:
    alloc = Allocator(
        [
            pool("v4only", "192.0.2.0/28", priority=1),
            pool("both", "198.51.100.0/28", "2001:db8::/64"),
        ]
    )
    result = alloc.assign(svc("x", policy="RequireDualStack"))
    assert isinstance(result, Assigned) and result.pool == "both"


def test_require_dual_stack_is_all_or_nothing() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/128")])
    alloc.assign(svc("v6", families="IPv6"))  # the only IPv6 address
    before = alloc.usage()
    refused = alloc.assign(svc("x", policy="RequireDualStack"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_FREE_ADDRESS
    assert alloc.usage() == before  # no half assignment leaked
    assert ips_of(alloc.assign(svc("y"))) == ["192.0.2.0"]


def test_prefer_dual_stack_gets_both_when_available() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/64")])
    assert ips_of(alloc.assign(svc("x", policy="PreferDualStack"))) == ["192.0.2.0", "2001:db8::1"]


def test_prefer_dual_stack_takes_one_family_when_that_is_all_there_is() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28")])
    assert ips_of(alloc.assign(svc("x", policy="PreferDualStack"))) == ["192.0.2.0"]


def test_prefer_dual_stack_prefers_a_pool_with_both_families_over_priority() -> None:
    alloc = Allocator(
        [
            pool("v4only", "192.0.2.0/28", priority=1),
            pool("both", "198.51.100.0/28", "2001:db8::/64"),
        ]
    )
    result = alloc.assign(svc("x", policy="PreferDualStack"))
    assert isinstance(result, Assigned) and result.pool == "both" and len(result.ips) == 2


def test_prefer_dual_stack_gains_the_missing_family_once_it_is_free() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/128")])
    alloc.assign(svc("v6", families="IPv6"))
    assert ips_of(alloc.assign(svc("x", policy="PreferDualStack"))) == ["192.0.2.0"]
    alloc.release("default/v6")
    assert ips_of(alloc.assign(svc("x", policy="PreferDualStack"))) == ["192.0.2.0", "2001:db8::"]


def test_a_single_stack_service_turning_dual_stack_keeps_its_ip_and_adds_one() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/64")])
    alloc.assign(svc("other"))
    first = ips_of(alloc.assign(svc("x")))
    both = ips_of(alloc.assign(svc("x", policy="RequireDualStack")))
    assert both == [*first, "2001:db8::1"]


def test_a_dual_stack_service_turning_single_stack_keeps_its_primary_and_frees_the_other() -> None:
    alloc = Allocator([pool("a", "192.0.2.0/28", "2001:db8::/64")])
    alloc.assign(svc("x", policy="RequireDualStack"))
    assert ips_of(alloc.assign(svc("x"))) == ["192.0.2.0"]
    assert alloc.usage()["a"][IPFamily.V6].assigned == 0


def test_huge_ipv6_pools_are_counted_exactly_without_enumeration() -> None:
    alloc = Allocator([pool("big", "2001:db8::/32")])
    for i in range(3):
        alloc.assign(svc(f"s{i}", families="IPv6"))
    use = alloc.usage()["big"][IPFamily.V6]
    assert (use.assigned, use.available) == (
        3,
        2**96 - 2**32 - 3,
    )  # no all-zeros interface ID: one per /64


# RFC 4291 §2.6.1: the address whose interface identifier is all zeros is the Subnet-Router
# anycast address of its /64; the routers on that link answer it.


def test_an_ipv6_pool_never_hands_out_the_subnet_router_anycast_address() -> None:
    alloc = Allocator([pool("v6", "2001:db8:100::/64")])
    assert ips_of(alloc.assign(svc("a", families="IPv6"))) == ["2001:db8:100::1"]
    use = alloc.usage()["v6"][IPFamily.V6]
    assert use.assigned + use.available == 2**64 - 1


def test_a_range_across_a_64_boundary_skips_the_anycast_address_in_it() -> None:
    alloc = Allocator([pool("v6", "2001:db8:1:0:ffff:ffff:ffff:ffff-2001:db8:1:1::1")])
    got = [ips_of(alloc.assign(svc(f"s{i}", families="IPv6")))[0] for i in range(2)]
    assert got == ["2001:db8:1:0:ffff:ffff:ffff:ffff", "2001:db8:1:1::1"]
    refused = alloc.assign(svc("more", families="IPv6"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.NO_FREE_ADDRESS


def test_requesting_the_anycast_address_is_refused_with_the_reason() -> None:
    alloc = Allocator([pool("v6", "2001:db8:100::/64")])
    refused = alloc.assign(svc("a", families="IPv6", ips="2001:db8:100::"))
    assert isinstance(refused, Refused) and refused.reason is RefusalReason.BUGGY_ADDRESS
    assert "Subnet-Router anycast address" in refused.message and "RFC 4291" in refused.message


def test_a_single_address_pool_entry_is_used_as_given() -> None:
    alloc = Allocator([pool("one", "2001:db8:100::/128")])
    assert ips_of(alloc.assign(svc("a", families="IPv6"))) == ["2001:db8:100::"]
