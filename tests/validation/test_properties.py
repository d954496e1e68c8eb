"""Properties: validation never crashes on any input, and overlap detection is exact."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from model.builders import objects, pool
from teapot_lb.model import parse_address_entry, parse_object
from teapot_lb.model.manifest import MODELS
from teapot_lb.validation import validate

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.text(max_size=12),
    st.sampled_from(["192.0.2.1", "2001:db8::1", "192.0.2.0/24", "1-2", "90s", "In", "a:b:c"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
field_names = st.sampled_from(
    ["addresses", "autoAssign", "myASN", "peerASN", "peerAddress", "holdTime", "keepaliveTime",
     "nodeSelectors", "communities", "largeCommunities", "aggregationLength", "vridRange",
     "interfaces", "interface", "addressPools", "serviceAllocation", "ports", "type",
     "bfdProfile", "receiveInterval", "detectMultiplier", "echoMode", "minimumTtl", "bogus"]
)  # fmt: skip
# Every kind manifests may hold, from the kind registry.
kinds = st.sampled_from(sorted(MODELS))


@settings(max_examples=300, deadline=None)
@given(kinds, st.dictionaries(field_names, json_values, max_size=5), json_values)
def test_any_document_gives_an_object_or_problems_never_an_exception(
    kind: tuple[str, str], spec: dict[str, Any], metadata: Any
) -> None:
    api_version, name = kind
    for meta in ({"name": "x"}, metadata):
        document = {"apiVersion": api_version, "kind": name, "metadata": meta, "spec": spec}
        obj, problems = parse_object(document)
        assert (obj is None) == bool(problems)
        if obj is not None:
            validate([obj])


@given(st.text(max_size=40))
def test_an_address_entry_parses_or_says_why(text: str) -> None:
    try:
        rng = parse_address_entry(text)
    except ValueError as err:
        assert str(err)
    else:
        assert int(rng.first) <= int(rng.last)


small_ranges = st.tuples(st.integers(0, 63), st.integers(0, 63)).map(sorted)


@given(st.lists(st.lists(small_ranges, min_size=1, max_size=3), min_size=1, max_size=4))
def test_overlaps_are_reported_exactly_when_two_pools_share_an_address(
    pools: list[list[list[int]]],
) -> None:
    base = int(IPv4Address("192.0.2.0"))

    def entry(lo: int, hi: int) -> str:
        return f"{IPv4Address(base + lo)}-{IPv4Address(base + hi)}"

    docs = [pool(f"p{i}", *(entry(lo, hi) for lo, hi in ranges)) for i, ranges in enumerate(pools)]
    owners: dict[int, set[tuple[int, int]]] = {}
    for i, ranges in enumerate(pools):
        for j, (lo, hi) in enumerate(ranges):
            for n in range(lo, hi + 1):
                owners.setdefault(n, set()).add((i, j))
    expected_pairs = set()
    for holders in owners.values():
        for a in holders:
            for b in holders:
                if a < b:
                    expected_pairs.add((a, b))
    problems = [p for p in validate(objects(*docs)) if "overlaps" in p.message]
    assert len(problems) == len(expected_pairs)
