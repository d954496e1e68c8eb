"""AddressPool: its addresses as ranges, counts, membership and who it serves."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.builders import parse, pool
from teapot_lb.model import AddressPool, AddressRange, parse_address_entry


def addresses(*entries: str, **spec: object) -> AddressPool:
    result: AddressPool = parse(pool("p", *entries, **spec))
    return result


def test_cidrs_and_ranges_become_first_last_pairs_in_spec_order() -> None:
    p = addresses("192.0.2.0/30", "198.51.100.5-198.51.100.9", "2001:db8::/127")
    assert p.address_ranges() == [
        (IPv4Address("192.0.2.0"), IPv4Address("192.0.2.3")),
        (IPv4Address("198.51.100.5"), IPv4Address("198.51.100.9")),
        (IPv6Address("2001:db8::"), IPv6Address("2001:db8::1")),
    ]


def test_a_range_may_have_spaces_around_the_dash() -> None:
    assert parse_address_entry("192.0.2.1 - 192.0.2.3").size == 3


def test_counts_are_per_family() -> None:
    p = addresses("192.0.2.0/24", "2001:db8::/120", "198.51.100.0/31")
    assert (p.address_count(4), p.address_count(6)) == (258, 256)
    assert p.families() == {4, 6}


def test_avoid_buggy_ips_drops_addresses_ending_in_0_and_255() -> None:
    p = addresses("192.0.2.0/24", "192.0.3.250-192.0.4.5", avoidBuggyIPs=True)
    assert p.address_count(4) == 254 + 12 - 2
    assert not p.contains(ip_address("192.0.2.0"))
    assert not p.contains(ip_address("192.0.3.255"))
    assert p.contains(ip_address("192.0.2.1"))


def test_avoid_buggy_ips_does_not_touch_ipv6() -> None:
    p = addresses("2001:db8::/120", avoidBuggyIPs=True)
    assert p.address_count(6) == 256
    assert p.contains(ip_address("2001:db8::ff"))


def test_contains_checks_family_and_bounds() -> None:
    p = addresses("192.0.2.10-192.0.2.20")
    assert p.contains(ip_address("192.0.2.10")) and p.contains(ip_address("192.0.2.20"))
    assert not p.contains(ip_address("192.0.2.21"))
    assert not p.contains(ip_address("::ffff:192.0.2.15"))


def test_a_pool_without_scope_serves_every_service() -> None:
    assert addresses("192.0.2.0/24").serves("any", {})


def test_scope_by_namespace_name_or_namespace_labels() -> None:
    scope = {
        "namespaces": ["team-a"],
        "namespaceSelectors": [{"matchLabels": {"tier": "gold"}}],
    }
    p = addresses("192.0.2.0/24", serviceAllocation=scope)
    assert p.serves("team-a", {}, {})
    assert p.serves("shop", {}, {"tier": "gold"})
    assert not p.serves("shop", {}, {"tier": "bronze"})


def test_unknown_namespace_labels_do_not_exclude_a_service() -> None:
    scope = {"namespaceSelectors": [{"matchLabels": {"tier": "gold"}}]}
    assert addresses("192.0.2.0/24", serviceAllocation=scope).serves("shop", {}, None)


def test_service_selectors_must_match_the_service_labels() -> None:
    scope = {"serviceSelectors": [{"matchLabels": {"exposure": "public"}}]}
    p = addresses("192.0.2.0/24", serviceAllocation=scope)
    assert p.serves("default", {"exposure": "public"})
    assert not p.serves("default", {})


def test_priority_comes_from_the_service_allocation() -> None:
    assert addresses("192.0.2.0/24").priority is None
    assert addresses("192.0.2.0/24", serviceAllocation={"priority": 5}).priority == 5


ipv4_ints = st.integers(min_value=0, max_value=2**32 - 1)


@given(ipv4_ints, ipv4_ints)
def test_any_ordered_range_parses_back_to_itself(a: int, b: int) -> None:
    first, last = IPv4Address(min(a, b)), IPv4Address(max(a, b))
    assert parse_address_entry(f"{first}-{last}") == AddressRange(first, last)


@given(ipv4_ints, st.integers(min_value=0, max_value=2000))
def test_avoid_buggy_count_matches_counting_one_by_one(start: int, length: int) -> None:
    end = min(start + length, 2**32 - 1)
    p = addresses(f"{IPv4Address(start)}-{IPv4Address(end)}", avoidBuggyIPs=True)
    expected = sum(1 for n in range(start, end + 1) if n % 256 not in (0, 255))
    assert p.address_count(4) == expected


@given(ipv4_ints, ipv4_ints)
def test_range_cidrs_tile_the_range_exactly(a: int, b: int) -> None:
    rng = AddressRange(IPv4Address(min(a, b)), IPv4Address(max(a, b)))
    blocks = rng.cidrs()
    assert blocks[0].network_address == rng.first
    assert blocks[-1].broadcast_address == rng.last
    assert all(int(x.broadcast_address) + 1 == int(y.network_address) for x, y in pairwise(blocks))


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("192.0.2.0/24", "192.0.2.128/25", "192.0.2.128/25"),
        ("192.0.2.0-192.0.2.10", "192.0.2.10-192.0.2.20", "192.0.2.10/32"),
        ("192.0.2.0/25", "192.0.2.128/25", None),
        ("192.0.2.0/24", "2001:db8::/120", None),
    ],
)
def test_overlap_of_two_ranges(a: str, b: str, overlap: str | None) -> None:
    common = parse_address_entry(a).overlap(parse_address_entry(b))
    assert (str(common) if common else None) == overlap
