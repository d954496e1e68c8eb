"""validate_change: what an admission webhook asks (does this change bring a problem?)."""

from __future__ import annotations

from model.builders import bfd_profile, bgp_advertisement, objects, parse, peer, pool
from teapot_lb.validation import validate, validate_change


def test_a_new_pool_overlapping_an_existing_one_is_refused_naming_both() -> None:
    existing = objects(pool("a", "192.0.2.0/24"))
    problems = validate_change(parse(pool("b", "192.0.2.128/25")), existing)
    assert [p.field for p in problems] == ["spec.addresses[0]"]
    assert "AddressPool 'a'" in problems[0].message


def test_an_unrelated_broken_object_does_not_block_a_change() -> None:
    existing = objects(pool("x", "192.0.2.0/24"), pool("y", "192.0.2.0/25"))  # x, y overlap
    assert validate(existing)
    assert validate_change(parse(pool("z", "198.51.100.0/24")), existing) == []


def test_an_update_replaces_the_previous_version_of_the_object() -> None:
    existing = objects(pool("a", "192.0.2.0/24"))
    assert validate_change(parse(pool("a", "192.0.2.0/25")), existing) == []


def test_shrinking_a_pool_under_an_aggregate_is_refused_for_the_pool_too() -> None:
    existing = objects(
        pool("a", "192.0.2.0/24"), bgp_advertisement("ad", "a", aggregationLength=24)
    )
    problems = validate_change(parse(pool("a", "192.0.2.0/25")), existing)
    assert [(p.kind, p.field) for p in problems] == [("BGPAdvertisement", "spec.aggregationLength")]


def test_a_peer_naming_a_missing_bfd_profile_is_refused_and_an_existing_one_accepted() -> None:
    existing = objects(bfd_profile("fast"))
    problems = validate_change(parse(peer("r", bfdProfile="slow")), existing)
    assert [(p.kind, p.field) for p in problems] == [("BGPPeer", "spec.bfdProfile")]
    assert validate_change(parse(peer("r", bfdProfile="fast")), existing) == []


def test_turning_echo_mode_on_in_a_profile_in_use_is_refused_for_the_profile() -> None:
    existing = objects(bfd_profile("fast"), peer("r", bfdProfile="fast"))
    problems = validate_change(parse(bfd_profile("fast", echoMode=True)), existing)
    assert [(p.kind, p.field) for p in problems] == [("BFDProfile", "spec.echoMode")]
