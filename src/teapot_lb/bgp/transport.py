"""Socket options for BGP transport: TCP MD5 (RFC 2385) and TTL (eBGP single/multi hop).

Linux only; these are the kernel interfaces, kept apart so the asyncio layer stays short.
"""

from __future__ import annotations

import socket
import struct
from ipaddress import IPv6Address, ip_address

TCP_MD5SIG = getattr(socket, "TCP_MD5SIG", 14)
TCP_MD5SIG_EXT = 32  # Linux 4.13: the key may cover a prefix of peers
TCP_MD5SIG_FLAG_PREFIX = 1
TCP_MD5SIG_MAXKEYLEN = 80
IP_MINTTL = getattr(socket, "IP_MINTTL", 21)
IPV6_MINHOPCOUNT = 73  # linux/in6.h
_SOCKADDR_STORAGE = 128


def md5sig_struct(peer: str, password: str | None, prefixlen: int | None = None) -> bytes:
    """``struct tcp_md5sig`` for ``peer`` (with ``prefixlen``: for every address of
    ``peer/prefixlen``, set with ``TCP_MD5SIG_EXT``); an empty key removes the key."""
    addr = ip_address(peer)
    key = (password or "").encode()
    if len(key) > TCP_MD5SIG_MAXKEYLEN:
        raise ValueError(f"TCP MD5 key is {len(key)} bytes, the kernel takes at most 80")
    if isinstance(addr, IPv6Address):
        sockaddr = struct.pack("=H", socket.AF_INET6) + struct.pack("!HI16sI", 0, 0, addr.packed, 0)
    else:
        sockaddr = struct.pack("=H", socket.AF_INET) + struct.pack("!H4s", 0, addr.packed)
    sockaddr = sockaddr.ljust(_SOCKADDR_STORAGE, b"\0")
    # flags, prefixlen, keylen, ifindex, key
    flags = 0 if prefixlen is None else TCP_MD5SIG_FLAG_PREFIX
    return (
        sockaddr
        + struct.pack("=BBHi", flags, prefixlen or 0, len(key), 0)
        + key.ljust(TCP_MD5SIG_MAXKEYLEN, b"\0")
    )


def set_md5(sock: socket.socket, peer: str, password: str | None) -> None:
    """Sign (and require signatures on) the TCP segments exchanged with ``peer``."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_MD5SIG, md5sig_struct(peer, password))


def set_ttl(sock: socket.socket, ttl: int) -> None:
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, ttl)
    else:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)


def set_min_ttl(sock: socket.socket, ttl: int) -> None:
    """Drop segments that arrive with a lower TTL (hop limit): GTSM, RFC 5082. On a
    listening socket it applies to the SYNs too (Linux), so a far sender never connects."""
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_MINHOPCOUNT, ttl)
    else:
        sock.setsockopt(socket.IPPROTO_IP, IP_MINTTL, ttl)
