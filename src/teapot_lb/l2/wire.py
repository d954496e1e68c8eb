"""Sans-I/O codec for ARP (RFC 826, RFC 5227) and NDP (RFC 4861) over Ethernet frames.

``decode(frame_bytes)`` returns an :class:`ArpFrame` or an :class:`NdpFrame`, or raises
:class:`WireError` (and only that): :class:`NotNeighborDiscovery` for well-formed traffic
that is neither ARP nor a neighbour solicitation/advertisement, plain :class:`WireError`
for anything malformed. ``encode(frame)`` is its inverse. Builders make the frames a
responder sends: ARP replies, gratuitous ARP, solicited and unsolicited NAs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from ipaddress import IPv4Address, IPv6Address

ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_IPV6 = 0x86DD
IPPROTO_ICMPV6 = 58

BROADCAST_MAC = b"\xff" * 6
ZERO_MAC = b"\x00" * 6
ALL_NODES = IPv6Address("ff02::1")
UNSPECIFIED = IPv6Address("::")

_ETH = struct.Struct("!6s6sH")
_ARP = struct.Struct("!HHBBH6s4s6s4s")
_IPV6 = struct.Struct("!IHBB16s16s")
_MIN_FRAME = 60  # Ethernet minimum without FCS; short frames are padded with zeros


class WireError(ValueError):
    """The bytes are not a frame this codec accepts; the message says why."""


class NotNeighborDiscovery(WireError):
    """A well-formed frame that is neither ARP nor an NS/NA (other traffic, not an attack)."""


class ArpOp(IntEnum):
    REQUEST = 1
    REPLY = 2


class NdpType(IntEnum):
    NEIGHBOR_SOLICITATION = 135
    NEIGHBOR_ADVERTISEMENT = 136


class NdpOptionType(IntEnum):
    SOURCE_LINK_LAYER_ADDRESS = 1
    TARGET_LINK_LAYER_ADDRESS = 2


def format_mac(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


def parse_mac(text: str) -> bytes:
    parts = text.split(":")
    if len(parts) != 6:
        raise WireError(f"not a MAC address: {text!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError as exc:
        raise WireError(f"not a MAC address: {text!r}") from exc


def solicited_node(ip: IPv6Address) -> IPv6Address:
    """The solicited-node multicast group of ``ip`` (RFC 4291 section 2.7.1)."""
    return IPv6Address(b"\xff\x02" + b"\x00" * 9 + b"\x01\xff" + ip.packed[13:])


def multicast_mac(group: IPv6Address) -> bytes:
    """The Ethernet address an IPv6 multicast group maps to (RFC 2464 section 7)."""
    return b"\x33\x33" + group.packed[12:]


@dataclass(frozen=True)
class Arp:
    """An Ethernet/IPv4 ARP packet (RFC 826)."""

    op: ArpOp
    sender_mac: bytes
    sender_ip: IPv4Address
    target_mac: bytes
    target_ip: IPv4Address

    @property
    def is_gratuitous(self) -> bool:
        """An announcement of the sender's own binding (RFC 5227 section 2.3)."""
        return self.sender_ip == self.target_ip


@dataclass(frozen=True)
class NdpOption:
    """An NDP option kept as-is (RFC 4861 section 4.6); ``data`` excludes type and length."""

    type: int
    data: bytes


@dataclass(frozen=True)
class NeighborSolicitation:
    target: IPv6Address
    source_lladdr: bytes | None = None
    options: tuple[NdpOption, ...] = ()


@dataclass(frozen=True)
class NeighborAdvertisement:
    target: IPv6Address
    router: bool = False
    solicited: bool = False
    override: bool = False
    target_lladdr: bytes | None = None
    options: tuple[NdpOption, ...] = ()


NdpMessage = NeighborSolicitation | NeighborAdvertisement


@dataclass(frozen=True)
class ArpFrame:
    eth_dst: bytes
    eth_src: bytes
    arp: Arp


@dataclass(frozen=True)
class NdpFrame:
    """An NS or NA in an IPv6 packet without extension headers, in an Ethernet frame."""

    eth_dst: bytes
    eth_src: bytes
    src_ip: IPv6Address
    dst_ip: IPv6Address
    message: NdpMessage
    hop_limit: int = 255  # RFC 4861 section 7.1: anything else did not come from the link


Frame = ArpFrame | NdpFrame


# --- encoding ---------------------------------------------------------------------------


def _check_mac(mac: bytes, what: str) -> None:
    if len(mac) != 6:
        raise WireError(f"{what} must be 6 bytes, got {len(mac)}")


def encode(frame: Frame) -> bytes:
    _check_mac(frame.eth_dst, "Ethernet destination")
    _check_mac(frame.eth_src, "Ethernet source")
    if isinstance(frame, ArpFrame):
        a = frame.arp
        _check_mac(a.sender_mac, "ARP sender hardware address")
        _check_mac(a.target_mac, "ARP target hardware address")
        body = _ARP.pack(
            1, ETH_P_IP, 6, 4, a.op, a.sender_mac, a.sender_ip.packed, a.target_mac,
            a.target_ip.packed,
        )  # fmt: skip
        data = _ETH.pack(frame.eth_dst, frame.eth_src, ETH_P_ARP) + body
        return data.ljust(_MIN_FRAME, b"\x00")
    icmp = _encode_ndp(frame.message)
    checksum = icmpv6_checksum(frame.src_ip, frame.dst_ip, icmp)
    icmp = icmp[:2] + struct.pack("!H", checksum) + icmp[4:]
    ip = _IPV6.pack(
        6 << 28, len(icmp), IPPROTO_ICMPV6, frame.hop_limit, frame.src_ip.packed,
        frame.dst_ip.packed,
    )  # fmt: skip
    return (_ETH.pack(frame.eth_dst, frame.eth_src, ETH_P_IPV6) + ip + icmp).ljust(
        _MIN_FRAME, b"\x00"
    )


def _encode_options(
    lladdr_type: int, lladdr: bytes | None, options: tuple[NdpOption, ...]
) -> bytes:
    out = b""
    if lladdr is not None:
        _check_mac(lladdr, "link-layer address option")
        out += bytes((lladdr_type, 1)) + lladdr
    for opt in options:
        if not 0 <= opt.type <= 255:
            raise WireError(f"NDP option type {opt.type} out of range")
        if (len(opt.data) + 2) % 8 or not opt.data or len(opt.data) + 2 > 255 * 8:
            raise WireError(f"NDP option data length {len(opt.data)} is not 8n-2 with n in 1..255")
        out += bytes((opt.type, (len(opt.data) + 2) // 8)) + opt.data
    return out


def _encode_ndp(msg: NdpMessage) -> bytes:
    if isinstance(msg, NeighborSolicitation):
        head = struct.pack("!BBHI", NdpType.NEIGHBOR_SOLICITATION, 0, 0, 0) + msg.target.packed
        return head + _encode_options(
            NdpOptionType.SOURCE_LINK_LAYER_ADDRESS, msg.source_lladdr, msg.options
        )
    flags = (msg.router << 31) | (msg.solicited << 30) | (msg.override << 29)
    head = struct.pack("!BBHI", NdpType.NEIGHBOR_ADVERTISEMENT, 0, 0, flags) + msg.target.packed
    return head + _encode_options(
        NdpOptionType.TARGET_LINK_LAYER_ADDRESS, msg.target_lladdr, msg.options
    )


def icmpv6_checksum(src: IPv6Address, dst: IPv6Address, icmp: bytes) -> int:
    """RFC 4443 section 2.3: ones' complement sum over the pseudo-header and the message.

    ``icmp`` must carry zeros in the checksum field when computing one to send; over a
    received message (checksum included) the result is 0 when the checksum is right.
    """
    pseudo = src.packed + dst.packed + struct.pack("!IxxxB", len(icmp), IPPROTO_ICMPV6)
    data = pseudo + icmp
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


# --- decoding ---------------------------------------------------------------------------


def decode(data: bytes) -> Frame:
    """Decode one Ethernet frame; raises :class:`WireError` (only) when it is not NS/NA/ARP."""
    if len(data) < _ETH.size:
        raise WireError(f"frame of {len(data)} bytes is shorter than an Ethernet header")
    dst, src, ethertype = _ETH.unpack_from(data)
    if ethertype == ETH_P_ARP:
        return ArpFrame(eth_dst=dst, eth_src=src, arp=_decode_arp(data[_ETH.size :]))
    if ethertype == ETH_P_IPV6:
        return _decode_ipv6(dst, src, data[_ETH.size :])
    raise NotNeighborDiscovery(f"ethertype 0x{ethertype:04x} is neither ARP nor IPv6")


def _decode_arp(body: bytes) -> Arp:
    if len(body) < _ARP.size:
        raise WireError(f"ARP packet of {len(body)} bytes is shorter than {_ARP.size}")
    htype, ptype, hlen, plen, op, sha, spa, tha, tpa = _ARP.unpack_from(body)
    if (htype, ptype, hlen, plen) != (1, ETH_P_IP, 6, 4):
        raise WireError(
            f"ARP for hardware type {htype}/{hlen} and protocol 0x{ptype:04x}/{plen} "
            "is not Ethernet/IPv4"
        )
    if op not in (ArpOp.REQUEST, ArpOp.REPLY):
        raise WireError(f"ARP operation {op} is neither request nor reply")
    return Arp(ArpOp(op), sha, IPv4Address(spa), tha, IPv4Address(tpa))


def _decode_ipv6(dst: bytes, src: bytes, packet: bytes) -> NdpFrame:
    if len(packet) < _IPV6.size:
        raise WireError(f"IPv6 packet of {len(packet)} bytes is shorter than its header")
    vtf, plen, next_header, hop_limit, sip, dip = _IPV6.unpack_from(packet)
    if vtf >> 28 != 6:
        raise WireError(f"IP version {vtf >> 28} in an IPv6 ethertype frame")
    payload = packet[_IPV6.size :]
    if plen > len(payload):
        raise WireError(f"IPv6 payload length {plen} exceeds the {len(payload)} bytes received")
    payload = payload[:plen]  # the rest is Ethernet padding
    if next_header != IPPROTO_ICMPV6:
        # NDP messages never carry extension headers we would have to walk (RFC 4861 7.1).
        raise NotNeighborDiscovery(f"IPv6 next header {next_header} is not ICMPv6")
    if len(payload) < 4:
        raise WireError(f"ICMPv6 message of {len(payload)} bytes is shorter than its header")
    icmp_type, code = payload[0], payload[1]
    if icmp_type not in (NdpType.NEIGHBOR_SOLICITATION, NdpType.NEIGHBOR_ADVERTISEMENT):
        raise NotNeighborDiscovery(f"ICMPv6 type {icmp_type} is not NS or NA")
    src_ip, dst_ip = IPv6Address(sip), IPv6Address(dip)
    if code != 0:
        raise WireError(f"NDP message with ICMPv6 code {code} (RFC 4861 7.1.1 requires 0)")
    if len(payload) < 24:
        raise WireError(f"NDP message of {len(payload)} bytes is shorter than 24")
    if icmpv6_checksum(src_ip, dst_ip, payload) != 0:
        raise WireError("ICMPv6 checksum mismatch")
    target = IPv6Address(payload[8:24])
    if target.is_multicast:
        raise WireError(f"NDP target {target} is a multicast address (RFC 4861 7.1)")
    lladdr_type = (
        NdpOptionType.SOURCE_LINK_LAYER_ADDRESS
        if icmp_type == NdpType.NEIGHBOR_SOLICITATION
        else NdpOptionType.TARGET_LINK_LAYER_ADDRESS
    )
    lladdr, options = _decode_options(payload[24:], lladdr_type)
    message: NdpMessage
    if icmp_type == NdpType.NEIGHBOR_SOLICITATION:
        message = NeighborSolicitation(target=target, source_lladdr=lladdr, options=options)
    else:
        (flags,) = struct.unpack_from("!I", payload, 4)
        message = NeighborAdvertisement(
            target=target,
            router=bool(flags >> 31 & 1),
            solicited=bool(flags >> 30 & 1),
            override=bool(flags >> 29 & 1),
            target_lladdr=lladdr,
            options=options,
        )
    return NdpFrame(
        eth_dst=dst, eth_src=src, src_ip=src_ip, dst_ip=dst_ip, message=message,
        hop_limit=hop_limit,
    )  # fmt: skip


def _decode_options(raw: bytes, lladdr_type: int) -> tuple[bytes | None, tuple[NdpOption, ...]]:
    lladdr: bytes | None = None
    options: list[NdpOption] = []
    pos = 0
    while pos < len(raw):
        if len(raw) - pos < 2:
            raise WireError("truncated NDP option header")
        opt_type, length = raw[pos], raw[pos + 1]
        if length == 0:
            raise WireError("NDP option with length 0 (RFC 4861 4.6 requires discarding)")
        end = pos + 8 * length
        if end > len(raw):
            raise WireError(f"NDP option type {opt_type} runs past the end of the message")
        data = raw[pos + 2 : end]
        if opt_type == lladdr_type and length == 1 and lladdr is None:
            lladdr = data
        else:
            options.append(NdpOption(opt_type, data))
        pos = end
    return lladdr, tuple(options)


# --- builders ---------------------------------------------------------------------------


def arp_reply(mac: bytes, request: Arp) -> ArpFrame:
    """Our answer to ``request``: ``request.target_ip`` is at ``mac``."""
    return ArpFrame(
        eth_dst=request.sender_mac,
        eth_src=mac,
        arp=Arp(ArpOp.REPLY, mac, request.target_ip, request.sender_mac, request.sender_ip),
    )


def gratuitous_arp(mac: bytes, ip: IPv4Address) -> ArpFrame:
    """An ARP announcement (RFC 5227 section 2.3): a broadcast request with sender = target.

    A request rather than a reply, because receivers that only refresh existing entries
    (Linux with ``arp_accept=0``) treat both alike and some stacks ignore unsolicited
    replies.
    """
    return ArpFrame(
        eth_dst=BROADCAST_MAC,
        eth_src=mac,
        arp=Arp(ArpOp.REQUEST, mac, ip, ZERO_MAC, ip),
    )


def neighbor_advertisement(mac: bytes, source: IPv6Address, request: NdpFrame) -> NdpFrame:
    """Our answer to a neighbour solicitation (RFC 4861 section 7.2.4)."""
    assert isinstance(request.message, NeighborSolicitation)
    ns = request.message
    if request.src_ip == UNSPECIFIED:
        # Duplicate address detection: answer all nodes, not solicited (7.2.4).
        dst_ip, eth_dst, solicited = ALL_NODES, multicast_mac(ALL_NODES), False
    else:
        dst_ip, eth_dst, solicited = request.src_ip, ns.source_lladdr or request.eth_src, True
    return NdpFrame(
        eth_dst=eth_dst,
        eth_src=mac,
        src_ip=source,
        dst_ip=dst_ip,
        message=NeighborAdvertisement(
            target=ns.target, solicited=solicited, override=True, target_lladdr=mac
        ),
    )


def unsolicited_advertisement(mac: bytes, source: IPv6Address, target: IPv6Address) -> NdpFrame:
    """An unsolicited NA to all nodes with the override flag (RFC 4861 section 7.2.6)."""
    return NdpFrame(
        eth_dst=multicast_mac(ALL_NODES),
        eth_src=mac,
        src_ip=source,
        dst_ip=ALL_NODES,
        message=NeighborAdvertisement(target=target, override=True, target_lladdr=mac),
    )


def neighbor_solicitation(mac: bytes, source: IPv6Address, target: IPv6Address) -> NdpFrame:
    """A multicast NS for ``target`` (what a client sends; used by tests and probes)."""
    group = solicited_node(target)
    return NdpFrame(
        eth_dst=multicast_mac(group),
        eth_src=mac,
        src_ip=source,
        dst_ip=group,
        message=NeighborSolicitation(
            target=target, source_lladdr=None if source == UNSPECIFIED else mac
        ),
    )


def arp_request(mac: bytes, sender_ip: IPv4Address, target_ip: IPv4Address) -> ArpFrame:
    """A broadcast who-has ``target_ip`` (what a client sends; used by tests and probes)."""
    return ArpFrame(
        eth_dst=BROADCAST_MAC,
        eth_src=mac,
        arp=Arp(ArpOp.REQUEST, mac, sender_ip, ZERO_MAC, target_ip),
    )
