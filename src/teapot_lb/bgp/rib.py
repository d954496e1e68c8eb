"""Adj-RIB-Out and Adj-RIB-In (RFC 4271 §3.2), pure.

The Adj-RIB-Out holds what the caller wants advertised (prefix → :class:`RouteAttributes`)
and what was sent; :meth:`AdjRibOut.updates` returns the minimal UPDATEs that move the
peer from one to the other (after the peer's export filter), packing all prefixes with
identical attributes into as few 4096-byte messages as possible. The Adj-RIB-In holds what
the peer sent and its import filter accepted, and why the rest was rejected.

Both keep prefixes in their NLRI encoding (bytes), per family, so the hot paths are dict
operations and ``bytes.join``: no ``ipaddress`` object is built until someone asks
(:attr:`AdjRibIn.routes`, :meth:`AdjRibIn.get`). The export encoding is done once per
:func:`compile_routes`, shared by every peer.

ADD-PATH (RFC 7911): for a family where it was negotiated, the keys are the Path
Identifier followed by the prefix's encoding, so each path of a prefix is diffed, sent and
withdrawn on its own; the packing code does not know the difference. A prefix with several
paths (:class:`~.attributes.Paths`) gives a peer without ADD-PATH its first path only.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from ipaddress import IPv4Address, IPv6Address, ip_network
from typing import TypeAlias, TypeVar, cast

from .attributes import DEFAULT_ATTRIBUTES, Desired, Paths, ReceivedPath, RouteAttributes
from .policy import ACCEPT_ALL, Filter, Judged, Rejected
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
    LocalPref,
    MultiExitDisc,
    NextHop,
    Origin,
    Prefix,
    pack_path_id,
    pack_update,
)
from .wire.aspath import As4Path, Segment, SegmentType
from .wire.attribute import EXTENDED_LENGTH, OPTIONAL, AttrType
from .wire.family import family_of
from .wire.mp import pack_mp_reach_value, pack_mp_unreach_value
from .wire.nlri import PATH_ID_LENGTH, decode_nlri, decode_path

__all__ = [
    "DEFAULT_ATTRIBUTES",
    "EMPTY_ROUTES",
    "AdjRibIn",
    "AdjRibOut",
    "CompiledRoutes",
    "ExportContext",
    "Paths",
    "PrefixKey",
    "ReceivedPath",
    "RouteAttributes",
    "as_prefix",
    "compile_routes",
    "decode_encodings",
    "encode_prefix",
    "export_attributes",
    "pack_announcements",
    "pack_withdrawals",
    "path_id",
    "path_ids",
]

DEFAULT_LOCAL_PREF = 100


@dataclass(frozen=True, slots=True)
class ExportContext:
    """What the Adj-RIB-Out needs to know about one established session (the protocol's
    part of export: our ASN on eBGP, next-hop self, LOCAL_PREF towards iBGP only); what a
    peer gets is the export filter's part (:mod:`.policy`)."""

    local_as: int
    peer_as: int
    four_octet_as: bool = True
    next_hop_v4: IPv4Address | None = None
    next_hop_v6: tuple[IPv6Address, ...] = ()  # global, then optionally link-local
    families: frozenset[Family] = frozenset({IPV4_UNICAST, IPV6_UNICAST})
    add_path: frozenset[Family] = frozenset()  # send every path, with Path Identifiers

    @property
    def ibgp(self) -> bool:
        return self.local_as == self.peer_as


# ---------------------------------------------------------------------------- compiled routes

# What the desired routes are keyed by: a network, or its text (as ``ip_network`` reads
# it). A caller holding 100k prefixes as text (the node speaker's plan) hands the text:
# a network object per route weighs ~340 bytes more, and is parsed here, once per
# compile, only to be encoded.
PrefixKey: TypeAlias = Prefix | str


_K = TypeVar("_K", bound=PrefixKey)  # a mapping's key type is invariant


def as_prefix(key: PrefixKey) -> Prefix:
    return ip_network(key) if isinstance(key, str) else key


_HEADS = tuple(bytes((n,)) for n in range(129))


def encode_prefix(prefix: Prefix) -> bytes:
    plen = prefix.prefixlen
    packed = prefix.network_address.packed
    if plen == 32 and len(packed) == 4:
        return b"\x20" + packed
    return _HEADS[plen] + packed[: (plen + 7) >> 3]


_MAX_PATH_ID = 0xFFFFFFFF


def path_id(key: str) -> int:
    """A path's Path Identifier, from its key alone (1..2^32-1): the same after a restart,
    so a graceful restart re-announces the paths the peer kept as stale. A prefix's only
    path (key ``""``) gets 1."""
    return zlib.crc32(key.encode()) % _MAX_PATH_ID + 1


def path_ids(keys: Sequence[str]) -> list[int]:
    """Path Identifiers of one prefix's paths (keys in order), distinct (RFC 7911 §3):
    a key whose identifier is taken (a CRC collision) takes the next free one."""
    used: set[int] = set()
    out: list[int] = []
    for key in keys:
        pid = path_id(key)
        while pid in used:
            pid = pid % _MAX_PATH_ID + 1
        used.add(pid)
        out.append(pid)
    return out


_SINGLE_PATH_ID = pack_path_id(path_id(""))


@lru_cache(maxsize=16384)
def _packed_path_ids(keys: tuple[str, ...]) -> tuple[bytes, ...]:
    # Many prefixes share one set of keys (a tenant's backends): compute their ids once.
    return tuple(pack_path_id(pid) for pid in path_ids(keys))


@dataclass(frozen=True, slots=True)
class CompiledRoutes:
    """Desired routes in wire form: per family, NLRI encoding → attributes (one path per
    prefix: what a peer without ADD-PATH gets); ``multipath``: the prefixes with several
    paths; :meth:`with_path_ids`: every path, for ADD-PATH peers."""

    by_family: Mapping[Family, Mapping[bytes, RouteAttributes]]
    multipath: Mapping[Family, Mapping[bytes, Paths]] = field(default_factory=dict)
    _with_ids: dict[Family, Mapping[bytes, RouteAttributes]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __len__(self) -> int:
        return sum(len(t) for t in self.by_family.values())

    def with_path_ids(self, family: Family) -> Mapping[bytes, RouteAttributes]:
        """Every path of ``family``, keyed by Path Identifier + NLRI encoding (computed
        once, shared by every ADD-PATH peer)."""
        have = self._with_ids.get(family)
        if have is not None:
            return have
        multi = self.multipath.get(family, {})
        out: dict[bytes, RouteAttributes] = {}
        for enc, attrs in self.by_family.get(family, {}).items():
            paths = multi.get(enc)
            if paths is None:
                out[_SINGLE_PATH_ID + enc] = attrs
                continue
            for pid, (_, path) in zip(_packed_path_ids(paths.keys()), paths.by_key, strict=True):
                out[pid + enc] = path
        self._with_ids[family] = out
        return out

    def prefix_paths(self, family: Family, enc: bytes) -> list[tuple[bytes, RouteAttributes]]:
        """One prefix's paths keyed as :meth:`with_path_ids` keys them (empty: the prefix
        is not desired)."""
        return list(self.paths_of(family, (enc,)).items())

    def paths_of(self, family: Family, encs: Iterable[bytes]) -> dict[bytes, RouteAttributes]:
        """Some prefixes' paths keyed as :meth:`with_path_ids` keys them (prefixes not
        desired are left out)."""
        table = self.by_family.get(family, {})
        multi = self.multipath.get(family, {})
        out: dict[bytes, RouteAttributes] = {}
        for enc in encs:
            attrs = table.get(enc)
            if attrs is None:
                continue
            paths = multi.get(enc)
            if paths is None:
                out[_SINGLE_PATH_ID + enc] = attrs
                continue
            pids = _packed_path_ids(paths.keys())
            for pid, (_, path) in zip(pids, paths.by_key, strict=True):
                out[pid + enc] = path
        return out


def compile_routes(routes: Mapping[_K, Desired | None]) -> CompiledRoutes:
    """Encode the prefixes once; ``None`` attributes mean the defaults."""
    v4: dict[bytes, RouteAttributes] = {}
    v6: dict[bytes, RouteAttributes] = {}
    multi: dict[Family, dict[bytes, Paths]] = {}
    for key, attrs in routes.items():
        prefix = as_prefix(key)
        enc = encode_prefix(prefix)
        table = v4 if prefix.version == 4 else v6
        if isinstance(attrs, Paths):
            for _, path in attrs.by_key:
                _check_next_hop(prefix, path)
            multi.setdefault(family_of(prefix), {})[enc] = attrs
            table[enc] = attrs.first()
        else:
            if attrs is not None and attrs.next_hop is not None:
                _check_next_hop(prefix, attrs)
            table[enc] = attrs or DEFAULT_ATTRIBUTES
    return CompiledRoutes({IPV4_UNICAST: v4, IPV6_UNICAST: v6}, multi)


def change_compiled(
    routes: CompiledRoutes,
    desired: Mapping[_K, Desired | None],
    withdrawn: Iterable[PrefixKey],
) -> dict[Family, set[bytes]]:
    """Change ``routes`` in place for some prefixes only (``desired``: set them, ``None``
    meaning the defaults; ``withdrawn``: drop them), as :func:`compile_routes` would have
    compiled them; returns the encodings changed per family (what
    :meth:`AdjRibOut.set_desired` wants to diff only those). ``routes`` must be a table
    :func:`compile_routes` made (its dicts are changed), not :data:`EMPTY_ROUTES`."""
    changed: dict[Family, set[bytes]] = {}
    tables = cast(dict[Family, dict[bytes, RouteAttributes]], routes.by_family)
    multi = cast(dict[Family, dict[bytes, Paths]], routes.multipath)

    def single(family: Family, enc: bytes) -> None:
        paths = multi.get(family)
        if paths is not None and paths.pop(enc, None) is not None and not paths:
            del multi[family]  # as compile_routes: no family without several-path prefixes

    def touch(prefix: Prefix) -> tuple[Family, bytes]:
        family, enc = family_of(prefix), encode_prefix(prefix)
        ids = routes._with_ids.get(family)
        if ids is not None:  # drop the prefix's paths; put back below if still desired
            for key, _ in routes.prefix_paths(family, enc):
                cast(dict[bytes, RouteAttributes], ids).pop(key, None)
        changed.setdefault(family, set()).add(enc)
        return family, enc

    for key in withdrawn:
        family, enc = touch(as_prefix(key))
        tables.setdefault(family, {}).pop(enc, None)
        single(family, enc)
    for key, attrs in desired.items():
        prefix = as_prefix(key)
        family, enc = touch(prefix)
        table = tables.setdefault(family, {})
        if isinstance(attrs, Paths):
            for _, path in attrs.by_key:
                _check_next_hop(prefix, path)
            multi.setdefault(family, {})[enc] = attrs
            table[enc] = attrs.first()
        else:
            if attrs is not None and attrs.next_hop is not None:
                _check_next_hop(prefix, attrs)
            single(family, enc)
            table[enc] = attrs or DEFAULT_ATTRIBUTES
        ids = routes._with_ids.get(family)
        if ids is not None:
            cast(dict[bytes, RouteAttributes], ids).update(routes.prefix_paths(family, enc))
    return changed


def _check_next_hop(prefix: Prefix, attrs: RouteAttributes) -> None:
    """A next hop of the other family would be replaced by next-hop self at export, which
    for a third-party next hop sends the traffic to the wrong machine: refuse it."""
    hop = attrs.next_hop
    if hop is not None and hop.version != prefix.version:
        raise ValueError(f"route {prefix}: next hop {hop} is not of the prefix's family")


EMPTY_ROUTES = CompiledRoutes({IPV4_UNICAST: {}, IPV6_UNICAST: {}})


# ---------------------------------------------------------------------------- Adj-RIB-Out


class AdjRibOut:
    """Desired routes vs. routes sent to one peer; emits the difference as UPDATEs.

    ``export_filter`` decides, per prefix, what of the desired routes the peer gets (and
    with which attributes); :attr:`rejected` says why the others are held back.

    A caller that knows which prefixes changed (a relay's table, 200,000 paths of which a
    few change at a time) says so in :meth:`set_desired`; :meth:`updates` then diffs only
    those prefixes, so its cost follows the change, not the table. Without that hint (and
    after a reset, a new export context or filter) the whole table is diffed.
    """

    def __init__(self, export_filter: Filter = ACCEPT_ALL) -> None:
        self._export_filter = export_filter
        self._desired: CompiledRoutes = EMPTY_ROUTES
        self._sent: dict[Family, dict[bytes, RouteAttributes]] = {}
        self.rejected: dict[Family, dict[bytes, Rejected]] = {}
        self._add_path: frozenset[Family] = frozenset()  # of the last updates()
        # Prefixes (encodings, without Path Identifier) to diff; None: the whole table.
        self._dirty: dict[Family, set[bytes]] | None = None
        # ADD-PATH families: prefix → the keys sent for it (built on first need).
        self._sent_keys: dict[Family, dict[bytes, list[bytes]]] = {}

    @property
    def export_filter(self) -> Filter:
        return self._export_filter

    @export_filter.setter
    def export_filter(self, value: Filter) -> None:
        self._export_filter = value
        self._dirty = None

    def set_desired(
        self, routes: CompiledRoutes, changed: Mapping[Family, Iterable[bytes]] | None = None
    ) -> None:
        """What the peer should have. ``changed``: the prefixes (NLRI encodings) that may
        differ from the routes given before, if the caller knows; None: any may."""
        self._desired = routes
        if changed is None:
            self._dirty = None
        elif self._dirty is not None:
            for family, encs in changed.items():
                self._dirty.setdefault(family, set()).update(encs)

    @property
    def desired(self) -> CompiledRoutes:
        return self._desired

    def sent_count(self, family: Family | None = None) -> int:
        """Paths advertised (with ADD-PATH a prefix counts once per path)."""
        if family is not None:
            return len(self._sent.get(family, ()))
        return sum(len(t) for t in self._sent.values())

    def advertised(self, family: Family) -> Mapping[bytes, RouteAttributes]:
        """What the peer was sent of ``family`` (keys with Path Identifiers under ADD-PATH)."""
        return self._sent.get(family, {})

    def reset(self) -> None:
        """The session went down: nothing is advertised any more."""
        self._sent = {}
        self._sent_keys = {}
        self._dirty = None

    def why_not(self, prefix: Prefix) -> Rejected | None:
        """Why the export filter holds ``prefix`` back (None: it does not; under ADD-PATH,
        the first of its paths held back)."""
        family = family_of(prefix)
        enc = encode_prefix(prefix)
        table = self.rejected.get(family, {})
        if family in self._add_path:
            return next((why for k, why in table.items() if k[PATH_ID_LENGTH:] == enc), None)
        return table.get(enc)

    def _exported(self, family: Family, add_path: bool) -> Mapping[bytes, RouteAttributes]:
        """The desired routes of ``family`` as the export filter lets them out."""
        routes = self._desired
        desired = routes.with_path_ids(family) if add_path else routes.by_family.get(family, {})
        if self._export_filter.accepts_all:
            self.rejected.pop(family, None)
            return desired
        self.rejected[family] = {}
        return self._judged(family, desired, add_path)

    def _judged(
        self, family: Family, desired: Mapping[bytes, RouteAttributes], add_path: bool
    ) -> dict[bytes, RouteAttributes]:
        """What the export filter lets out of ``desired`` (the rest noted in :attr:`rejected`)."""
        out: dict[bytes, RouteAttributes] = {}
        rejected = self.rejected.setdefault(family, {})
        for attrs, encs in _group(desired.items()):
            judged = self._export_filter.judge_batch(family, encs, attrs, add_path=add_path)
            for path, accepted in judged.accepted:
                out.update(dict.fromkeys(accepted, path))
            for why, held in judged.rejected:
                rejected.update(dict.fromkeys(held, why))
        return out

    def _exported_some(
        self, family: Family, encs: Iterable[bytes], add_path: bool, held: list[bytes]
    ) -> dict[bytes, RouteAttributes]:
        """:meth:`_exported` for some prefixes only; ``held``: their keys sent so far."""
        routes = self._desired
        desired: dict[bytes, RouteAttributes] = {}
        if add_path:
            desired = routes.paths_of(family, encs)
        else:
            table = routes.by_family.get(family, {})
            desired = {enc: a for enc in encs if (a := table.get(enc)) is not None}
        if self._export_filter.accepts_all:
            return desired
        rejected = self.rejected.setdefault(family, {})
        for key in (*held, *desired):
            rejected.pop(key, None)
        return self._judged(family, desired, add_path)

    def _sent_index(self, family: Family) -> dict[bytes, list[bytes]]:
        index = self._sent_keys.get(family)
        if index is None:
            index = self._sent_keys[family] = {}
            for key in self._sent.get(family, {}):
                index.setdefault(key[PATH_ID_LENGTH:], []).append(key)
        return index

    def _changes(
        self, family: Family, encs: set[bytes], add_path: bool
    ) -> tuple[list[bytes], list[tuple[bytes, RouteAttributes]]]:
        """Withdrawals and announcements for the prefixes ``encs`` only (and the sent
        table brought up to date for them)."""
        sent = self._sent.setdefault(family, {})
        if add_path:
            index = self._sent_index(family)
            held = [k for enc in encs for k in index.pop(enc, ())]
        else:
            held = [enc for enc in encs if enc in sent]
        desired = self._exported_some(family, encs, add_path, held)
        withdrawn = [k for k in held if k not in desired]
        # A new path (no previous) is not compared: None != a asks the dataclass first.
        changed = [
            (k, a)
            for k, a in desired.items()
            if (prev := sent.get(k)) is None or (prev is not a and prev != a)
        ]
        for key in withdrawn:
            del sent[key]
        sent.update(changed)
        if add_path:
            for key in desired:
                index.setdefault(key[PATH_ID_LENGTH:], []).append(key)
        return withdrawn, changed

    def updates(self, export: ExportContext) -> list[bytes]:
        """The UPDATE messages that bring the peer from what was sent to what is desired."""
        out: list[bytes] = []
        dirty = self._dirty if export.add_path == self._add_path else None
        self._add_path = export.add_path
        self._dirty = {}
        for family in (IPV4_UNICAST, IPV6_UNICAST):
            if family not in export.families:
                continue
            if dirty is not None:
                some = dirty.get(family)
                if some:
                    gone, changed = self._changes(family, some, family in export.add_path)
                    if gone:
                        out.extend(pack_withdrawals(family, sorted(gone)))
                    for attrs, keys in _group(changed):
                        # In address order (the changed set's is a hash's): a router
                        # installs a burst in address order at about 3/4 of the CPU
                        # (its FIB's and the kernel's tries; bench/relay.py).
                        keys.sort()
                        out.extend(pack_announcements(family, attrs, keys, export))
                continue
            self._sent_keys.pop(family, None)
            desired = self._exported(family, family in export.add_path)
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

    def withdraw_all(self, export: ExportContext) -> list[bytes]:
        """UPDATEs withdrawing everything sent (graceful stop)."""
        out: list[bytes] = []
        for family, sent in self._sent.items():
            if sent and family in export.families:
                out.extend(pack_withdrawals(family, list(sent)))
        self.reset()
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


def export_attributes(attrs: RouteAttributes, export: ExportContext) -> list[Attribute]:
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
    family: Family, attrs: RouteAttributes, encs: list[bytes], export: ExportContext
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

_FAMILIES = (IPV4_UNICAST, IPV6_UNICAST)


class AdjRibIn:
    """Routes received from one peer that its import filter accepted, by NLRI encoding per
    family; graceful-restart stale marks (RFC 4724); why each filtered route was rejected."""

    def __init__(self, import_filter: Filter = ACCEPT_ALL) -> None:
        self.import_filter = import_filter
        # Families received with Path Identifiers (RFC 7911): their keys start with one.
        self.add_path: frozenset[Family] = frozenset()
        self.tables: dict[Family, dict[bytes, ReceivedPath]] = {f: {} for f in _FAMILIES}
        self.stale_marks: dict[Family, set[bytes]] = {f: set() for f in _FAMILIES}
        # Like BIRD's "import keep filtered", but only the reason is kept, not the route.
        self.filtered: dict[Family, dict[bytes, Rejected]] = {f: {} for f in _FAMILIES}
        self.rejections: Counter[str] = Counter()  # routes rejected, by reason (metrics)

    def __len__(self) -> int:
        return sum(len(t) for t in self.tables.values())

    # -- objects, on demand -------------------------------------------------------------------

    @property
    def routes(self) -> dict[Prefix, ReceivedPath]:
        """Every route with its prefix decoded (O(n): for explain, tools and tests); of a
        prefix received with several paths (ADD-PATH), the one with the lowest Path
        Identifier (all of them: :attr:`paths`)."""
        out: dict[Prefix, ReceivedPath] = {}
        for family, table in self.tables.items():
            items: Iterable[tuple[bytes, ReceivedPath]] = table.items()
            if family in self.add_path:
                items = sorted(items, key=lambda kv: kv[0][:PATH_ID_LENGTH], reverse=True)
            encs, paths = zip(*items, strict=True) if table else ((), ())
            decoded = decode_nlri(encs, family.afi, family in self.add_path)
            out.update(zip(decoded, paths, strict=True))
        return out

    @property
    def paths(self) -> list[tuple[Prefix, int | None, ReceivedPath]]:
        """Every path: prefix, Path Identifier (None without ADD-PATH), path (O(n))."""
        out: list[tuple[Prefix, int | None, ReceivedPath]] = []
        for family, table in self.tables.items():
            for enc, path in table.items():
                if family in self.add_path:
                    pid, prefix = decode_path(enc, family.afi)
                    out.append((prefix, pid, path))
                else:
                    out.append((decode_nlri((enc,), family.afi, False)[0], None, path))
        return out

    @property
    def stale(self) -> set[Prefix]:
        return {
            p
            for f, marks in self.stale_marks.items()
            for p in decode_nlri(marks, f.afi, f in self.add_path)
        }

    def _keys(self, table: Mapping[bytes, object], prefix: Prefix) -> list[bytes]:
        """The keys of ``prefix`` in one of the family tables (each path's under ADD-PATH)."""
        family = family_of(prefix)
        enc = encode_prefix(prefix)
        if family in self.add_path:
            return sorted(k for k in table if k[PATH_ID_LENGTH:] == enc)
        return [enc] if enc in table else []

    def get(self, prefix: Prefix) -> ReceivedPath | None:
        table = self.tables[family_of(prefix)]
        keys = self._keys(table, prefix)
        return table[keys[0]] if keys else None

    def why_not(self, prefix: Prefix) -> Rejected | None:
        """Why the import filter rejected ``prefix`` (None: it did not, or never saw it)."""
        table = self.filtered[family_of(prefix)]
        keys = self._keys(table, prefix)
        return table[keys[0]] if keys else None

    # -- the receive path ----------------------------------------------------------------------

    def learn(
        self, family: Family, encodings: Iterable[bytes], path: ReceivedPath
    ) -> Judged[ReceivedPath]:
        """Prefixes announced with ``path``, through the import filter. A rejected prefix
        replaces (removes) any earlier path for it, as the new announcement does."""
        table = self.tables[family]
        stale = self.stale_marks[family]
        filtered = self.filtered[family]
        judged = self.import_filter.judge_batch(
            family, encodings, path, add_path=family in self.add_path
        )
        for accepted_path, encs in judged.accepted:
            if len(judged.accepted) == 1 and not judged.rejected:
                table.update(dict.fromkeys(encs, accepted_path))
            else:
                for enc in encs:
                    table[enc] = accepted_path
            if stale:
                stale.difference_update(encs)
            if filtered:
                for enc in encs:
                    filtered.pop(enc, None)
        for why, encs in judged.rejected:
            for enc in encs:
                table.pop(enc, None)
            filtered.update(dict.fromkeys(encs, why))
            if stale:
                stale.difference_update(encs)
            self.rejections[why.reason] += len(encs)
        return judged

    def withdraw(self, family: Family, encodings: Sequence[bytes]) -> list[bytes]:
        """Remove prefixes; returns those that were present."""
        table = self.tables[family]
        filtered = self.filtered[family]
        gone = [enc for enc in encodings if table.pop(enc, None) is not None]
        if filtered:
            for enc in encodings:
                filtered.pop(enc, None)
        stale = self.stale_marks[family]
        if stale:
            stale.difference_update(gone)
        return gone

    # -- graceful restart ----------------------------------------------------------------------

    def mark_stale(self, family: Family | None = None) -> int:
        """Keep routes but mark them stale (peer restarting); returns how many are stale."""
        for f in _FAMILIES if family is None else (family,):
            self.stale_marks[f].update(self.tables[f])
        return sum(len(m) for m in self.stale_marks.values())

    def sweep_stale(self, family: Family | None = None) -> dict[Family, list[bytes]]:
        """Drop stale routes not refreshed (End-of-RIB received or restart timer expired)."""
        out: dict[Family, list[bytes]] = {}
        for f in _FAMILIES if family is None else (family,):
            marks = self.stale_marks[f]
            if marks:
                table = self.tables[f]
                for enc in marks:
                    table.pop(enc, None)
                out[f] = list(marks)
                marks.clear()
        return out

    def clear(self, family: Family | None = None) -> dict[Family, list[bytes]]:
        """Drop every route (of ``family``); returns what was dropped."""
        families = _FAMILIES if family is None else (family,)
        out = {f: list(self.tables[f]) for f in families if self.tables[f]}
        for f in families:
            self.tables[f].clear()
            self.stale_marks[f].clear()
            self.filtered[f].clear()
        return out


def decode_encodings(encs: Iterable[bytes], family: Family, add_path: bool = False) -> list[Prefix]:
    """Prefixes back from NLRI encodings (tests and diagnostics)."""
    return list(decode_nlri(encs, family.afi, add_path))
