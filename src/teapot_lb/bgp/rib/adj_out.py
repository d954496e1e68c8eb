"""Adj-RIB-Out (RFC 4271 §3.2): what one peer was sent, and the minimal UPDATEs that move
it to what is wanted (after its export filter), packed into as few messages as possible."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

from ..attributes import RouteAttributes
from ..policy import ACCEPT_ALL, Filter, Rejected
from ..wire import (
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
    pack_update,
)
from ..wire.aspath import As4Path, Segment, SegmentType
from ..wire.attribute import EXTENDED_LENGTH, OPTIONAL, AttrType
from ..wire.family import family_of
from ..wire.mp import pack_mp_reach_value, pack_mp_unreach_value
from ..wire.nlri import PATH_ID_LENGTH
from .compiled import EMPTY_ROUTES, CompiledRoutes, encode_prefix
from .update_groups import EMPTY_LINEAGE, TAKEN, ExportMemo, FamilyFlush, Flushed, Share

DEFAULT_LOCAL_PREF = 100


@dataclass(frozen=True, slots=True)
class ExportContext:
    """What the Adj-RIB-Out needs to know about one established session (the protocol's
    part of export: our ASN on eBGP, next-hop self, LOCAL_PREF towards iBGP only); what a
    peer gets is the export filter's part (:mod:`teapot_lb.bgp.policy`)."""

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


# ---------------------------------------------------------------------------- Adj-RIB-Out


class AdjRibOut:
    """Desired routes vs. routes sent to one peer; emits the difference as UPDATEs.

    ``export_filter`` decides, per prefix, what of the desired routes the peer gets (and
    with which attributes); :attr:`rejected` says why the others are held back.

    A caller that knows which prefixes changed (a relay's table, 200,000 paths of which a
    few change at a time) says so in :meth:`set_desired`; :meth:`updates` then diffs only
    those prefixes, so its cost follows the change, not the table. Without that hint (and
    after a reset, a new export context or filter) the whole table is diffed.

    With a :attr:`memo` shared by the peers of one speaker, peers in step (the same
    lineage, context and table) compute their UPDATEs once (:mod:`.update_groups`).
    """

    def __init__(self, export_filter: Filter = ACCEPT_ALL) -> None:
        self._export_filter = export_filter
        self._desired: CompiledRoutes = EMPTY_ROUTES
        self._sent: dict[Family, dict[bytes, RouteAttributes]] = {}
        # Families whose sent table other Adj-RIB-Outs of the update group may hold too
        # (the very object: eight routers in step keep one table, not eight): copied
        # before it changes (:meth:`_own`).
        self._lent: dict[Family, Share] = {}
        self.rejected: dict[Family, dict[bytes, Rejected]] = {}
        self._add_path: frozenset[Family] = frozenset()  # of the last updates()
        # Prefixes (encodings, without Path Identifier) to diff; None: the whole table.
        self._dirty: dict[Family, set[bytes]] | None = None
        # ADD-PATH families: prefix → the keys sent for it (built on first need).
        self._sent_keys: dict[Family, dict[bytes, list[bytes]]] = {}
        self.memo: ExportMemo | None = None
        self._lineage: object = EMPTY_LINEAGE  # stands for what was sent (update groups)

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
        if self.memo is not None:
            self.memo.changed()
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
        self._lent = {}
        self._sent_keys = {}
        self._dirty = None
        self._lineage = EMPTY_LINEAGE

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

    def _own(self, family: Family) -> dict[bytes, RouteAttributes]:
        """The sent table of ``family``, to change: a copy of its own first if it was lent
        (the other holders keep the one they have)."""
        sent = self._sent.get(family)
        if sent is None:
            sent = self._sent[family] = {}
        else:
            share = self._lent.pop(family, None)
            if share is not None and share.held:
                sent = self._sent[family] = dict(sent)
        return sent

    def _changes(
        self, family: Family, encs: set[bytes], add_path: bool
    ) -> tuple[list[bytes], list[tuple[bytes, RouteAttributes]]]:
        """Withdrawals and announcements for the prefixes ``encs`` only (and the sent
        table brought up to date for them)."""
        sent = self._own(family)
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
        whole = self._dirty is None or export.add_path != self._add_path
        key = None
        if self.memo is not None and self._export_filter.accepts_all:
            key = (self._lineage, id(self._desired), id(self._export_filter), export, whole)
            flushed = self.memo.get(key)
            if flushed is not None:
                return self._take(flushed, export)
        record: list[FamilyFlush] = []
        out = self._updates(export, record)
        self._lineage = object()
        if key is not None:
            assert self.memo is not None
            self.memo.put(key, Flushed(self._lineage, tuple(record), tuple(out)))
            # The others may take these tables: copied before a change once one has.
            self._lent.update((done.family, done.share) for done in record)
        return out

    def _take(self, flushed: Flushed, export: ExportContext) -> list[bytes]:
        """Another peer of the group computed this flush: apply its changes to the sent
        tables (a cost that follows the change) and send its UPDATEs."""
        self._add_path = export.add_path
        self._dirty = {}
        for done in flushed.families:
            family = done.family
            if done.withdrawn is None:
                assert done.whole is not None
                self._sent_keys.pop(family, None)
                self.rejected.pop(family, None)
                self._sent[family] = done.whole  # shared, not copied
                done.share.taken = True
                self._lent[family] = TAKEN
                continue
            before = self._sent.get(family)
            # The computing peer held the very table this one holds: take its new one.
            adopt = before is done.before and done.after is not None and done.after is not before
            sent = {} if before is None else before
            index = self._sent_keys.get(family)
            if index is not None:
                for key in done.withdrawn:
                    keys = index[key[PATH_ID_LENGTH:]]
                    keys.remove(key)
                    if not keys:
                        del index[key[PATH_ID_LENGTH:]]
                for key, _ in done.changed:
                    if key not in sent:
                        index.setdefault(key[PATH_ID_LENGTH:], []).append(key)
            if adopt:
                assert done.after is not None
                self._sent[family] = done.after
                done.share.taken = True
                self._lent[family] = TAKEN
                continue
            sent = self._own(family)
            for key in done.withdrawn:
                del sent[key]
            sent.update(done.changed)
        self._lineage = flushed.lineage
        assert self.memo is not None
        self.memo.shared += 1
        return list(flushed.messages)

    def _updates(self, export: ExportContext, record: list[FamilyFlush]) -> list[bytes]:
        """:meth:`updates` computed here; what it did to the sent tables in ``record``."""
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
                    before = self._sent.get(family)
                    gone, changed = self._changes(family, some, family in export.add_path)
                    record.append(FamilyFlush(family, tuple(gone), tuple(changed),
                                              before=before, after=self._sent[family]))  # fmt: skip
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
            record.append(FamilyFlush(family, None, whole=self._sent[family]))
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
