"""The BGP wire codec: round trips, framing, NOTIFICATION codes and RFC 7606 handling."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import pytest
from bgp_strategies import (
    capabilities,
    keepalives,
    notifications,
    opens,
    route_refreshes,
    updates,
)
from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.bgp.wire import (
    AS_TRANS,
    IPV4_UNICAST,
    IPV6_UNICAST,
    As4Path,
    AsPath,
    Communities,
    Context,
    ErrorCode,
    FourOctetAS,
    GracefulRestart,
    HeaderSubcode,
    Keepalive,
    LargeCommunities,
    LocalPref,
    MessageReader,
    MpReachNlri,
    MpUnreachNlri,
    NextHop,
    Notification,
    Open,
    OpenSubcode,
    Origin,
    Segment,
    UnknownAttribute,
    Update,
    UpdateSubcode,
    decode_message,
    decode_prefixes,
    decode_stream,
    decode_update_routes,
    family_of,
    merge_as4_path,
    pack_attribute,
)
from teapot_lb.bgp.wire import CodecError as BgpCodecError
from teapot_lb.bgp.wire.capability import pack_capability, unpack_capabilities

FOUR = Context(four_octet_as=True)
TWO = Context(four_octet_as=False)


def one(data: bytes, ctx: Context = FOUR) -> object:
    (msg,) = decode_stream(data, ctx)
    return msg


def update_body(withdrawn: bytes, attrs: bytes, nlri: bytes) -> bytes:
    return (
        struct.pack("!H", len(withdrawn)) + withdrawn + struct.pack("!H", len(attrs)) + attrs + nlri
    )


BASE_ATTRS = (
    Origin(0).pack() + AsPath.sequence(65001).pack() + NextHop(IPv4Address("192.0.2.1")).pack()
)
NLRI = b"\x18\xc6\x33\x64"  # 198.51.100.0/24


# --- round trips -------------------------------------------------------------------------


@given(opens)
def test_open_round_trips(msg: Open) -> None:
    assert one(msg.pack()) == msg


@given(capabilities)
def test_every_capability_round_trips(cap: object) -> None:
    assert unpack_capabilities(pack_capability(cap)) == [cap]  # type: ignore[arg-type]


@given(updates(four=True))
def test_update_round_trips_with_four_octet_asns(msg: Update) -> None:
    decoded = one(msg.pack(FOUR), FOUR)
    assert decoded == msg
    assert not decoded.treat_as_withdraw  # type: ignore[attr-defined]


@given(updates(four=False))
def test_update_round_trips_with_two_octet_asns(msg: Update) -> None:
    assert one(msg.pack(TWO), TWO) == msg


@given(updates(four=True))
def test_receive_path_decoding_agrees_with_the_typed_update(msg: Update) -> None:
    body = msg.pack(FOUR)[19:]
    typed = Update.unpack(body, FOUR)
    routes = decode_update_routes(body, FOUR)
    reach = {
        (r.family, p) for r in routes.reach for p in decode_prefixes(r.encodings, r.family.afi)
    }
    assert reach == {(family_of(p), p) for p in typed.reachable()}
    unreach = {p for u in routes.unreach for p in decode_prefixes(u.encodings, u.family.afi)}
    assert unreach == set(typed.unreachable())
    others = tuple(a for a in typed.attributes if not isinstance(a, MpReachNlri | MpUnreachNlri))
    assert routes.attributes == others
    assert routes.end_of_rib() == typed.end_of_rib()
    assert routes.treat_as_withdraw == typed.treat_as_withdraw


@given(st.one_of(notifications, route_refreshes, keepalives))
def test_notification_route_refresh_and_keepalive_round_trip(msg: object) -> None:
    assert one(msg.pack()) == msg  # type: ignore[attr-defined]


# --- framing -----------------------------------------------------------------------------


@given(st.lists(st.one_of(opens, keepalives, notifications), min_size=1, max_size=5), st.data())
def test_reader_reassembles_messages_from_arbitrary_chunks(
    msgs: list[object], data: st.DataObject
) -> None:
    stream = b"".join(m.pack() for m in msgs)  # type: ignore[attr-defined]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    reader = MessageReader()
    out = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        reader.feed(stream[prev:cut])
        prev = cut
        out.extend(decode_message(t, b) for t, b in reader.frames())
    assert out == msgs
    assert reader.buffered == 0


def test_bad_marker_is_connection_not_synchronized() -> None:
    with pytest.raises(BgpCodecError) as err:
        one(b"\x00" * 16 + b"\x00\x13\x04")
    assert (err.value.code, err.value.subcode) == (1, HeaderSubcode.CONNECTION_NOT_SYNCHRONIZED)


@pytest.mark.parametrize("length", [18, 4097, 20])
def test_bad_keepalive_length_reports_the_length(length: int) -> None:
    with pytest.raises(BgpCodecError) as err:
        one(b"\xff" * 16 + struct.pack("!HB", length, 4) + b"\0" * max(0, length - 19))
    assert (err.value.code, err.value.subcode) == (1, HeaderSubcode.BAD_MESSAGE_LENGTH)
    assert err.value.data == struct.pack("!H", length)


def test_unknown_message_type_is_bad_message_type() -> None:
    with pytest.raises(BgpCodecError) as err:
        one(b"\xff" * 16 + b"\x00\x13\x09")
    assert (err.value.code, err.value.subcode, err.value.data) == (1, 3, b"\x09")


# --- OPEN ----------------------------------------------------------------------------------


def test_open_for_a_four_octet_asn_carries_as_trans() -> None:
    msg = Open.build(4200000001, 90, IPv4Address("192.0.2.1"))
    assert msg.my_as == AS_TRANS
    assert msg.asn == 4200000001
    assert FourOctetAS(4200000001) in msg.capabilities


def test_open_with_version_3_is_unsupported_version() -> None:
    raw = bytearray(Open(65001, 90, IPv4Address("192.0.2.1")).pack())
    raw[19] = 3
    with pytest.raises(BgpCodecError) as err:
        one(bytes(raw))
    assert (err.value.code, err.value.subcode) == (2, OpenSubcode.UNSUPPORTED_VERSION_NUMBER)
    assert err.value.data == b"\x00\x04"


def test_open_with_unknown_optional_parameter_is_rejected() -> None:
    body = struct.pack("!BHH4sB", 4, 65001, 90, b"\xc0\x00\x02\x01", 4) + b"\x07\x02ab"
    with pytest.raises(BgpCodecError) as err:
        decode_message(1, body)
    assert err.value.subcode == OpenSubcode.UNSUPPORTED_OPTIONAL_PARAMETER


def test_graceful_restart_capability_encodes_flags_and_time() -> None:
    cap = GracefulRestart(300, restarting=True, families=())
    assert pack_capability(cap) == b"\x40\x02\x81\x2c"


# --- UPDATE --------------------------------------------------------------------------------


def test_ipv4_end_of_rib_is_an_empty_update() -> None:
    assert (
        Update.end_of_rib_for(IPV4_UNICAST).pack() == b"\xff" * 16 + b"\x00\x17\x02\x00\x00\x00\x00"
    )
    assert one(Update().pack()).end_of_rib() == IPV4_UNICAST  # type: ignore[attr-defined]


def test_ipv6_end_of_rib_is_an_empty_mp_unreach() -> None:
    msg = one(Update.end_of_rib_for(IPV6_UNICAST).pack())
    assert msg.end_of_rib() == IPV6_UNICAST  # type: ignore[attr-defined]


def test_ipv6_next_hop_keeps_global_and_link_local() -> None:
    mp = MpReachNlri(
        IPV6_UNICAST,
        (IPv6Address("2001:db8::1"), IPv6Address("fe80::1")),
        (IPv6Network("2001:db8:1::/48"),),
    )
    msg = one(Update(attributes=(Origin(0), AsPath(), mp)).pack())
    assert msg.get(MpReachNlri) == mp  # type: ignore[attr-defined]


def test_large_attribute_uses_extended_length() -> None:
    attr = Communities(tuple(range(100)))
    raw = attr.pack()
    assert raw[0] & 0x10 and struct.unpack("!H", raw[2:4])[0] == 400


def test_as4_path_rebuilds_the_real_path() -> None:
    as_path = AsPath.sequence(65001, AS_TRANS, AS_TRANS)
    as4 = As4Path((Segment(2, (4200000001, 4200000002)),))
    assert merge_as4_path(as_path, as4).asns() == (65001, 4200000001, 4200000002)


def test_longer_as4_path_is_ignored() -> None:
    as_path = AsPath.sequence(AS_TRANS)
    as4 = As4Path((Segment(2, (4200000001, 4200000002)),))
    assert merge_as4_path(as_path, as4) == as_path


def test_two_octet_peer_gets_as_trans_in_as_path() -> None:
    raw = AsPath.sequence(4200000001).pack(TWO)
    assert raw[-2:] == struct.pack("!H", AS_TRANS)


def test_withdrawn_length_overrun_resets_with_malformed_attribute_list() -> None:
    with pytest.raises(BgpCodecError) as err:
        decode_message(2, b"\x00\x10\x00\x00")
    assert (err.value.code, err.value.subcode) == (3, UpdateSubcode.MALFORMED_ATTRIBUTE_LIST)


def test_bad_prefix_length_is_invalid_network_field() -> None:
    with pytest.raises(BgpCodecError) as err:
        decode_message(2, update_body(b"", BASE_ATTRS, b"\x21\x01\x02\x03\x04\x05"))
    assert (err.value.code, err.value.subcode) == (3, UpdateSubcode.INVALID_NETWORK_FIELD)


def test_malformed_origin_is_treat_as_withdraw() -> None:
    attrs = pack_attribute(0x40, 1, b"\x07") + BASE_ATTRS[4:]
    msg = Update.unpack(update_body(b"", attrs, NLRI))
    assert msg.treat_as_withdraw
    assert msg.reachable() == (IPv4Network("198.51.100.0/24"),)


def test_bad_community_length_is_treat_as_withdraw() -> None:
    msg = Update.unpack(update_body(b"", BASE_ATTRS + pack_attribute(0xC0, 8, b"abc"), NLRI))
    assert msg.treat_as_withdraw


def test_bad_large_community_length_is_treat_as_withdraw() -> None:
    msg = Update.unpack(update_body(b"", BASE_ATTRS + pack_attribute(0xC0, 32, b"x" * 13), NLRI))
    assert msg.treat_as_withdraw and msg.get(LargeCommunities) is None


def test_bad_atomic_aggregate_is_discarded_and_route_kept() -> None:
    msg = Update.unpack(update_body(b"", BASE_ATTRS + pack_attribute(0x40, 6, b"x"), NLRI))
    assert not msg.treat_as_withdraw
    assert msg.problems


def test_wrong_flags_on_local_pref_is_treat_as_withdraw() -> None:
    msg = Update.unpack(update_body(b"", BASE_ATTRS + pack_attribute(0x80, 5, b"\0\0\0\1"), NLRI))
    assert msg.treat_as_withdraw and msg.get(LocalPref) is None


def test_missing_next_hop_is_treat_as_withdraw() -> None:
    attrs = Origin(0).pack() + AsPath().pack()
    assert Update.unpack(update_body(b"", attrs, NLRI)).treat_as_withdraw


def test_attribute_overrunning_the_list_is_treat_as_withdraw() -> None:
    attrs = BASE_ATTRS + b"\xc0\x08\x40abcd"
    assert Update.unpack(update_body(b"", attrs, NLRI)).treat_as_withdraw


def test_malformed_mp_reach_resets_the_session() -> None:
    attrs = BASE_ATTRS + pack_attribute(0x80, 14, b"\x00\x02\x01\x05abcde\x00")
    with pytest.raises(BgpCodecError) as err:
        Update.unpack(update_body(b"", attrs, b""))
    assert (err.value.code, err.value.subcode) == (3, UpdateSubcode.OPTIONAL_ATTRIBUTE_ERROR)


def test_repeated_mp_unreach_resets_the_session() -> None:
    mp = MpUnreachNlri(IPV6_UNICAST, ()).pack()
    with pytest.raises(BgpCodecError) as err:
        Update.unpack(update_body(b"", mp + mp, b""))
    assert err.value.subcode == UpdateSubcode.MALFORMED_ATTRIBUTE_LIST


def test_unrecognized_well_known_attribute_resets_with_its_bytes() -> None:
    bad = pack_attribute(0x40, 99, b"zz")
    with pytest.raises(BgpCodecError) as err:
        Update.unpack(update_body(b"", BASE_ATTRS + bad, NLRI))
    assert err.value.subcode == UpdateSubcode.UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE
    assert err.value.data == bad


def test_unknown_optional_transitive_is_kept_and_forwarded_partial() -> None:
    msg = Update.unpack(update_body(b"", BASE_ATTRS + pack_attribute(0xC0, 99, b"zz"), NLRI))
    (unknown,) = [a for a in msg.attributes if isinstance(a, UnknownAttribute)]
    fwd = unknown.forwarded()
    assert fwd is not None and fwd.pack()[0] & 0x20


def test_duplicate_attribute_keeps_the_first() -> None:
    attrs = BASE_ATTRS + LocalPref(10).pack() + LocalPref(20).pack()
    msg = Update.unpack(update_body(b"", attrs, NLRI))
    assert msg.get(LocalPref) == LocalPref(10) and not msg.treat_as_withdraw


def test_notification_codes_are_described() -> None:
    assert Notification(4).describe() == "Hold Timer Expired"
    assert Notification(2, 2).describe() == "OPEN Message Error/Bad Peer AS"
    assert Notification.cease(2, "bye").describe() == 'Cease/Administrative Shutdown "bye"'
    assert Notification.cease(2, "é" * 200).shutdown_communication == "é" * 127


def test_codec_error_maps_to_a_notification() -> None:
    err = BgpCodecError(ErrorCode.OPEN_MESSAGE, OpenSubcode.BAD_PEER_AS, b"\xfd\xe9")
    assert Notification.from_error(err) == Notification(2, 2, b"\xfd\xe9")
    assert Keepalive().pack() == b"\xff" * 16 + b"\x00\x13\x04"
