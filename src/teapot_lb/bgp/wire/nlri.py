"""NLRI prefix encoding (RFC 4271 §4.3): length in bits, then the significant octets."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Network, IPv6Network

from .errors import CodecError, ErrorCode, UpdateSubcode
from .family import Prefix

_V4_MASKS = tuple(((1 << 32) - 1) ^ ((1 << (32 - n)) - 1) for n in range(33))
_V6_MASKS = tuple(((1 << 128) - 1) ^ ((1 << (128 - n)) - 1) for n in range(129))


def pack_prefix(prefix: Prefix) -> bytes:
    plen = prefix.prefixlen
    return bytes((plen,)) + prefix.network_address.packed[: (plen + 7) // 8]


def pack_prefixes(prefixes: Iterable[Prefix]) -> bytes:
    return b"".join([pack_prefix(p) for p in prefixes])


def split_prefixes(data: bytes, afi: int, subcode: int) -> list[bytes]:
    """Cut an NLRI field into per-prefix encodings (canonical: host bits clear), validating
    lengths. The receive path keeps prefixes in this form until someone asks for objects."""
    maxlen = 32 if afi == 1 else 128
    out = []
    pos = 0
    n = len(data)
    while pos < n:
        plen = data[pos]
        end = pos + 1 + ((plen + 7) >> 3)
        if plen > maxlen or end > n:
            raise CodecError(
                ErrorCode.UPDATE_MESSAGE,
                subcode,
                reason=f"prefix length {plen} at offset {pos} is invalid or overruns",
            )
        enc = data[pos:end]
        if plen & 7 and enc[-1] & (0xFF >> (plen & 7)):
            # Bits beyond the length are ignored (RFC 4271 §4.3): clear them, so one prefix
            # has one encoding (the Adj-RIB-In is keyed by it).
            enc = enc[:-1] + bytes((enc[-1] & (0xFF << (8 - (plen & 7))) & 0xFF,))
        out.append(enc)
        pos = end
    return out


def decode_prefix(enc: bytes, afi: int) -> Prefix:
    """One prefix from its encoding; host bits beyond the length are cleared."""
    plen = enc[0]
    if afi == 1:
        value = int.from_bytes(enc[1:].ljust(4, b"\0"), "big") & _V4_MASKS[plen]
        return IPv4Network((value, plen))
    value = int.from_bytes(enc[1:].ljust(16, b"\0"), "big") & _V6_MASKS[plen]
    return IPv6Network((value, plen))


def unpack_prefixes(
    data: bytes, afi: int, subcode: int = UpdateSubcode.INVALID_NETWORK_FIELD
) -> tuple[Prefix, ...]:
    return tuple(decode_prefix(e, afi) for e in split_prefixes(data, afi, subcode))


def decode_prefixes(encs: Iterable[bytes], afi: int) -> tuple[Prefix, ...]:
    return tuple(decode_prefix(e, afi) for e in encs)
