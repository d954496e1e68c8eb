"""Adj-RIB-Out and Adj-RIB-In (RFC 4271 §3.2), pure.

The Adj-RIB-Out holds what the caller wants advertised (prefix → :class:`RouteAttributes`)
and what was sent; :meth:`AdjRibOut.updates` returns the minimal UPDATEs that move the
peer from one to the other, packing all prefixes with identical attributes into as few
4096-byte messages as possible. Prefixes are kept in their NLRI encoding (bytes) so the
hot path is dict scans and ``bytes.join``; the encoding is done once per
:func:`compile_routes`, shared by every peer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address

from .wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    UPDATE_ROOM,
    AsPath,
    Attribute,
    Communities,
    Context,
    Family,
    LargeCommunities,
    LargeCommunity,
    LocalPref,
    MultiExitDisc,
    NextHop,
    Origin,
    OriginCode,
    Prefix,
    pack_update,
)
from .wire.aspath import As4Path, Segment, SegmentType
from .wire.attribute import EXTENDED_LENGTH, OPTIONAL, AttrType, UnknownAttribute
from .wire.family import Address
from .wire.mp import pack_mp_reach_value, pack_mp_unreach_value
from .wire.nlri import decode_prefix

DEFAULT_LOCAL_PREF = 100


@dataclass(frozen=True, slots=True)
class RouteAttributes:
    """What to advertise with a prefix; per-peer details are applied at export."""

    next_hop: Address | None = None  # None: next-hop self (the session's local address)
    communities: tuple[int, ...] = ()
    large_communities: tuple[LargeCommunity, ...] = ()
    local_pref: int | None = None  # sent to iBGP peers only (default 100 there)
    med: int | None = None
    origin: int = OriginCode.IGP
    as_path: tuple[int, ...] = ()  # after our own ASN on eBGP sessions


DEFAULT_ATTRIBUTES = RouteAttributes()


@dataclass(frozen=True, slots=True)
class ExportPolicy:
    """What the Adj-RIB-Out needs to know about one established session."""

    local_as: int
    peer_as: int
    four_octet_as: bool = True
    next_hop_v4: IPv4Address | None = None
    next_hop_v6: tuple[IPv6Address, ...] = ()  # global, then optionally link-local
    families: frozenset[Family] = frozenset({IPV4_UNICAST, IPV6_UNICAST})

    @property
    def ibgp(self) -> bool:
        return self.local_as == self.peer_as


# ---------------------------------------------------------------------------- compiled routes

_HEADS = tuple(bytes((n,)) for n in range(129))


def encode_prefix(prefix: Prefix) -> bytes:
    plen = prefix.prefixlen
    packed = prefix.network_address.packed
    if plen == 32 and len(packed) == 4:
        return b"\x20" + packed
    return _HEADS[plen] + packed[: (plen + 7) >> 3]


@dataclass(frozen=True, slots=True)
class CompiledRoutes:
    """Desired routes in wire form: per family, NLRI encoding → attributes."""

    by_family: Mapping[Family, Mapping[bytes, RouteAttributes]]

    def __len__(self) -> int:
        return sum(len(t) for t in self.by_family.values())


def compile_routes(routes: Mapping[Prefix, RouteAttributes | None]) -> CompiledRoutes:
    """Encode the prefixes once; ``None`` attributes mean the defaults."""
    v4: dict[bytes, RouteAttributes] = {}
    v6: dict[bytes, RouteAttributes] = {}
    for prefix, attrs in routes.items():
        (v4 if prefix.version == 4 else v6)[encode_prefix(prefix)] = attrs or DEFAULT_ATTRIBUTES
    return CompiledRoutes({IPV4_UNICAST: v4, IPV6_UNICAST: v6})


EMPTY_ROUTES = CompiledRoutes({IPV4_UNICAST: {}, IPV6_UNICAST: {}})


# ---------------------------------------------------------------------------- Adj-RIB-Out


class AdjRibOut:
    """Desired routes vs. routes sent to one peer; emits the difference as UPDATEs."""

    def __init__(self) -> None:
        self._desired: CompiledRoutes = EMPTY_ROUTES
        self._sent: dict[Family, dict[bytes, RouteAttributes]] = {}

    def set_desired(self, routes: CompiledRoutes) -> None:
        self._desired = routes

    @property
    def desired(self) -> CompiledRoutes:
        return self._desired

    def sent_count(self, family: Family | None = None) -> int:
        if family is not None:
            return len(self._sent.get(family, ()))
        return sum(len(t) for t in self._sent.values())

    def reset(self) -> None:
        """The session went down: nothing is advertised any more."""
        self._sent = {}

    def updates(self, export: ExportPolicy) -> list[bytes]:
        """The UPDATE messages that bring the peer from what was sent to what is desired."""
        out: list[bytes] = []
        for family in (IPV4_UNICAST, IPV6_UNICAST):
            if family not in export.families:
                continue
            desired = self._desired.by_family.get(family, {})
            sent = self._sent.get(family)
            if not sent:
                if not desired:
                    continue
                groups = _group(desired.items())
                withdrawn: list[bytes] = []
            else:
                withdrawn = [enc for enc in sent if enc not in desired]
                groups = _group(
                    (enc, attrs)
                    for enc, attrs in desired.items()
                    if (prev := sent.get(enc)) is not attrs and prev != attrs
                )
            if withdrawn:
                out.extend(pack_withdrawals(family, withdrawn))
            for attrs, encs in groups:
                out.extend(pack_announcements(family, attrs, encs, export))
            self._sent[family] = dict(desired)
        return out

    def withdraw_all(self, export: ExportPolicy) -> list[bytes]:
        """UPDATEs withdrawing everything sent (graceful stop)."""
        out: list[bytes] = []
        for family, sent in self._sent.items():
            if sent and family in export.families:
                out.extend(pack_withdrawals(family, list(sent)))
        self._sent = {}
        return out


def _group(
    items: Iterable[tuple[bytes, RouteAttributes]],
) -> list[tuple[RouteAttributes, list[bytes]]]:
    """Group encodings by attributes: by identity first (cheap), then merge equal ones."""
    by_id: dict[int, tuple[RouteAttributes, list[bytes]]] = {}
    for enc, attrs in items:
        slot = by_id.get(id(attrs))
        if slot is None:
            by_id[id(attrs)] = (attrs, [enc])
        else:
            slot[1].append(enc)
    merged: dict[RouteAttributes, list[bytes]] = {}
    for attrs, encs in by_id.values():
        have = merged.get(attrs)
        if have is None:
            merged[attrs] = encs
        else:
            have.extend(encs)
    return list(merged.items())


def _chunks(encs: list[bytes], room: int) -> Iterator[bytes]:
    """Cut encodings into runs of at most ``room`` bytes each."""
    if not encs:
        return
    size0 = len(encs[0])
    n = len(encs)
    i = 0
    while i < n:
        # Fast path: a run of equal-size encodings (all /32s, all /128s).
        per = room // size0
        j = min(n, i + per)
        if all(len(e) == size0 for e in encs[i:j]):
            yield b"".join(encs[i:j])
            i = j
            continue
        total = 0
        j = i
        while j < n and total + len(encs[j]) <= room:
            total += len(encs[j])
            j += 1
        yield b"".join(encs[i:j])
        i = j


def pack_withdrawals(family: Family, encs: list[bytes]) -> list[bytes]:
    if family == IPV4_UNICAST:
        return [pack_update(chunk, b"", b"") for chunk in _chunks(encs, UPDATE_ROOM)]
    room = UPDATE_ROOM - 4 - 3  # extended attribute header, AFI/SAFI
    return [
        pack_update(b"", _mp_attr(AttrType.MP_UNREACH_NLRI, pack_mp_unreach_value(family, c)), b"")
        for c in _chunks(encs, room)
    ]


def _mp_attr(tcode: int, value: bytes) -> bytes:
    return struct.pack("!BBH", OPTIONAL | EXTENDED_LENGTH, tcode, len(value)) + value


def export_attributes(attrs: RouteAttributes, export: ExportPolicy) -> list[Attribute]:
    """The path attributes (without next hop) one peer gets for ``attrs``."""
    asns = attrs.as_path if export.ibgp else (export.local_as, *attrs.as_path)
    as_path = AsPath((Segment(SegmentType.AS_SEQUENCE, asns),) if asns else ())
    out: list[Attribute] = [Origin(attrs.origin), as_path]
    if attrs.med is not None:
        out.append(MultiExitDisc(attrs.med))
    if export.ibgp:
        out.append(LocalPref(DEFAULT_LOCAL_PREF if attrs.local_pref is None else attrs.local_pref))
    if attrs.communities:
        out.append(Communities(attrs.communities))
    if not export.four_octet_as and as_path.needs_as4_path():
        out.append(As4Path(as_path.segments))  # RFC 6793 §4.2.2
    if attrs.large_communities:
        out.append(LargeCommunities(attrs.large_communities))
    return out


def pack_announcements(
    family: Family, attrs: RouteAttributes, encs: list[bytes], export: ExportPolicy
) -> list[bytes]:
    ctx = Context(export.four_octet_as)
    common = b"".join(a.pack(ctx) for a in export_attributes(attrs, export))
    if family == IPV4_UNICAST:
        nh = attrs.next_hop if isinstance(attrs.next_hop, IPv4Address) else export.next_hop_v4
        if nh is None:
            raise ValueError("no IPv4 next hop: the session has no local IPv4 address")
        block = common + NextHop(nh).pack(ctx)
        return [pack_update(b"", block, c) for c in _chunks(encs, UPDATE_ROOM - len(block))]
    if isinstance(attrs.next_hop, IPv6Address):
        hops: tuple[IPv6Address, ...] = (attrs.next_hop,)
    else:
        hops = export.next_hop_v6
    if not hops:
        raise ValueError("no IPv6 next hop: the session has no local IPv6 address")
    nh_bytes = b"".join(h.packed for h in hops)
    room = UPDATE_ROOM - len(common) - 4 - (5 + len(nh_bytes))
    return [
        pack_update(
            b"",
            common + _mp_attr(AttrType.MP_REACH_NLRI, pack_mp_reach_value(family, nh_bytes, c)),
            b"",
        )
        for c in _chunks(encs, room)
    ]


# ---------------------------------------------------------------------------- Adj-RIB-In


@dataclass(frozen=True, slots=True)
class ReceivedPath:
    """A received route's next hop and path attributes (MP attributes removed,
    AS4_PATH already merged into AS_PATH)."""

    next_hop: Address | None
    attributes: tuple[Attribute, ...]

    def get(self, cls: type[Attribute]) -> Attribute | None:
        for a in self.attributes:
            if type(a) is cls:
                return a
        return None

    @property
    def as_path(self) -> tuple[int, ...]:
        a = self.get(AsPath)
        return a.asns() if isinstance(a, AsPath) else ()

    @property
    def communities(self) -> tuple[int, ...]:
        a = self.get(Communities)
        return a.values if isinstance(a, Communities) else ()

    @property
    def large_communities(self) -> tuple[LargeCommunity, ...]:
        a = self.get(LargeCommunities)
        return a.values if isinstance(a, LargeCommunities) else ()

    @property
    def local_pref(self) -> int | None:
        a = self.get(LocalPref)
        return a.value if isinstance(a, LocalPref) else None

    @property
    def med(self) -> int | None:
        a = self.get(MultiExitDisc)
        return a.value if isinstance(a, MultiExitDisc) else None

    def forwardable(self) -> tuple[Attribute, ...]:
        """Attributes as passed on: unknown transitive ones with Partial set."""
        out: list[Attribute] = []
        for a in self.attributes:
            if isinstance(a, UnknownAttribute):
                fwd = a.forwarded()
                if fwd is not None:
                    out.append(fwd)
            else:
                out.append(a)
        return tuple(out)


@dataclass
class AdjRibIn:
    """Routes received from one peer, with graceful-restart stale marking (RFC 4724)."""

    routes: dict[Prefix, ReceivedPath] = field(default_factory=dict)
    stale: set[Prefix] = field(default_factory=set)

    def learn(self, routes: Iterable[tuple[Prefix, ReceivedPath]]) -> None:
        if not self.stale:
            self.routes.update(routes)
            return
        for prefix, path in routes:
            self.routes[prefix] = path
            self.stale.discard(prefix)

    def withdraw(self, prefixes: Iterable[Prefix]) -> list[Prefix]:
        """Remove prefixes; returns those that were present."""
        gone = []
        for p in prefixes:
            if self.routes.pop(p, None) is not None:
                gone.append(p)
                self.stale.discard(p)
        return gone

    def mark_stale(self, family: Family | None = None) -> int:
        """Keep routes but mark them stale (peer restarting); returns how many."""
        for p in self.routes:
            if family is None or (p.version == 4) == (family == IPV4_UNICAST):
                self.stale.add(p)
        return len(self.stale)

    def sweep_stale(self, family: Family | None = None) -> list[Prefix]:
        """Drop stale routes not refreshed (End-of-RIB received or restart timer expired)."""
        gone = [
            p for p in self.stale if family is None or (p.version == 4) == (family == IPV4_UNICAST)
        ]
        for p in gone:
            self.routes.pop(p, None)
            self.stale.discard(p)
        return gone

    def clear(self) -> list[Prefix]:
        gone = list(self.routes)
        self.routes.clear()
        self.stale.clear()
        return gone


def decode_encodings(encs: Iterable[bytes], family: Family) -> list[Prefix]:
    """Prefixes back from NLRI encodings (tests and diagnostics)."""
    return [decode_prefix(e, family.afi) for e in encs]
