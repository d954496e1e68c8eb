"""The routes a speaker wants advertised, compiled once for every peer: prefixes in their
NLRI encoding per family, with their Path Identifiers (RFC 7911) and attributes."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from ipaddress import ip_network
from typing import TypeAlias, TypeVar, cast

from ..attributes import DEFAULT_ATTRIBUTES, Desired, Paths, RouteAttributes
from ..wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    Family,
    Prefix,
    pack_path_id,
)
from ..wire.family import family_of

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
