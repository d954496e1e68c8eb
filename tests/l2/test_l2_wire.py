"""ARP/NDP codec: round trips, builders, and malformed input raising only WireError."""

from __future__ import annotations

import contextlib
from ipaddress import IPv4Address, IPv6Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.l2 import wire

macs = st.binary(min_size=6, max_size=6)
v4 = st.builds(IPv4Address, st.integers(0, 2**32 - 1))
v6 = st.builds(IPv6Address, st.integers(0, 2**128 - 1))
unicast_v6 = v6.filter(lambda a: not a.is_multicast)
other_options = st.lists(
    st.builds(
        wire.NdpOption,
        st.integers(3, 255),
        st.integers(1, 4).flatmap(lambda n: st.binary(min_size=8 * n - 2, max_size=8 * n - 2)),
    ),
    max_size=3,
).map(tuple)

arp_frames = st.builds(
    wire.ArpFrame,
    eth_dst=macs,
    eth_src=macs,
    arp=st.builds(wire.Arp, st.sampled_from(wire.ArpOp), macs, v4, macs, v4),
)
ndp_messages = st.one_of(
    st.builds(
        wire.NeighborSolicitation,
        target=unicast_v6,
        source_lladdr=st.none() | macs,
        options=other_options,
    ),
    st.builds(
        wire.NeighborAdvertisement,
        target=unicast_v6,
        router=st.booleans(),
        solicited=st.booleans(),
        override=st.booleans(),
        target_lladdr=st.none() | macs,
        options=other_options,
    ),
)
ndp_frames = st.builds(
    wire.NdpFrame,
    eth_dst=macs,
    eth_src=macs,
    src_ip=v6,
    dst_ip=v6,
    message=ndp_messages,
    hop_limit=st.integers(0, 255),
)

MAC = bytes.fromhex("020000000001")
CLIENT_MAC = bytes.fromhex("020000000099")


@given(arp_frames | ndp_frames)
def test_every_frame_survives_an_encode_decode_round_trip(frame: wire.Frame) -> None:
    assert wire.decode(wire.encode(frame)) == frame


@given(st.binary(max_size=120))
def test_random_bytes_decode_or_raise_wire_error_only(data: bytes) -> None:
    with contextlib.suppress(wire.WireError):
        wire.decode(data)


@given(arp_frames | ndp_frames, st.data())
def test_corrupted_frames_decode_or_raise_wire_error_only(
    frame: wire.Frame, data: st.DataObject
) -> None:
    raw = bytearray(wire.encode(frame))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(wire.WireError):
        wire.decode(bytes(raw[:cut]))


def test_ndp_with_a_wrong_checksum_is_rejected() -> None:
    ns = wire.neighbor_solicitation(
        CLIENT_MAC, IPv6Address("2001:db8::10"), IPv6Address("2001:db8::100")
    )
    raw = bytearray(wire.encode(ns))
    raw[14 + 40 + 2] ^= 0xFF
    with pytest.raises(wire.WireError, match="checksum"):
        wire.decode(bytes(raw))


def test_ndp_option_of_length_zero_is_malformed() -> None:
    ns = wire.neighbor_solicitation(
        CLIENT_MAC, IPv6Address("2001:db8::10"), IPv6Address("2001:db8::100")
    )
    raw = bytearray(wire.encode(ns))
    raw[14 + 40 + 24 + 1] = 0  # the source link-layer option's length
    with pytest.raises(wire.WireError):
        wire.decode(bytes(raw))


def test_other_traffic_is_reported_as_not_neighbor_discovery() -> None:
    ipv4 = b"\xff" * 12 + b"\x08\x00" + b"\x45" + b"\x00" * 50
    with pytest.raises(wire.NotNeighborDiscovery):
        wire.decode(ipv4)


def test_checksum_matches_scapy() -> None:
    scapy_all = pytest.importorskip("scapy.all")
    na = wire.unsolicited_advertisement(MAC, IPv6Address("fe80::1"), IPv6Address("2001:db8::100"))
    raw = wire.encode(na)
    pkt = scapy_all.Ether(raw)
    reported = pkt[scapy_all.ICMPv6ND_NA].cksum
    del pkt[scapy_all.ICMPv6ND_NA].cksum
    recomputed = scapy_all.Ether(bytes(pkt))[scapy_all.ICMPv6ND_NA].cksum
    assert reported == recomputed
    assert pkt[scapy_all.ICMPv6ND_NA].O == 1 and pkt[scapy_all.ICMPv6ND_NA].S == 0


def test_gratuitous_arp_is_a_broadcast_request_with_sender_equal_to_target() -> None:
    frame = wire.gratuitous_arp(MAC, IPv4Address("192.0.2.100"))
    assert frame.eth_dst == wire.BROADCAST_MAC
    assert frame.arp.op is wire.ArpOp.REQUEST
    assert frame.arp.is_gratuitous and frame.arp.sender_mac == MAC
    assert len(wire.encode(frame)) == 60


def test_arp_reply_answers_the_requester_with_our_mac() -> None:
    req = wire.arp_request(CLIENT_MAC, IPv4Address("192.0.2.10"), IPv4Address("192.0.2.100"))
    reply = wire.arp_reply(MAC, req.arp)
    assert reply.eth_dst == CLIENT_MAC
    assert reply.arp == wire.Arp(
        wire.ArpOp.REPLY, MAC, IPv4Address("192.0.2.100"), CLIENT_MAC, IPv4Address("192.0.2.10")
    )


def test_solicited_advertisement_goes_back_to_the_solicitor_with_s_and_o() -> None:
    ns = wire.neighbor_solicitation(
        CLIENT_MAC, IPv6Address("2001:db8::10"), IPv6Address("2001:db8::100")
    )
    assert ns.dst_ip == IPv6Address("ff02::1:ff00:100")
    assert ns.eth_dst == bytes.fromhex("3333ff000100")
    na = wire.neighbor_advertisement(MAC, IPv6Address("fe80::1"), ns)
    assert (na.dst_ip, na.eth_dst) == (IPv6Address("2001:db8::10"), CLIENT_MAC)
    assert isinstance(na.message, wire.NeighborAdvertisement)
    assert na.message.solicited and na.message.override and not na.message.router
    assert na.message.target_lladdr == MAC


def test_advertisement_for_duplicate_address_detection_goes_to_all_nodes_unsolicited() -> None:
    dad = wire.neighbor_solicitation(CLIENT_MAC, wire.UNSPECIFIED, IPv6Address("2001:db8::100"))
    na = wire.neighbor_advertisement(MAC, IPv6Address("fe80::1"), dad)
    assert na.dst_ip == wire.ALL_NODES and na.eth_dst == bytes.fromhex("333300000001")
    assert isinstance(na.message, wire.NeighborAdvertisement) and not na.message.solicited
