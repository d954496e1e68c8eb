"""A route's path attributes: the one type for what goes with a prefix, and its received form.

:class:`RouteAttributes` is what teapot-lb advertises with a prefix (the speaker's
``set_routes``, the announcement plan, a relay re-advertising a tenant's route): plain
values, per-peer details (our ASN, next-hop self, LOCAL_PREF only towards iBGP) are added
at export. :class:`ReceivedPath` is a path as a peer sent it, with its raw attributes kept
so unknown transitive ones can be passed on (RFC 4271 §5); it reads like
:class:`RouteAttributes` (the policy interpreter reads both through :class:`Path`) and
:meth:`ReceivedPath.to_attributes` turns it into one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeAlias

from .wire import (
    AsPath,
    Attribute,
    Communities,
    LargeCommunities,
    LargeCommunity,
    LocalPref,
    MultiExitDisc,
    Origin,
    OriginCode,
)
from .wire.attribute import UnknownAttribute
from .wire.family import Address


class Path(Protocol):
    """What a policy reads of a route, and how it changes one (both types below)."""

    @property
    def next_hop(self) -> Address | None: ...
    @property
    def as_path(self) -> tuple[int, ...]: ...
    @property
    def communities(self) -> tuple[int, ...]: ...
    @property
    def large_communities(self) -> tuple[LargeCommunity, ...]: ...
    @property
    def origin(self) -> int: ...
    @property
    def local_pref(self) -> int | None: ...
    @property
    def med(self) -> int | None: ...
    @property
    def has_as_set(self) -> bool: ...
    @property
    def has_confed(self) -> bool: ...

    def evolve(self, **changes: object) -> Path: ...


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

    @property
    def has_as_set(self) -> bool:
        return False  # a sequence only

    @property
    def has_confed(self) -> bool:
        return False

    def evolve(self, **changes: object) -> RouteAttributes:
        return replace(self, **changes)  # type: ignore[arg-type]


DEFAULT_ATTRIBUTES = RouteAttributes()


@dataclass(frozen=True, slots=True)
class Paths:
    """Several paths for one prefix, each under a key the caller chooses (a backend node's
    name): announced one by one with ADD-PATH (RFC 7911), so a router can spread traffic
    over all of them; typically each with its own third-party ``next_hop`` (RFC 4271
    §5.1.3). A peer without ADD-PATH gets one of them: :meth:`first`, the path whose key
    sorts first. Keys give each path a stable Path Identifier (:func:`.rib.path_ids`), so
    removing one path withdraws that path only."""

    by_key: tuple[tuple[str, RouteAttributes], ...]  # sorted by key, keys unique

    def __post_init__(self) -> None:
        keys = [k for k, _ in self.by_key]
        if not keys:
            raise ValueError("Paths needs at least one path")
        if keys != sorted(set(keys)):
            raise ValueError(f"path keys must be unique and sorted: {keys}")

    @classmethod
    def of(cls, paths: Mapping[str, RouteAttributes]) -> Paths:
        # A mapping's keys are unique, and sorted here: nothing left to check (this runs
        # once per changed prefix in a relay's table of 100,000s).
        out = object.__new__(cls)
        # (key, path) pairs sort by their unique keys: the paths are never compared.
        items = paths.items()
        object.__setattr__(out, "by_key", tuple(items) if len(items) == 1 else tuple(sorted(items)))
        if not out.by_key:
            raise ValueError("Paths needs at least one path")
        return out

    def first(self) -> RouteAttributes:
        """The one path a peer without ADD-PATH gets."""
        return self.by_key[0][1]

    def keys(self) -> tuple[str, ...]:
        return tuple([k for k, _ in self.by_key])


# What a prefix is announced with: one path, or several (ADD-PATH).
Desired: TypeAlias = RouteAttributes | Paths


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
    def has_as_set(self) -> bool:
        """An AS_SET or AS_CONFED_SET segment is in the path (RFC 6472)."""
        a = self.get(AsPath)
        return isinstance(a, AsPath) and any(s.type in (1, 4) for s in a.segments)

    @property
    def has_confed(self) -> bool:
        """An AS_CONFED_SEQUENCE or AS_CONFED_SET segment is in the path (RFC 5065)."""
        a = self.get(AsPath)
        return isinstance(a, AsPath) and a.has_confed()

    @property
    def communities(self) -> tuple[int, ...]:
        a = self.get(Communities)
        return a.values if isinstance(a, Communities) else ()

    @property
    def large_communities(self) -> tuple[LargeCommunity, ...]:
        a = self.get(LargeCommunities)
        return a.values if isinstance(a, LargeCommunities) else ()

    @property
    def origin(self) -> int:
        a = self.get(Origin)
        return a.value if isinstance(a, Origin) else OriginCode.INCOMPLETE

    @property
    def local_pref(self) -> int | None:
        a = self.get(LocalPref)
        return a.value if isinstance(a, LocalPref) else None

    @property
    def med(self) -> int | None:
        a = self.get(MultiExitDisc)
        return a.value if isinstance(a, MultiExitDisc) else None

    def evolve(self, **changes: object) -> ReceivedPath:
        """The same path with some values replaced (``as_path`` cannot be: it is kept
        segment by segment as received)."""
        next_hop = self.next_hop
        attrs = list(self.attributes)
        for name, value in changes.items():
            if name == "next_hop":
                next_hop = value  # type: ignore[assignment]
                continue
            cls, new = _EVOLVE[name](value)
            attrs = [a for a in attrs if type(a) is not cls]
            if new is not None:
                attrs.append(new)
        attrs.sort(key=lambda a: a.type_code())
        return ReceivedPath(next_hop, tuple(attrs))

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

    def to_attributes(self) -> RouteAttributes:
        """As :class:`RouteAttributes`, e.g. to advertise it on (AS sets are flattened)."""
        return RouteAttributes(
            next_hop=self.next_hop,
            communities=self.communities,
            large_communities=self.large_communities,
            local_pref=self.local_pref,
            med=self.med,
            origin=self.origin,
            as_path=self.as_path,
        )


_Evolve: TypeAlias = Callable[[Any], tuple[type[Attribute], Attribute | None]]


def _optional(cls: Callable[[Any], Attribute]) -> _Evolve:
    def make(value: object) -> tuple[type[Attribute], Attribute | None]:
        if value is None or value == ():
            return cls, None  # type: ignore[return-value]
        return cls, cls(value)  # type: ignore[return-value]

    return make


_EVOLVE: dict[str, _Evolve] = {
    "communities": _optional(Communities),
    "large_communities": _optional(LargeCommunities),
    "local_pref": _optional(LocalPref),
    "med": _optional(MultiExitDisc),
    "origin": _optional(Origin),
}
