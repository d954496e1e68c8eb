"""What a policy rule does to a route it holds for: its verdict (:class:`Accept`,
:class:`Reject` with a reason) and its changes to the path (local preference, MED,
origin, next hop, communities)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from ..attributes import Path
from ..wire import LargeCommunity, OriginCode
from ..wire.community import format_community
from ..wire.family import Address

P = TypeVar("P", bound=Path)

# ---------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Accept:
    """Verdict: the route passes (with the changes made so far)."""

    def __str__(self) -> str:
        return "accept"


@dataclass(frozen=True, slots=True)
class Reject:
    """Verdict: the route is dropped, for ``reason`` (shown by explain, logs, metrics)."""

    reason: str

    def __str__(self) -> str:
        return f'reject "{self.reason}"'


Verdict: TypeAlias = Accept | Reject


class Change:
    """Base of the actions that change a route."""

    __slots__ = ()

    def apply(self, path: P) -> P:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class SetLocalPref(Change):
    value: int

    def apply(self, path: P) -> P:
        return path.evolve(local_pref=self.value)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_local_pref = {self.value}"


@dataclass(frozen=True, slots=True)
class SetMed(Change):
    value: int | None  # None removes it

    def apply(self, path: P) -> P:
        return path.evolve(med=self.value)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_med = {self.value}"


@dataclass(frozen=True, slots=True)
class SetOrigin(Change):
    code: OriginCode

    def apply(self, path: P) -> P:
        return path.evolve(origin=self.code)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_origin = {self.code.name}"


@dataclass(frozen=True, slots=True)
class SetNextHop(Change):
    address: Address

    def apply(self, path: P) -> P:
        return path.evolve(next_hop=self.address)  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_next_hop = {self.address}"


@dataclass(frozen=True, slots=True)
class AddCommunities(Change):
    values: tuple[int, ...]

    def apply(self, path: P) -> P:
        have = path.communities
        added = tuple(v for v in self.values if v not in have)
        return path.evolve(communities=have + added) if added else path  # type: ignore[return-value]

    def __str__(self) -> str:
        return f"bgp_community.add({', '.join(map(format_community, self.values))})"


@dataclass(frozen=True, slots=True)
class StripCommunities(Change):
    """Remove these communities; none given: all of them."""

    values: frozenset[int] = frozenset()

    def apply(self, path: P) -> P:
        have = path.communities
        if not have:
            return path
        keep = tuple(c for c in have if self.values and c not in self.values)
        return path.evolve(communities=keep)  # type: ignore[return-value]

    def __str__(self) -> str:
        which = ", ".join(map(format_community, sorted(self.values))) or "all"
        return f"bgp_community.delete({which})"


@dataclass(frozen=True, slots=True)
class StripLargeCommunities(Change):
    """Remove these large communities; none given: all of them."""

    values: frozenset[LargeCommunity] = frozenset()

    def apply(self, path: P) -> P:
        have = path.large_communities
        if not have:
            return path
        keep = tuple(c for c in have if self.values and c not in self.values)
        return path.evolve(large_communities=keep)  # type: ignore[return-value]

    def __str__(self) -> str:
        which = ", ".join(sorted(map(str, self.values))) or "all"
        return f"bgp_large_community.delete({which})"


@dataclass(frozen=True, slots=True)
class KeepCommunities(Change):
    """Remove every community and large community but these (allowlists; empty: all go)."""

    values: frozenset[int] = frozenset()
    large: frozenset[LargeCommunity] = frozenset()

    def apply(self, path: P) -> P:
        have, have_large = path.communities, path.large_communities
        keep = tuple(c for c in have if c in self.values)
        keep_large = tuple(c for c in have_large if c in self.large)
        if len(keep) == len(have) and len(keep_large) == len(have_large):
            return path
        return path.evolve(communities=keep, large_communities=keep_large)  # type: ignore[return-value]

    def __str__(self) -> str:
        which = ", ".join(map(format_community, sorted(self.values)))
        large = ", ".join(sorted(map(str, self.large)))
        return f"bgp_community.keep({which}); bgp_large_community.keep({large})"


Action: TypeAlias = Change | Accept | Reject
