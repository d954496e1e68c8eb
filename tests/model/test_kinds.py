"""Our kinds on the wire: camelCase names, defaults, unknown fields refused, helpers."""

from __future__ import annotations

import pytest

from model.builders import bgp_advertisement, parse, peer, pool, vip_advertisement
from teapot_lb.model import (
    BGPPeer,
    dump,
    parse_community,
    parse_duration,
    parse_large_community,
)
from teapot_lb.model.common import creation_order
from teapot_lb.model.manifest import parse_object
from teapot_lb.vrrp import group


def test_fields_are_camel_case_on_the_wire_and_snake_case_in_python() -> None:
    p: BGPPeer = parse(peer("r", routerID="192.0.2.1", ebgpMultiHop=True))
    assert (p.spec.my_asn, p.spec.peer_asn, p.spec.ebgp_multi_hop) == (64512, 64500, True)
    wire = dump(p)["spec"]
    assert {"myASN", "peerASN", "peerAddress", "routerID", "ebgpMultiHop"} <= wire.keys()


@pytest.mark.parametrize(
    "document",
    [
        pool("p", "192.0.2.0/24", "2001:db8::/120", avoidBuggyIPs=True,
             serviceAllocation={"priority": 1, "namespaces": ["a"]}),
        peer("r", holdTime="90s", keepaliveTime="30s", families=["ipv4-unicast"],
             nodeSelectors=[{"matchLabels": {"zone": "a"}}]),
        bgp_advertisement("ad", "p", communities=["no-export"], aggregationLength=32),
        vip_advertisement("vip", "p", vridRange={"start": 1, "end": 9}, unicastPeers=True),
    ],
)  # fmt: skip
def test_an_object_survives_a_round_trip_through_its_wire_form(document: dict[str, object]) -> None:
    obj = parse(document)
    assert parse(dump(obj)) == obj


def test_defaults_match_metallb() -> None:
    p = parse(pool("p", "192.0.2.0/24"))
    assert p.spec.auto_assign is True and p.spec.avoid_buggy_ips is False
    r: BGPPeer = parse(peer("r"))
    assert r.spec.peer_port == 179
    assert (r.hold_time_seconds(), r.keepalive_time_seconds(), r.connect_time_seconds()) == (
        90.0,
        30.0,
        120.0,
    )


def test_metadata_fields_we_do_not_use_are_ignored() -> None:
    document = pool("p", "192.0.2.0/24")
    document["metadata"] |= {"uid": "1", "managedFields": [], "selfLink": "x"}
    assert parse(document).metadata.uid == "1"


def test_creation_timestamp_is_read_and_orders_older_first() -> None:
    old, new, unstamped = (
        pool("b", "192.0.2.0/24"),
        pool("a", "192.0.2.0/24"),
        pool("0", "192.0.2.0/24"),
    )
    old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    new["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00"  # no zone: UTC
    objs = [parse(unstamped), parse(new), parse(old)]
    assert [o.name for o in sorted(objs, key=creation_order)] == ["b", "a", "0"]


def test_a_garbled_creation_timestamp_is_a_problem_naming_the_field() -> None:
    document = pool("p", "192.0.2.0/24")
    document["metadata"]["creationTimestamp"] = "yesterday"
    _, problems = parse_object(document)
    assert [p.field for p in problems] == ["metadata.creationTimestamp"]


def test_ibgp_is_same_asn_or_dynamic_internal() -> None:
    assert parse(peer("r", peerASN=64512)).is_ibgp()
    assert not parse(peer("r")).is_ibgp()
    assert parse(peer("r", peerASN=None, dynamicASN="internal")).is_ibgp()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("65000:100", 65000 << 16 | 100),
        ("0:0", 0),
        ("no-export", 0xFFFFFF01),
        ("No-Advertise", 0xFFFFFF02),
        ("no-export-subconfed", 0xFFFFFF03),
        ("graceful-shutdown", 0xFFFF0000),
        ("blackhole", 0xFFFF029A),
    ],
)
def test_standard_communities_parse_to_their_32_bit_value(text: str, value: int) -> None:
    assert parse_community(text) == value


def test_large_communities_parse_to_three_numbers() -> None:
    assert parse_large_community("4200000000:1:4294967295") == (4200000000, 1, 4294967295)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("1m30s", 90), ("1h", 3600), ("500ms", 0.5), ("1.5s", 1.5), ("0", 0)],
)
def test_durations_are_read_like_kubernetes(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_vip_defaults_to_every_vrid_and_one_second() -> None:
    vip = parse(vip_advertisement("v"))
    assert vip.vrids() == range(1, 256)
    assert vip.advertisement_interval_seconds() == group.DEFAULT_ADVERT_INTERVAL_S == 0.1


def test_dump_leaves_out_unset_fields() -> None:
    assert "peerASN" not in dump(parse(peer("r", peerASN=None, dynamicASN="external")))["spec"]
