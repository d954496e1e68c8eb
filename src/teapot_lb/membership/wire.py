"""The speakers' heartbeat and accusation messages (the liveness protocol of
:mod:`teapot_lb.membership.core`): typed messages, ``encode`` and ``decode``.

Heartbeat format (network byte order)::

    magic "TLB1" | flags u8 | name length u8 | incarnation u64 | sequence u64 |
    name (UTF-8) | MAC count u8 | MACs (6 bytes each) | [HMAC-SHA256, first 16 bytes]

Flags: 0x01 authenticated, 0x02 leaving, 0x04 presence (to every peer; does not start a
silence timer), 0x08 monitored (the sender heartbeats its monitors only; a peer without it
is of the full-mesh version and gets heartbeats from everyone). An older node ignores the
flags it does not know and reads every message of this version as a heartbeat.

Accusation format (version 2; an older node drops it as a bad magic)::

    magic "TLB2" | flags u8 | accuser length u8 | subject length u8 |
    accuser incarnation u64 | accuser sequence u64 |
    subject incarnation u64 | subject sequence u64 (the last one the accuser heard) |
    accuser | subject | [HMAC-SHA256, first 16 bytes]

``incarnation`` is fixed for the life of a process (the agent uses its start time in
nanoseconds, so a restarted node supersedes its former self); ``sequence`` increases by
one per heartbeat. With a shared key, messages without the right tag and replays (an old
incarnation, or a sequence not above the last one) are dropped; a heartbeat without the
right tag is also reported (:class:`Unauthenticated`), so the adapter can name its source.
Without a key every heartbeat is accepted, authenticated ones too (the tag is not checked).
The MACs let peers map a
gratuitous ARP back to the node that sent it (split-brain arbitration).
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass

MAGIC = b"TLB1"
_HEAD = struct.Struct("!4sBBQQ")
_TAG_LEN = 16
FLAG_AUTH = 0x01
FLAG_LEAVING = 0x02
FLAG_PRESENCE = 0x04
FLAG_MONITORED = 0x08
MAGIC_ACCUSE = b"TLB2"
_ACCUSE_HEAD = struct.Struct("!4sBBBQQQQ")


class HeartbeatError(ValueError):
    """Bytes that are not a valid heartbeat; the message says why."""


class HeartbeatAuthError(HeartbeatError):
    """A heartbeat without the right tag while a key is configured (forged, or another key)."""


@dataclass(frozen=True)
class Heartbeat:
    node: str
    incarnation: int
    sequence: int
    macs: tuple[bytes, ...] = ()
    leaving: bool = False
    presence: bool = False
    monitored: bool = False


@dataclass(frozen=True)
class Accusation:
    """``accuser`` has not heard ``subject`` since the subject's (incarnation, sequence)."""

    accuser: str
    incarnation: int
    sequence: int
    subject: str
    subject_incarnation: int
    subject_sequence: int


def encode(hb: Heartbeat, key: bytes | None = None) -> bytes:
    name = hb.node.encode()
    if not 0 < len(name) <= 255 or len(hb.macs) > 255 or any(len(m) != 6 for m in hb.macs):
        raise HeartbeatError("node name must be 1..255 bytes and MACs 6 bytes each (<= 255)")
    flags = (
        (FLAG_AUTH if key else 0)
        | (FLAG_LEAVING if hb.leaving else 0)
        | (FLAG_PRESENCE if hb.presence else 0)
        | (FLAG_MONITORED if hb.monitored else 0)
    )
    body = (
        _HEAD.pack(MAGIC, flags, len(name), hb.incarnation, hb.sequence)
        + name
        + bytes((len(hb.macs),))
        + b"".join(hb.macs)
    )
    return _sealed(body, key)


def _sealed(body: bytes, key: bytes | None) -> bytes:
    """``body`` with its tag (HMAC-SHA256, first 16 bytes) when there is a key."""
    return body + hmac.digest(key, body, "sha256")[:_TAG_LEN] if key else body


def decode(data: bytes, key: bytes | None = None) -> Heartbeat:
    """Decode and authenticate; raises :class:`HeartbeatError` (only)."""
    if len(data) < _HEAD.size:
        raise HeartbeatError(f"{len(data)} bytes is shorter than a heartbeat header")
    magic, flags, name_len, incarnation, sequence = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise HeartbeatError("not a teapot-lb heartbeat (bad magic)")
    pos = _HEAD.size
    name_raw = data[pos : pos + name_len]
    pos += name_len
    if len(name_raw) != name_len or pos >= len(data):
        raise HeartbeatError("truncated heartbeat")
    count = data[pos]
    pos += 1
    macs = tuple(data[pos + 6 * i : pos + 6 * i + 6] for i in range(count))
    pos += 6 * count
    if pos > len(data):
        raise HeartbeatError("truncated MAC list")
    _authenticate(data, pos, flags, key)
    node = _name(name_raw)
    return Heartbeat(
        node,
        incarnation,
        sequence,
        macs,
        leaving=bool(flags & FLAG_LEAVING),
        presence=bool(flags & FLAG_PRESENCE),
        monitored=bool(flags & FLAG_MONITORED),
    )


def _authenticate(data: bytes, end: int, flags: int, key: bytes | None) -> None:
    """Check the tag after ``data[:end]`` (with a key) or that nothing else follows."""
    if key:
        if not flags & FLAG_AUTH or len(data) != end + _TAG_LEN:
            raise HeartbeatAuthError("heartbeat is not authenticated and a key is configured")
        tag = hmac.digest(key, data[:end], "sha256")[:_TAG_LEN]
        if not hmac.compare_digest(tag, data[end:]):
            raise HeartbeatAuthError("heartbeat authentication tag mismatch")
    elif len(data) != end + (_TAG_LEN if flags & FLAG_AUTH else 0):
        raise HeartbeatError("trailing bytes after heartbeat")


def _name(raw: bytes) -> str:
    try:
        name = raw.decode()
    except UnicodeDecodeError as exc:
        raise HeartbeatError("node name is not UTF-8") from exc
    if not name:
        raise HeartbeatError("empty node name")
    return name


def encode_accusation(acc: Accusation, key: bytes | None = None) -> bytes:
    accuser, subject = acc.accuser.encode(), acc.subject.encode()
    if not (0 < len(accuser) <= 255 and 0 < len(subject) <= 255):
        raise HeartbeatError("node names must be 1..255 bytes")
    body = (
        _ACCUSE_HEAD.pack(
            MAGIC_ACCUSE,
            FLAG_AUTH if key else 0,
            len(accuser),
            len(subject),
            acc.incarnation,
            acc.sequence,
            acc.subject_incarnation,
            acc.subject_sequence,
        )
        + accuser
        + subject
    )
    return _sealed(body, key)


def decode_accusation(data: bytes, key: bytes | None = None) -> Accusation:
    """Decode and authenticate; raises :class:`HeartbeatError` (only)."""
    if len(data) < _ACCUSE_HEAD.size or data[:4] != MAGIC_ACCUSE:
        raise HeartbeatError(f"not a teapot-lb accusation ({len(data)} bytes, or bad magic)")
    _, flags, a_len, s_len, inc, seq, s_inc, s_seq = _ACCUSE_HEAD.unpack_from(data)
    end = _ACCUSE_HEAD.size + a_len + s_len
    if len(data) < end:
        raise HeartbeatError("truncated accusation")
    _authenticate(data, end, flags, key)
    accuser = _name(data[_ACCUSE_HEAD.size : _ACCUSE_HEAD.size + a_len])
    subject = _name(data[_ACCUSE_HEAD.size + a_len : end])
    return Accusation(accuser, inc, seq, subject, s_inc, s_seq)
