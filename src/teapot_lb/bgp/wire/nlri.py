"""NLRI prefix encoding (RFC 4271 §4.3): length in bits, then the significant octets.

With ADD-PATH negotiated for a family (RFC 7911 §3) every NLRI of it, announced or
withdrawn, starts with a 4-octet Path Identifier. Such an encoding (path identifier, then
the prefix's encoding) is what the RIBs key on: two paths of one prefix are two keys.
"""

from __future__ import annotations

import struct
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


PATH_ID_LENGTH = 4
_PATH_ID = struct.Struct("!I")


def pack_path_id(path_id: int) -> bytes:
    return _PATH_ID.pack(path_id)


def pack_path_prefix(path_id: int, prefix: Prefix) -> bytes:
    """One NLRI with its Path Identifier (RFC 7911 §3)."""
    return _PATH_ID.pack(path_id) + pack_prefix(prefix)


def split_prefixes(data: bytes, afi: int, subcode: int, add_path: bool = False) -> list[bytes]:
    """Cut an NLRI field into per-prefix encodings (canonical: host bits clear), validating
    lengths. The receive path keeps prefixes in this form until someone asks for objects.
    ``add_path``: each NLRI starts with a Path Identifier, kept at the encoding's front."""
    maxlen = 32 if afi == 1 else 128
    skip = PATH_ID_LENGTH if add_path else 0
    out = []
    pos = 0
    n = len(data)
    while pos < n:
        if pos + skip >= n:
            raise CodecError(
                ErrorCode.UPDATE_MESSAGE,
                subcode,
                reason=f"path identifier at offset {pos} overruns the NLRI",
            )
        plen = data[pos + skip]
        end = pos + skip + 1 + ((plen + 7) >> 3)
        if plen > maxlen or end > n:
            raise CodecError(
                ErrorCode.UPDATE_MESSAGE,
                subcode,
                reason=f"prefix length {plen} at offset {pos + skip} is invalid or overruns",
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


def decode_path(enc: bytes, afi: int) -> tuple[int, Prefix]:
    """Path Identifier and prefix of an ADD-PATH encoding (as :func:`split_prefixes` cuts)."""
    return _PATH_ID.unpack_from(enc)[0], decode_prefix(enc[PATH_ID_LENGTH:], afi)


def decode_nlri(encs: Iterable[bytes], afi: int, add_path: bool) -> tuple[Prefix, ...]:
    """Prefixes of encodings with (``add_path``) or without Path Identifiers."""
    if add_path:
        return tuple(decode_prefix(e[PATH_ID_LENGTH:], afi) for e in encs)
    return tuple(decode_prefix(e, afi) for e in encs)
